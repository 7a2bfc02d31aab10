"""Statistics over episode frames: summaries, per-tier intervals over tasks, paired comparison of two models.

An unscored episode (`reward` null, `error_class` set: the infrastructure failed) is never read as a zero:
summaries give the mean over scored episodes and, labelled, the mean with unscored counted as zero. An
episode with no reward and no error (an env that gives no reward, or a run graded elsewhere and not merged)
is neither: summaries count it as `no_reward` and leave it out of both means. Frames come from
`evalkit.records.loading`; their text and files from `evalkit.analysis.summary`; how each number is said
from `evalkit.analysis.tables`; the intervals and tests themselves from `evalkit.analysis.intervals`.

One rule wherever a number is shown. The task is the unit, keyed by env, its configuration and task id
(TASK_KEYS): a model's scored episodes of one task become one value before any mean, interval or test. A
mean's 95% interval is over those values (`mean_interval`, by default the Bayesian bootstrap over tasks);
a paired difference compares like with like (`paired_tasks`: within a task the cells both sides scored,
surface × mode × skin, each cell the mean of its repeats) and its p-value is the sign-flip test over the
tasks' differences, exact up to EXACT_FLIPS tasks, with an interval that agrees with it. Nothing is shown
below MIN_TASKS tasks. Every frame names the method behind its interval (`ci_method`, `tables.METHODS`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from evalkit.analysis import harness, power
from evalkit.analysis.intervals import (
    ALPHA,
    DRAWS,
    EXACT_FLIPS,
    MEAN_METHODS,
    N_BOOT,
    N_FLIPS,
    NORMAL_FLIPS,
    PAIRED_METHODS,
    Z_80,
    Z_975,
    _t_quantile,  # noqa: F401  (re-exported: plots and repeats take it from here)
    agree,
    check_method,
    cluster_bootstrap,
    mean_interval,
    min_detectable,
    mover_share,
    ni_upper,
    p_is_exact,
    paired_bootstrap,
    paired_interval,
    sign_flip_interval,
    sign_flip_p,
)
from evalkit.analysis.tables import METHODS, MIN_TASKS
from evalkit.records.columns import eager

__all__ = [
    "ALPHA", "COMPARE_COLUMNS", "DRAWS", "EXACT_FLIPS", "GROUP", "MEAN_METHODS", "MIN_TASKS", "N_BOOT",
    "N_FLIPS", "NORMAL_FLIPS", "PAIRED_METHODS", "PAIR_KEYS", "TASK_KEYS", "TIER_ORDER", "Z_80", "Z_975",
    "by_tier", "cluster_bootstrap", "compare", "compare_many", "grade_components", "holm", "mean_interval",
    "min_detectable", "p_is_exact", "paired_bootstrap", "paired_tasks", "sign_flip_interval", "sign_flip_p",
    "summarise", "task_column",
]  # fmt: skip

TIER_ORDER = ("easy", "medium", "hard")
GROUP = ("model", "env", "env_config", "surface", "mode")
"""A summary's rows: a model on one env in one configuration, surface and mode (`env_config` is left out of
a frame that has no such column)."""
TASK_KEYS = ("env", "env_config", "task_id")
"""What makes two episodes the same task: the same task id of two envs, or of two configurations of one env
(OpenSpiel's catch and tic_tac_toe both say `OpenSpielEnvironment`), are two tasks, never pooled or paired."""
CELL_KEYS = ("surface", "mode", "skin")
"""The cells of a task: a paired difference compares a task's cells both sides scored, each cell the mean of
its repeats (`paired_tasks`)."""
PAIR_KEYS = ("env", "env_config", "surface", "mode", "task_id", "skin")
"""What makes an A episode and a B episode the same attempt, for showing them side by side (the viewer's and
the bundle's A vs B): a task's cell."""
TASK = "_task"
"""The column `task_column` adds: one value per task (TASK_KEYS joined), the cluster of every interval."""
_SEP = "\x1f"

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64


def _present(keys: Iterable[str], df: pl.DataFrame) -> list[str]:
    """`keys` without `env_config` where `df` has no such column (a frame built by hand)."""
    return [k for k in keys if k != "env_config" or k in df.columns]


def task_column(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with TASK: its env, configuration and task id joined, so that a table grouped by model alone
    still counts two envs' "task-1" as two tasks."""
    keys = [k for k in TASK_KEYS if k in df.columns]
    return df.with_columns(
        pl.concat_str([pl.col(k).cast(_S).fill_null("\x00") for k in keys], separator=_SEP).alias(TASK)
    )


def _aggs() -> list[pl.Expr]:
    r = pl.col("reward")
    scored = pl.col("scored")
    failed = pl.col("error_class").is_not_null()
    turns_ = pl.col("n_turns").cast(_F)
    return [
        pl.len().alias("n"),
        scored.sum().cast(_I).alias("scored"),
        failed.sum().cast(_I).alias("unscored"),
        (~scored & ~failed).sum().cast(_I).alias("no_reward"),
        # Task-weighted: each task's scored episodes weigh 1/k together (`_weigh`), so a task run five
        # times counts as much as one run once.
        pl.when(scored.any())
        .then((r * pl.col("_w")).filter(scored).sum() / pl.col("_w").filter(scored).sum())
        .alias("mean_reward"),
        # No scored episode, no grades: "unscored as zero" would read as a model that scored 0.
        pl.when(scored.any())
        .then(
            pl.when(scored).then(r * pl.col("_w0")).when(failed).then(0.0).sum()
            / pl.col("_w0").filter(scored | failed).sum()
        )
        .alias("mean_reward_unscored_as_0"),
        r.filter(scored).min().alias("min_reward"),
        r.filter(scored).max().alias("max_reward"),
        pl.col("n_turns").mean().alias("mean_turns"),
        pl.col("tool_calls").mean().alias("mean_tool_calls"),
        pl.col("tool_errors").mean().alias("mean_tool_errors"),
        pl.col("parse_errors").mean().alias("mean_parse_errors"),
        pl.col("tokens").mean().alias("mean_tokens"),
        (pl.col("reasoning_tokens").sum() / turns_.sum()).alias("reasoning_tokens_per_turn"),
        (pl.col("reasoning_chars").sum() / turns_.sum()).alias("reasoning_chars_per_turn"),
        # A price missing for any episode makes the total unknown, not smaller: null, never a guess.
        pl.when(pl.col("cost_usd").null_count() == 0).then(pl.col("cost_usd").sum()).alias("cost_usd"),
        pl.col("cost_usd").mean().alias("mean_cost_usd"),
        pl.col("seconds").mean().alias("mean_seconds"),
        pl.col("_nan").sum().cast(_I).alias("nan_reward"),
    ]


def _weigh(df: pl.DataFrame, keys: list[str], cluster: str = TASK) -> pl.DataFrame:
    """`df` with what the task-weighted means need: `_w` = 1 / (scored episodes of the row's task in its
    group), `_w0` the same over scored and unscored ones, `_nan` for a reward that is not a number. A NaN
    reward is no score (counted in `nan_reward` and `no_reward`), never a number in a mean."""
    nan = pl.col("reward").is_nan().fill_null(False)
    df = df.with_columns(nan.alias("_nan"), (pl.col("scored") & ~nan).alias("scored"))
    failed = pl.col("error_class").is_not_null()
    part = [*keys, cluster] if cluster in df.columns else keys
    return df.with_columns(
        (1.0 / pl.col("scored").cast(_F).sum().over(part)).alias("_w"),
        (1.0 / (pl.col("scored") | failed).cast(_F).sum().over(part)).alias("_w0"),
    )


def summarise(df: pl.DataFrame, by: Iterable[str] = GROUP, as_harness: bool = False) -> pl.DataFrame:
    """Per model × env × surface × mode: counts, reward (scored mean, and with unscored counted as zero),
    turns, tool calls and errors, tokens, reasoning per turn, cost.

    `n` = `scored` + `unscored` + `no_reward`: `unscored` are infrastructure errors (`error_class` set, no
    reward); `no_reward` are episodes that ended without error and without a reward (an env that gives none),
    among them `nan_reward` whose reward was not a number. `mean_reward` is over scored episodes,
    task-weighted (each task's episodes are first averaged into one value, then the tasks);
    `mean_reward_unscored_as_0` also counts the unscored as zero. No-reward episodes are in neither mean:
    there is no score to take, and no failure to charge. A group with no scored episode (an ungraded run) has
    both means null: no grades, not a zero.

    `as_harness`: instead, each imported run's numbers as its own harness summarised them
    (`evalkit.analysis.harness`)."""
    df = eager(df, "summarise")
    if as_harness:
        return harness.summarise(df, by)
    by = _present(by, df)
    return (
        _weigh(task_column(df), by).group_by(by, maintain_order=True).agg(_aggs()).sort(by, nulls_last=True)
    )


def _tier_rank() -> pl.Expr:
    t = pl.col("tier")
    return (
        pl.when(t == "all")
        .then(99)
        .when(t.is_in(list(TIER_ORDER)))
        .then(t.replace_strict(list(TIER_ORDER), list(range(len(TIER_ORDER))), default=50))
        .otherwise(50)
    )


def _mde(per_task: pl.DataFrame, seed: int = 0) -> float | None:
    """The smallest true difference the sign-flip test over these paired tasks detects with 80% power at
    α = 0.05 (`power.detectable`: simulated under the tasks' pass/fail rates or their spread of
    differences); None below MIN_TASKS tasks and where no difference within the reward range gets there."""
    if per_task.height < MIN_TASKS:
        return None

    # The test's own data: the balanced differences, m episodes a side where a cell's repeats differ.
    balanced = not (per_task["d_test"] == per_task["d"]).all()
    return power.detectable(
        per_task["d_test" if balanced else "d"].to_numpy(),
        per_task["pooled"].to_numpy(),
        per_task["m" if balanced else "k_a"].to_numpy(),
        per_task["m" if balanced else "k_b"].to_numpy(),
        bool(per_task["pf"].all()),
        ALPHA,
        seed,
    )


def _in_task_order(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Rows sorted by `keys` (then repeat and record key where present): sums and resamples are then a
    function of the data, not of the order the rows came in."""
    cols = [c for c in [*keys, "repeat", "key"] if c in df.columns]
    return df.sort(cols, nulls_last=True, maintain_order=True)


def by_tier(
    df: pl.DataFrame, by: Iterable[str] = GROUP, method: str | None = None, n_boot: int | None = None,
    seed: int = 0, cluster: str | None = None,
) -> pl.DataFrame:  # fmt: skip
    """`summarise` per group and tier, plus tier "all", with 95% intervals on both reward means, which are
    task-weighted: each task's episodes (repeats, skins) become one value first, and the interval is over
    those values (`mean_interval` by `method`, one of MEAN_METHODS: by default the Bayesian bootstrap over
    tasks; `ci_method` names it). A task is an env, configuration and task id (`cluster`, default all three:
    grouped by model alone, two envs' "task-1" are two tasks). `n_tasks` counts the tasks of a row,
    `n_cells` its cells (task × skin) and `n_cells_scored` those with a scored episode: a side that lost
    cells says so. A CI over fewer than MIN_TASKS tasks with a score is null (shown as "too few tasks"), as
    is the unscored-as-zero one over fewer than MIN_TASKS scored or unscored tasks. Rows without a tier
    (an env with no tiers) are only the "all" row. `seed` starts every draw; `n_boot` is the bootstrap's
    resamples (method "bootstrap" only)."""
    df = eager(df, "by_tier")
    method = check_method(method, MEAN_METHODS, "by_tier")
    if n_boot is not None and method != "bootstrap":
        raise ValueError(f"by_tier: n_boot is the bootstrap's resamples; method {method!r} draws none "
                         "(give method='bootstrap' with it)")  # fmt: skip
    by = _present(by, df)
    keys = by + ["tier"]
    if cluster is None:
        df, cluster = task_column(df), TASK
    cell = pl.concat_str([pl.col(cluster).cast(_S), pl.col("skin").cast(_S).fill_null("")], separator=_SEP)
    df = df.with_columns(cell.alias("_cell") if "skin" in df.columns else pl.col(cluster).alias("_cell"))
    both = pl.concat([df, df.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    both = _weigh(_in_task_order(both, keys + [cluster]), keys, cluster)
    scored_cells = pl.col("_cell").filter(pl.col("scored")).n_unique().cast(_I).alias("n_cells_scored")
    cells = [pl.col("_cell").n_unique().cast(_I).alias("n_cells"), scored_cells]
    table = both.group_by(keys, maintain_order=True).agg(
        _aggs()[:1] + [pl.col(cluster).n_unique().cast(_I).alias("n_tasks"), *cells] + _aggs()[1:]
    )
    failed = pl.col("error_class").is_not_null()
    per_task = both.group_by(keys + [cluster], maintain_order=True).agg(
        pl.col("reward").filter(pl.col("scored")).mean().alias("m"),
        pl.when(pl.col("scored")).then(pl.col("reward")).when(failed).then(0.0).mean().alias("m0"),
        pl.col("scored").sum().cast(_I).alias("c"),
        (pl.col("scored") | failed).sum().cast(_I).alias("nz"),
        pl.col("reward").filter(pl.col("scored")).is_in([0.0, 1.0]).all().alias("pf"),
    )
    ci_rows = []
    for k, sub in per_task.group_by(keys, maintain_order=True):
        pf = bool(sub["pf"].all())
        has, has0 = sub.filter(pl.col("c") > 0), sub.filter(pl.col("nz") > 0)
        kw = {"method": method, "seed": seed, "n_boot": n_boot}
        lo, hi = mean_interval(has["m"].to_numpy(), int(has["c"].sum()), pf, **kw)
        zlo, zhi = mean_interval(has0["m0"].to_numpy(), int(has0["nz"].sum()), pf, **kw)
        ci_rows.append((*k, lo, hi, zlo, zhi))
    ci = pl.DataFrame(
        ci_rows,
        schema=[(k, both.schema[k]) for k in keys]
        + [("ci_low", _F), ("ci_high", _F), ("ci_low_unscored_as_0", _F), ("ci_high_unscored_as_0", _F)],
        orient="row",
    )
    out = table.join(ci, on=keys, how="left", nulls_equal=True)
    # A group with no scored episode has no mean to bound: no CI, not [0, 0].
    none = pl.col("scored") == 0
    out = out.with_columns(pl.when(~none).then(pl.col(c)).alias(c) for c in ci.columns[len(keys) :])
    out = out.with_columns(pl.lit(METHODS[method], _S).alias("ci_method"))
    cols = list(table.columns)
    i = cols.index("mean_reward") + 1
    cols[i:i] = ["ci_low", "ci_high"]
    j = cols.index("mean_reward_unscored_as_0") + 1
    cols[j:j] = ["ci_low_unscored_as_0", "ci_high_unscored_as_0"]
    return _one_row_without_tiers(out.select([*cols, "ci_method"]), by).pipe(_tier_sorted, by)


def _one_row_without_tiers(out: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """`out` without the untiered row of a group whose episodes have no tier: it would repeat "all"."""
    tiered = pl.col("tier").is_not_null() & (pl.col("tier") != "all")
    has_tier = tiered.any().over(by) if by else tiered.any()
    return out.filter(pl.col("tier").is_not_null() | has_tier)


def _tier_sorted(out: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    return out.with_columns(_tier_rank().alias("_r")).sort(by + ["_r", "tier"], nulls_last=True).drop("_r")


# ---------------------------------------------------------------- paired comparison


def _select(df: pl.DataFrame, who: str) -> pl.DataFrame:
    """Episodes of `who`: a model label, a run as given to load_runs, or a run's name."""
    for col in ("model", "run", "run_name"):
        if col in df.columns:
            sub = df.filter(pl.col(col) == who)
            if sub.height:
                return sub
    models = df["model"].unique().sort().to_list() if "model" in df.columns else []
    shown = ", ".join(repr(m) for m in models[:12])
    shown += f", … ({len(models)} in all)" if len(models) > 12 else ""
    raise ValueError(f"{who!r} is neither a model nor a run in this frame; its models: {shown or 'none'}")


COMPARE_COLUMNS = (
    "a", "b", "by", "group", "n_tasks", "n_cells", "n_cells_a_only", "n_cells_b_only", "n_dropped",
    "n_unpaired", "n_unscored_a", "n_unscored_b", "mean_a", "mean_b", "diff", "ci_low", "ci_high",
    "p_value", "wins", "ties", "losses", "sd_diff", "mde", "p_exact", "ci_method", "not_run_a", "not_run_b",
)  # fmt: skip
"""A `compare` row. `n_cells`: the cells (surface × mode × skin of a task) both sides scored, the only ones
in the difference; `n_cells_a_only` / `n_cells_b_only`: cells one side scored and the other did not (lost
or never run), left out and counted; `n_dropped`: tasks with no cell in common; `n_unpaired`: the scored
episodes of cells left out; `not_run_a` / `not_run_b`: episodes a side's runs planned and never ran
(`loading.run_status`; null where no plan is recorded)."""
_COUNTS = ("n_tasks", "n_cells", "n_cells_a_only", "n_cells_b_only", "n_dropped", "n_unpaired",
           "n_unscored_a", "n_unscored_b", "wins", "ties", "losses", "not_run_a", "not_run_b")  # fmt: skip


def _cells(d: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One row per cell a side scored: the mean of its scored repeats `r`, how many `k`, whether all were 0
    or 1, and the rewards in repeat order (for the test's balanced difference)."""
    s = d.filter(pl.col("scored") & ~pl.col("reward").is_nan())
    return (
        _in_task_order(s, keys)
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("reward").mean().alias("r"),
            pl.len().cast(_I).alias("k"),
            pl.col("reward").is_in([0.0, 1.0]).all().alias("pf"),
            pl.col("reward").alias("rs"),
        )
    )


def paired_tasks(a_df: pl.DataFrame, b_df: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Like with like: per task (TASK_KEYS), the cells (CELL_KEYS) both sides scored, each cell the mean of
    its scored repeats, and over those cells each side's mean (`mean_a`, `mean_b`) and their difference
    `d`; `n_cells` how many, `k_a`/`k_b` the episodes behind them, `pooled` both sides' mean, `pf` whether
    every reward was 0 or 1. `d_test` is the difference the sign-flip test takes: where a cell's sides have
    unequal repeats, each side's first m of them by repeat (m the fewer), so that under "A and B are alike"
    the difference is as likely either way (a mean of five rewards against one reward is not: that test
    said "higher" in 7–8% of runs of equal models at 10 tasks); `m` the episodes per side behind it.
    `best_cell` is the paired cell whose difference is furthest in the task's direction (for pictures).
    A cell only one side scored is never mixed in: the counts say how many (`a_only`, `b_only`, the
    episodes behind them `unpaired`, and `dropped` tasks with no cell in common). Repeat numbers never pair
    episodes: A's repeats 0 and 1 and B's repeat 2 of a cell are its two means."""
    keys_t = [k for k in TASK_KEYS if k in a_df.columns]
    keys_c = [k for k in CELL_KEYS if k in a_df.columns]
    keys = keys_t + keys_c
    ca, cb = _cells(a_df, keys), _cells(b_df, keys)
    j = ca.join(cb, on=keys, how="full", suffix="_b", nulls_equal=True, coalesce=True)
    both = j.filter(pl.col("r").is_not_null() & pl.col("r_b").is_not_null())
    m = pl.min_horizontal("k", "k_b")
    both = both.with_columns(
        (pl.col("r") - pl.col("r_b")).alias("cd"),
        (pl.col("rs").list.head(m).list.mean() - pl.col("rs_b").list.head(m).list.mean()).alias("cd_test"),
        m.alias("m"),
        pl.concat_str([pl.col(k).cast(_S).fill_null("–") for k in keys_c], separator="/").alias("cell")
        if keys_c
        else pl.lit("", _S).alias("cell"),
    )
    # Sorted, so that sums (and the seeded draws over them) come out the same on every call.
    per_task = (
        both.sort(keys, nulls_last=True)
        .group_by(keys_t, maintain_order=True)
        .agg(
            pl.col("r").mean().alias("mean_a"),
            pl.col("r_b").mean().alias("mean_b"),
            pl.col("cd").mean().alias("d"),
            pl.col("cd_test").mean().alias("d_test"),
            pl.len().cast(_I).alias("n_cells"),
            pl.col("k").sum().cast(_I).alias("k_a"),
            pl.col("k_b").sum().cast(_I).alias("k_b"),
            pl.col("m").sum().cast(_I).alias("m"),
            ((pl.col("r") * pl.col("k") + pl.col("r_b") * pl.col("k_b")).sum()
             / (pl.col("k") + pl.col("k_b")).sum()).alias("pooled"),
            (pl.col("pf") & pl.col("pf_b")).all().alias("pf"),
            pl.col("cell").sort_by(pl.col("cd") * pl.col("cd").mean().sign(), descending=True).first()
            .alias("best_cell"),
        )
        .sort(keys_t, nulls_last=True)
    )  # fmt: skip
    a_only = j.filter(pl.col("r_b").is_null())
    b_only = j.filter(pl.col("r").is_null())
    tasks = pl.concat([ca.select(keys_t), cb.select(keys_t)]).unique().height
    counts = {
        "a_only": a_only.height,
        "b_only": b_only.height,
        "unpaired": int(a_only["k"].sum() or 0) + int(b_only["k_b"].sum() or 0),
        "dropped": tasks - per_task.height,
    }
    return per_task, counts


def _mover_share(per_task: pl.DataFrame, counts: dict[str, int]) -> float:
    """`intervals.mover_share` of a comparison's paired tasks: unequal repeats where some paired cell has
    more scored repeats on one side (a side's episodes above the balanced count `m`), lost cells where some
    cell was scored by one side alone; pass/fail where every reward was 0 or 1; the fewest episodes a side
    behind a task's value, its balanced count `m`."""
    unequal = not bool(((per_task["k_a"] == per_task["m"]) & (per_task["k_b"] == per_task["m"])).all())
    lost = bool(counts["a_only"] or counts["b_only"])
    return mover_share(bool(per_task["pf"].all()), unequal, lost, int(per_task["m"].min() or 0))


def _compare_block(
    a_df: pl.DataFrame, b_df: pl.DataFrame, method: str, seed: int, n_boot: int | None,
    margin: float | None = None,
) -> dict:  # fmt: skip
    per_task, counts = paired_tasks(a_df, b_df)
    n = per_task.height
    row: dict[str, Any] = {
        "n_tasks": n,
        "n_cells": int(per_task["n_cells"].sum() or 0),
        "n_cells_a_only": counts["a_only"],
        "n_cells_b_only": counts["b_only"],
        "n_dropped": counts["dropped"],
        "n_unpaired": counts["unpaired"],
        "n_unscored_a": int((~a_df["scored"]).sum()),  # no score: an infrastructure error or no reward
        "n_unscored_b": int((~b_df["scored"]).sum()),
        "p_exact": p_is_exact(n) if n else None,
        "ci_method": METHODS[method],
    }
    if margin is not None:
        row |= {"margin": float(margin), "ni_upper": None, "noninferior": None}
    if n == 0:
        return (
            row
            | dict.fromkeys(("mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value", "sd_diff", "mde"))
            | {"wins": 0, "ties": 0, "losses": 0}
        )
    d = per_task["d"].to_numpy()
    # The same seed for every group and either order: B against A flips the same signs, so its p is this
    # one and its interval this one negated.
    p = sign_flip_p(per_task["d_test"].to_numpy(), N_FLIPS, seed)
    ya, yb = per_task["mean_a"].to_numpy(), per_task["mean_b"].to_numpy()
    lo, hi = paired_interval(d, ya, yb, method, seed, n_boot, share=_mover_share(per_task, counts))
    lo, hi = agree(lo, hi, p, float(d.mean()))
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    tie = np.isclose(d, 0, atol=1e-9)
    if margin is not None and hi is not None:
        # One-sided at 1.25%: the upper end of the 97.5% interval of A − B (NI_LEVEL: at 95% the steps of
        # pass/fail differences let a B worse by the margin through in up to 3.9% of runs). B is no worse
        # than A by more than the margin when even that end is below it.
        ni = ni_upper(d, ya, yb, p, method, seed, n_boot)  # t+mover: all the way to MOVER's end
        row |= {"ni_upper": ni, "noninferior": bool(ni < margin)}
    return row | {
        "mean_a": float(per_task["mean_a"].mean()),
        "mean_b": float(per_task["mean_b"].mean()),
        "diff": float(d.mean()),
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "wins": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "losses": int(((d < 0) & ~tie).sum()),
        "sd_diff": sd,
        "mde": None if lo is None else _mde(per_task, seed),
    }


def _configurations(df: pl.DataFrame) -> set[tuple[str | None, str | None]]:
    cols = [k for k in ("env", "env_config") if k in df.columns]
    return {tuple(r) for r in df.select(cols).unique().iter_rows()} if cols else set()


def _check_configurations(da: pl.DataFrame, db: pl.DataFrame, a: str, b: str) -> None:
    """Two sides that ran one env in different configurations (OpenSpiel's catch and tic_tac_toe) share task
    ids and nothing else: said in one line rather than a comparison of no tasks."""
    ca, cb = _configurations(da), _configurations(db)
    if not ca or not cb or ca & cb or not {e for e, *_ in ca} & {e for e, *_ in cb}:
        return

    def said(c: set) -> str:
        return "; ".join(sorted(f"{e} [{cfg or 'no configuration recorded'}]" for e, *rest in c
                                for cfg in [rest[0] if rest else None]))  # fmt: skip

    raise ValueError(f"compare: {a!r} ran {said(ca)} and {b!r} ran {said(cb)}: different configurations of "
                     "an env are different tasks, so there is nothing to pair")  # fmt: skip


Groups = list[tuple[str | None, pl.DataFrame, pl.DataFrame]]


def _groups(da: pl.DataFrame, db: pl.DataFrame, by: str | None) -> Groups:
    """The rows of a comparison: one per value of `by` (tiers easy, medium, hard first), then "all"; only
    "all" where `by` has fewer than two values (no tiers: the per-value row would repeat it)."""
    groups: Groups = []
    values = pl.concat([da[by], db[by]]).unique().to_list() if by else []
    if len(values) > 1:
        rank = {t: i for i, t in enumerate(TIER_ORDER)}
        values.sort(key=lambda v: (v is None, rank.get(v, 50), str(v)))
        for v in values:
            f = pl.col(by).is_null() if v is None else pl.col(by) == v
            groups.append((None if v is None else str(v), da.filter(f), db.filter(f)))
    groups.append(("all", da, db))
    return groups


def compare(
    df: pl.DataFrame, a: str, b: str, by: str | None = "tier", method: str | None = None,
    n_boot: int | None = None, seed: int = 0, margin: float | None = None,
) -> pl.DataFrame:  # fmt: skip
    """Paired comparison of `a` against `b` (models, or runs) by task, like with like (`paired_tasks`):
    within each task (env, configuration, task id) the cells both sides scored (surface × mode × skin, each
    the mean of its repeats), the task's difference d = A − B the mean over those cells; `mean_a`, `mean_b`
    and `diff` are task-weighted means over the same cells, `sd_diff` the SD of d. Cells one side has and
    the other lost are never mixed in: counted in `n_cells_a_only` / `n_cells_b_only`. `p_value` is the
    two-sided sign-flip permutation test over the tasks' differences (`sign_flip_p`: exact up to
    EXACT_FLIPS tasks, `p_exact` false beyond; where a cell's sides have unequal repeats, on the balanced
    difference `d_test`); the 95% interval is `method`'s (PAIRED_METHODS, default the first; `ci_method`
    names it), made to agree with p (`agree`: it excludes 0 exactly when p < 0.05), null below MIN_TASKS
    tasks; `mde` is the smallest true difference that test would detect with 80% power at α = 0.05. One
    row per value of `by` plus "all" (only "all" where `by` has one value or none). Sides that ran one env
    in different configurations are refused (ValueError): their tasks share ids, not tasks.

    `margin`: non-inferiority of B against A. `ni_upper` is the one-sided 98.75% upper bound of A − B (the
    upper end of the 97.5% interval by the same method, made to agree with p: `intervals.ni_upper`; at
    the 95% interval's end the error was up to 3.9% for pass/fail rewards, where 2.5% is the promise) and
    `noninferior` says whether B is worse than A by less than `margin` (ni_upper < margin); null below
    MIN_TASKS tasks. `seed` starts every draw (random sign assignments
    above EXACT_FLIPS tasks, the interval's); `n_boot` is the bootstrap's resamples (method "bootstrap")."""
    df = eager(df, "compare")
    method = check_method(method, PAIRED_METHODS, "compare")
    if n_boot is not None and method != "bootstrap":
        raise ValueError(f"compare: n_boot is the bootstrap's resamples; method {method!r} draws none "
                         "(give method='bootstrap' with it)")  # fmt: skip
    if "reward" in df.columns:  # a reward that is not a number is no score
        df = df.with_columns((pl.col("scored") & ~pl.col("reward").is_nan().fill_null(False)).alias("scored"))
    da, db = _select(df, a), _select(df, b)
    _check_configurations(da, db, a, b)
    missing = {"not_run_a": _not_run(da), "not_run_b": _not_run(db)}
    for who, n in ((a, missing["not_run_a"]), (b, missing["not_run_b"])):
        if n:
            said = (f"compare: {who!r}: {n} planned episode(s) not run (its run is incomplete; rerun the "
                    "same command to resume); the comparison covers the tasks both have")  # fmt: skip
            warnings.warn(said, stacklevel=2)
    rows = [
        {"a": a, "b": b, "by": by or "", "group": g}
        | _compare_block(xa, xb, method, seed, n_boot, margin)
        | missing
        for g, xa, xb in _groups(da, db, by)
    ]
    cols = list(COMPARE_COLUMNS) + (["margin", "ni_upper", "noninferior"] if margin is not None else [])
    schema = {c: (_S if c in ("a", "b", "by", "group", "ci_method") else _F) for c in cols}
    schema |= dict.fromkeys(_COUNTS, _I) | {"p_exact": pl.Boolean}
    if margin is not None:
        schema["noninferior"] = pl.Boolean
    return Comparison(pl.DataFrame(rows, schema=schema).select(cols))


def holm(p: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of p-values (None stays None and is not counted): the family-wise error
    stays at α whatever the number of comparisons and however they depend on each other."""
    idx = sorted((i for i, x in enumerate(p) if x is not None), key=lambda i: p[i])
    m = len(idx)
    out: list[float | None] = [None] * len(p)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        out[i] = running
    return out


class Comparison(pl.DataFrame):
    """The frame `compare` returns, which a notebook shows as a sentence (the overall difference, its CI and
    method, p, wins and losses, cells a side lost, a side's run left incomplete) above the table per group.
    Anything done to it is a plain Polars frame again."""

    def _repr_html_(self, **kw: Any) -> str:
        if not set(COMPARE_COLUMNS) <= set(self.columns) or self.height == 0:
            return pl.DataFrame(self)._repr_html_(**kw)
        from evalkit.analysis.tables import COMPARE_TABLE, esc, headline_text, table_html

        line = esc(headline_text(self.row(-1, named=True)))
        table = table_html(pl.DataFrame(self), COMPARE_TABLE)
        return f'<div style="font-size:14px;margin:4px 0">{line}</div>{table}'


def _not_run(side: pl.DataFrame) -> int | None:
    """Episodes the runs of `side` planned for its models and never ran (`loading.run_status`); None where
    no run says what it planned (a foreign run, or sides the viewer relabelled), or where `side` holds no
    episodes as `load_runs` gives them (a scanner's rates compared as `why` compares them)."""
    if not {"run", "run_name", "scored", "error_class"} <= set(side.columns) or not side.height:
        return None
    from evalkit.records.loading import run_status

    status = run_status(side).filter(pl.col("model").is_in(side["model"].unique().implode()))
    if not status.height or status["planned"].null_count() == status.height:
        return None
    return int(status["not_run"].fill_null(0).sum())


def compare_many(
    df: pl.DataFrame, ref: str, by: str | None = None, method: str | None = None, n_boot: int | None = None,
    seed: int = 0, margin: float | None = None,
) -> pl.DataFrame:  # fmt: skip
    """`compare(df, m, ref)` for every other model m: one table of each model against the reference, with
    `p_holm`, the p-values Holm-adjusted over the models within each group: with ten equal models, a
    p_holm < 0.05 somewhere in the table happens at most 5% of the time (the raw p: about 20–40%)."""
    df = eager(df, "compare_many")
    _select(df, ref)
    others = [m for m in df["model"].unique(maintain_order=True).to_list() if m != ref]
    kw = {"method": method, "n_boot": n_boot, "seed": seed, "margin": margin}
    if not others:
        empty = compare(df, ref, ref, by=None, **kw)
        return pl.DataFrame(schema=empty.schema | {"p_holm": _F})
    out = pl.concat([compare(df, m, ref, by=by, **kw) for m in others], how="vertical").with_row_index("_i")
    adjusted = []
    for _, g in out.group_by("group", maintain_order=True):
        adjusted += list(zip(g["_i"].to_list(), holm(g["p_value"].to_list()), strict=True))
    fix = pl.DataFrame(adjusted, schema={"_i": pl.UInt32, "p_holm": _F}, orient="row")
    out = out.join(fix, on="_i", how="left").sort("_i").drop("_i")
    cols = out.columns
    cols.insert(cols.index("p_value") + 1, cols.pop(cols.index("p_holm")))
    return out.select(cols)


def grade_components(df: pl.DataFrame) -> pl.DataFrame:
    """Long frame (model, component, value) of the numeric grade entries in [0, 1] other than `total` —
    for canvas: structure, visual, coverage, order, background — over scored episodes."""
    df = eager(df, "grade_components")
    rows = []
    for model, g in (
        df.filter(pl.col("scored") & pl.col("grade").is_not_null()).select("model", "grade").iter_rows()
    ):
        for k, v in json.loads(g).items():
            if (
                k != "total"
                and not k.startswith("n_")
                and isinstance(v, int | float)
                and not isinstance(v, bool)
            ):
                rows.append((model, k, float(v)))
    return pl.DataFrame(rows, schema={"model": _S, "component": _S, "value": _F}, orient="row")
