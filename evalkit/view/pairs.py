"""A vs B: sides (a model in a run), the pairs of episodes they share (same env and configuration, surface,
mode, task, skin), and the paired comparison of two sides (`evalkit.analysis.compare`) as the viewer and the
bundle show it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from evalkit import analysis
from evalkit.analysis.tables import ci_column, ci_text, lost_cells_text, mde_text, p_column, p_phrase
from evalkit.view.text import CELL_LIMIT, NONE_LABEL, clip, clip_columns


def side_label(model: Any, run_label: Any) -> str:
    return f"{model} · {run_label}"


def _side() -> pl.Expr:
    return pl.concat_str([pl.col("model").fill_null(NONE_LABEL), pl.lit(" · "), pl.col("run_label")])


def sides(df: pl.DataFrame) -> list[str]:
    if df.is_empty():
        return []
    return df.select(_side().alias("s")).get_column("s").unique().sort().to_list()


def side_rows(df: pl.DataFrame, side: str) -> pl.DataFrame:
    return df.filter(_side() == side)


PAIR_SEP = "\x1f"
"""Joins the values of the pairing columns into one pair id (a unit separator: not in task ids or names)."""


def pair_columns(df: pl.DataFrame) -> list[str]:
    """The columns of `evalkit.analysis.PAIR_KEYS` that `df` has: an A episode is compared with a B episode
    only when all of them agree (same env and configuration, surface, mode, task and skin)."""
    return [k for k in analysis.PAIR_KEYS if k in df.columns]


def _pair_expr(keys: Sequence[str]) -> pl.Expr:
    return pl.concat_str([pl.col(k).cast(pl.String).fill_null(NONE_LABEL) for k in keys], separator=PAIR_SEP)


def pair_id(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """The pair id of one table row (as `ab_tasks` puts in its `pair` column)."""
    return PAIR_SEP.join(NONE_LABEL if row.get(k) is None else str(row.get(k)) for k in keys)


def pair_label(pid: str, keys: Sequence[str], limit: int = CELL_LIMIT) -> str:
    """`task · env surface/mode · skin` for a pair id, what is unset left out, clipped for a label."""
    v = dict(zip(keys, pid.split(PAIR_SEP), strict=False))
    where = f"{v.get('surface', NONE_LABEL)}/{v.get('mode', NONE_LABEL)}"
    if v.get("env", NONE_LABEL) != NONE_LABEL:
        where = f"{v['env']} {where}"
    parts = [v.get("task_id", NONE_LABEL), where]
    if v.get("skin", NONE_LABEL) != NONE_LABEL:
        parts.append(f"skin {v['skin']}")
    return clip(" · ".join(parts), limit)


def pair_rows(df: pl.DataFrame, side: str, pid: str) -> pl.DataFrame:
    """The episodes of `side` on one pair (task, surface, mode, …), by repeat."""
    keys = pair_columns(df)
    return (
        side_rows(df, side)
        .filter(_pair_expr(keys) == pid)
        .sort("repeat", nulls_last=True, maintain_order=True)
    )


def best_opponent(df: pl.DataFrame, a: str) -> str | None:
    """The default B against `a`: another model (the same model in another run only when no other model
    shares a pair), the side that shares most (task, surface, mode, …) pairs with it, the better one
    (`ranked_sides`) among equals; None when no side shares a pair."""
    labelled = df.with_columns(_side().alias("_side"), _pair_expr(pair_columns(df)).alias("_pair"))
    mine = labelled.filter(pl.col("_side") == a)
    own = mine.get_column("model").first() if not mine.is_empty() else None
    shared = (
        labelled.filter((pl.col("_side") != a) & pl.col("_pair").is_in(mine.get_column("_pair").implode()))
        .group_by("_side")
        .agg(pl.col("_pair").n_unique().alias("n"), pl.col("model").first().alias("model"))
    )
    if shared.is_empty():
        return None
    rank = {s: i for i, s in enumerate(ranked_sides(df))}
    best = max(shared.iter_rows(), key=lambda r: (r[2] != own, r[1], -rank.get(r[0], len(rank))))
    return best[0]


def ab_tasks(df: pl.DataFrame, a: str, b: str, solved: float = 0.5) -> pl.DataFrame:
    """One row per pair (env, surface, mode, task, skin: `evalkit.analysis.PAIR_KEYS`) that both sides
    attempted, the largest |A − B| first: the pairing columns, a `pair` id, best scored reward of each side
    and an outcome label. A pair
    is solved by a side when any scored episode (repeat) reaches `solved`; unscored episodes count neither
    way. Pairing on the task alone would line up one mode of A against another of B."""
    keys = pair_columns(df)

    def per(side: str, tag: str) -> pl.DataFrame:
        return (
            side_rows(df, side)
            .with_columns(pl.col(k).cast(pl.String).fill_null(NONE_LABEL) for k in keys)
            .group_by(keys)
            .agg(
                pl.col("reward").max().alias(f"{tag}_best"),
                pl.len().alias(f"{tag}_n"),
                pl.col("reward").is_not_null().sum().alias(f"{tag}_scored"),
            )
        )

    both = per(a, "a").join(per(b, "b"), on=keys, how="inner")
    a_ok = pl.col("a_best") >= solved
    b_ok = pl.col("b_best") >= solved
    outcome = (
        pl.when(pl.col("a_best").is_null() | pl.col("b_best").is_null())
        .then(pl.lit("unscored"))
        .when(a_ok & ~b_ok)
        .then(pl.lit("A solved, B failed"))
        .when(~a_ok & b_ok)
        .then(pl.lit("B solved, A failed"))
        .when(a_ok & b_ok)
        .then(pl.lit("both solved"))
        .otherwise(pl.lit("both failed"))
    )
    # Largest |A − B| first: the tasks that tell the two apart are the ones to look at; a side with no
    # score on a task leaves it last.
    return (
        both.with_columns(
            _pair_expr(keys).alias("pair"),
            outcome.alias("outcome"),
            (pl.col("a_best") - pl.col("b_best")).alias("difference"),
        )
        .sort(["task_id", *[k for k in keys if k != "task_id"]])
        .sort(pl.col("difference").abs(), descending=True, nulls_last=True, maintain_order=True)
    )


def ab_table(pairs: pl.DataFrame) -> pl.DataFrame:
    """`ab_tasks` as shown: task, surface and mode always, env and skin only when they tell pairs apart."""
    cols = [c for c in ("task_id", "surface", "mode") if c in pairs.columns]
    if "env" in pairs.columns and pairs.get_column("env").n_unique() > 1:
        cols.append("env")
    if "skin" in pairs.columns and (pairs.get_column("skin") != NONE_LABEL).any():
        cols.append("skin")
    return clip_columns(pairs.select(*cols, "outcome", "a_best", "b_best", "difference", "a_n", "b_n"))


def ranked_sides(df: pl.DataFrame) -> list[str]:
    """Sides (model · run) by mean scored reward, best first: the default A is the best, B the runner-up."""
    if df.is_empty():
        return []
    scored = pl.col("reward").filter(pl.col("error_class").is_null())
    means = df.group_by(_side().alias("s")).agg(scored.mean().alias("m"))
    return means.sort(["m", "s"], descending=[True, False], nulls_last=True).get_column("s").to_list()


def _as_sides(df: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """The episodes of the sides `names` with the side as their `model` (what `analysis.compare` selects
    by): the same model in two runs is two sides."""
    d = df.with_columns(_side().alias("_s")).filter(pl.col("_s").is_in(list(names)))
    if "scored" not in d.columns:
        d = d.with_columns((pl.col("error_class").is_null() & pl.col("reward").is_not_null()).alias("scored"))
    return d.with_columns(pl.col("_s").alias("model")).drop("_s")


def ab_difference(df: pl.DataFrame, a: str, b: str, tier: str | None = None) -> dict[str, Any]:
    """The paired comparison of side `a` against side `b` on the tasks both ran (`analysis.compare`: each
    side's mean over its episodes of a task, the mean of the per-task differences, the sign-flip test's p and
    the interval that inverts it, wins/ties/losses), in one tier or all."""
    d = _as_sides(df, [a, b])
    if tier is not None:
        d = d.filter(pl.col("tier").cast(pl.String).fill_null(NONE_LABEL) == tier)
    if d.filter(pl.col("model") == a).is_empty() or d.filter(pl.col("model") == b).is_empty():
        return {"n_tasks": 0}
    return analysis.compare(d, a, b, by=None).row(0, named=True)


def difference_line(r: Mapping[str, Any], tier: str | None = None) -> str:
    """A paired comparison row (`analysis.compare`) as one line: difference, CI and its method, p, the
    smallest detectable difference, wins / ties / losses, then the cells a side lost (left out); "no
    conclusion" first when there are too few tasks for a CI."""
    where = "all tiers" if tier is None else f"tier {clip(tier, 60)}"
    n = r.get("n_tasks") or 0
    if not n:
        return f"No task with a scored episode on both sides in {where}: no paired difference."
    tasks = f"{n} task{'s' if n != 1 else ''}"
    few = r.get("ci_low") is None
    ci = "no CI" if few else "95% CI " + ci_text(r["ci_low"], r["ci_high"], r["diff"], signed=True)
    if not few and r.get("ci_method"):
        ci += f" ({r['ci_method']})"
    line = (
        f"A − B = {r['diff']:+.3f} ({where}) · {ci} · "
        f"{p_phrase(r.get('p_value'), r.get('p_exact'))} · smallest detectable "
        f"{mde_text(r.get('mde'), n)} · wins / ties / losses {r['wins']} / {r['ties']} / {r['losses']} "
        f"over {tasks}"
    )
    lost = lost_cells_text(r)
    line = f"{line} · {lost}" if lost else line
    return f"No conclusion: only {tasks}. {line}" if few else line


def flipped(r: Mapping[str, Any]) -> dict[str, Any]:
    """A paired comparison row of A against B as the row of B against A (the same tasks, sign assignments
    and p)."""
    out = dict(r)
    pairs = (("a", "b"), ("mean_a", "mean_b"), ("wins", "losses"), ("n_unscored_a", "n_unscored_b"),
             ("n_cells_a_only", "n_cells_b_only"), ("not_run_a", "not_run_b"))  # fmt: skip
    for x, y in pairs:
        if x in r or y in r:
            out[x], out[y] = r.get(y), r.get(x)
    neg = {k: None if r.get(k) is None else -r[k] for k in ("diff", "ci_low", "ci_high")}
    return out | neg | {"ci_low": neg["ci_high"], "ci_high": neg["ci_low"]}


COMPARE_NAMES = {
    "a": "A", "b": "B", "group": "tier", "n_tasks": "tasks", "mean_a": "mean A", "mean_b": "mean B",
    "diff": "A − B", "ci": "95% CI", "p": "p", "p_holm": "p (Holm)", "mde": "smallest detectable",
    "wtl": "wins / ties / losses", "left": "left out",
}  # fmt: skip
"""The paired table's columns as the Summary names them; "p (Holm)" only when more than one side is compared
with the reference."""


def paired_table(df: pl.DataFrame, ref: str, by: str = "tier") -> pl.DataFrame:
    """Every other side against `ref`, per tier and over all, as the Summary shows it: readable column
    names, the CI and the win counts as text; with more than one other side, the p-values Holm-adjusted over
    them within each tier (`analysis.compare_many`) beside the raw ones."""
    others = [s for s in sides(df) if s != ref]
    if not others:
        return pl.DataFrame()
    d = _as_sides(df, [ref, *others]).sort("model", maintain_order=True)  # the others in `sides` order
    rows = analysis.compare_many(d, ref, by=by)
    rows = rows.filter((pl.col("n_tasks") > 0) | (pl.col("group") == "all"))
    shown = rows.with_columns(
        ci_column(rows, "ci_low", "ci_high", "diff", signed=True).alias("ci"),
        pl.format("{} / {} / {}", "wins", "ties", "losses").alias("wtl"),
        p_column(rows, "p_value").alias("p"),
        p_column(rows, "p_holm").alias("p_holm"),
        pl.Series([mde_text(m, n) for m, n in zip(rows["mde"], rows["n_tasks"], strict=True)]).alias("mde"),
        pl.Series([_left_out(r) for r in rows.iter_rows(named=True)], dtype=pl.String).alias("left"),
    )
    names = {c: n for c, n in COMPARE_NAMES.items() if c != "p_holm" or len(others) > 1}
    return shown.select(list(names)).rename(names)


def _left_out(r: Mapping[str, Any]) -> str:
    """What a paired row left out, in one short cell: tasks with no cell in common ("2 tasks"), cells one side
    lacks ("B −2": B has no score in two cells A scored); "–" when nothing. One narrow column rather than
    three keeps the Summary's table within 1280 px."""
    parts = []
    if r.get("n_dropped"):
        parts.append(f"{r['n_dropped']} task{'s' if r['n_dropped'] != 1 else ''}")
    for side, k in (("A", r.get("n_cells_b_only")), ("B", r.get("n_cells_a_only"))):
        if k:
            parts.append(f"{side} −{k}")
    return ", ".join(parts) or "–"


def matching_episode(a_row: Mapping[str, Any] | None, b_rows: pl.DataFrame) -> int:
    """Index in `b_rows` of the episode to show against A's: same surface, mode and repeat when there is one
    (the rows already share the pair), else the first."""
    if a_row is None or b_rows.is_empty():
        return 0
    for i, r in enumerate(b_rows.iter_rows(named=True)):
        if all(r.get(k) == a_row.get(k) for k in ("surface", "mode", "repeat")):
            return i
    return 0
