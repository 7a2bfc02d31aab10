"""The Episodes view: the filtered table (a click on a row opens the episode, at its first search hit when a
search is on: the one way to open one), and under a search the list of matching steps with a snippet of
each."""

from __future__ import annotations

import os
from collections.abc import Callable

import polars as pl
import streamlit as st

from evalkit.view import support as vs
from viewer.common import S, no_none, open_episode
from viewer.rows import row_table, rows_height

TABLE_FIRST_ENV = "EVALKIT_VIEWER_TABLE_FIRST"


def table_first() -> bool:
    """Whether a page opened on the Episodes view draws its table before the sidebar's widgets: a dozen
    widgets built by the browser at the same time kept the table off the screen for half a second. The
    first run of a page draws the table (and the sidebar's title, so that nothing moves), and the browser
    asks for the rest once the rows are painted. `EVALKIT_VIEWER_TABLE_FIRST=0` draws all at once (no
    browser to ask: AppTest)."""
    return os.environ.get(TABLE_FIRST_ENV, "1") != "0"


COLUMNS = {
    "reward": st.column_config.NumberColumn("reward", format="%.3f"),
    "cost_usd": st.column_config.NumberColumn("cost", format="$%.4f"),
    "run_label": st.column_config.TextColumn("run"),
    "task_id": st.column_config.TextColumn("task"),
    "n_turns": st.column_config.NumberColumn("turns"),
    "end_reason": st.column_config.TextColumn("end"),
    "error_class": st.column_config.TextColumn("error"),
    "first_hit": st.column_config.NumberColumn("first hit", help="The first step that matches the search"),
    "hits": st.column_config.NumberColumn("hits", help="Steps that match the search"),
    "#": st.column_config.NumberColumn("#", help="The order of the trace"),
}


def _open_shown(name: str, i: int) -> None:
    """Open row `i` of the table last drawn (`name` holds its run, key and first hit, as a frame: a list of
    10,000 tuples made on every draw was a tenth of the table's first paint)."""
    shown = S.get(name)
    if shown is not None and 0 <= i < shown.height:
        open_episode(*shown.row(i))


def next_sort(now: tuple[str | None, bool] | None, column: str, sortable) -> tuple[str | None, bool]:
    """The order after a click on `column`'s name: by it, ascending; on the one sorted by, the other way;
    on "#" (or a column not offered), the order of the trace."""
    by, desc = now or (None, False)
    if column not in sortable:
        return None, False
    return (by, not desc) if column == by else (column, False)


def sort_by(column: str) -> None:
    S._sort = next_sort(S.get("_sort"), column, S.get("_sortable", ()))


def _current(shown: pl.DataFrame) -> int | None:
    """The row of the episode last opened, if it is in the table."""
    ep = S.get("ep")
    if not ep:
        return None
    at = shown.with_row_index("_i").filter((pl.col("run") == ep[0]) & (pl.col("key") == ep[1]))
    return int(at.item(0, "_i")) if at.height else None


def _layout(
    df: pl.DataFrame, df_all: pl.DataFrame, hits: pl.DataFrame | None, sort: tuple[str | None, bool]
) -> tuple[list[str], pl.DataFrame, pl.DataFrame, pl.DataFrame, dict, tuple[str, bool]]:
    """The table as drawn: (its columns one can sort by, the rows in their order with `#` and the search's
    columns, each row's run, key and first hit, the cells as shown, their config, the sort marked)."""
    # Columns that tell no episode of the runs apart are left out (filtering keeps the others).
    cols = vs.varying_columns(df_all, [c for c in vs.DISPLAY_COLUMNS if c in df.columns])
    if hits is not None:
        df = df.join(hits.select("run", "key", "first_hit", "hits"), on=["run", "key"], how="left")
        cols = ["hits", "first_hit", *cols]
    by, desc = sort
    by = by if by in cols else None
    df = vs.sort_table(df, by, desc).with_row_index("#", offset=1)
    first = pl.col("first_hit") if hits is not None else pl.lit(None, pl.Int32).alias("first_hit")
    ids = df.select("run", "key", first)
    shown, config = no_none(vs.clip_columns(df.select("#", *cols)), COLUMNS, df.get_column("error_class"))
    return cols, df, ids, shown, config, (by or "#", desc if by else False)


@st.cache_resource(max_entries=8, show_spinner=False)
def _shared_layout(names: tuple, sort: tuple, _df, _df_all, _hits) -> tuple:
    """`_layout` made once for every page that shows the same table (`names` says what `_df` is made of):
    made by each new page, most of it the reward column's text (~4 ms), the first run of a page took
    12-14 ms, now 5-8 (the table's first paint waits for it). The values are shared: never changed."""
    return _layout(_df, _df_all, _hits, sort)


def view_table(
    df: pl.DataFrame,
    df_all: pl.DataFrame,
    hits: pl.DataFrame | None,
    steps: pl.DataFrame | None,
    on_painted: Callable[[], None] | None = None,
    names: tuple | None = None,
) -> None:
    """The table (and under a search its matching steps); `on_painted` is called once its rows are on
    screen (the page's first run draws the table before the sidebar's widgets). `names` says what `df` is
    made of (runs, labels, filters, search): the table as drawn is then made once for every page."""
    st.text(f"{df.height:,} of {df_all.height:,} episodes")
    sort = tuple(S.get("_sort") or (None, False))
    if names is None:
        made = _layout(df, df_all, hits, sort)
    else:
        made = _shared_layout(names, sort, df, df_all, hits)
    S._sortable, df, S._shown, shown, config, marked = made
    height = rows_height(df.height, 520 if steps is None else 300)
    row_table(
        shown, S._shown, key="table", config=config, height=height,
        on_open=lambda i: _open_shown("_shown", i), sort=marked, on_sort=sort_by,
        current=_current(S._shown), empty="No episode matches the filters.", on_painted=on_painted,
    )  # fmt: skip
    if on_painted is None:  # Markdown: not before the rows are on screen (viewer/app.py's `main`)
        st.caption("Click a row to open its episode; a column's name to sort by it (again: the other way).")
    if steps is not None:
        matching_steps(df, steps)


def matching_steps(df: pl.DataFrame, steps: pl.DataFrame) -> None:
    """Every matching step (of the episodes in the table), with a snippet; a click opens the episode there."""
    rows = steps.join(df.select("run", "key", "model", "task_id", "mode", "run_label"), on=["run", "key"])
    st.subheader(f"Matching steps: {rows.height:,}" + (" (the first 500)" if rows.height >= 500 else ""))
    S._shown_steps = rows.select("run", "key", "step")
    found, config = no_none(
        vs.clip_columns(rows.select("model", "task_id", "mode", "step", "snippet", "run_label")),
        COLUMNS | {"snippet": st.column_config.TextColumn("where")},
    )
    row_table(
        found, S._shown_steps, key="steps_table", config=config, height=rows_height(rows.height, 300),
        on_open=lambda i: _open_shown("_shown_steps", i), empty="No step of these episodes matches.",
    )  # fmt: skip
