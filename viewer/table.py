"""The Episodes view: the filtered table (a click on a row opens the episode, at its first search hit when a
search is on: the one way to open one), and under a search the list of matching steps with a snippet of
each."""

from __future__ import annotations

import polars as pl
import streamlit as st

from evalkit.view import support as vs
from viewer.common import S, no_none, open_episode

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
}


def _open_shown(name: str, i: int) -> None:
    """Open row `i` of the table last drawn (`name` holds its run, key and first hit, as a frame: a list of
    10,000 tuples made on every draw was a tenth of the table's first paint)."""
    shown = S.get(name)
    if shown is not None and 0 <= i < shown.height:
        open_episode(*shown.row(i))


def rows_height(n: int, most: int) -> int:
    """A table's height in pixels: its rows (a header and 35 px each), up to `most` (then it scrolls)."""
    return min(most, 35 * (n + 1) + 3)


def _on_select(table: str, shown: str) -> None:
    rows = S[table].selection.rows if table in S else []
    if rows:
        _open_shown(shown, rows[0])


def view_table(
    df: pl.DataFrame, df_all: pl.DataFrame, hits: pl.DataFrame | None, steps: pl.DataFrame | None
) -> None:
    st.text(f"{df.height:,} of {df_all.height:,} episodes")
    # Columns that tell no episode of the runs apart are left out (filtering keeps the others).
    cols = vs.varying_columns(df_all, [c for c in vs.DISPLAY_COLUMNS if c in df.columns])
    if hits is not None:
        df = df.join(hits.select("run", "key", "first_hit", "hits"), on=["run", "key"], how="left")
        cols = ["hits", "first_hit", *cols]
    c1, c2, _ = st.columns([2, 1, 2], vertical_alignment="bottom")
    by = c1.selectbox("Sort by", ["(trace order)", *cols], key="sort_by")
    desc = c2.toggle("Descending", key="sort_desc")
    df = vs.sort_table(df, None if by == "(trace order)" else by, desc).with_row_index("#", offset=1)
    first = pl.col("first_hit") if hits is not None else pl.lit(None, pl.Int32).alias("first_hit")
    S._shown = df.select("run", "key", first)
    shown, config = no_none(vs.clip_columns(df.select("#", *cols)), COLUMNS, df.get_column("error_class"))
    st.dataframe(
        # Repeated strings go as Arrow dictionaries: a third of the bytes to the browser for 10,000 rows.
        shown.with_columns(pl.col(pl.String).cast(pl.Categorical)),
        key="table",
        on_select=lambda: _on_select("table", "_shown"),
        selection_mode="single-row",
        hide_index=True,
        height=rows_height(df.height, 520 if steps is None else 300),
        column_config=config,
    )
    st.caption("Click a row to open its episode.")
    if steps is not None:
        matching_steps(df, steps)


def matching_steps(df: pl.DataFrame, steps: pl.DataFrame) -> None:
    """Every matching step (of the episodes in the table), with a snippet; a click opens the episode there."""
    rows = steps.join(df.select("run", "key", "model", "task_id", "mode", "run_label"), on=["run", "key"])
    st.subheader(f"Matching steps: {rows.height:,}" + (" (the first 500)" if rows.height >= 500 else ""))
    S._shown_steps = rows.select("run", "key", "step")
    found, config = no_none(
        vs.clip_columns(rows.select("model", "task_id", "mode", "step", "snippet", "run_label")),
        COLUMNS | {"snippet": st.column_config.TextColumn("where", width="large")},
    )
    st.dataframe(
        found,
        key="steps_table",
        on_select=lambda: _on_select("steps_table", "_shown_steps"),
        selection_mode="single-row",
        hide_index=True,
        height=rows_height(rows.height, 300),
        column_config=config,
    )
