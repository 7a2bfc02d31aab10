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

from evalkit.analysis import harness, power
from evalkit.analysis.tables import COMPARE_TABLE, MIN_TASKS, ci_text, esc, mde_text, p_phrase, table_html
from evalkit.records.columns import eager

N_BOOT = 2000
# MIN_TASKS (6; defined in `tables`, where "too few tasks" is said, which imports nothing of evalkit): the
# fewest tasks (clusters) behind an interval or a minimum detectable effect. Below it nothing can be
# concluded at the 5% level: even with every task on one side, the exact sign-flip test's smallest two-sided
# p-value is 2/2^n, 0.0625 at five tasks, and a percentile bootstrap over so few clusters has almost no
# distinct resamples (one task: an interval of zero width) and covers far less than 95%. Such a mean is
# shown with "too few tasks" and its comparison with its exact p-value, never a CI.
EXACT_FLIPS = 16
"""Up to this many tasks the sign-flip test enumerates all 2^n sign assignments (65,536 at 16); beyond,
N_FLIPS random ones (p = (1 + as extreme) / (1 + N_FLIPS), shown with "≈"), and beyond NORMAL_FLIPS tasks
the normal limit of the same statistic."""
N_FLIPS = 20_000
"""Random sign assignments above EXACT_FLIPS tasks: near p = 0.05 the Monte Carlo error of p is
sqrt(0.05 · 0.95 / 20,000) ≈ 0.0015, under the 0.005 a third decimal needs (2,000 gave 0.005)."""
NORMAL_FLIPS = 2_000
"""Above this many tasks the sign-flip statistic's normal limit replaces random assignments (its error is
far below the Monte Carlo one there, and 20,000 × n draws would dominate a 10,000-task comparison)."""
ALPHA = 0.05
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


def _weigh(df: pl.DataFrame, keys: list[str], cluster: str = "task_id") -> pl.DataFrame:
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
    by = list(by)
    return _weigh(df, by).group_by(by, maintain_order=True).agg(_aggs()).sort(by, nulls_last=True)


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


def _flip_sums(d: np.ndarray, n_flips: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """For every sign assignment s (all 2^n up to EXACT_FLIPS tasks, else `n_flips` random ones from
    `seed`): (s · d, s · 1). The test of "the mean difference is δ" is then a comparison of
    |s·d − δ s·1| with |Σd − nδ| for every δ, without drawing the signs again."""
    n = len(d)
    if n <= EXACT_FLIPS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return (signs * d).sum(1), signs.sum(1)
    rng = np.random.default_rng(seed)
    a, m = np.empty(n_flips), np.empty(n_flips)
    done = 0
    for b in _chunks(n_flips, n):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(b, n))
        a[done : done + b], m[done : done + b] = (signs * d).sum(1), signs.sum(1)
        done += b
    return a, m


def _flip_p(d: np.ndarray, a: np.ndarray | None, m: np.ndarray | None, delta: float) -> float:
    n = len(d)
    x = d - delta
    observed = abs(x.sum())
    if a is None:  # the normal limit: Σ s·x has mean 0 and variance Σ x² under random signs
        sd = math.sqrt(float((x * x).sum()))
        return 1.0 if sd == 0 else math.erfc(observed / sd / math.sqrt(2))
    # Sums equal to the observed one up to rounding count as "as extreme": a tie is not evidence.
    tol = 1e-9 * max(1.0, float(np.abs(x).sum()))
    extreme = int((np.abs(a - delta * m) >= observed - tol).sum())
    if n <= EXACT_FLIPS:
        return extreme / len(a)
    return (1 + extreme) / (1 + len(a))


def p_is_exact(n: int | None) -> bool:
    """Whether the sign-flip p over `n` tasks is exact (enumerated) rather than approximate ("≈")."""
    return n is not None and n <= EXACT_FLIPS


def sign_flip_p(d: np.ndarray, n_flips: int = N_FLIPS, seed: int = 0) -> float | None:
    """Two-sided p-value of a paired sign-flip permutation test: under "A and B are interchangeable", each
    task's difference is as likely with its sign flipped, and p is the share of sign assignments whose mean
    is at least as far from zero as the one observed. Exact (all 2^n assignments) up to EXACT_FLIPS tasks:
    one task gives p = 1, n tasks all on one side 2/2^n. Beyond, `n_flips` random assignments from a
    generator seeded by `seed`, counting the observed one: p = (1 + k) / (1 + n_flips); beyond NORMAL_FLIPS
    tasks the statistic's normal limit."""
    d = np.asarray(d, float)
    if len(d) == 0:
        return None
    if len(d) > NORMAL_FLIPS:
        return _flip_p(d, None, None, 0.0)
    a, m = _flip_sums(d, n_flips, seed)
    return _flip_p(d, a, m, 0.0)


def _wilson(u: float, n_eff: float, z: float) -> tuple[float, float]:
    """Wilson's score interval for a share `u` in [0, 1] over `n_eff` (effective) trials, quantile `z`:
    never of zero width, and inside [0, 1]."""
    z2 = z * z / n_eff
    centre = (u + z2 / 2) / (1 + z2)
    half = z * math.sqrt(max(u * (1 - u), 0.0) / n_eff + z * z / (4 * n_eff * n_eff)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(
    y: np.ndarray, episodes: int | None = None, pass_fail: bool = False, level: float = 0.95
) -> tuple[float | None, float | None]:
    """The interval of a task-weighted mean: `y` holds one value per task (the mean of its scored
    episodes), `episodes` how many episodes are behind them. None below MIN_TASKS tasks.

    Wilson's score interval on the rewards' range ([0, 1], or wider where rewards lie outside it) over the
    effective number of observations, u(1 − u) / (s² / n) with s the SD of the tasks' values (Kish's design
    effect), with Student's t quantile on n − 1 degrees of freedom (after Korn and Graubard's interval for
    clustered proportions). Pass/fail rewards (every reward 0 or 1): the effective number capped at the
    episodes; with one episode per task this is Wilson's own interval (normal quantile), with repeats the
    quantile is Student's on episodes − 1 degrees of freedom; where every task has the same value it is the
    tasks (all 20 tasks at 1.0 give [0.84, 1], not [1, 1], however often each ran). Other rewards: where the
    tasks' values are all equal (no spread to measure), `_constant`. Chosen by simulation
    (benchmarks/coverage.py): about 93–97% from six tasks, where the percentile bootstrap covered 82–89%
    and Student's t 88–91% on skewed rewards."""
    y = np.asarray(y, float)
    y = y[np.isfinite(y)]
    n = len(y)
    if n < MIN_TASKS:
        return None, None
    episodes = max(int(episodes or n), n)
    z = _quantile(level, n, episodes, pass_fail)
    mean = float(y.mean())
    sd = float(y.std(ddof=1))
    lo_b, hi_b = min(0.0, float(y.min())), max(1.0, float(y.max()))
    width = hi_b - lo_b
    u = (mean - lo_b) / width
    if not pass_fail and sd <= 1e-12 * width:
        return _constant(mean, n, lo_b, hi_b, 1 - level)
    var_u = (sd / width) ** 2 / n
    if var_u > 0 and 0 < u < 1:
        n_eff = u * (1 - u) / var_u
    else:  # all tasks alike: how alike a task's own repeats are says nothing of the tasks not drawn
        n_eff = float(n)
    # Pass/fail: no more information than the episodes hold. Continuous rewards may be far less spread than
    # a share's u(1 − u), so n_eff may exceed the episodes; Wilson is then Student's t, pulled toward the
    # middle of the range where the rewards are skewed against a bound (as a share near 0 or 1 is).
    n_eff = min(max(n_eff, 1.0), float(episodes)) if pass_fail else max(n_eff, 1.0)
    lo, hi = _wilson(u, n_eff, z)
    return lo_b + lo * width, lo_b + hi * width


def _quantile(level: float, n: int, episodes: int, pass_fail: bool) -> float:
    """The quantile `mean_interval` puts on Wilson's interval. Pass/fail rewards with one episode per task:
    the normal one (each task's value is 0 or 1, its spread is fixed by the mean: Wilson's own case; with t
    on top it covered 97–100% at 6–10 tasks). With repeats the spread between tasks is estimated, and the
    quantile is Student's on episodes − 1 degrees of freedom: with the normal quantile 6 tasks × 3 repeats
    at 0.5 covered 92%, with Korn and Graubard's n − 1 (the continuous rewards' quantile) 97–99% at 6–10
    tasks (benchmarks/coverage.py; the task means of few repeats take few values, so coverage moves in
    steps as the quantile grows)."""
    z = _z(level)
    if not pass_fail:
        return _t_quantile(z, n - 1)
    return z if episodes <= n else _t_quantile(z, episodes - 1)


def _constant(c: float, n: int, low: float, high: float, alpha: float) -> tuple[float, float]:
    """The interval of a mean when all `n` tasks gave the same value `c`: the share of tasks that could
    differ from c is below 1 − (α/2)^(1/n) (Clopper–Pearson for 0 of n; 3.7/n or so), and those could lie
    anywhere in [low, high]. Wide, as it must be: no spread seen is not no spread."""
    q = 1 - (alpha / 2) ** (1 / n)
    return c - (c - low) * q, c + (high - c) * q


def _z(level: float) -> float:
    """The two-sided normal quantile of `level` (0.95 → 1.96) by bisection on erfc: no scipy."""
    if abs(level - 0.95) < 1e-12:
        return Z_975
    target, lo, hi = 1 - level, 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erfc(mid / math.sqrt(2)) > target else (lo, mid)
    return (lo + hi) / 2


def sign_flip_interval(
    d: np.ndarray, alpha: float = ALPHA, n_flips: int = N_FLIPS, seed: int = 0
) -> tuple[float | None, float | None, float | None]:
    """(low, high, p): the sign-flip test inverted, every shift δ that the test of "the mean difference is
    δ" (on d − δ, with the same sign assignments) does not reject at `alpha`, and p, that test at δ = 0.
    The interval excludes 0 exactly when p < alpha, so the interval and the verdict agree. None below
    MIN_TASKS tasks. Where every task's difference is the same (the test has no spread to invert, and would
    give an interval of zero width) it is widened to Wilson's interval over the tasks on the differences'
    range [−1, 1] (or wider) as `_constant` does, never across 0 while p < alpha."""
    d = np.asarray(d, float)
    n = len(d)
    if n == 0:
        return None, None, None
    a, m = (None, None) if n > NORMAL_FLIPS else _flip_sums(d, n_flips, seed)
    p0 = _flip_p(d, a, m, 0.0)
    if n < MIN_TASKS:
        return None, None, p0
    mean = float(d.mean())

    def edge(far: float) -> float:
        # p(mean) = 1; p(far) < alpha beyond the data (every d − δ of one sign gives 2/2^n). Bisect.
        inside, out = mean, far
        for _ in range(60):
            mid = (inside + out) / 2
            inside, out = (mid, out) if _flip_p(d, a, m, mid) >= alpha else (inside, mid)
            if abs(out - inside) <= 1e-10 * max(1.0, abs(far)):
                break
        return inside

    span = float(d.max() - d.min())
    lo, hi = edge(float(d.min()) - span - 1e-9), edge(float(d.max()) + span + 1e-9)
    if span <= 1e-12 * max(1.0, abs(mean)):
        r = max(1.0, float(np.abs(d).max()))
        wl, wh = _constant(mean, n, -r, r, alpha)
        lo, hi = min(lo, wl), max(hi, wh)
    # The p-value is not monotone in δ everywhere; where a crossing lands on the wrong side of 0, the test
    # at 0 decides.
    if p0 >= alpha:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    elif lo <= 0 <= hi:
        lo, hi = (max(lo, 1e-12), hi) if mean > 0 else (lo, min(hi, -1e-12))
    # Bisection leaves ~1e-10 of noise at an edge that is exactly a data value (0 or 1 for pass/fail).
    return round(lo, 9) + 0.0, round(hi, 9) + 0.0, p0


def min_detectable(sd: float | None, n: int) -> float | None:
    """The paired t-test's smallest detectable difference, (t₀.₉₇₅ + t₀.₈) · sd / √n over `n` tasks whose
    differences have SD `sd`: for reference only. evalkit runs the sign-flip test, whose MDE (`_mde`, by
    `power.detectable`) is larger at few tasks and for pass/fail rewards; at this one it had 62–80% power
    for continuous rewards and 7–40% for pass/fail rewards near 0.9. None below MIN_TASKS tasks."""
    if sd is None or n < MIN_TASKS:
        return None
    return (_t_quantile(Z_975, n - 1) + _t_quantile(Z_80, n - 1)) * sd / math.sqrt(n)


def _mde(per_task: pl.DataFrame, seed: int = 0) -> float | None:
    """The smallest true difference the sign-flip test over these paired tasks detects with 80% power at
    α = 0.05 (`power.detectable`: simulated under the tasks' pass/fail rates or their spread of
    differences); None below MIN_TASKS tasks and where no difference within the reward range gets there."""
    if per_task.height < MIN_TASKS:
        return None

    return power.detectable(
        per_task["d"].to_numpy(),
        per_task["pooled"].to_numpy(),
        per_task["k_a"].to_numpy(),
        per_task["k_b"].to_numpy(),
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
    df: pl.DataFrame, by: Iterable[str] = GROUP, n_boot: int = N_BOOT, seed: int = 0, cluster: str = "task_id"
) -> pl.DataFrame:
    """`summarise` per group and tier, plus tier "all", with 95% CIs on both reward means, which are
    task-weighted: each task's episodes (repeats, skins) become one value first, and the interval is over
    those values (`mean_interval`: Wilson over effective episodes for pass/fail rewards, Student's t
    otherwise; chosen by simulation, benchmarks/coverage.py). `n_tasks` counts the tasks of a row; a CI over
    fewer than MIN_TASKS tasks with a score is null (shown as "too few tasks"), as is the unscored-as-zero one
    over fewer than MIN_TASKS scored or unscored tasks. `n_boot` and `seed` are no longer used (the intervals
    are closed-form) and are kept so that calls giving them still work."""
    df = eager(df, "by_tier")
    by = list(by)
    keys = by + ["tier"]
    both = pl.concat([df, df.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    both = _weigh(_in_task_order(both, keys + [cluster]), keys, cluster)
    table = both.group_by(keys, maintain_order=True).agg(
        _aggs()[:1] + [pl.col(cluster).n_unique().cast(_I).alias("n_tasks")] + _aggs()[1:]
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
        lo, hi = mean_interval(has["m"].to_numpy(), int(has["c"].sum()), pf)
        zlo, zhi = mean_interval(has0["m0"].to_numpy(), int(has0["nz"].sum()), pf)
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
"""What makes an A episode and a B episode the same attempt, for showing them side by side (the viewer's and
the bundle's A vs B). Not the unit of a comparison's statistics: that is TASK_KEYS."""
TASK_KEYS = ("env", "task_id")
"""What makes two episodes the same task in a paired comparison: skins, surfaces, modes and repeats of a
task are that task's episodes, averaged into one value per side before pairing (unless `by` splits them)."""


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
    "p_exact",
)


def _per_task_differences(
    a_df: pl.DataFrame, b_df: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, int]:
    """Per task scored on both sides: each side's mean over all its scored episodes of the task (every
    repeat, skin and surface), and their difference. Repeat numbers play no part: A's repeats 0 and 1 and
    B's repeat 2 of a task are a pair. Also the number of scored episodes of tasks the other side has no
    score for (`n_unpaired`)."""

    def cells(d: pl.DataFrame) -> pl.DataFrame:
        return (
            _in_task_order(d.filter(pl.col("scored") & ~pl.col("reward").is_nan()), keys)
            .group_by(keys, maintain_order=True)
            .agg(
                pl.col("reward").mean().alias("r"),
                pl.len().alias("k"),
                pl.col("reward").is_in([0.0, 1.0]).all().alias("pf"),
            )
        )

    ca, cb = cells(a_df), cells(b_df)
    # Sorted, so that sums (and the seeded sign assignments over them) come out the same on every call.
    j = ca.join(cb, on=keys, how="inner", suffix="_b", nulls_equal=True).sort(keys, nulls_last=True)
    per_task = j.select(
        *keys,
        pl.col("r").alias("mean_a"),
        pl.col("r_b").alias("mean_b"),
        (pl.col("r") - pl.col("r_b")).alias("d"),
        pl.col("k").alias("k_a"),
        pl.col("k_b"),
        ((pl.col("r") * pl.col("k") + pl.col("r_b") * pl.col("k_b")) / (pl.col("k") + pl.col("k_b"))).alias(
            "pooled"
        ),
        (pl.col("pf") & pl.col("pf_b")).alias("pf"),
    )
    unpaired = int(ca["k"].sum() + cb["k"].sum() - j["k"].sum() - j["k_b"].sum())
    return per_task, unpaired


def _compare_block(
    a_df: pl.DataFrame, b_df: pl.DataFrame, n_flips: int, seed: int, margin: float | None = None
) -> dict:
    keys = [k for k in TASK_KEYS if k in a_df.columns]
    per_task, unpaired = _per_task_differences(a_df, b_df, keys)
    n = per_task.height
    row: dict[str, Any] = {
        "n_tasks": n,
        "n_dropped": pl.concat([a_df.select(keys), b_df.select(keys)]).unique().height - n,
        "n_unpaired": unpaired,
        "n_unscored_a": int((~a_df["scored"]).sum()),  # no score: an infrastructure error or no reward
        "n_unscored_b": int((~b_df["scored"]).sum()),
        "p_exact": p_is_exact(n) if n else None,
    }
    if margin is not None:
        row |= {"margin": float(margin), "ni_upper": None, "noninferior": None}
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
    # The same seed for every group and either order: B against A flips the same signs, so its interval is
    # exactly this one negated.
    lo, hi, p = sign_flip_interval(d, ALPHA, n_flips, seed)
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    tie = np.isclose(d, 0, atol=1e-9)
    if margin is not None and n >= MIN_TASKS:
        # One-sided at 2.5%: the upper end of the two-sided 95% interval of A − B. B is no worse than A by
        # more than the margin when even that end is below it.
        upper = hi
        row |= {"ni_upper": upper, "noninferior": bool(upper < margin)}
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


def compare(
    df: pl.DataFrame,
    a: str,
    b: str,
    by: str | None = "tier",
    n_boot: int = N_BOOT,
    seed: int = 0,
    margin: float | None = None,
) -> pl.DataFrame:
    """Paired comparison of `a` against `b` (models, or runs) by task: each side's scored episodes of a task
    (env and task id: every repeat, skin and surface, unless `by` splits them) become that side's mean for
    the task, and each task scored on both sides gives one difference d = A − B; `mean_a`, `mean_b` and
    `diff` are task-weighted means, `sd_diff` the SD of d. `p_value` is the two-sided sign-flip permutation
    test over the d (`sign_flip_p`: exact up to EXACT_FLIPS tasks, `p_exact` false beyond, where it is
    approximate); the 95% CI is that test inverted (`sign_flip_interval`), so it excludes 0 exactly when
    p < 0.05, null below MIN_TASKS tasks; `mde` is the smallest true difference that test would detect
    with 80% power at α = 0.05 (`min_detectable`). Left out and counted: episodes without a score
    (`n_unscored_*`), tasks scored on one side only (`n_dropped`) and those tasks' scored episodes
    (`n_unpaired`). One row per value of `by` plus "all".

    `margin`: non-inferiority of B against A. `ni_upper` is the one-sided 97.5% upper bound of A − B (the
    upper end of the 95% interval) and `noninferior` says whether B is worse than A by less than `margin`
    (ni_upper < margin); null below MIN_TASKS tasks. `n_boot` is no longer used (the interval is the test
    inverted, with N_FLIPS sign assignments above EXACT_FLIPS tasks) and is kept for existing calls."""
    df = eager(df, "compare")
    if "reward" in df.columns:  # a reward that is not a number is no score
        df = df.with_columns((pl.col("scored") & ~pl.col("reward").is_nan().fill_null(False)).alias("scored"))
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
        rows.append(
            {"a": a, "b": b, "by": by or "", "group": g} | _compare_block(xa, xb, N_FLIPS, seed, margin)
        )
    cols = list(COMPARE_COLUMNS) + (["margin", "ni_upper", "noninferior"] if margin is not None else [])
    schema = {c: (_S if c in ("a", "b", "by", "group") else _F) for c in cols}
    for c in ("n_tasks", "n_dropped", "n_unpaired", "n_unscored_a", "n_unscored_b", "wins", "ties", "losses"):
        schema[c] = _I
    schema["p_exact"] = pl.Boolean
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
    """The frame `compare` returns, which a notebook shows as a sentence (the overall difference, its CI,
    p, wins and losses) above the table per group. Anything done to it is a plain Polars frame again."""

    def _repr_html_(self, **kw: Any) -> str:
        if not set(COMPARE_COLUMNS) <= set(self.columns) or self.height == 0:
            return pl.DataFrame(self)._repr_html_(**kw)

        r = self.row(-1, named=True)
        a, b, n = esc(r["a"]), esc(r["b"]), r["n_tasks"]
        if not n:
            line = f"<b>{a}</b> and <b>{b}</b> share no scored task."
        else:
            ci = ci_text(r["ci_low"], r["ci_high"], r["diff"], signed=True)
            ci = f"95% CI {ci}" if r["ci_low"] is not None else f"no CI: {ci}"
            p = esc(p_phrase(r["p_value"], r.get("p_exact")))
            line = (f"<b>{a}</b> − <b>{b}</b> = <b>{r['diff']:+.3f}</b> task-weighted mean reward ({ci}, "
                    f"{p}) over {n} paired task(s): A better on <b>{r['wins']}</b>,"
                    f" B better on <b>{r['losses']}</b>, {r['ties']} tied; smallest detectable difference "
                    f"{mde_text(r['mde'], n)}.")  # fmt: skip
            if r["ci_low"] is None:
                line = f"<b>No conclusion: only {n} task(s).</b> " + line
        table = table_html(pl.DataFrame(self), COMPARE_TABLE)
        return f'<div style="font-size:14px;margin:4px 0">{line}</div>{table}'


def compare_many(
    df: pl.DataFrame,
    ref: str,
    by: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    margin: float | None = None,
) -> pl.DataFrame:
    """`compare(df, m, ref)` for every other model m: one table of each model against the reference, with
    `p_holm`, the p-values Holm-adjusted over the models within each group: with ten equal models, a
    p_holm < 0.05 somewhere in the table happens at most 5% of the time (the raw p: about 20–40%)."""
    df = eager(df, "compare_many")
    _select(df, ref)
    others = [m for m in df["model"].unique(maintain_order=True).to_list() if m != ref]
    if not others:
        empty = compare(df, ref, ref, by=None, margin=margin)
        return pl.DataFrame(schema=empty.schema | {"p_holm": _F})
    out = pl.concat(
        [compare(df, m, ref, by=by, n_boot=n_boot, seed=seed, margin=margin) for m in others], how="vertical"
    ).with_row_index("_i")
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
