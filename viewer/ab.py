"""A vs B: two sides (a model in a run) on the same task, surface and mode. On top, the paired difference over
the tasks both ran (task-weighted, like with like: the cells both scored), with the sign-flip test's p, its
CI (named by its method) and wins / losses, and the cells a side lost, for the tier chosen; then the
tasks (a click picks one); then both episodes in one row under one step control, the target once as a
thumbnail, and what each side did at that step beside each other."""

from __future__ import annotations

import polars as pl
import streamlit as st

from evalkit.records.viewer_marks import space_of
from evalkit.types import EpisodeRecord
from evalkit.view import support as vs
from viewer.common import S, fields, find, load, memo, no_none, no_reward, num, show_image, step_controls
from viewer.episode import show_step, text_step
from viewer.rows import row_table, rows_height

ALL = "all tiers"
PAIR_COLUMNS = {
    "task_id": st.column_config.TextColumn("task"),
    "a_best": st.column_config.NumberColumn("A best", format="%.3f", help="Empty: no scored episode"),
    "b_best": st.column_config.NumberColumn("B best", format="%.3f", help="Empty: no scored episode"),
    "difference": st.column_config.NumberColumn("A − B", format="%+.3f"),
    "a_n": st.column_config.NumberColumn("A episodes"),
    "b_n": st.column_config.NumberColumn("B episodes"),
}


def _choices(rows: pl.DataFrame) -> tuple[list[tuple[str, str]], list[str]]:
    items = list(zip(rows.get_column("run").to_list(), rows.get_column("key").to_list(), strict=True))
    desc = [
        f"{vs.clip(r['surface'], 40)}/{vs.clip(r['mode'], 40)} · repeat {r['repeat']} · "
        f"reward {num(r['reward'], '.3f', no_reward(r['error_class']))}"
        for r in rows.iter_rows(named=True)
    ]
    return items, desc


def _episode_choice(rows: pl.DataFrame, key: str, label: str) -> tuple[str, str] | None:
    if rows.is_empty():
        return None
    items, desc = _choices(rows)
    if len(items) == 1:
        return items[0]
    if not isinstance(S.get(key), int) or not 0 <= S[key] < len(items):
        S[key] = 0
    i = st.selectbox(label, range(len(items)), format_func=lambda i: desc[i], key=key)
    return items[i or 0]


def _apply_pin(pin: tuple[str, str, str, str], df: pl.DataFrame, labels: dict[str, str]) -> None:
    """A deep link to A vs B: select the sides, pair and episodes that hold the two linked episodes."""
    ra, ka, rb, kb = pin
    a_row, b_row = find(df, ra, ka), find(df, rb, kb)
    if not (a_row and b_row):
        return
    S.ab_a = vs.side_label(a_row["model"] or vs.NONE_LABEL, labels[ra])
    S.ab_b = vs.side_label(b_row["model"] or vs.NONE_LABEL, labels[rb])
    S.ab_task = vs.pair_id(a_row, vs.pair_columns(df))
    S.ab_only = False
    for tag, side, want in (("a", S.ab_a, (ra, ka)), ("b", S.ab_b, (rb, kb))):
        items, _ = _choices(vs.pair_rows(df, side, S.ab_task))
        S[f"ab_ep_{tag}"] = items.index(want) if want in items else 0
    S._ab_follow = (S.ab_task, (ra, ka), S.ab_b)  # the link chose B's episode: do not re-match it to A


def _side_head(rec: EpisodeRecord, run: str, labels: dict[str, str], name: str) -> None:
    c = vs.clip
    reward = num(rec.reward, ".3f", no_reward(rec.error_class))
    st.markdown(
        f"**{name}** · reward **{vs.md_escape(reward, 40)}** · {vs.md_escape(rec.end_reason or '—', 60)} · "
        f"{num(rec.n_turns or len(rec.turns), 'd')} turns"
        + (f" · {vs.md_escape(rec.error_class, 60)}" if rec.error_class else "")
    )
    st.text(f"{c(rec.model)} · {c(labels.get(run, run))}")
    st.text(f"{c(rec.task_id)} · {c(rec.surface, 60)}/{c(rec.mode, 60)} · repeat {num(rec.repeat, 'd')}")
    rows, long = vs.field_rows(rec.grade)
    if rows:
        with st.expander("Grade"):
            fields(st, rows, "component", "no grade")
            if long:
                st.caption("Long grade values are cut here; the Episode view shows them whole.")


def _difference(df: pl.DataFrame, a: str, b: str, tier: str | None, fingerprint: tuple) -> None:
    """The paired difference A − B for one tier (or all) as one line on top of the view."""
    r = memo(("ab_diff", fingerprint, a, b, tier), lambda: vs.ab_difference(df, a, b, tier))
    st.markdown(f"**{vs.md_escape(vs.difference_line(r, tier), 600)}**")
    if r.get("n_tasks") and r.get("ci_low") is None:
        why = "even every task on one side gives p = 2/2ⁿ"
        st.caption(f"Fewer than {vs.MIN_TASKS} tasks: no difference can be told apart from chance at the "
                   f"5% level ({why}), so no interval is shown.")  # fmt: skip


def _on_pair_click(ids: list[str], i: int) -> None:
    if 0 <= i < len(ids):
        S.ab_task = ids[i]


def view_ab(df: pl.DataFrame, df_all: pl.DataFrame, labels: dict[str, str], fingerprint: tuple) -> None:
    pin = S.pop("ab_pin", None)
    if pin:
        _apply_pin(pin, df, labels)
    sides = vs.sides(df)
    if not sides:
        st.info("No episodes under the current filters.")
        return
    keys = vs.pair_columns(df)
    open_row = find(df, *S.ep) if S.get("ep") and "ab_a" not in S else None
    if open_row:  # coming from an open episode: it is A, on its task, surface and mode
        S.ab_a = vs.side_label(open_row["model"] or vs.NONE_LABEL, labels[open_row["run"]])
        S.ab_task = vs.pair_id(open_row, keys)
        S._ab_open = (open_row["run"], open_row["key"])
    if S.get("ab_a") not in sides:  # by default the best side against the runner-up
        S.ab_a = vs.ranked_sides(df)[0]
    if S.get("ab_b") not in sides:
        S.ab_b = vs.best_opponent(df, S.ab_a) or next((x for x in sides if x != S.ab_a), sides[0])
    tiers = [ALL, *vs.options(df, "tier")]
    if S.get("ab_tier") not in tiers:
        S.ab_tier = ALL
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1])
    a = c1.selectbox("A", sides, key="ab_a", format_func=vs.clip)
    b = c2.selectbox("B", sides, key="ab_b", format_func=vs.clip)
    tier = c3.selectbox("Tier", tiers, key="ab_tier", format_func=vs.clip)
    thr = c4.number_input("Solved if reward ≥", 0.0, 1e9, 0.5, 0.05, key="ab_thr")
    _difference(df, a, b, None if tier == ALL else tier, fingerprint)
    in_tier = (
        df if tier == ALL else df.filter(pl.col("tier").cast(pl.String).fill_null(vs.NONE_LABEL) == tier)
    )
    pairs = vs.ab_tasks(in_tier, a, b, thr)
    if pairs.is_empty():
        st.info(
            "A and B share no task on the same surface and mode"
            + ("" if tier == ALL else " in this tier")
            + "."
        )
        return
    counts = pairs.group_by("outcome").len().sort("outcome")
    st.text("  ·  ".join(f"{o}: {n}" for o, n in counts.iter_rows()))
    only = st.toggle("Only tasks A solved and B failed", key="ab_only")
    shown = pairs.filter(pl.col("outcome") == "A solved, B failed") if only else pairs
    ids = shown.get_column("pair").to_list() or pairs.get_column("pair").to_list()
    data, config = no_none(vs.ab_table(shown), PAIR_COLUMNS)
    if S.get("ab_task") not in ids:
        S.ab_task = ids[0]
    here = S.ab_task
    row_table(
        data, shown.select("pair"), key="ab_pairs", config=config, height=rows_height(shown.height, 220),
        on_open=lambda i: _on_pair_click(ids, i), current=ids.index(here) if here in ids else None,
        empty="No task here.",
    )  # fmt: skip
    st.caption("Click a row to see its task below.")
    c1, c2, c3 = st.columns([2, 1.5, 1.5])
    pid = c1.selectbox("Task", ids, key="ab_task", format_func=lambda p: vs.pair_label(p, keys))
    a_rows, b_rows = vs.pair_rows(df, a, pid), vs.pair_rows(df, b, pid)
    opened = S.pop("_ab_open", None)
    if opened:
        items, _ = _choices(a_rows)
        S.ab_ep_a = items.index(opened) if opened in items else 0
    with c2:
        pick_a = _episode_choice(a_rows, "ab_ep_a", "A episode")
    # B follows A: on a new pair, A episode or B side, B shows its episode of the same surface, mode and
    # repeat; an episode the user picks for B stays until one of those changes.
    if S.get("_ab_follow") != (pid, pick_a, b):
        S._ab_follow = (pid, pick_a, b)
        S.ab_ep_b = vs.matching_episode(find(df, *pick_a) if pick_a else None, b_rows)
    with c3:
        pick_b = _episode_choice(b_rows, "ab_ep_b", "B episode")
    if pick_a is None or pick_b is None:
        st.info("One side has no episode of this task.")
        return
    recs = [load(df_all, r, k) for r, k in (pick_a, pick_b)]
    S._ab_pair = (*pick_a, *pick_b)
    heads = st.columns(2)
    for col, rec, (r, _k), name in ((heads[0], recs[0], pick_a, "A"), (heads[1], recs[1], pick_b, "B")):
        with col:
            if isinstance(rec, str):
                st.error(vs.md_escape(rec, 500))
            else:
                _side_head(rec, r, labels, name)
    if any(isinstance(x, str) for x in recs):
        return
    aligned = vs.align_steps(recs[0], recs[1])
    if S.get("_ab_opened") != S._ab_pair:  # a new pair opens where both have a picture of a step
        S._ab_opened = S._ab_pair
        if S.pop("_ab_linked_step", None) is None:
            both = (i for i, (x, y) in enumerate(aligned) if x and y and x.turn and x.frame and y.frame)
            S.ab_step = next(both, vs.first_step([x or y for x, y in aligned]))
    pos = step_controls("ab_step", [max(x.index for x in p if x is not None) for p in aligned])
    sa, sb = aligned[pos]
    pictures = any(vs.has_pictures(r) for r in recs)
    if pictures:
        row = st.columns(3 if recs[0].target else [1, 1])
        if recs[0].target:
            with row[0]:
                show_image(pick_a[0], recs[0].target, "Target", enlarge="ab_target")
        for col, rec, (r, _k), s, tag in (
            (row[-2], recs[0], pick_a, sa, "a"),
            (row[-1], recs[1], pick_b, sb, "b"),
        ):
            with col:
                if s is None:
                    show_image(r, rec.render, f"{tag.upper()}: ended; final render", enlarge=f"ab_end_{tag}")
                else:
                    turn = s.turn if s.marked else None
                    cap, big = f"{tag.upper()}: {s.caption}", f"ab_frame_{tag}"
                    show_image(r, s.frame, cap, rec, turn, enlarge=big, space=space_of(rec))
        with st.expander("Final renders"):
            ends = st.columns(3 if recs[0].target else [1, 1])
            for col, rec, (r, _k), tag in (
                (ends[-2], recs[0], pick_a, "a"),
                (ends[-1], recs[1], pick_b, "b"),
            ):
                with col:
                    show_image(r, rec.render, f"{tag.upper()}: final render", enlarge=f"ab_render_{tag}")
    detail = st.columns(2)
    for col, rec, (r, _k), s, tag in (
        (detail[0], recs[0], pick_a, sa, "a"),
        (detail[1], recs[1], pick_b, sb, "b"),
    ):
        with col:
            st.markdown(f"**{tag.upper()}**")
            if s is None:
                st.caption("(this episode has ended)")
            elif pictures:
                show_step(r, rec, s, f"ab{tag}_{pos}")
            else:
                text_step(r, rec, s, f"ab{tag}_{pos}")
