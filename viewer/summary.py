"""The Summary view: per model the means and counts, per tier the task-weighted mean reward and its CI, the
charts (reward per tier, how episodes ended, reward against cost and against turns, grade components), and
the paired comparison of every side against a reference, per tier.

One row is one model in one run (`vs.summary_rows`): a model in two runs is two rows, since the runs may
differ in what an episode is (a turn budget, a token limit). "Pool runs" makes the runs of a model that
agree in those settings one row, and the page says which."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from evalkit.view import support as vs
from viewer.common import memo, no_none

N = st.column_config.NumberColumn
NAMES = {
    "n": N("episodes"),
    "scored": N("scored"),
    "unscored": N("unscored", help="An infrastructure error ended them: in no mean"),
    "no_reward": N("no reward", help="Ended without an error and without a reward (not graded)"),
    "mean_reward": st.column_config.TextColumn("reward (scored)"),
    "mean_reward_unscored_as_0": st.column_config.TextColumn("reward (unscored = 0)"),
    "n_tasks": N("tasks"),
    "ci": st.column_config.TextColumn("95% CI"),
    "ci0": st.column_config.TextColumn("95% CI (unscored = 0)"),
    "min_reward": N("min", format="%.3f"),
    "max_reward": N("max", format="%.3f"),
    "mean_turns": N("turns", format="%.1f"),
    "mean_tool_calls": N("tool calls", format="%.1f"),
    "mean_tool_errors": N("tool errors", format="%.2f"),
    "mean_parse_errors": N("parse errors", format="%.2f"),
    "mean_tokens": N("tokens", format="%.0f"),
    "reasoning_tokens_per_turn": N("reasoning tokens / turn", format="%.0f"),
    "cost_usd": N("cost", format="$%.4f", help="Unknown (empty) when an episode's cost is unknown"),
    "mean_seconds": N("seconds", format="%.1f"),
}
SIDE = ["model", "env", "surface", "mode"]
SUMMARY = [*SIDE, "n", "scored", "unscored", "no_reward", "mean_reward", "mean_reward_unscored_as_0",
           "min_reward", "max_reward"]  # fmt: skip
EFFORT = [*SIDE, "mean_turns", "mean_tool_calls", "mean_tool_errors", "mean_parse_errors", "mean_tokens",
          "reasoning_tokens_per_turn", "cost_usd", "mean_seconds"]  # fmt: skip
"""The summary in two tables, outcome then effort and cost: in one, its twenty columns ran past the page at
1280 px and the last ones were cut."""
TIERS = [*SIDE, "tier", "n", "n_tasks", "unscored", "mean_reward", "ci"]
TIERS_AS_ZERO = [*SIDE, "tier", "n", "n_tasks", "unscored", "mean_reward_unscored_as_0", "ci0"]
"""By tier, the rewards of scored episodes or (a toggle) with unscored ones as 0: the two side by side ran
past the page at 1280 px."""
WIDE_CSS = '[data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem; }'
"""The Summary's tables and charts take the page's width beside the sidebar (Streamlit leaves 5 rem)."""


def _said(table: pl.DataFrame) -> pl.DataFrame:
    """Rewards, CIs as the CLI, the report and the bundle say them: "no grades", "too few tasks"."""
    out = []
    for mean in ("mean_reward", "mean_reward_unscored_as_0"):
        rows = zip(table[mean], table["scored"], table["no_reward"], strict=True)
        out.append(pl.Series(mean, [vs.reward_text(m, s, q) for m, s, q in rows], dtype=pl.String))
    if "ci_low" in table.columns:
        out.append(vs.ci_column(table, "ci_low", "ci_high", "mean_reward").alias("ci"))
        ci0 = ("ci_low_unscored_as_0", "ci_high_unscored_as_0", "mean_reward_unscored_as_0")
        out.append(vs.ci_column(table, *ci0).alias("ci0"))
    return table.with_columns(out)


def _shown(title: str, make) -> object | None:
    try:
        return make()
    except Exception as e:  # one table or chart that does not apply to this selection leaves the rest
        st.warning(vs.md_escape(f"{title} could not be computed: {type(e).__name__}: {e}", 500))
        return None


def wide(chart):
    """`chart` as wide as the page, its plot area as tall as the chart says. Streamlit's default for a chart
    as wide as its container (`autosize: fit`) fits the whole chart, legend and axes included, into that
    height: the plot was left a line, the legend cut after a few entries."""
    return chart.properties(width="container", autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))


def view_summary(df: pl.DataFrame, fingerprint: tuple, df_all: pl.DataFrame | None = None) -> None:
    # Model and task names reach the tables and the charts' data: cut first (the grade JSON is left whole).
    df_all = df if df_all is None else df_all  # the runs whole: a filter must not read as missing episodes
    df = vs.clip_columns(df, columns=vs.LABEL_COLUMNS)
    st.html(f"<style>{WIDE_CSS}</style>")
    from evalkit import analysis
    from evalkit.analysis import plots

    head, pool_box = st.columns([4, 1], vertical_alignment="bottom")
    head.subheader("Summary")
    for line in memo(("incomplete", fingerprint), lambda: vs.incomplete_lines(df_all)):
        st.warning(vs.md_escape(line, 500))
    pool = pool_box.toggle(
        "Pool runs", key="sum_pool",
        help="One row per model over all runs whose settings that change an episode agree (turn budget, "
        "token limit, coordinates, …); off: one row per model and run.",
    )  # fmt: skip
    rows, said = memo(("summary_rows", fingerprint, pool), lambda: vs.summary_rows(df, pool))
    if said:
        st.caption(said)
    table = _shown("Summary", lambda: analysis.summarise(rows))
    if table is not None:
        said_table = _said(table)
        for columns, key in ((SUMMARY, "sum_outcome"), (EFFORT, "sum_effort")):
            cols = vs.varying_columns(table, [c for c in columns if c in table.columns], SIDE[1:])
            data, config = no_none(said_table.select(cols), NAMES)
            st.container(key=key).dataframe(data, hide_index=True, column_config=config)
    head, zero_box = st.columns([4, 1], vertical_alignment="bottom")
    head.subheader("By tier")
    zero = zero_box.toggle(
        "Unscored as 0", key="sum_zero",
        help="Count the episodes an infrastructure error ended (unscored: in no mean by default) as 0.",
    )  # fmt: skip
    tiers = _shown("By tier", lambda: memo(("by_tier", fingerprint, pool), lambda: analysis.by_tier(rows)))
    if tiers is not None:
        t = _said(tiers)
        shown = TIERS_AS_ZERO if zero else TIERS
        cols = vs.varying_columns(t, [c for c in shown if c in t.columns], SIDE[1:])
        data, config = no_none(t.select(cols), NAMES)
        st.container(key="sum_tiers").dataframe(data, hide_index=True, column_config=config)
        st.caption(f"Task-weighted means (each task's episodes averaged first); 95% CI: "
                   f"{vs.METHODS[vs.MEAN_METHODS[0]]}, none below {vs.MIN_TASKS} tasks; unscored "
                   "episodes in no mean unless counted as 0.")  # fmt: skip
    repeats(rows, fingerprint, pool)
    st.subheader("Charts")
    charts = {
        # the per-tier chart draws the table above rather than bootstrapping it again
        "reward_by_tier": lambda: plots.reward_by_tier(tiers if tiers is not None else df, zero),
        "end_reasons": lambda: plots.end_reasons(rows),
        "reward_vs_cost": lambda: plots.reward_vs_cost(rows),
        "reward_vs_turns": lambda: plots.reward_vs_turns(rows),
        "grade_components": lambda: plots.grade_components(rows),
    }
    for name, make in charts.items():
        chart = _shown(f"Chart {name}", make)
        if chart is not None:
            st.container(key=f"chart_{name}").altair_chart(wide(chart), width="stretch")
    paired(df, fingerprint)


PASS_K = {
    "k": N("k"), "n_tasks": N("tasks"),
    "n_tasks_short": N("tasks < k repeats", help="Left out: fewer than k scored repeats"),
    "pass_at_k": N("pass@k", format="%.3f", help="The chance that some of k attempts at a task succeed"),
    "ci": st.column_config.TextColumn("pass@k 95% CI"),
    "pass_hat_k": N("pass^k", format="%.3f", help="The chance that all k attempts at a task succeed"),
    "hat": st.column_config.TextColumn("pass^k 95% CI"),
}  # fmt: skip


def repeats(rows: pl.DataFrame, fingerprint: tuple, pool: bool) -> None:
    """pass@k and pass^k, as the CLI's summary and the report show them, when a task has two scored
    repeats."""
    from evalkit.analysis.repeats import pass_k_table

    table = _shown("pass@k", lambda: memo(("pass_k", fingerprint, pool), lambda: pass_k_table(rows)))
    if table is None or table.is_empty():
        return
    st.subheader("Repeats")
    said = table.with_columns(
        vs.ci_column(table, "ci_low", "ci_high", "pass_at_k").alias("ci"),
        vs.ci_column(table, "hat_low", "hat_high", "pass_hat_k").alias("hat"),
    )
    cols = vs.varying_columns(said, [c for c in [*SIDE, *PASS_K] if c in said.columns], SIDE[1:])
    data, config = no_none(said.select(cols), PASS_K)
    st.container(key="sum_pass_k").dataframe(data, hide_index=True, column_config=config)
    st.caption(
        "Success: reward ≥ 1. pass@k: some of k attempts at a task succeed; pass^k: all k do; unbiased "
        "estimators per task from its scored repeats, then task-weighted means; 95% CI: "
        f"{vs.METHODS[vs.MEAN_METHODS[0]]}."
    )


def paired(df: pl.DataFrame, fingerprint: tuple) -> None:
    st.subheader("Paired comparison")
    ranked = vs.ranked_sides(df)
    if len(ranked) < 2:
        st.caption("One model (in one run) only: nothing to compare.")
        return
    if st.session_state.get("sum_ref") not in ranked:
        st.session_state.sum_ref = ranked[1]  # the runner-up: the best model's row reads as its lead
    ref = st.selectbox("Against", ranked, key="sum_ref", format_func=vs.clip)
    table = _shown(
        "Paired comparison", lambda: memo(("paired", fingerprint, ref), lambda: vs.paired_table(df, ref))
    )
    if table is not None:
        text = st.column_config.TextColumn
        config = {"mean A": N(format="%.3f"), "mean B": N(format="%.3f"), "A − B": N(format="%+.3f"),
                  "wins / ties / losses": text("W / T / L", help="Wins / ties / losses"),
                  "smallest detectable": text("detectable", help="Smallest detectable difference"),
                  "left out": text("left out", help="Tasks with no cell both sides scored (2 tasks); cells "
                                   "(surface × mode × skin) a side has no score in (B −2): not in A − B"),
                  }  # fmt: skip
        # B is the side chosen above on every row, and "left out" mostly "–" on every row: those columns
        # only pushed the last ones off the page at 1280 px.
        table = vs.clip_columns(table).drop("B", strict=False)
        run = ref.rsplit(" · ", 1)[-1] if " · " in ref else None
        if run and "A" in table.columns and table["A"].str.ends_with(f" · {run}").all():
            table = table.with_columns(pl.col("A").str.strip_suffix(f" · {run}"))  # one run: said once, above
        if "left out" in table.columns and (table["left out"] == "–").all():  # said where something was
            table = table.drop("left out")
        data, config = no_none(table, config)
        st.container(key="sum_paired").dataframe(data, hide_index=True, column_config=config)
        st.caption(
            "Each side (A) against the one chosen above (B), like with like: within each task only the "
            "cells (surface × mode × skin) both scored, each the mean of its repeats (cells one side lost "
            "are left out and counted); A − B is the mean over tasks of the per-task difference; p from a "
            f"sign-flip test (≈ above 16 tasks); 95% CI: {vs.METHODS[vs.PAIRED_METHODS[0]]}, made to agree "
            "with the test; tasks without a scored cell on both sides are left out."
            + (" p (Holm): p adjusted for the number of sides compared with the same one (Holm), so that a "
               "p (Holm) below 0.05 anywhere in the table is a 5% risk when all are equal."
               if "p (Holm)" in table.columns else "")
        )  # fmt: skip
