"""The power of the paired sign-flip test evalkit runs (`stats.sign_flip_p`), and from it the smallest
difference that test detects (`detectable`, the MDE `compare` prints) and the tasks a difference needs
(`tasks_needed`, what `plan` prints).

Power is simulated, not taken from the paired t-test's formula: at few tasks the sign-flip test can only
reject when (nearly) every task's difference has the same sign, and pass/fail rewards give differences of
−1, 0 and +1 whose ties carry no evidence, so the t-test's MDE had 62–80% power for continuous rewards and
7–40% for pass/fail rewards near 0.9. Runs of the same design are drawn from a model of the tasks, a true
difference δ is put in, and the same test is applied to each; one set of random numbers serves every δ, so
the power is a smooth function of δ and the same run always prints the same MDE. For the location model
each simulated run's threshold δ is found directly and the MDE is their 80% quantile; for pass/fail
rewards δ is bisected.

Two models of the tasks, chosen by the rewards:
  location   rewards that are not all 0 or 1: the observed per-task differences, centred, resampled and
             smoothed (the spread seen, with tails), their SD drawn from its distribution given the estimate,
             shifted by δ and widened as a share's spread widens when its mean moves toward the middle.
  pass/fail  every reward 0 or 1 (or no spread seen at all): each task has a success rate θ drawn from a
             Beta fitted to the tasks' pooled success rates (mean and intraclass correlation), each side's
             episodes are Bernoulli draws, and one side's θ is moved by δ toward the middle of the range
             (clipped to [0, 1]). A difference moves the rates, so the spread grows with δ and ties thin out:
             the observed spread (near a ceiling, often none) would understate what a real difference gives.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

N_SIM = 500
"""Simulated runs per power evaluation: the power's Monte Carlo error at 0.8 is 0.018, and one set of
random numbers serves every δ, so the MDE moves smoothly with the data."""
EXACT_SIM = 12
"""Up to this many tasks a simulated run's test enumerates all sign assignments (as `sign_flip_p` does up to
16); above, SIM_FLIPS random ones, and above NORMAL_SIM tasks the statistic's normal limit."""
SIM_FLIPS = 1000
NORMAL_SIM = 300
LATTICE_MAX = 12
"""Pass/fail differences lie on a lattice of 1/lcm(episodes per task); up to this lcm the simulated runs'
test is exact at any number of tasks (`_lattice_rejects`), and far cheaper than sign assignments."""
POWER = 0.8
_Z975 = 1.959963984540054

Model = Callable[[float], np.ndarray]
"""δ → simulated per-task differences A − B (runs × tasks) with true mean difference δ (or −δ; `_rejects`
is given the direction)."""


def _signs(n: int, rng: np.random.Generator) -> tuple[np.ndarray | None, bool]:
    if n > NORMAL_SIM:
        return None, False
    if n <= EXACT_SIM:
        return 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1), True
    return 1.0 - 2.0 * rng.integers(0, 2, size=(SIM_FLIPS, n)), False


def _rejects(d: np.ndarray, signs: np.ndarray | None, exact: bool, alpha: float) -> np.ndarray:
    """Per simulated run (a row of `d`): the sign of its mean difference where the two-sided sign-flip test
    rejects at `alpha`, else 0. The same p as `stats.sign_flip_p` (exact, or random assignments counting
    the observed one, or the normal limit)."""
    s = d.sum(1)
    if signs is None:
        reject = np.abs(s) > _Z975 * np.sqrt((d * d).sum(1))
    else:
        tol = 1e-9 * np.maximum(1.0, np.abs(d).sum(1))
        count = (np.abs(d @ signs.T) >= (np.abs(s) - tol)[:, None]).sum(1)
        p = count / len(signs) if exact else (1 + count) / (1 + len(signs))
        reject = p < alpha
    return np.where(reject, np.sign(s), 0.0)


@functools.lru_cache(maxsize=4096)
def _level(j: int, c: int) -> np.ndarray:
    """The distribution of Σ s·j over c tasks of |v| = j under random signs, on a grid of 1 from −cj."""
    level = np.zeros(2 * j * c + 1)
    level[:: 2 * j] = np.array([math.comb(c, k) for k in range(c + 1)], float) / 2.0**c
    return level


@functools.lru_cache(maxsize=65536)
def _tail(counts: tuple[int, ...]) -> np.ndarray:
    """P(|Σ s·v| ≥ t) for t = 0, 1, …, under random signs s, where `counts[j − 1]` tasks have |v| = j: the
    exact sign-flip null distribution of lattice differences, by convolving one binomial per level. Cached:
    the runs of one MDE, and of the next, share most of their counts."""
    pmf = np.ones(1)
    for j, c in enumerate(counts, 1):
        if c:
            pmf = np.convolve(pmf, _level(j, c))
    top = len(pmf) // 2
    upper = np.cumsum(pmf[::-1])[::-1][top:]  # P(T ≥ t), t = 0 … top
    return np.concatenate([[1.0], np.minimum(1.0, 2 * upper[1:]), [0.0]])


def _lattice_rejects(d: np.ndarray, lattice: int, alpha: float) -> np.ndarray:
    """`_rejects` for differences on a lattice of 1/`lattice` (pass/fail rewards: d = c_A/r_A − c_B/r_B),
    exactly at any number of tasks: the p of a run depends only on how many tasks have each |d| and on the
    sum, and each distinct set of counts is worked out once (`_tail`)."""
    v = np.rint(d * lattice).astype(np.int64)
    a = np.abs(v)
    counts = np.stack([(a == j).sum(1) for j in range(1, lattice + 1)], 1)
    key = counts @ (d.shape[1] + 1) ** np.arange(lattice, dtype=np.int64)  # one number per set of counts
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    tails = [_tail(tuple(u)) for u in counts[first].tolist()]
    width = max(len(t) for t in tails)
    table = np.zeros((len(tails), width))
    for i, t in enumerate(tails):
        table[i, : len(t)] = t
    total = v.sum(1)
    p = table[inv.ravel(), np.minimum(np.abs(total), width - 1)]
    return np.where(p < alpha, np.sign(total), 0.0)


Test = Callable[[np.ndarray], np.ndarray]
"""Simulated runs (runs × tasks) → per run +1 / −1 where the test rejects for A / B, else 0."""


def tester(n: int, rng: np.random.Generator, alpha: float = 0.05, lattice: int | None = None) -> Test:
    """The sign-flip test on runs of `n` tasks: exact on a lattice of 1/`lattice` (up to LATTICE_MAX),
    else as `_signs` says."""
    if lattice and lattice <= LATTICE_MAX and n <= NORMAL_SIM:
        return lambda d: _lattice_rejects(d, lattice, alpha)
    signs, exact = _signs(n, rng)
    return lambda d: _rejects(d, signs, exact, alpha)


def power(model: Model, delta: float, direction: float, test: Test) -> float:
    """How often the test rejects in `direction` (+1: A higher) with the true difference `delta`."""
    return float((test(model(delta)) == direction).mean())


def _thresholds(e: np.ndarray, signs: np.ndarray | None, exact: bool, alpha: float) -> np.ndarray:
    """Per simulated run e (a row): the smallest δ at which the test on e + δ rejects for A. The power at δ
    is then the share of runs whose threshold is below δ, and the MDE their 80% quantile: no search.

    An assignment s is as extreme as the observed one while |s·e + δ (s·1)| ≥ Σe + nδ, which is linear in
    δ: while δ ≤ c_s = max((s·e − Σe) / (n − s·1), (−s·e − Σe) / (n + s·1)) (∞ for s = ±1, which always
    count). The test rejects when at most k assignments count (k/2ⁿ < α exact, (1 + k)/(1 + M) < α with M
    random ones), so the threshold is the (k + 1)-th largest c_s."""
    n = e.shape[1]
    total = e.sum(1)
    if signs is None:  # normal limit: (Σe + nδ)² > z² Σ(e + δ)², a quadratic in δ
        q = (e * e).sum(1)
        c = (total**2 - _Z975**2 * q) / (n - _Z975**2)
        return (-total + np.sqrt(np.maximum(total**2 - n * c, 0.0))) / n
    a, m = e @ signs.T, signs.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(m < n, (a - total[:, None]) / (n - m), np.inf)
        down = np.where(m > -n, (-a - total[:, None]) / (n + m), np.inf)
    cut = np.maximum(up, down)
    k = math.ceil(alpha * len(m)) - 1 if exact else math.ceil(alpha * (1 + len(m))) - 2
    kth = -np.partition(-cut, k, axis=1)[:, k]
    return np.maximum(kth, -total / n)


def location_model(d: np.ndarray, rng: np.random.Generator, k: int = N_SIM) -> Model:
    """Runs of len(d) tasks whose differences are the observed ones centred and resampled with replacement,
    smoothed by normal noise of Silverman's bandwidth and scaled back to the observed SD (ddof = 1), plus δ.
    The smoothing gives the tails a few tasks cannot show: at six tasks the test needs all six on one side,
    so the power is set by how far the spread reaches, not by the six values seen."""
    d = np.asarray(d, float)
    n = len(d)
    sd = float(d.std(ddof=1))
    h = 1.06 * n ** (-0.2)  # in units of the SD
    e = (d - d.mean()) / sd * math.sqrt(n / (n - 1))
    base = (e[rng.integers(0, n, size=(k, n))] + h * rng.standard_normal((k, n))) * sd / math.sqrt(1 + h * h)
    # The SD is estimated from n tasks: each simulated run draws its own from the SD's distribution given
    # the estimate (σ² ~ (n − 1) s² / χ²ₙ₋₁), so that the MDE has 80% power on average over what the true
    # SD may be, not only if it happens to equal the estimate (which at six tasks gave 60%).
    base *= np.sqrt((n - 1) / rng.chisquare(n - 1, size=(k, 1)))
    return lambda delta: base + delta


def normal_model(
    sd: float, n: int, rng: np.random.Generator, k: int = N_SIM, pilot: int | None = None
) -> Model:
    """Runs of `n` tasks with normal differences of SD `sd` around δ (`plan`'s model of continuous
    rewards: between-task plus within-task variance). With `pilot` (the tasks `sd` was estimated from),
    each simulated run draws its own SD from the SD's distribution given the estimate (σ² ~ (p − 1) s² /
    χ²ₚ₋₁), so that a plan has its power on average over what the true SD may be: a pilot of six tasks
    that happened to show a small spread planned runs with 44–64% power."""
    base = rng.standard_normal((k, n)) * sd
    if pilot is not None and pilot > 1:
        base *= np.sqrt((pilot - 1) / rng.chisquare(pilot - 1, size=(k, 1)))
    return lambda delta: base + delta


def beta_fit(rate: np.ndarray, episodes: np.ndarray) -> tuple[float, float]:
    """(mean, intraclass correlation) of tasks' success rates θ from each task's observed rate over its
    `episodes` (method of moments for the beta-binomial: the observed rates' variance less the binomial
    part). The mean is pulled half an episode from 0 and 1 (no failure seen is not a rate of 1), the
    correlation kept within [0.01, 0.95]."""
    rate, episodes = np.asarray(rate, float), np.asarray(episodes, float)
    total = float(episodes.sum())
    m = (float((rate * episodes).sum()) + 0.5) / (total + 1.0)
    inv = float(np.mean(1.0 / episodes))
    v = float(np.var(rate, ddof=1)) if len(rate) > 1 else 0.0
    var_theta = (v - m * (1 - m) * inv) / (1 - inv) if inv < 1 else v
    return m, min(0.95, max(0.01, var_theta / (m * (1 - m))))


def pass_fail_model(
    m: float, icc: float, reps_a: np.ndarray, reps_b: np.ndarray, rng: np.random.Generator, k: int = N_SIM
) -> tuple[Model, float, float]:
    """(model, direction, largest δ the range allows): tasks' θ from Beta(κm, κ(1 − m)) with κ = 1/icc − 1,
    A's reps_a[i] and B's reps_b[i] episodes of task i Bernoulli; B's θ moved by s toward the middle (down
    when m ≥ 0.5: A is then the better side, direction +1), clipped to [0, 1], with s chosen so that the
    mean of θ_A − θ_B over the Beta is δ."""
    kappa = 1.0 / icc - 1.0
    a_, b_ = max(kappa * m, 1e-3), max(kappa * (1 - m), 1e-3)
    n = len(reps_a)
    direction = 1.0 if m >= 0.5 else -1.0
    theta = rng.beta(a_, b_, size=(k, n))
    big = rng.beta(a_, b_, size=5_000)
    ra, rb = np.asarray(reps_a, int), np.asarray(reps_b, int)
    ua = rng.random((k, n, int(ra.max())))
    ub = rng.random((k, n, int(rb.max())))
    mask_a, mask_b = np.arange(ua.shape[2]) < ra[:, None], np.arange(ub.shape[2]) < rb[:, None]
    mean_a = ((ua < theta[..., None]) & mask_a).sum(2) / ra

    def moved(t: np.ndarray, s: float) -> np.ndarray:
        return np.clip(t - direction * s, 0.0, 1.0)

    grid = np.linspace(0.0, 1.0, 101)
    reach = np.abs(big[None, :] - moved(big[None, :], grid[:, None])).mean(1)  # δ of each shift, increasing

    def shift(delta: float) -> float:
        return float(np.interp(delta, reach, grid))

    def model(delta: float) -> np.ndarray:
        tb = moved(theta, shift(delta))
        return mean_a - ((ub < tb[..., None]) & mask_b).sum(2) / rb

    return model, direction, float(reach[-1])


def solve_delta(model: Model, direction: float, hi: float, test: Test, target: float = POWER) -> float | None:
    """The smallest δ in (0, hi] at which the test has `target` power under `model`, by bisection (to 1%
    of hi); None where even `hi` falls short."""
    if power(model, hi, direction, test) < target:
        return None
    lo = 0.0
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(model, mid, direction, test) < target else (lo, mid)
    return hi


def detectable(
    d: np.ndarray,
    pooled: np.ndarray | None = None,
    reps_a: np.ndarray | None = None,
    reps_b: np.ndarray | None = None,
    pass_fail: bool = False,
    alpha: float = 0.05,
    seed: int = 0,
) -> float | None:
    """The smallest true difference in task-weighted mean reward that the sign-flip test over these tasks
    detects with 80% power at `alpha` (two-sided, in the right direction): `d` the per-task differences,
    `pooled` each task's mean over both sides' episodes and `reps_a`, `reps_b` their numbers of episodes
    (needed for pass/fail rewards, and where the differences have no spread). None where no difference
    within the reward range [0, 1] reaches 80% (at six pass/fail tasks even A always right and B always
    wrong is all it takes to reject, and that is not 80% likely under any rates but 0 and 1)."""
    d = np.asarray(d, float)
    n = len(d)
    rng = np.random.default_rng(seed)
    spread = float(d.std(ddof=1)) if n > 1 else 0.0
    if pass_fail or spread <= 1e-9:
        if pooled is None or reps_a is None or reps_b is None:
            raise ValueError("detectable: pass/fail rewards need the tasks' pooled means and episode counts")
        ra, rb = np.asarray(reps_a, int), np.asarray(reps_b, int)
        m, icc = beta_fit(np.clip(pooled, 0.0, 1.0), ra + rb)
        model, direction, most = pass_fail_model(m, icc, ra, rb, rng)
        return solve_delta(model, direction, most, tester(n, rng, alpha, int(np.lcm.reduce(np.r_[ra, rb]))))
    e = location_model(d, rng)(0.0)
    signs, exact = _signs(n, rng)
    q = float(np.quantile(_thresholds(e, signs, exact, alpha), POWER))
    return q if pooled is None else _with_spread(q, np.asarray(pooled, float))


def _with_spread(q: float, pooled: np.ndarray) -> float | None:
    """The δ at which δ / g(δ) = q, where g(δ) is how much a difference δ widens the differences' spread:
    rewards on a bounded range spread like shares, with variance ∝ u(1 − u) at a mean u on the range, and
    one side moved by δ toward the middle has u_B(1 − u_B) / (u(1 − u)) times the variance of the other.
    The test is scale-free (a run e·g + δ is rejected where e + δ/g is), so the thresholds of the location
    model still decide. None where the range leaves no room."""
    low, high = min(0.0, float(pooled.min())), max(1.0, float(pooled.max()))
    width = high - low
    u = (float(pooled.mean()) - low) / width
    if not 0 < u < 1:
        return q
    room = u if u >= 0.5 else 1 - u

    def scaled(delta: float) -> float:
        ub = u - delta / width if u >= 0.5 else u + delta / width
        return delta / math.sqrt((1 + ub * (1 - ub) / (u * (1 - u))) / 2)

    if scaled(room * width) < q:
        return None
    lo, hi = 0.0, room * width
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if scaled(mid) < q else (lo, mid)
    return hi


def tasks_needed(
    delta: float, make: Callable[[int, np.random.Generator], tuple[Model, float, int | None]], start: int,
    lowest: int,
    alpha: float = 0.05, target: float = POWER, seed: int = 0, most: int = 100_000,
) -> int | None:  # fmt: skip
    """The fewest tasks (at least `lowest`) at which `make(n, rng)` → (model, direction, lattice) gives the
    test `target` power at `delta`: from `start` (the t-test's count) up by about 10% until reached, then
    bisected back down. None where `most` tasks fall short."""

    def ok(n: int) -> bool:
        rng = np.random.default_rng(seed)
        model, direction, lattice = make(n, rng)
        return power(model, delta, direction, tester(n, rng, alpha, lattice)) >= target

    lo, hi = lowest - 1, max(lowest, start)
    while not ok(hi):
        if hi >= most:
            return None
        lo, hi = hi, min(most, max(hi + 1, int(hi * 1.1)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not ok(mid) else (lo, mid)
    return hi
