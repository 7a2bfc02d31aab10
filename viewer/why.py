"""Why: what the scanners found in the episodes on view. Per model × scanner, the share of tasks where it
fired with its 95% interval (the tier table's); for two models, the paired differences, sorted by size,
Holm-adjusted across scanners; with a person's labels, each scanner's precision and recall. Choosing a
scanner lists the episodes where it fired; a click opens one at the step the scanner points to, marked
there, where the episode can be labelled (`viewer.episode.scan_banner`)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from evalkit.analysis import why as w
from evalkit.view import support as vs
from evalkit.view import why as vw
from viewer.common import S, memo, open_episode
from viewer.rows import row_table, rows_height

FIRED_COLUMNS = {
    "model": st.column_config.TextColumn("model"),
    "task_id": st.column_config.TextColumn("task"),
    "steps": st.column_config.TextColumn("steps", help="The turns where it fired; it opens at the first"),
    "evidence": st.column_config.TextColumn("evidence"),
    "label": st.column_config.TextColumn("your label"),
}


def scans(df_all: pl.DataFrame, drawn: tuple) -> pl.DataFrame | str:
    """The scan of every episode on view, once per change of the traces (a few seconds for 10,000)."""

    def make() -> pl.DataFrame | str:
        try:
            with st.spinner("Scanning the episodes…", show_time=True):
                return vw.scan_rows(df_all)
        except (OSError, ValueError, RuntimeError, vs.TraceError) as e:
            return f"{type(e).__name__}: {e}"

    return memo(("scans", drawn), make, keep=2)


def labels(runs: list[str]) -> pl.DataFrame | None:
    sig = vw.labels_signature(runs)
    return memo(("labels", sig), lambda: vw.read_labels(runs), keep=2)


def _open(i: int) -> None:
    """A click on row `i` of the fired episodes: that episode, at the step the scanner points to."""
    S._why_click = i


def open_fired(row: dict, scanner: str, phrase: str) -> None:
    """Open the episode of a scan row at its first step, with the scanner's mark on its steps. The step's
    position is found once the episode's steps are known (`viewer.episode`)."""
    steps = [int(s) for s in row.get("steps") or []]
    S._scan_mark = {
        "run": row["run"], "key": row["key"], "scanner": scanner, "phrase": phrase, "steps": steps,
        "evidence": row.get("evidence") or "", "placed": False,
    }  # fmt: skip
    open_episode(row["run"], row["key"], None)


KEPT = ("why_a", "why_b", "why_scanner", "why_quiet")
"""Choices kept while another view is open: Streamlit forgets a widget's value in a run that does not draw
it, and coming back from an episode should find the scanner it was opened from."""


def view_why(
    df: pl.DataFrame, df_all: pl.DataFrame, chosen: list[str], drawn: tuple, fingerprint: tuple
) -> None:
    for k in KEPT:
        if k not in S and f"_{k}" in S:
            S[k] = S[f"_{k}"]
    rows = scans(df_all, drawn)
    if isinstance(rows, str):
        st.error(vs.md_escape(f"The episodes could not be scanned: {rows}", 500))
        return
    on_view = rows.join(df.select("run", "key"), on=["run", "key"], how="semi")
    if not on_view.height:
        st.info("No episodes under the current filters.")
        return
    lab = labels(chosen)
    key = ("why_rates", fingerprint, rows.height, vw.labels_signature(chosen))
    rates = memo(key, lambda: w.why(df, on_view, labels=lab))
    st.markdown("**How often each scanner fired**, per model: the share of tasks")
    st.caption(
        f"Each cell: the share of tasks where the scanner fired (a task's episodes averaged first), its "
        f"{w.METHOD} (none below 6 tasks), and tasks where it fired / tasks counted. Episodes the "
        "infrastructure ended are left out of the model's rates. docs/scanners.md says what each looks at."
    )
    st.dataframe(vw.rates_table(rates), hide_index=True, key="why_rates")
    models = df.get_column("model").drop_nulls().unique().sort().to_list()
    if len(models) >= 2:
        _differences(df, on_view, models, fingerprint)
    if lab is not None:
        checked = w.check(on_view, lab)
        if checked.height:
            st.markdown("**Against your labels**")
            st.text(w.format_check(checked))
    _fired(df, on_view, lab)


def _differences(df: pl.DataFrame, rows: pl.DataFrame, models: list[str], fingerprint: tuple) -> None:
    if S.get("why_a") not in models:
        S.why_a = models[0]
    if S.get("why_b") not in models or S.why_b == S.why_a:
        S.why_b = next(m for m in models if m != S.why_a)
    c1, c2 = st.columns(2)
    a = c1.selectbox("A", models, key="why_a", format_func=vs.clip)
    b = c2.selectbox("B", models, key="why_b", format_func=vs.clip)
    if a == b:
        st.info("Choose two models to see what separates them.")
        return
    try:
        diffs = memo(("why_diffs", fingerprint, rows.height, a, b), lambda: w.why(df, rows, a=a, b=b))
    except ValueError as e:
        st.info(vs.md_escape(f"No paired differences: {e}", 300))
        return
    st.markdown("**What separates A from B**, sorted by the size of the difference")
    for s in diffs.filter(pl.col("separates")).get_column("sentence").to_list():
        st.markdown(f"- {vs.md_escape(s, 400)}")
    st.dataframe(vw.differences_table(diffs), hide_index=True, key="why_diffs")
    st.caption(f"{w.PAIRED}; p (Holm) adjusted across the scanners; separates: p (Holm) < 0.05.")


def _fired(df: pl.DataFrame, rows: pl.DataFrame, lab: pl.DataFrame | None) -> None:
    counts = (
        rows.filter(pl.col("fired").fill_null(False)).group_by("scanner").len().sort("len", descending=True)
    )
    n = dict(counts.iter_rows())
    names = [*counts.get_column("scanner").to_list()]
    names += [s for s in rows.get_column("scanner").unique(maintain_order=True).to_list() if s not in n]
    if S.get("why_scanner") not in names:
        S.why_scanner = names[0]
    scanner = st.selectbox(
        "Episodes where a scanner fired", names, key="why_scanner",
        format_func=lambda s: f"{s} ({n.get(s, 0)} episode{'s' if n.get(s, 0) != 1 else ''})",
    )  # fmt: skip
    for k in KEPT:
        if k in S:
            S[f"_{k}"] = S[k]
    quiet = st.toggle(
        "Where it did not fire (a random order: label some, or its recall says nothing)", key="why_quiet"
    )
    got = vw.fired(rows, scanner, df, quiet=quiet)
    phrase = rows.filter(pl.col("scanner") == scanner).get_column("phrase")[0]
    click = S.pop("_why_click", None)
    if isinstance(click, int) and 0 <= click < got.height:
        open_fired(got.row(click, named=True), scanner, phrase)
        st.rerun()
    if not got.height:
        st.caption("No such episode on view.")
        return
    said = [vw.label_of(lab, r, k, scanner) for r, k in got.select("run", "key").iter_rows()]
    shown = got.with_columns(
        pl.col("steps").list.eval(pl.element().cast(pl.String)).list.join(", ").alias("steps"),
        pl.Series("label", ["" if x is None else "yes" if x else "no" for x in said], pl.String),
        pl.col("task_id") + " · " + pl.col("mode").fill_null(""),
    )
    data = vs.clip_columns(shown.select("model", "task_id", "steps", "evidence", "label"))
    row_table(data, got.select("run", "key"), key="why_fired", config=FIRED_COLUMNS,
              height=rows_height(got.height, 330), on_open=_open, empty="No episode.")  # fmt: skip
    st.caption("Click a row to open the episode (where the scanner fired: at the step it points to) and "
               "label it there.")  # fmt: skip
