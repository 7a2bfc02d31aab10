"""The intervals and tests behind every number evalkit shows, on plain arrays: one value per task (a mean
interval) or one difference per task (a paired one). `evalkit.analysis.stats` builds those arrays from
episode frames; `benchmarks/coverage.py` measures what each method here covers.

Methods, each named once (`tables.METHODS`) and by that name wherever its interval is shown:
  bayes      the Bayesian bootstrap over tasks with one prior task (the default for a mean);
  wilson     Wilson's score interval over the effective number of tasks (the default before issue 51);
  bootstrap  the studentized bootstrap over tasks (resampling tasks, `n_boot` resamples from `seed`);
and for a paired difference `PAIRED_METHODS`. Every draw is a function of the data: values are sorted
first and every generator starts from the same seed, so a run gives the same interval in the CLI, a
notebook, the report, the viewer and the bundle, whatever the order of its rows.

The p-value of a paired comparison is always the sign-flip test's (exact up to EXACT_FLIPS tasks), and
every paired interval is made to agree with it (`agree`): it excludes 0 exactly when p < ALPHA.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from evalkit.analysis.tables import MEAN_METHODS, MIN_TASKS, PAIRED_METHODS

N_BOOT = 2000
"""Resamples of the studentized bootstrap (`bootstrap_interval`) unless a caller gives `n_boot`."""
DRAWS = 4000
"""Posterior draws of the Bayesian bootstrap (`bayes_interval`): the Monte Carlo error of a 2.5% quantile is
about 1% of the interval's width."""
NORMAL_TASKS = 2000
"""Above this many tasks `bayes_interval` takes the posterior's normal limit (draws would cost n × DRAWS)."""
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
NI_LEVEL = 0.975
"""The paired interval whose upper end is the non-inferiority bound (`ni_upper`): a one-sided 98.75% bound,
not the 95% interval's 97.5% one. Pass/fail differences over 10–60 tasks take few values, and the 95%
interval's upper end put a B truly worse by the margin below it in up to 3.9% of runs (exact over every
2 × 2 table at 20 tasks, one episode a side; 3–3.6% at 3,000 runs a cell near a bound with unequal repeats:
benchmarks/coverage.py --part ni, ni-exact), where 2.5% is the promise. No interval tried held 2.5% there
and kept the 95% interval's coverage in 93–97% (the counts' steps: docs/statistics.md); a bound one level
further out holds it in every cell measured, at the price of a bound ~14% further from the difference."""
SHARE_BALANCED = 0.05
"""How far the default paired interval's ends go from paired t's toward MOVER's (where MOVER's reach further)
when the sides are balanced (every paired cell has as many scored repeats on A's side as on B's; for
continuous rewards, fewer than AVERAGED episodes behind some task's value), and for continuous rewards also
where cells were scored by one side alone (`mover_share`)."""
SHARE_UNEQUAL = 0.1
"""The same share for continuous rewards where a paired cell has more scored repeats on one side than the
other: a single episode's skew near a bound is not cancelled by the other side's mean of several."""
AVERAGED = 3
"""Continuous rewards, sides balanced and no cell lost, every paired task's value on each side the mean of at
least this many scored episodes: the default takes paired t alone (no way toward MOVER). A mean of three
rewards is skewed little enough near a bound that t covered 93.6–96.9% in every cell of design 3/3
(benchmarks/coverage.py, 2,000 runs a cell on fresh draws; at 8,000 the lowest, 0.95 × 6 tasks, read
93.5 ± 0.3%), where a twentieth of the way covered up to 99.9%; with two episodes a task t covered 92.1%
at 0.95 × 6 tasks, so below this the twentieth stays."""
SHARE_PASS_FAIL_UNBALANCED = 0.5
"""The same share for pass/fail rewards with unequal repeats or cells scored by one side alone: a single 0 or
1 against a mean of several leaves the differences too skewed for t (benchmarks/coverage.py --part
paired-between; docs/statistics.md)."""
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143


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


def wilson_interval(
    y: np.ndarray, episodes: int | None = None, pass_fail: bool = False, level: float = 0.95
) -> tuple[float | None, float | None]:
    """METHODS["wilson"]: the interval of a task-weighted mean from `y`, one value per task (the mean of
    its scored episodes), `episodes` how many episodes are behind them. None below MIN_TASKS tasks.

    Wilson's score interval on the rewards' range ([0, 1], or wider where rewards lie outside it) over the
    effective number of observations, u(1 − u) / (s² / n) with s the SD of the tasks' values (Kish's design
    effect), with Student's t quantile on n − 1 degrees of freedom (after Korn and Graubard's interval for
    clustered proportions). Pass/fail rewards (every reward 0 or 1): the effective number capped at the
    episodes; with one episode per task this is Wilson's own interval (normal quantile), with repeats the
    quantile is Student's on episodes − 1 degrees of freedom; where every task has the same value it is the
    tasks (all 20 tasks at 1.0 give [0.84, 1], not [1, 1], however often each ran). Other rewards: where the
    tasks' values are all equal (no spread to measure), `_constant`. It covered 93–97% for rewards near
    the middle of the range, and 72–93% for skewed continuous rewards near a bound (means 0.9 and 0.95,
    6–60 tasks: benchmarks/coverage.py), where `bayes_interval` covers."""
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
    """The quantile `wilson_interval` puts on Wilson's interval. Pass/fail rewards with one episode per task:
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


def bounds(y: np.ndarray) -> tuple[float, float]:
    """The rewards' range: [0, 1], or wider where values lie outside it."""
    return min(0.0, float(y.min())), max(1.0, float(y.max()))


def _dirichlet_means(
    y: np.ndarray, low: np.ndarray, high: np.ndarray, draws: int, rng: np.random.Generator
) -> np.ndarray:
    """Posterior draws (rows × draws) of the mean of each row of `y` (one run's task values, sorted) under
    the Bayesian bootstrap with one prior task on [low, high] (`bayes_interval`), in blocks of about a
    quarter of a million numbers; for one row the draws come in the order a row alone would take them."""
    rows, n = y.shape
    per = max(1, 250_000 // (n + 1))  # draws of one row per block
    step = min(draws, per)
    block = max(1, 250_000 // (draws * (n + 1))) if step == draws else 1
    out = np.empty((rows, draws))
    for r0 in range(0, rows, block):
        part = y[r0 : r0 + block]
        k = len(part)
        lo, width = low[r0 : r0 + k, None], (high - low)[r0 : r0 + k, None]
        for d0 in range(0, draws, step):
            b = min(step, draws - d0)
            g = rng.standard_exponential((k, b, n))
            g0 = rng.standard_exponential((k, b))
            prior = lo + width * rng.beta(0.5, 0.5, (k, b))
            # Products through numpy's sum, not BLAS: multi-threaded BLAS cost several times the loop on a
            # busy two-core machine (see `cluster_bootstrap`).
            out[r0 : r0 + k, d0 : d0 + b] = ((g * part[:, None, :]).sum(2) + g0 * prior) / (g.sum(2) + g0)
    return out


def bayes_bounds(
    y: np.ndarray, level: float = 0.95, seed: int = 0, draws: int = DRAWS, low: Any = None, high: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """`bayes_interval` of every row of `y` (runs × tasks, no NaN) at once: (lows, highs). What the
    simulations of benchmarks/coverage.py call, so that they measure this code."""
    y = np.sort(np.atleast_2d(np.asarray(y, float)), axis=1)
    rows, n = y.shape
    low = np.minimum(0.0, y[:, 0]) if low is None else np.broadcast_to(np.asarray(low, float), (rows,))
    high = np.maximum(1.0, y[:, -1]) if high is None else np.broadcast_to(np.asarray(high, float), (rows,))
    alpha = 1 - level
    if n > NORMAL_TASKS:  # the Dirichlet mean's variance, Σ(y − ȳ)² / (n (n + 1)), and its normal limit
        mean = y.mean(1)
        sd = np.sqrt(((y - mean[:, None]) ** 2).sum(1) / (n * (n + 1)))
        return np.maximum(low, mean - _z(level) * sd), np.minimum(high, mean + _z(level) * sd)
    means = _dirichlet_means(y, low, high, draws, np.random.default_rng(seed))
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=1)
    return lo, hi


def bayes_interval(
    y: np.ndarray, level: float = 0.95, seed: int = 0, draws: int = DRAWS, low: float | None = None,
    high: float | None = None,
) -> tuple[float | None, float | None]:  # fmt: skip
    """METHODS["bayes"]: the central `level` interval of the posterior of the mean of the tasks' values `y`
    under a Dirichlet-process prior of concentration 1 whose base measure is Jeffreys' Beta(1/2, 1/2) on the
    rewards' range [low, high] (default `bounds(y)`): the Bayesian bootstrap over tasks (Rubin 1981; each
    task weighs an Exp(1) draw) with one prior task (weight Exp(1), value from the base measure). None below
    MIN_TASKS tasks.

    Why the prior task: rewards near a bound are skewed, and a few tasks often miss the rare task far from
    the rest (at a mean of 0.95 most runs of 20 tasks hold none below 0.5), so any interval built from the
    spread seen (Wilson's, Student's t, the bootstrap) is too narrow there: 72–93% at means 0.9–0.95. The
    prior task stands for the task not seen; it weighs as much as one task, so its pull fades as tasks
    accumulate. By simulation (benchmarks/coverage.py) it covers 93–97% for continuous and pass/fail
    rewards at means 0.5–0.95 from six tasks; all tasks alike give a wide interval, never one of zero width
    (20 perfect tasks: about [0.89, 1]). The pull is toward the middle of the range, so near a bound its
    rare misses are through the end toward the bound (3–5% of runs) and the other end lies far out for
    rewards of little spread; the intervals that are narrow there (Wilson's, Korn and Graubard's) covered
    70–94% at 6–20 tasks, missing through that far end (`--part candidates`, docs/statistics.md)."""
    y = np.asarray(y, float)
    y = y[np.isfinite(y)]
    if len(y) < MIN_TASKS:
        return None, None
    lo, hi = bayes_bounds(y[None, :], level, seed, draws, low, high)
    return float(lo[0]), float(hi[0])


def bootstrap_bounds(
    y: np.ndarray, level: float = 0.95, n_boot: int | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`bootstrap_interval` of every row of `y` (runs × tasks, no NaN) at once: (lows, highs)."""
    y = np.sort(np.atleast_2d(np.asarray(y, float)), axis=1)
    rows, n = y.shape
    lo_b, hi_b = np.minimum(0.0, y[:, 0]), np.maximum(1.0, y[:, -1])
    mean, sd = y.mean(1), y.std(1, ddof=1)
    n_boot = N_BOOT if n_boot is None else int(n_boot)
    rng = np.random.default_rng(seed)
    t = np.empty((rows, n_boot))
    block = max(1, 250_000 // (n_boot * n)) if n_boot * n <= 250_000 else 1
    for r0 in range(0, rows, block):
        part = y[r0 : r0 + block]
        k = len(part)
        done = 0
        for b in _chunks(n_boot, n * k):
            s = np.take_along_axis(part[:, None, :], rng.integers(0, n, size=(k, b, n), dtype=np.intp), 2)
            m, se = s.mean(2), s.std(2, ddof=1) / math.sqrt(n)
            with np.errstate(divide="ignore", invalid="ignore"):
                # A resample of one repeated value has no spread: as far out as it gets (0 at the mean).
                diff = m - mean[r0 : r0 + k, None]
                t[r0 : r0 + k, done : done + b] = np.where(se > 0, diff / se, np.sign(diff) * np.inf)
            done += b
    alpha = 1 - level
    with np.errstate(invalid="ignore"):  # quantiles between two infinite t*: the interval reaches the bound
        q_hi, q_lo = np.quantile(t, [1 - alpha / 2, alpha / 2], axis=1)
    q_hi, q_lo = np.nan_to_num(q_hi, nan=np.inf), np.nan_to_num(q_lo, nan=-np.inf)
    se0 = sd / math.sqrt(n)
    with np.errstate(invalid="ignore"):  # an infinite t* times a flat run's zero spread: `flat` below
        lo, hi = np.maximum(lo_b, mean - q_hi * se0), np.minimum(hi_b, mean - q_lo * se0)
    flat = sd <= 1e-12 * (hi_b - lo_b)  # nothing to resample: `_constant`
    q = 1 - ((1 - level) / 2) ** (1 / n)
    lo = np.where(flat, mean - (mean - lo_b) * q, lo)
    hi = np.where(flat, mean + (hi_b - mean) * q, hi)
    return lo, hi


def bootstrap_interval(
    y: np.ndarray, level: float = 0.95, n_boot: int | None = None, seed: int = 0
) -> tuple[float | None, float | None]:
    """METHODS["bootstrap"]: the studentized (bootstrap-t) interval of the mean of the tasks' values `y`:
    tasks resampled with replacement `n_boot` (default N_BOOT) times from `seed`, t* = (mean* − mean) / se*
    per resample, and mean − t*₁₋α/₂ · se … mean − t*α/₂ · se, clipped to the rewards' range. None below
    MIN_TASKS tasks; where every task has the same value (nothing to resample), `_constant`. Second-order
    accurate, so it follows skewed rewards at 20 tasks and more; at 6–10 tasks of pass/fail rewards most
    resamples have no spread and it covers far less (benchmarks/coverage.py)."""
    y = np.asarray(y, float)
    y = y[np.isfinite(y)]
    if len(y) < MIN_TASKS:
        return None, None
    lo, hi = bootstrap_bounds(y[None, :], level, n_boot, seed)
    return float(lo[0]), float(hi[0])


def check_method(method: str | None, allowed: tuple[str, ...], what: str) -> str:
    """`method` (None: the first allowed), refused in one line when it names none of `allowed`."""
    if method is None:
        return allowed[0]
    if method not in allowed:
        raise ValueError(f"{what}: method {method!r} is not one of {', '.join(map(repr, allowed))}")
    return method


def mean_interval(
    y: np.ndarray, episodes: int | None = None, pass_fail: bool = False, level: float = 0.95,
    method: str | None = None, seed: int = 0, n_boot: int | None = None,
) -> tuple[float | None, float | None]:  # fmt: skip
    """The `level` interval of a task-weighted mean: `y` holds one value per task (the mean of its scored
    episodes), `episodes` how many episodes are behind them (Wilson's interval caps its effective number of
    pass/fail trials there). `method` one of MEAN_METHODS (default "bayes", `bayes_interval`); None below
    MIN_TASKS tasks. `n_boot` is the bootstrap's resamples: given with another method it has no effect, and
    is refused so that no one believes it had."""
    method = check_method(method, MEAN_METHODS, "mean_interval")
    if n_boot is not None and method != "bootstrap":
        raise ValueError(f"mean_interval: n_boot is the bootstrap's; method {method!r} draws no resamples")
    if method == "bayes":
        return bayes_interval(y, level, seed)
    if method == "bootstrap":
        return bootstrap_interval(y, level, n_boot, seed)
    return wilson_interval(y, episodes, pass_fail, level)


def paired_bootstrap(d: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Bootstrap distribution of the mean of per-task differences `d`: tasks are resampled (the cluster) and
    each carries its own difference, so the repeats behind it travel with it. Resampling the repeats again
    inside each drawn task would count the within-task noise twice (it is already in the spread of `d`)."""
    d = np.asarray(d, float)
    return cluster_bootstrap(d, np.ones_like(d), n_boot, seed)


def t_bounds(d: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """`t_interval` of every row of `d` (runs × tasks) at once: (lows, highs)."""
    d = np.atleast_2d(np.asarray(d, float))
    n = d.shape[1]
    mean, sd = d.mean(1), d.std(1, ddof=1)
    r = np.maximum(1.0, np.abs(d).max(1))
    half = _t_quantile(_z(level), n - 1) * sd / math.sqrt(n)
    q = 1 - ((1 - level) / 2) ** (1 / n)
    flat = sd <= 1e-12 * r  # every task the same difference: `_constant` on [−r, r]
    return np.where(flat, mean - (mean + r) * q, mean - half), np.where(
        flat, mean + (r - mean) * q, mean + half
    )


def t_interval(d: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """METHODS["t"]: Student's t interval of the mean of the tasks' differences `d`, on n − 1 degrees of
    freedom; where every task's difference is the same, `_constant` on the differences' range [−1, 1] (or
    wider). None below MIN_TASKS tasks."""
    d = np.asarray(d, float)
    if len(d) < MIN_TASKS:
        return None, None
    lo, hi = t_bounds(d[None, :], level)
    return float(lo[0]), float(hi[0])


def mover_bounds(
    ya: np.ndarray, yb: np.ndarray, level: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`mover_interval` of every row of `ya` − `yb` (runs × paired tasks) at once: (lows, highs)."""
    ya, yb = np.atleast_2d(np.asarray(ya, float)), np.atleast_2d(np.asarray(yb, float))
    la, ua = bayes_bounds(ya, level, seed)
    lb, ub = bayes_bounds(yb, level, seed)
    a, b = ya.mean(1), yb.mean(1)
    ca, cb = ya - a[:, None], yb - b[:, None]
    den = np.sqrt((ca * ca).sum(1) * (cb * cb).sum(1))
    r = np.where(den > 0, (ca * cb).sum(1) / np.where(den > 0, den, 1.0), 0.0)
    low, up = (a - la, ub - b), (ua - a, b - lb)
    return (
        a - b - np.sqrt(np.maximum(0.0, low[0] ** 2 + low[1] ** 2 - 2 * r * low[0] * low[1])),
        a - b + np.sqrt(np.maximum(0.0, up[0] ** 2 + up[1] ** 2 - 2 * r * up[0] * up[1])),
    )


def mover_interval(
    ya: np.ndarray, yb: np.ndarray, level: float = 0.95, seed: int = 0
) -> tuple[float | None, float | None]:
    """METHODS["mover"]: the interval of mean(ya) − mean(yb) over paired tasks by MOVER (Zou and Donner 2008;
    Newcombe's method 10 for paired proportions is its pass/fail case): each side's own interval
    (`bayes_interval`, which knows how far a mean near a bound may be from the tasks seen) combined with
    the correlation r of the two sides' task values,
    low = d − √((a − lₐ)² + (u_b − b)² − 2r (a − lₐ)(u_b − b)), and the upper end alike. None below MIN_TASKS
    tasks."""
    ya, yb = np.asarray(ya, float), np.asarray(yb, float)
    if len(ya) < MIN_TASKS:
        return None, None
    lo, hi = mover_bounds(ya[None, :], yb[None, :], level, seed)
    return float(lo[0]), float(hi[0])


def paired_bounds(
    d: np.ndarray, ya: np.ndarray, yb: np.ndarray, method: str | None = None, seed: int = 0,
    n_boot: int | None = None, level: float = 0.95, share: float | np.ndarray = 1.0,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """`paired_interval` of every row (runs × paired tasks) at once, for the methods that take no sign
    assignments ("sign-flip" is one run at a time: `sign_flip_interval`); `share` one for all rows or one a
    row."""
    method = check_method(method, PAIRED_METHODS, "paired_bounds")
    d = np.atleast_2d(np.asarray(d, float))
    if method == "bootstrap":
        r = np.maximum(1.0, np.abs(d).max(1))[:, None]
        lo, hi = bootstrap_bounds((d + r) / (2 * r), level, n_boot, seed)
        return lo * 2 * r[:, 0] - r[:, 0], hi * 2 * r[:, 0] - r[:, 0]
    if method == "mover":
        return mover_bounds(ya, yb, level, seed)
    if method == "sign-flip":
        rows = [sign_flip_interval(row, 1 - level, N_FLIPS, seed)[:2] for row in d]
        return np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float)
    lo, hi = t_bounds(d, level)
    if method == "t":
        return lo, hi
    mlo, mhi = mover_bounds(ya, yb, level, seed)
    whole = np.asarray(share) >= 1  # all the way: MOVER's own end, not t's plus the gap (rounding)
    return (np.where(whole, np.minimum(lo, mlo), lo + share * np.minimum(mlo - lo, 0.0)),
            np.where(whole, np.maximum(hi, mhi), hi + share * np.maximum(mhi - hi, 0.0)))  # fmt: skip


def mover_share(pass_fail: bool, unequal: bool = False, lost: bool = False, fewest: int = 1) -> float:
    """The share of the way from paired t's ends to MOVER's that the default ("t+mover") takes where MOVER's
    reach further, by what a run shows: whether every reward is 0 or 1, whether some paired cell has more
    scored repeats on one side (`unequal`), whether some cell was scored by one side alone (`lost`), and
    the fewest scored episodes a side behind a paired task's value (`fewest`).
    SHARE_PASS_FAIL_UNBALANCED for pass/fail rewards with either, SHARE_UNEQUAL for continuous rewards with
    unequal repeats, none (paired t alone) for continuous ones balanced with AVERAGED episodes a task or
    more, else SHARE_BALANCED. Chosen by simulation (benchmarks/coverage.py --part
    paired-between, docs/statistics.md): near a bound with few tasks paired t alone covered as little as
    84% (continuous) and 82% (pass/fail), the whole way to MOVER 98–100%."""
    if pass_fail and (unequal or lost):
        return SHARE_PASS_FAIL_UNBALANCED
    if not pass_fail and unequal:
        return SHARE_UNEQUAL
    return 0.0 if not pass_fail and not lost and fewest >= AVERAGED else SHARE_BALANCED


def sign_flip_p_rows(d: np.ndarray, n_flips: int = N_FLIPS, seed: int = 0) -> np.ndarray:
    """`sign_flip_p` of every row of `d` (runs × tasks) at once, the same sign assignments for every row."""
    d = np.atleast_2d(np.asarray(d, float))
    rows, n = d.shape
    if n > NORMAL_FLIPS:
        sd = np.sqrt((d * d).sum(1))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.array([math.erfc(x) for x in np.abs(d.sum(1)) / np.where(sd > 0, sd, 1) / math.sqrt(2)])
        return np.where(sd > 0, p, 1.0)
    if n <= EXACT_FLIPS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    else:
        signs = 1.0 - 2.0 * np.random.default_rng(seed).integers(0, 2, size=(n_flips, n))
    observed = np.abs(d.sum(1))
    tol = 1e-9 * np.maximum(1.0, np.abs(d).sum(1))
    count = np.zeros(rows)
    block = max(1, 2_000_000 // len(signs))
    for r0 in range(0, rows, block):
        part = d[r0 : r0 + block]
        sums = np.abs((part[:, None, :] * signs[None, :, :]).sum(2))
        count[r0 : r0 + block] = (sums >= (observed - tol)[r0 : r0 + block, None]).sum(1)
    return count / len(signs) if n <= EXACT_FLIPS else (1 + count) / (1 + len(signs))


def paired_interval(
    d: np.ndarray, ya: np.ndarray, yb: np.ndarray, method: str | None = None, seed: int = 0,
    n_boot: int | None = None, level: float = 0.95, share: float = 1.0,
) -> tuple[float | None, float | None]:  # fmt: skip
    """The `level` interval of the mean of the tasks' differences `d` = `ya` − `yb` (each side's value of
    each paired task) by `method`, one of PAIRED_METHODS; None below MIN_TASKS tasks. Before it is shown it
    is made to agree with the sign-flip test (`agree`).

    The default, "t+mover", is Student's t interval (`t_interval`) with each end taken `share` of the way
    out to MOVER's (`mover_interval`) where that reaches further (1: all the way; `compare` gives
    `mover_share` of its data for its 95% interval and 1 for the non-inferiority bound). By simulation
    (benchmarks/coverage.py): t alone covers 93–97% in the middle of the reward range and with 20 tasks or
    more, but near a bound with few tasks the tasks' differences are skewed (the one that would show B's
    rare drop is often not drawn) and it covered as little as 84%, its upper end missing a true difference
    in up to 13% of runs; MOVER's ends know each side's unseen tail, at the price of being wide there
    (98–100%). A twentieth of the way (a tenth for continuous rewards with unequal repeats, half the way
    for pass/fail ones with unequal repeats or lost cells, none for continuous ones balanced with three
    episodes a task or more: `mover_share`) covers 93–97% in 193 of the full table's 288 cells with a true
    difference (103 all the way); three read under 93% at 500 runs, 94.9–95.1% at 8,000."""
    method = check_method(method, PAIRED_METHODS, "paired_interval")
    d = np.asarray(d, float)
    if len(d) < MIN_TASKS:
        return None, None
    lo, hi = paired_bounds(d[None, :], np.asarray(ya, float)[None, :], np.asarray(yb, float)[None, :], method,
                           seed, n_boot, level, share)  # fmt: skip
    return float(lo[0]), float(hi[0])


def ni_upper_rows(
    d: np.ndarray, ya: np.ndarray, yb: np.ndarray, p: np.ndarray, method: str | None = None, seed: int = 0,
    n_boot: int | None = None,
) -> np.ndarray:  # fmt: skip
    """The non-inferiority bound of every run (runs × paired tasks): the upper end of its NI_LEVEL paired
    interval by `method`, made to agree with the test's `p` (`agree_rows`)."""
    d = np.atleast_2d(np.asarray(d, float))
    lo, hi = paired_bounds(d, ya, yb, method, seed, n_boot, NI_LEVEL)
    return agree_rows(lo, hi, np.asarray(p, float), d.mean(1))[1]


def ni_upper(
    d: np.ndarray, ya: np.ndarray, yb: np.ndarray, p: float | None, method: str | None = None, seed: int = 0,
    n_boot: int | None = None,
) -> float | None:  # fmt: skip
    """The non-inferiority bound of A − B, one-sided at (1 + NI_LEVEL) / 2: the upper end of the NI_LEVEL
    interval of the tasks' differences `d` (`paired_interval` by `method`), made to agree with the sign-flip
    test's `p`. None below MIN_TASKS tasks."""
    lo, hi = paired_interval(d, ya, yb, method, seed, n_boot, NI_LEVEL)
    return agree(lo, hi, p, float(np.mean(d)))[1]


def agree(
    lo: float | None, hi: float | None, p: float | None, mean: float, alpha: float = ALPHA
) -> tuple[float | None, float | None]:
    """An interval made to agree with the test's p: widened to reach 0 where p ≥ alpha, cut just short of 0
    on the mean's side where p < alpha, so that it excludes 0 exactly when the verdict says "higher". The
    test decides; at six tasks it can say "higher" only when all six differences have one sign."""
    if lo is None or hi is None or p is None:
        return lo, hi
    # Bisection and draws leave ~1e-10 of noise at an edge that is exactly a data value (0 or 1).
    lo, hi = round(lo, 9) + 0.0, round(hi, 9) + 0.0
    if p >= alpha:
        return min(lo, 0.0), max(hi, 0.0)
    if lo <= 0 <= hi:
        return (max(lo, 1e-9), hi) if mean > 0 else (lo, min(hi, -1e-9))
    return lo, hi


def agree_rows(
    lo: np.ndarray, hi: np.ndarray, p: np.ndarray, mean: np.ndarray, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """`agree` for every run at once."""
    lo, hi = np.round(lo, 9) + 0.0, np.round(hi, 9) + 0.0
    keep = p >= alpha
    lo, hi = np.where(keep, np.minimum(lo, 0.0), lo), np.where(keep, np.maximum(hi, 0.0), hi)
    cut = ~keep & (lo <= 0) & (hi >= 0)
    lo = np.where(cut & (mean > 0), np.maximum(lo, 1e-9), lo)
    hi = np.where(cut & (mean <= 0), np.minimum(hi, -1e-9), hi)
    return lo, hi
