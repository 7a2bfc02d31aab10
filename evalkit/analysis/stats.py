"""Statistics over episode frames: summaries, per-tier bootstrap CIs, paired comparison of two models.

An unscored episode (`reward` null, `error_class` set: the infrastructure failed) is never read as a zero:
summaries give the mean over scored episodes and, labelled, the mean with unscored counted as zero. An
episode with no reward and no error (an env that gives no reward, or a run graded elsewhere and not merged)
is neither: summaries count it as `no_reward` and leave it out of both means. Frames come from
`evalkit.records.loading`; their text and files from `evalkit.analysis.summary`; how each number is said
from `evalkit.analysis.tables`.

One rule wherever a number is shown. A mean's 95% CI is a percentile bootstrap over tasks (the clusters),
and none is given below MIN_TASKS tasks. A paired difference's p-value is a sign-flip permutation test over
the tasks' differences, exact up to EXACT_FLIPS tasks. Resampling is a function of the data alone: rows are
put in task order first and every group's generator starts from the same `seed`, so a run gives the same
interval in the CLI, a notebook, the report, the viewer and the bundle, whatever the row order, the other
models beside it or the grouping that led to it (a tier filtered or grouped by); one resample count
(N_BOOT) serves them all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

from evalkit.records.columns import eager

N_BOOT = 2000
MIN_TASKS = 6
"""Fewest tasks (clusters) behind a bootstrap CI or a minimum detectable effect. Below it nothing can be
concluded at the 5% level: even with every task on one side, the exact sign-flip test's smallest two-sided
p-value is 2/2^n, 0.0625 at five tasks, and a percentile bootstrap over so few clusters has almost no
distinct resamples (one task: an interval of zero width) and covers far less than 95%. Such a mean is
shown with "too few tasks" and its comparison with its exact p-value, never a CI."""
EXACT_FLIPS = 16
"""Up to this many tasks the sign-flip test enumerates all 2^n sign assignments (65,536 at 16); beyond,
N_BOOT random ones, p = (1 + as extreme) / (1 + N_BOOT)."""
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143
TIER_ORDER = ("easy", "medium", "hard")
GROUP = ("model", "env", "surface", "mode")

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64


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
        r.filter(scored).mean().alias("mean_reward"),
        # No scored episode, no grades: "unscored as zero" would read as a model that scored 0.
        pl.when(scored.any())
        .then(pl.when(scored).then(r).when(failed).then(0.0).mean())
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
    ]


def summarise(df: pl.DataFrame, by: Iterable[str] = GROUP, as_harness: bool = False) -> pl.DataFrame:
    """Per model × env × surface × mode: counts, reward (scored mean, and with unscored counted as zero),
    turns, tool calls and errors, tokens, reasoning per turn, cost.

    `n` = `scored` + `unscored` + `no_reward`: `unscored` are infrastructure errors (`error_class` set, no
    reward); `no_reward` are episodes that ended without error and without a reward (an env that gives
    none). `mean_reward` is over scored episodes; `mean_reward_unscored_as_0` also counts the unscored as
    zero. No-reward episodes are in neither mean: there is no score to take, and no failure to charge. A
    group with no scored episode (an ungraded run) has both means null: no grades, not a zero.

    `as_harness`: instead, each imported run's numbers as its own harness summarised them
    (`evalkit.analysis.harness`)."""
    df = eager(df, "summarise")
    if as_harness:
        from evalkit.analysis import harness

        return harness.summarise(df, by)
    by = list(by)
    return df.group_by(by, maintain_order=True).agg(_aggs()).sort(by, nulls_last=True)


def _tier_rank() -> pl.Expr:
    t = pl.col("tier")
    return (
        pl.when(t == "all")
        .then(99)
        .when(t.is_in(list(TIER_ORDER)))
        .then(t.replace_strict(list(TIER_ORDER), list(range(len(TIER_ORDER))), default=50))
        .otherwise(50)
    )


def _chunks(n_boot: int, width: int, budget: int = 250_000) -> Iterator[int]:
    # Resamples in blocks of ~budget draws: a block's buffers stay in cache, several times faster than one
    # 2,000 × n matrix on this machine, and memory stays flat for any n.
    step = max(1, min(n_boot, budget // max(1, width)))
    done = 0
    while done < n_boot:
        yield min(step, n_boot - done)
        done += step


def cluster_bootstrap(
    sums: np.ndarray, counts: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
) -> np.ndarray:
    """Bootstrap means of a ratio estimator over clusters: resample clusters (tasks) with replacement and
    return sum(sums)/sum(counts) per resample. With one episode per cluster this is the plain bootstrap.

    `sums` may be 2-D (k statistics × clusters) sharing one `counts` row each ((k × clusters) too); the same
    resamples serve all k, returned as (n_boot × k). Each distinct input row is gathered by the resampled
    indices and summed per resample; a matrix product of cluster multiplicities gave the same sums but went
    through multi-threaded BLAS, which on a busy two-core machine cost several times the whole loop."""
    s2 = np.atleast_2d(np.asarray(sums, float))
    c2 = np.atleast_2d(np.asarray(counts, float))
    rng = np.random.default_rng(seed)
    n = s2.shape[1]
    if n == 0:
        out = np.full((n_boot, s2.shape[0]), np.nan)
        return out if np.ndim(sums) > 1 else out[:, 0]
    k = s2.shape[0]
    # by_tier passes the reward sums twice (once per mean): gather each distinct row once.
    rows: list[np.ndarray] = []
    inv = []
    for r in np.concatenate([s2, c2]):
        same = [j for j, u in enumerate(rows) if np.array_equal(u, r)]
        if not same:
            rows.append(np.ascontiguousarray(r))
        inv.append(same[0] if same else len(rows) - 1)
    # A constant row (episodes per task when every task has the same repeats) sums to the same every time.
    const = [bool((r == r[0]).all()) for r in rows]
    tot = np.empty((n_boot, len(rows)))
    done = 0
    for b in _chunks(n_boot, n):
        # intp draws are the int32 stream for n < 2**32, and indexing with them needs no conversion.
        idx = rng.integers(0, n, size=(b, n), dtype=np.intp)
        for j, r in enumerate(rows):
            tot[done : done + b, j] = r[0] * n if const[j] else r[idx].sum(1)
        done += b
    tot = tot[:, inv]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = tot[:, :k] / tot[:, k:]
    return out if np.ndim(sums) > 1 else out[:, 0]


def _ci(boot: np.ndarray, clusters: int) -> tuple[float | None, float | None]:
    boot = boot[np.isfinite(boot)]
    if not len(boot) or clusters < MIN_TASKS:
        return None, None
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(lo), float(hi)


def sign_flip_p(d: np.ndarray, n_flips: int = N_BOOT, seed: int = 0) -> float | None:
    """Two-sided p-value of a paired sign-flip permutation test: under "A and B are interchangeable", each
    task's difference is as likely with its sign flipped, and p is the share of sign assignments whose mean
    is at least as far from zero as the one observed. Exact (all 2^n assignments) up to EXACT_FLIPS tasks:
    one task gives p = 1, n tasks all on one side 2/2^n. Beyond, `n_flips` random assignments from a
    generator seeded by `seed`, counting the observed one: p = (1 + k) / (1 + n_flips)."""
    d = np.asarray(d, float)
    n = len(d)
    if n == 0:
        return None
    observed = abs(d.sum())
    # Sums equal to the observed one up to rounding count as "as extreme": a tie is not evidence.
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if n <= EXACT_FLIPS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return float((np.abs((signs * d).sum(1)) >= observed - tol).mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    for b in _chunks(n_flips, n):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(b, n))
        extreme += int((np.abs((signs * d).sum(1)) >= observed - tol).sum())
    return (1 + extreme) / (1 + n_flips)


def _t_quantile(z: float, df: int) -> float:
    """Student's t quantile from the normal one `z` (Cornish–Fisher expansion in 1/df): within 1e-4 of the
    exact value for df ≥ 5, all MIN_TASKS allows, without loading scipy.stats for two numbers."""
    v = float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def min_detectable(sd: float | None, n: int) -> float | None:
    """The smallest true mean difference that `n` paired tasks with differences of SD `sd` would detect with
    80% power at α = 0.05 (two-sided; the paired t-test's, which the sign-flip test approaches): None below
    MIN_TASKS tasks, where no difference can be detected at all."""
    if sd is None or n < MIN_TASKS:
        return None
    return (_t_quantile(Z_975, n - 1) + _t_quantile(Z_80, n - 1)) * sd / math.sqrt(n)


def _in_task_order(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Rows sorted by `keys` (then repeat and record key where present): sums and resamples are then a
    function of the data, not of the order the rows came in."""
    cols = [c for c in [*keys, "repeat", "key"] if c in df.columns]
    return df.sort(cols, nulls_last=True, maintain_order=True)


def by_tier(
    df: pl.DataFrame, by: Iterable[str] = GROUP, n_boot: int = N_BOOT, seed: int = 0, cluster: str = "task_id"
) -> pl.DataFrame:
    """`summarise` per group and tier, plus tier "all", with 95% percentile bootstrap CIs on both reward
    means. The bootstrap resamples tasks (repeats of a task move together), vectorised over resamples.
    `n_tasks` counts the tasks of a row; a CI over fewer than MIN_TASKS tasks with a score is null (shown as
    "too few tasks"), as is the unscored-as-zero one over fewer than MIN_TASKS scored or unscored tasks."""
    df = eager(df, "by_tier")
    by = list(by)
    keys = by + ["tier"]
    both = pl.concat([df, df.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    both = _in_task_order(both, keys + [cluster])
    table = both.group_by(keys, maintain_order=True).agg(
        _aggs()[:1] + [pl.col(cluster).n_unique().cast(_I).alias("n_tasks")] + _aggs()[1:]
    )
    per_task = both.group_by(keys + [cluster], maintain_order=True).agg(
        pl.col("reward").filter(pl.col("scored")).sum().alias("s"),
        pl.col("scored").sum().cast(_F).alias("c"),
        (pl.col("scored") | pl.col("error_class").is_not_null()).sum().cast(_F).alias("nz"),
    )
    ci_rows = []
    for k, sub in per_task.group_by(keys, maintain_order=True):
        s, c, nz = (sub[col].to_numpy() for col in ("s", "c", "nz"))
        # Both means share resamples; a task whose episodes are all unscored adds nothing to the scored mean.
        boot = cluster_bootstrap(np.stack([s, s]), np.stack([c, nz]), n_boot, seed)
        lo, hi = _ci(boot[:, 0], int((c > 0).sum()))
        zlo, zhi = _ci(boot[:, 1], int((nz > 0).sum()))
        ci_rows.append((*k, lo, hi, zlo, zhi))
    ci = pl.DataFrame(
        ci_rows,
        schema=[(k, both.schema[k]) for k in keys]
        + [("ci_low", _F), ("ci_high", _F), ("ci_low_unscored_as_0", _F), ("ci_high_unscored_as_0", _F)],
        orient="row",
    )
    out = table.join(ci, on=keys, how="left", nulls_equal=True)
    # A group with no scored episode has no mean to bound (its resamples are all 0 / n): no CI, not [0, 0].
    none = pl.col("scored") == 0
    out = out.with_columns(pl.when(~none).then(pl.col(c)).alias(c) for c in ci.columns[len(keys) :])
    cols = list(table.columns)
    i = cols.index("mean_reward") + 1
    cols[i:i] = ["ci_low", "ci_high"]
    j = cols.index("mean_reward_unscored_as_0") + 1
    cols[j:j] = ["ci_low_unscored_as_0", "ci_high_unscored_as_0"]
    return (
        out.select(cols)
        .with_columns(_tier_rank().alias("_r"))
        .sort(by + ["_r", "tier"], nulls_last=True)
        .drop("_r")
    )


# ---------------------------------------------------------------- paired comparison

PAIR_KEYS = ("env", "surface", "mode", "task_id", "skin")


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


def paired_bootstrap(d: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Bootstrap distribution of the mean of per-task differences `d`: tasks are resampled (the cluster) and
    each carries its own difference, so the repeats behind it travel with it. Resampling the repeats again
    inside each drawn task would count the within-task noise twice (it is already in the spread of `d`)."""
    d = np.asarray(d, float)
    return cluster_bootstrap(d, np.ones_like(d), n_boot, seed)


COMPARE_COLUMNS = (
    "a",
    "b",
    "by",
    "group",
    "n_tasks",
    "n_dropped",
    "n_unpaired",
    "n_unscored_a",
    "n_unscored_b",
    "mean_a",
    "mean_b",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "wins",
    "ties",
    "losses",
    "sd_diff",
    "mde",
)


def _per_task_differences(
    a_df: pl.DataFrame, b_df: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, int]:
    """Per task with at least one repeat scored on both sides: the mean over those repeats of A, of B, and of
    their difference (repeat r of A against repeat r of B). Also the number of scored episodes of those tasks
    left out because the other side has no scored episode with the same repeat."""
    rk = keys + ["repeat"]

    def cells(d: pl.DataFrame) -> pl.DataFrame:
        # One value per task and repeat (a model found in two runs may have both at the same repeat).
        return (
            _in_task_order(d.filter(pl.col("scored")), rk)
            .group_by(rk, maintain_order=True)
            .agg(pl.col("reward").mean().alias("r"), pl.len().alias("k"))
        )

    ca, cb = cells(a_df), cells(b_df)
    # Sorted, so that sums (and the seeded bootstrap over them) come out the same on every call.
    j = ca.join(cb, on=rk, how="inner", suffix="_b", nulls_equal=True).sort(rk, nulls_last=True)
    per_task = (
        j.group_by(keys, maintain_order=True)
        .agg(
            pl.col("r").mean().alias("mean_a"),
            pl.col("r_b").mean().alias("mean_b"),
            (pl.col("r") - pl.col("r_b")).mean().alias("d"),
        )
        .sort(keys, nulls_last=True)
    )
    paired = per_task.select(keys)
    scored_in_paired = sum(
        int(c.join(paired, on=keys, how="semi", nulls_equal=True)["k"].sum()) for c in (ca, cb)
    )
    return per_task, scored_in_paired - int(j["k"].sum() + j["k_b"].sum())


def _compare_block(a_df: pl.DataFrame, b_df: pl.DataFrame, n_boot: int, seed: int) -> dict:
    keys = [k for k in PAIR_KEYS if k in a_df.columns]
    per_task, unpaired = _per_task_differences(a_df, b_df, keys)
    n = per_task.height
    row: dict[str, Any] = {
        "n_tasks": n,
        "n_dropped": pl.concat([a_df.select(keys), b_df.select(keys)]).unique().height - n,
        "n_unpaired": unpaired,
        "n_unscored_a": int((~a_df["scored"]).sum()),  # no score: an infrastructure error or no reward
        "n_unscored_b": int((~b_df["scored"]).sum()),
    }
    if n == 0:
        return (
            row
            | {
                k: None
                for k in ("mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value", "sd_diff", "mde")
            }
            | {"wins": 0, "ties": 0, "losses": 0}
        )
    d = per_task["d"].to_numpy()
    # The same seed for every group and either order: B against A resamples the same tasks, so its
    # interval is exactly this one negated.
    lo, hi = _ci(paired_bootstrap(d, n_boot, seed), n)
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    tie = np.isclose(d, 0, atol=1e-9)
    return row | {
        "mean_a": float(per_task["mean_a"].mean()),
        "mean_b": float(per_task["mean_b"].mean()),
        "diff": float(d.mean()),
        "ci_low": lo,
        "ci_high": hi,
        "p_value": sign_flip_p(d, n_boot, seed),
        "wins": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "losses": int(((d < 0) & ~tie).sum()),
        "sd_diff": sd,
        "mde": min_detectable(sd, n),
    }


def compare(
    df: pl.DataFrame, a: str, b: str, by: str | None = "tier", n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """Paired comparison of `a` against `b` (models, or runs): episodes paired by task (env, surface, mode,
    task, skin) and repeat. Each task gives one difference d, the mean over its paired repeats of
    (A − B); `diff` is the mean of d over tasks, `sd_diff` its SD. The CI is a bootstrap that resamples
    tasks only, each with its d (a task-clustered bootstrap: repeats travel with their task), null below
    MIN_TASKS tasks; `p_value` is the two-sided sign-flip permutation test over the d (`sign_flip_p`: exact
    for few tasks, 1 for one); `mde` is the smallest true difference this many tasks would detect with 80%
    power at α = 0.05, from `sd_diff` (`min_detectable`: null below MIN_TASKS). Left out and counted:
    episodes without a score (`n_unscored_*`: an infrastructure error or no reward), tasks without a repeat
    scored on both sides (`n_dropped`), and scored episodes of the other tasks whose repeat has no scored
    partner on the other side (`n_unpaired`). One row per value of `by` plus "all"."""
    df = eager(df, "compare")
    da, db = _select(df, a), _select(df, b)
    groups: list[tuple[str, pl.DataFrame, pl.DataFrame]] = []
    if by:
        values = [v for v in pl.concat([da[by], db[by]]).unique().to_list()]
        rank = {t: i for i, t in enumerate(TIER_ORDER)}
        values.sort(key=lambda v: (v is None, rank.get(v, 50), str(v)))
        for v in values:
            f = pl.col(by).is_null() if v is None else pl.col(by) == v
            groups.append((None if v is None else str(v), da.filter(f), db.filter(f)))
    groups.append(("all", da, db))
    rows = []
    for g, xa, xb in groups:
        rows.append({"a": a, "b": b, "by": by or "", "group": g} | _compare_block(xa, xb, n_boot, seed))
    schema = {c: (_S if c in ("a", "b", "by", "group") else _F) for c in COMPARE_COLUMNS}
    for c in ("n_tasks", "n_dropped", "n_unpaired", "n_unscored_a", "n_unscored_b", "wins", "ties", "losses"):
        schema[c] = _I
    return Comparison(pl.DataFrame(rows, schema=schema).select(COMPARE_COLUMNS))


class Comparison(pl.DataFrame):
    """The frame `compare` returns, which a notebook shows as a sentence (the overall difference, its CI,
    p, wins and losses) above the table per group. Anything done to it is a plain Polars frame again."""

    def _repr_html_(self, **kw: Any) -> str:
        if not set(COMPARE_COLUMNS) <= set(self.columns) or self.height == 0:
            return pl.DataFrame(self)._repr_html_(**kw)
        from evalkit.analysis.tables import COMPARE_TABLE, ci_text, esc, mde_text, p_phrase, table_html

        r = self.row(-1, named=True)
        a, b, n = esc(r["a"]), esc(r["b"]), r["n_tasks"]
        if not n:
            line = f"<b>{a}</b> and <b>{b}</b> share no scored task."
        else:
            ci = ci_text(r["ci_low"], r["ci_high"], r["diff"], signed=True)
            ci = f"95% CI {ci}" if r["ci_low"] is not None else f"no CI: {ci}"
            line = (f"<b>{a}</b> − <b>{b}</b> = <b>{r['diff']:+.3f}</b> mean reward ({ci}, "
                    f"{esc(p_phrase(r['p_value']))}) over {n} paired task(s): A better on <b>{r['wins']}</b>,"
                    f" B better on <b>{r['losses']}</b>, {r['ties']} tied; smallest detectable difference "
                    f"{mde_text(r['mde'], n)}.")  # fmt: skip
            if r["ci_low"] is None:
                line = f"<b>No conclusion: only {n} task(s).</b> " + line
        table = table_html(pl.DataFrame(self), COMPARE_TABLE)
        return f'<div style="font-size:14px;margin:4px 0">{line}</div>{table}'


def compare_many(
    df: pl.DataFrame, ref: str, by: str | None = None, n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """`compare(df, m, ref)` for every other model m: one table of each model against the reference."""
    df = eager(df, "compare_many")
    _select(df, ref)
    others = [m for m in df["model"].unique(maintain_order=True).to_list() if m != ref]
    if not others:
        return pl.DataFrame(schema=compare(df, ref, ref, by=None, n_boot=10).schema)
    return pl.concat([compare(df, m, ref, by=by, n_boot=n_boot, seed=seed) for m in others], how="vertical")


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
