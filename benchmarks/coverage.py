"""Coverage of evalkit's intervals and the error rates of its verdicts on simulated runs (issues 40 and 51;
the contract is DESIGN.md's "Statistics": 95% means 93–97% from six tasks, false "higher" ≤ 5%,
non-inferiority wrongly declared ≤ 2.5%).

    PYTHONPATH=. python benchmarks/coverage.py --reps 300       # every cell, a few minutes
    PYTHONPATH=. python benchmarks/coverage.py                  # the table in docs/statistics.md
    PYTHONPATH=. python benchmarks/coverage.py --part paired --tasks 6 10   # one part, some task counts
    PYTHONPATH=. python benchmarks/coverage.py --part mde       # the MDE's power (issue 40's columns)
    PYTHONPATH=. python benchmarks/coverage.py --part candidates --tier-runs 800   # tier intervals not kept
    PYTHONPATH=. python benchmarks/coverage.py --part ni --tasks 20 60   # NI error at 3,000 runs a cell
    PYTHONPATH=. python benchmarks/coverage.py --part ni-exact --tasks 6 10 20   # design 1/1, no sampling
    PYTHONPATH=. python benchmarks/coverage.py --part paired-exact --tasks 6 10 20   # and its steps
    PYTHONPATH=. python benchmarks/coverage.py --part lost-exact --tasks 6 10   # lost cells' floor, exactly
    PYTHONPATH=. python benchmarks/coverage.py --part tier --tier-runs 8000 --cells b:0.9:20:3   # one cell
    PYTHONPATH=. python benchmarks/coverage.py --part paired-between --reps 8000 --seed-offset 100000 \
        --weights 0.4 0.5 1 --cells 'b:0.9*:*:lost:0.*'   # shares w, fresh draws, cells by pattern

A simulated run has `n` tasks; a task has its own success rate or mean θ drawn from a Beta around the cell's
mean (tasks differ: the intraclass correlation is about 1/3), and each of its episodes a reward around θ:
continuous (a Beta with mean θ, skewed near the bounds) or pass/fail (Bernoulli θ). Model B's θ is A's moved
down by a shift chosen so that the true mean difference A − B over the task population is the cell's Δ
(clipped at 0, so near a bound the shift is larger than Δ). Designs:
  1/1, 3/3   one or three episodes a task on each side;
  3–5/1      A has three to five episodes a task (drawn), B one: unequal repeats;
  lost       each task has two cells (two modes) of one episode a side, and B lost one of them (unscored)
             on half the tasks, at random: the comparison pairs the cells both scored.
Every interval is computed by the code `by_tier` and `compare` run (`evalkit.analysis.intervals`, the
"_bounds" functions taking every simulated run at once), the verdict by the sign-flip test `compare` runs
(on the balanced differences where repeats are unequal), each paired interval made to agree with it.
Columns, each ± one Monte Carlo standard error:
  tier   coverage of one model's 95% interval of its task-weighted mean, per method (`MEAN_METHODS`); for
         pass/fail rewards with one episode per task also the default's exact coverage (a binomial count:
         any interval that is a function of the count covers in steps) and the step below it; beside each
         coverage [misses below / above]: the share of runs whose interval lies wholly below / above the
         truth (a 95% interval should miss about 2.5% each way);
  candidates  tier intervals measured while choosing the default and not kept, continuous rewards, at means
         0.07–0.95 and for tasks as the table's and far more alike (`run_candidates`);
  pass@k coverage of the pass@2 interval (three or five repeats a task) at success rates 0.8 and 0.9;
  paired coverage of the paired 95% interval of A − B, per method (`PAIRED_METHODS`); "higher" (Δ = 0):
         how often the verdict says one model "scores higher" for two equal models; NI error (Δ > 0): how
         often B, truly worse than A by Δ, is declared non-inferior with margin Δ (the NI bound,
         `intervals.ni_upper`, below Δ). A default above 97% is marked "equal tails: ≥ F forced" where
         no interval that agrees with the test and has equal tails covers under F > 97% (`equal_tail_floor`).
  ni     the default's coverage and NI error again, pass/fail rewards only, with `--ni-runs` runs a cell
         (3,000: ± 0.003 at 2.5%), and beside it the NI error had the bound been the 95% interval's upper
         end (the default's, and paired t's alone). At 500 runs a cell the full table's
         NI column is 2.5% ± 0.7%, so over its ~150 cells with Δ > 0 a reading of 4–5% is expected by chance
         where the true rate is 2.5%; this part tells a cell truly above 2.5% from one read high.
  ni-exact  pass/fail, one episode a task a side (design 1/1): a run is a 2 × 2 table of counts, so the
         default's coverage and NI error are sums over every table of its probability (the tasks' θ
         integrated out) — no Monte Carlo error but that of the sign-flip p above 16 tasks.
  paired-exact  design 1/1 again, Δ = 0 too: the default's exact coverage (the exact sign-flip p at any
         number of tasks) and the steps around 93–97% that an interval of the discordant counts could take
         (the highest coverage ≤ 97% and the lowest ≥ 93%), at that cell alone and for one interval serving
         the three means, any such interval and one agreeing with the test; at Δ = 0 any test of level 5%;
         last, the least coverage at Δ > 0 of one that agrees with the test and has equal tails.
  lost-exact  pass/fail design "lost" up to 16 tasks: `equal_tail_floor` with every table of the tasks'
         differences weighed by its probability (the cells' and tasks' rates integrated out): no sampling.
  paired-between  the default's ends a share w of the way from paired t's to MOVER's, for fixed w and for
         the default's w by the run's balance (`intervals.mover_share`), and the cells each covers in
         93–97% and under 93% per reward kind and design.
"""

from __future__ import annotations

import argparse
import math
import time
from fnmatch import fnmatch
from math import comb

import numpy as np

from evalkit.analysis import intervals as I
from evalkit.analysis.tables import MEAN_METHODS, METHODS, MIN_TASKS, PAIRED_METHODS

KAPPA_TASK = 2.0  # spread of θ between tasks: Beta(κm, κ(1 − m)), ICC ≈ 1 / (κ + 1) for pass/fail
KAPPA_EPISODE = 6.0  # continuous rewards around θ: Beta(κθ, κ(1 − θ))
KAPPA_CELL = 6.0  # the two cells of a task ("lost" design): θ_cell ~ Beta(κθ, κ(1 − θ))
MEANS = (0.5, 0.9, 0.95)
DELTAS = (0.0, 0.02, 0.05, 0.1)
DESIGNS = ("1/1", "3/3", "3–5/1", "lost")
TIER_REPEATS = ("1", "3", "1–5")
TIER_RUNS = 4
"""The tier part runs this many times the runs of the paired part (one interval a run: cheap)."""
PAIRED_SHOWN = ("t+mover", "t", "bootstrap")
"""Paired methods in the table (MOVER alone and the sign-flip test inverted were measured while choosing:
docs/statistics.md); the bootstrap only in designs 1/1 and 3/3 (`--all-methods` for every design)."""
BENCH_FLIPS = 2000
"""Random sign assignments of the test above 16 tasks here (`compare` takes N_FLIPS = 20,000): a Monte Carlo
p-value (1 + k) / (1 + M) is valid at any M, so the false-positive rate holds; it keeps 60-task cells to
seconds."""


def thetas(rng: np.random.Generator, mean: float, shape: tuple, kappa: float = KAPPA_TASK) -> np.ndarray:
    return rng.beta(kappa * mean, kappa * (1 - mean), shape)


def episodes(rng: np.random.Generator, kind: str, theta: np.ndarray, repeats: int) -> np.ndarray:
    """(…, repeats) rewards around θ."""
    t = np.clip(np.repeat(theta[..., None], repeats, -1), 1e-6, 1 - 1e-6)
    if kind == "b":
        return (rng.random(t.shape) < t).astype(float)
    return rng.beta(KAPPA_EPISODE * t, KAPPA_EPISODE * (1 - t))


def pm(x: float | None, n: int) -> str:
    if x is None or not n:
        return "–"
    return f"{x:.3f} ± {math.sqrt(max(x * (1 - x), 1e-9) / n):.3f}"


def hits(lo: np.ndarray, hi: np.ndarray, truth: float) -> float:
    return float(((lo <= truth + 1e-12) & (truth - 1e-12 <= hi)).mean())


def sides(lo: np.ndarray, hi: np.ndarray, truth: float) -> tuple[float, float]:
    """(share of runs whose interval lies wholly below the truth, wholly above it): a 95% interval should
    miss about 2.5% on each side; one that misses 5% on one side and 0% on the other covers 95% lopsidedly."""
    return float((hi < truth - 1e-12).mean()), float((lo > truth + 1e-12).mean())


def pm_sides(x: float, miss: tuple[float, float], n: int) -> str:
    return f"{pm(x, n)} [{miss[0]:.3f} / {miss[1]:.3f}]"


def equal_tail_floor(p: np.ndarray, est: np.ndarray, delta: float, weight: np.ndarray | None = None) -> float:
    """A floor under the coverage, over simulated runs at a true Δ > 0, of every paired interval that agrees
    with the test (`intervals.agree`: its lower end is above 0 only where the test says A is higher), holds
    its estimate and has equal tails (each end beyond the truth in at most 2.5% of runs, as each end of a
    95% interval is read as a bound). Its upper end may miss in 2.5% of runs; its lower end can lie above
    Δ only where the test rejects (p < 5%) and the estimate is above Δ, so the share of those runs comes
    off too. Above 97%: no such interval covers 93–97% there; one could only with an upper end that misses
    more often than a 97.5% bound may. `weight`: each run's probability (the exact tables of design 1/1,
    `equal_tail_least`), else every run alike."""
    lifted = (p < I.ALPHA) & (est > delta + 1e-12)
    return 1 - I.ALPHA / 2 - float(lifted.mean() if weight is None else weight @ lifted)


# ------------------------------------------------------------------------------------------------ tier


def exact_tier(n: int, p: float) -> tuple[float, float]:
    """The default tier interval's exact coverage over n pass/fail tasks of one episode each (a Binomial(n,
    p) count), and the largest coverage below it that an interval which is a function of the count can have
    (it covers p for the counts a..b around np, b = n − a at p = 0.5)."""
    pmf = [comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    got = 0.0
    for k in range(n + 1):
        lo, hi = I.mean_interval(np.array([1.0] * k + [0.0] * (n - k)), n, True)
        got += pmf[k] * (lo <= p <= hi)
    steps = [sum(pmf[a : b + 1]) for a in range(n + 1) for b in range(a, n + 1)
             if a <= n * p <= b and (p != 0.5 or a == n - b)]  # fmt: skip
    return got, max((s for s in steps if s < got - 1e-12), default=0.0)


def tier_values(
    rng: np.random.Generator,
    kind: str,
    mean: float,
    n: int,
    repeats: str,
    runs: int,
    kappa: float = KAPPA_TASK,
):
    """(task values runs × n, episodes per run, every reward 0 or 1) of one model."""
    th = thetas(rng, mean, (runs, n), kappa)
    if repeats == "1–5":
        k = rng.integers(1, 6, (runs, n))
        e = episodes(rng, kind, th, 5)
        y = (e * (np.arange(5) < k[..., None])).sum(-1) / k
        return y, k.sum(1), kind == "b"
    r = int(repeats)
    return episodes(rng, kind, th, r).mean(-1), np.full(runs, n * r), kind == "b"


def tier_cell(kind: str, mean: float, n: int, repeats: str, runs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    y, eps, pf = tier_values(rng, kind, mean, n, repeats, runs)
    out = {}
    for m in MEAN_METHODS:
        if m == "bayes":
            lo, hi = I.bayes_bounds(y, seed=seed)
        elif m == "bootstrap":
            lo, hi = I.bootstrap_bounds(y, seed=seed)
        else:  # closed form, one run at a time
            lo, hi = np.array([I.wilson_interval(row, int(e), pf) for row, e in zip(y, eps, strict=True)]).T
        out[m] = hits(lo, hi, mean)
        out[m + " sides"] = sides(lo, hi, mean)
    return out


def pass_k_cell(rate: float, n: int, repeats: int, runs: int, seed: int, k: int = 2) -> float:
    """Coverage of the pass@k interval (unbiased per-task estimates, `repeats.pass_at_k`, then the default
    mean interval) at a success rate of `rate`."""
    rng = np.random.default_rng(seed)
    th = thetas(rng, rate, (runs, n))
    c = (rng.random((runs, n, repeats)) < th[..., None]).sum(-1)
    est = 1.0 - np.vectorize(lambda cc: comb(repeats - cc, k) / comb(repeats, k))(c)
    big = thetas(np.random.default_rng(0), rate, 400_000)
    truth = float((1 - (1 - big) ** k).mean())
    lo, hi = I.bayes_bounds(est, seed=seed)
    return hits(lo, hi, truth)


# ------------------------------------------------------------------------------------------ candidates
# Tier intervals measured while choosing the default and not in evalkit (issue 51, round four): written
# here so that the figures in docs/statistics.md can be made again.


def korn_graubard(y: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson at the effective number of tasks m(1 − m) / v (v the variance of the mean over
    tasks), that number scaled by (z / t₍ₙ₋₁₎)² for few tasks (Korn and Graubard 1998), continuous rewards
    on [0, 1]; where the tasks have no spread, `_constant`."""
    from scipy.special import betaincinv

    n = y.shape[1]
    z = I._z(level)
    u, v = y.mean(1), y.var(1, ddof=1) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where((v > 0) & (u > 0) & (u < 1), u * (1 - u) / v, n)
    n_eff = np.maximum(n_eff * (z / I._t_quantile(z, n - 1)) ** 2, 1.0)
    x, a = u * n_eff, 1 - level
    lo = np.where(x > 0, betaincinv(np.maximum(x, 1e-12), n_eff - x + 1, a / 2), 0.0)
    hi = np.where(x < n_eff, betaincinv(x + 1, np.maximum(n_eff - x, 1e-12), 1 - a / 2), 1.0)
    flat = v <= 0
    q = 1 - (a / 2) ** (1 / n)
    return np.where(flat, u - u * q, lo), np.where(flat, u + (1 - u) * q, hi)


def light_prior(
    y: np.ndarray, seed: int, weight: float = 0.5, draws: int = 4000
) -> tuple[np.ndarray, np.ndarray]:
    """The default's Bayesian bootstrap with its prior task weighing Gamma(`weight`) instead of Exp(1):
    less pull toward the middle of the range."""
    rng = np.random.default_rng(seed)
    rows, n = y.shape
    out = np.empty((rows, draws))
    step = max(1, 250_000 // (n + 1))
    for r in range(rows):
        for d0 in range(0, draws, step):
            b = min(step, draws - d0)
            g, g0 = rng.standard_exponential((b, n)), rng.gamma(weight, 1.0, b)
            out[r, d0 : d0 + b] = ((g * y[r]).sum(1) + g0 * rng.beta(0.5, 0.5, b)) / (g.sum(1) + g0)
    lo, hi = np.quantile(out, [0.025, 0.975], axis=1)
    return lo, hi


CANDIDATES = {
    "bayes": "Bayesian bootstrap over tasks (default)",
    "wilson": "Wilson score interval over tasks",
    "kg": "Korn–Graubard (Clopper–Pearson)",
    "light": "prior task of half weight",
}


def run_candidates(a: argparse.Namespace) -> None:
    runs = a.tier_runs or TIER_RUNS * a.reps
    print(f"\n### Tier candidates, continuous rewards ({runs} runs a cell; [misses below / above])\n")
    print("| tasks between | mean | tasks | repeats | " + " | ".join(CANDIDATES.values()) + " |\n|"
          + "---|" * (4 + len(CANDIDATES)))  # fmt: skip
    seed = 7000
    for kappa, label in ((KAPPA_TASK, "as the table (ICC 1/3)"), (50.0, "alike (ICC 1/50)")):
        for mean in (0.07, 0.5, 0.9, 0.95):
            for n in a.tasks:
                for rep in ("1", "1–5"):
                    seed += 1
                    y, eps, _ = tier_values(np.random.default_rng(seed), "c", mean, n, rep, runs, kappa)
                    cells = []
                    for m in CANDIDATES:
                        if m == "bayes":
                            lo, hi = I.bayes_bounds(y, seed=seed)
                        elif m == "wilson":
                            lo, hi = np.array(
                                [I.wilson_interval(r, int(e)) for r, e in zip(y, eps, strict=True)]
                            ).T
                        elif m == "kg":
                            lo, hi = korn_graubard(y)
                        else:
                            lo, hi = light_prior(y, seed)
                        cells.append(pm_sides(hits(lo, hi, mean), sides(lo, hi, mean), runs))
                    print(f"| {label} | {mean:g} | {n} | {rep} | " + " | ".join(cells) + " |", flush=True)


# ---------------------------------------------------------------------------------------------- paired


def shift_for(mean: float, delta: float, cells: bool = False) -> float:
    """The shift of θ (clipped at 0) that makes the population's mean difference `delta`."""
    if delta <= 0:
        return 0.0
    rng = np.random.default_rng(0)
    big = thetas(rng, mean, 200_000)
    if cells:
        big = np.clip(big, 1e-6, 1 - 1e-6)
        big = rng.beta(KAPPA_CELL * big, KAPPA_CELL * (1 - big))
    grid = np.linspace(0.0, 1.0, 801)
    diffs = np.array([(big - np.clip(big - g, 0, 1)).mean() for g in grid])
    return float(np.interp(delta, diffs, grid))


def paired_values(
    rng: np.random.Generator, kind: str, mean: float, n: int, design: str, shift: float, runs: int
):
    """(d, d_test, A's task values, B's task values, whether the run is balanced) of `runs` simulated
    comparisons, as `stats.paired_tasks` builds them; balanced (`intervals.mover_share`): equal repeats a
    side in every paired cell and no cell lost."""
    th = thetas(rng, mean, (runs, n))
    if design == "lost":
        t2 = np.clip(th[..., None].repeat(2, -1), 1e-6, 1 - 1e-6)
        cell = rng.beta(KAPPA_CELL * t2, KAPPA_CELL * (1 - t2))
        ya = episodes(rng, kind, cell, 1)[..., 0]
        yb = episodes(rng, kind, np.clip(cell - shift, 0, 1), 1)[..., 0]
        both = np.ones((runs, n, 2), bool)
        both[..., 1] = rng.random((runs, n)) < 0.5  # B's second cell lost on half the tasks
        ma = (ya * both).sum(-1) / both.sum(-1)
        mb = (yb * both).sum(-1) / both.sum(-1)
        return ma - mb, ma - mb, ma, mb, both.all((1, 2))
    if design == "3–5/1":
        k = rng.integers(3, 6, (runs, n))
        e = episodes(rng, kind, th, 5)
        ya = (e * (np.arange(5) < k[..., None])).sum(-1) / k
        yb = episodes(rng, kind, np.clip(th - shift, 0, 1), 1)[..., 0]
        # the test: each side's first episode (balanced)
        return ya - yb, e[..., 0] - yb, ya, yb, np.zeros(runs, bool)
    r = int(design[0])
    ya = episodes(rng, kind, th, r).mean(-1)
    yb = episodes(rng, kind, np.clip(th - shift, 0, 1), r).mean(-1)
    return ya - yb, ya - yb, ya, yb, np.ones(runs, bool)


def shares(balanced: np.ndarray, kind: str, design: str) -> np.ndarray:
    """The default's share of the way to MOVER (`intervals.mover_share`) of every simulated run: a run not
    balanced has unequal repeats in design 3–5/1 and a lost cell in design "lost"; behind a task's value
    on each side are the repeats of designs 1/1 and 3/3, two cells' episodes in a balanced run of "lost"."""
    fewest = {"1/1": 1, "3/3": 3, "lost": 2}.get(design, 1)
    return np.array([I.mover_share(kind == "b", not b and design == "3–5/1", not b and design == "lost",
                                   fewest) for b in balanced])  # fmt: skip


def paired_cell(
    kind: str, mean: float, n: int, design: str, delta: float, runs: int, seed: int, every: bool = False
) -> dict:
    rng = np.random.default_rng(seed)
    d, d_test, ya, yb, bal = paired_values(
        rng, kind, mean, n, design, shift_for(mean, delta, design == "lost"), runs
    )
    p = I.sign_flip_p_rows(d_test, BENCH_FLIPS, seed=seed)
    out: dict = {"higher": float((p < I.ALPHA).mean())}
    for m in PAIRED_SHOWN:
        if m == "bootstrap" and design not in ("1/1", "3/3") and not every:
            out[m] = None
            continue
        lo, hi = I.agree_rows(
            *I.paired_bounds(d, ya, yb, m, seed=seed, share=shares(bal, kind, design)), p, d.mean(1)
        )
        out[m] = hits(lo, hi, delta)
        if m == PAIRED_METHODS[0] and delta > 0:
            out["ni"] = float((I.ni_upper_rows(d, ya, yb, p, m, seed=seed) < delta).mean())
            out["floor"] = equal_tail_floor(p, d.mean(1), delta)
        elif m == PAIRED_METHODS[0]:
            out["ni"] = None
    return out


# ------------------------------------------------------------------------------------------ paired-exact
# Design 1/1, pass/fail: a run is a table of counts (both pass, A only, B only, neither). Which coverages
# could an interval that is a function of the counts have? The sign-flip test and paired t see only the
# discordant counts (b tasks A only, c B only: differences +1, −1, 0), so the steps here are those of
# intervals that are functions of (b, c), monotone in them (one more A-only task never moves an end down,
# one more B-only task never up) and holding their own estimate (b − c) / n. Such an interval misses a true
# Δ > 0 above its upper end on a down-set L of the (b, c) grid and below its lower end on an up-set U;
# `miss_masses` finds every mass the two can have at one cell, `joint_steps` those one interval can have at
# the three means at once (L and U depend on Δ, not on the mean). At Δ = 0 the coverage is one minus the
# false "higher" rate, and `level_tests` lists every test of level 5% at any discordance rate.

STEP_RES = 1e-5
"""The unit `miss_masses` adds masses in (each of the n + 1 columns rounded: ± 0.0001 at 20 tasks)."""


def count_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every 2 × 2 table of n tasks, one episode a side: (counts (both, A only, B only, neither) a row, A's
    task values, B's), a run a row."""
    tabs = np.array([(i, j, k, n - i - j - k) for i in range(n + 1) for j in range(n + 1 - i)
                     for k in range(n + 1 - i - j)])  # fmt: skip
    at = np.arange(n)[None, :]
    ya = (at < (tabs[:, 0] + tabs[:, 1])[:, None]).astype(float)
    yb = (at < tabs[:, 0, None]) | ((at >= (tabs[:, 0] + tabs[:, 1])[:, None])
                                    & (at < tabs[:, :3].sum(1)[:, None]))  # fmt: skip
    return tabs, ya, yb.astype(float)


def excess_moment(mean: float, k: int, s: float, kappa: float = KAPPA_TASK) -> float:
    """E[θᵏ (θ − s)⁺] for θ ~ Beta(κm, κ(1 − m)) (the tasks' θ of `thetas` by default), in closed form:
    E[θᵏ⁺¹; θ > s] − s E[θᵏ; θ > s], each by the incomplete beta function. With B's θ_B = max(θ − s, 0),
    k = 0 gives E[θ_B] and k = 1 gives E[θ θ_B]."""
    from scipy.special import beta, betaincc

    a, b = kappa * mean, kappa * (1 - mean)
    tail = [beta(a + j, b) / beta(a, b) * betaincc(a + j, b, s) for j in (k, k + 1)]
    return float(tail[1] - s * tail[0])


def exact_shift(mean: float, delta: float) -> float:
    """The shift s of θ (B's θ = max(θ − s, 0)) that makes the true A − B exactly `delta`: E[θ] − E[θ_B] =
    Δ, solved in closed form (`shift_for` finds it from draws, for the simulated runs)."""
    from scipy.optimize import brentq

    def gap(s: float) -> float:
        return mean - excess_moment(mean, 0, s) - delta

    return 0.0 if delta <= 0 else float(brentq(gap, 0.0, 1.0, xtol=1e-14))


def table_probs(tabs: np.ndarray, mean: float, delta: float) -> np.ndarray:
    """Each table's probability at the cell (mean, Δ), the tasks' θ integrated out in closed form: with B's
    θ_B = max(θ − s, 0) (`exact_shift`), a task is passed by both with probability E[θ θ_B], by A alone
    E[θ] − that, by B alone E[θ_B] − that."""
    from scipy import stats

    s = exact_shift(mean, delta)
    tb, both = excess_moment(mean, 0, s), excess_moment(mean, 1, s)  # E[θ_B], E[θ θ_B]
    cells = [both, mean - both, tb - both]
    return stats.multinomial.pmf(tabs, int(tabs[0].sum()), [*cells, 1 - sum(cells)])


def sign_test_p(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The exact two-sided sign-flip p of b differences +1, c −1 and the rest 0 (a tie flips to itself):
    the share of the 2^(b + c) signs of the discordant tasks whose sum is as far from 0 as b − c."""
    out = np.empty(len(b))
    for i, (bb, cc) in enumerate(zip(b, c, strict=True)):
        m = int(bb + cc)
        out[i] = sum(comb(m, k) for k in range(m + 1) if abs(2 * k - m) >= abs(bb - cc)) / 2**m
    return out


def miss_masses(
    grid: np.ndarray, low_from: np.ndarray, low_within: np.ndarray, high_within: np.ndarray, cap: float = 0.5
) -> np.ndarray:
    """Every mass (in STEP_RES units, up to `cap`) of the outcomes a monotone interval can miss: a down-set L
    of the (b, c) grid (`grid[b, c]` the probability of b A-only and c B-only tasks, b + c ≤ n) where its
    upper end is below the truth, and a disjoint up-set U where its lower end is above it. Column b of L is
    c ≥ γ(b), γ nondecreasing, low_from[b] ≤ γ(b) ≤ low_within[b] (L must hold the cells from there on);
    of U, c ≤ η(b) ≤ high_within[b], with η(b + 1) ≥ min(η(b), n − b − 1) (−1: empty). Returns a boolean
    array, True where a mass k · STEP_RES can be missed."""
    n = grid.shape[0] - 1
    k = int(round(cap / STEP_RES)) + 1
    big = n + 1  # γ = n + 1: column empty; η index = η + 1 (0: column empty)
    state = np.zeros((n + 2, n + 2, k), bool)
    state[0, 0, 0] = True
    for b in range(n + 1):
        top = n - b  # the column's cells: c = 0..top
        col = np.concatenate([[0.0], np.cumsum(grid[b, : top + 1])])  # col[j]: mass of c < j
        reach = np.logical_or.accumulate(state, 0)  # γ_old ≤ γ_new
        below = np.logical_or.accumulate(reach, 1)  # η_old ≤ η_new (below[:, η + 1])
        full_u = below[:, -1]  # U's column full: any η_old
        new = np.zeros_like(state)
        for g in [*range(top + 1), big]:
            if not low_from[b] <= g <= low_within[b] and g != big:
                continue
            if g == big and low_within[b] <= top:
                continue
            m_low = col[top + 1] - col[g] if g <= top else 0.0
            for h in range(-1, top + 1):
                if h >= g or h > high_within[b]:
                    continue
                src = full_u[g] if h == top else below[g, h + 1]
                shift = int(round((m_low + col[h + 1]) / STEP_RES))
                if shift < k:
                    new[g, h + 1, shift:] |= src[: k - shift]
        state = new
    return np.logical_or.reduce(state.reshape(-1, k), 0)


def down_sets(grid: np.ndarray, first: np.ndarray, last: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The masses (a row each, the empty set's first) of every down-set of the (b, c) grid (`grid[b, c]`
    a vector of K probabilities, zero where b + c > n): column b is c ≥ γ(b), γ nondecreasing, first[b] ≤
    γ(b) ≤ last[b] (a column with last[b] ≤ n − b must not be empty), whose mass stays ≤ `cap` (K)."""
    n = grid.shape[0] - 1
    tail = np.cumsum(grid[:, ::-1], 1)[:, ::-1]  # tail[b, g]: the mass of c ≥ g in column b
    must = np.logical_or.accumulate((last <= n - np.arange(n + 1))[::-1])[::-1]
    found: list[np.ndarray] = []

    def grow(b: int, low: int, size: np.ndarray) -> None:
        if b > n or not must[b]:
            found.append(size)  # columns b on empty
        if b > n:
            return
        for g in range(min(n - b, last[b]), max(low, first[b]) - 1, -1):  # more mass as g falls
            more = size + tail[b, g]
            if (more > cap).any():
                break
            grow(b + 1, g, more)

    grow(0, 0, np.zeros(grid.shape[2]))
    return np.array(found)


def level_tests(n: int, rates: list[float], level: float = I.ALPHA, grid: int = 400) -> np.ndarray:
    """The false "higher" rate, at each discordance rate in `rates`, of every test that is a function of
    (b, c), symmetric in A and B, monotone (it rejects for B on a down-set of b < c, for A on its mirror),
    and of level `level` at every discordance rate q (on a grid of `grid` rates in (0, 1]): equal models
    give b and c from a multinomial (n; q/2, q/2, 1 − q). A row per test; the empty test included."""
    from scipy import stats

    qs = np.concatenate([np.linspace(0, 1, grid + 1)[1:], rates])
    pmf = np.zeros((n + 1, n + 1, len(qs)))
    for b in range(n + 1):
        for c in range(n + 1 - b):
            pmf[b, c] = stats.multinomial.pmf([b, c, n - b - c], n, np.stack([qs / 2, qs / 2, 1 - qs], 1))
    cap = np.concatenate([np.full(grid, level), np.full(len(rates), np.inf)])
    at = np.arange(n + 1)
    return down_sets(2 * pmf, at + 1, np.full(n + 1, n + 1), cap)[:, grid:]


def step_pair(cover: np.ndarray) -> tuple[float | None, float | None]:
    """(the highest coverage ≤ 97%, the lowest ≥ 93%) among the coverages `cover` an interval can have;
    None: no such step. Some coverage in 93–97% is possible exactly when the first is ≥ 93% (`miss_masses`
    adds masses in units of STEP_RES: to ± 0.0001 there)."""
    tol = 1e-12
    below, above = cover[cover <= 0.97 + tol], cover[cover >= 0.93 - tol]
    return (float(below.max()) if len(below) else None), (float(above.min()) if len(above) else None)


def reachable(masses: np.ndarray) -> np.ndarray:
    """The coverages of `miss_masses`'s boolean array."""
    return 1 - np.flatnonzero(masses) * STEP_RES


def bounds_of_sets(n: int, delta: float, tabs: np.ndarray, p: np.ndarray, agree: bool) -> dict:
    """The limits on the miss sets L (upper end below Δ) and U (lower end above Δ) of an interval that holds
    its own estimate (b − c) / n (so L lies where it is below Δ, U where above) and, if `agree`, excludes
    0 exactly where the test rejects (L holds B's rejections, U only A's). Column b of L: low_from[b] ≤
    γ(b) ≤ low_within[b]; of U: c ≤ high_within[b]."""
    at = np.arange(n + 1)
    low_from = np.maximum(0, np.floor(at - n * delta + 1e-9).astype(int) + 1)  # c > b − nΔ
    high_within = np.maximum(-1, np.ceil(at - n * delta - 1e-9).astype(int) - 1)  # c < b − nΔ
    low_within = np.full(n + 1, n + 1)
    if agree:
        b, c, rej = tabs[:, 1], tabs[:, 2], p < I.ALPHA
        a_side = np.full(n + 1, -1)
        for bb, cc in zip(b[rej], c[rej], strict=True):
            if bb < cc:
                low_within[bb] = min(low_within[bb], cc)
            else:
                a_side[bb] = max(a_side[bb], cc)
        high_within = np.minimum(high_within, a_side)
    return {"low_from": low_from, "low_within": low_within, "high_within": high_within}


def paired_exact_cell(n: int, tabs: np.ndarray, covered: np.ndarray, p: np.ndarray, mean: float,
                      delta: float, tests: np.ndarray) -> dict:  # fmt: skip
    """The default's exact coverage at one cell and its steps: at Δ > 0 those of (i) any monotone interval
    of (b, c) that holds its estimate and (ii) one that also agrees with the test as evalkit's does; at
    Δ = 0 (coverage = 1 − false "higher") those of (i) every test of level 5% (`tests`: their false
    "higher" at this cell, `level_tests`), while (ii) leaves no choice: the test decides. At Δ > 0 also
    `equal_tail_least`."""
    pr = table_probs(tabs, mean, delta)
    out = {"exact": float(pr @ covered)}
    if delta > 0:
        out["equal"] = equal_tail_least(n, delta, tabs, p, pr)
    if delta == 0:
        return out | {"any": step_pair(1 - tests), "test": (out["exact"], out["exact"])}
    grid = np.zeros((n + 1, n + 1))
    np.add.at(grid, (tabs[:, 1], tabs[:, 2]), pr)
    for key, agree in (("any", False), ("test", True)):
        out[key] = step_pair(reachable(miss_masses(grid, **bounds_of_sets(n, delta, tabs, p, agree))))
    return out


def equal_tail_least(n: int, delta: float, tabs: np.ndarray, p: np.ndarray, pr: np.ndarray) -> float:
    """The least coverage at Δ > 0 of an interval of (b, c) that is monotone, holds its estimate, agrees
    with the test and has equal tails (`equal_tail_floor`), the tables weighed by `pr`: its lower end lies
    above Δ on at most the tables where the test says A is higher and the estimate is above Δ (an up-set),
    its upper end below Δ on a down-set L of mass ≤ 2.5% (`down_sets`: every such L). Never under
    `equal_tail_floor`, and above it where no L reaches 2.5% (the counts' steps); NaN where B's rejections
    alone (which L must hold) pass 2.5%: there no interval agreeing with the test has equal tails."""
    grid = np.zeros((n + 1, n + 1))
    np.add.at(grid, (tabs[:, 1], tabs[:, 2]), pr)
    lim = bounds_of_sets(n, delta, tabs, p, True)
    low = down_sets(grid[..., None], lim["low_from"], lim["low_within"], np.array([I.ALPHA / 2]))[:, 0]
    if not len(low):
        return math.nan
    return equal_tail_floor(p, (tabs[:, 1] - tabs[:, 2]) / n, delta, pr) + I.ALPHA / 2 - float(low.max())


def lost_task_probs(mean: float, delta: float) -> tuple[float, np.ndarray]:
    """(B's shift, the probabilities of a task's difference −1, −½, 0, ½, 1) in design "lost" with pass/fail
    rewards (`paired_values`): each of a task's two cells has its own rate c ~ Beta(κθ, κ(1 − θ)), B's
    max(c − s, 0); B's second cell is lost on half the tasks, and a task's difference is over the cells
    both scored. Given θ, a cell's difference is +1 with probability u = E[c (1 − c_B)], −1 with v =
    E[(1 − c) c_B] (closed form, `excess_moment`); θ is integrated out numerically and s solved for the
    exact Δ = E[c] − E[c_B]."""
    from scipy import integrate, optimize, stats

    def given(th: float, s: float) -> tuple[float, float, float]:
        cb, both = excess_moment(th, 0, s, KAPPA_CELL), excess_moment(th, 1, s, KAPPA_CELL)
        return th - both, cb - both, cb  # u, v, E[c_B]

    def over_theta(f) -> float:
        a, b = KAPPA_TASK * mean, KAPPA_TASK * (1 - mean)
        return integrate.quad(lambda th: f(th) * stats.beta.pdf(th, a, b), 0, 1, epsabs=1e-12, limit=500)[0]

    def gap(s: float) -> float:
        return mean - over_theta(lambda th: given(th, s)[2]) - delta

    s = 0.0 if delta <= 0 else optimize.brentq(gap, 1e-9, 1.0, xtol=1e-14)

    def task(th: float) -> np.ndarray:
        u, v, _ = given(th, s)
        z = 1 - u - v
        one = np.array([v, 0, z, 0, u])  # B's second cell lost: d = e₁
        two = np.array([v * v, 2 * v * z, z * z + 2 * u * v, 2 * u * z, u * u])  # both: d = (e₁ + e₂) / 2
        return 0.5 * one + 0.5 * two

    q = np.array([over_theta(lambda th, k=k: float(task(th)[k])) for k in range(5)])
    return s, q / q.sum()


def lost_exact_floor(mean: float, n: int, delta: float) -> float:
    """`equal_tail_floor` of pass/fail design "lost" exactly (n ≤ 16): every table of the n tasks'
    differences (−1, −½, 0, ½, 1) weighed by its multinomial probability (`lost_task_probs`), the exact
    sign-flip p of each."""
    from scipy import stats

    _, q = lost_task_probs(mean, delta)
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    tabs = np.array([t for t in np.ndindex(*(n + 1,) * 5) if sum(t) == n])
    d = np.array([np.repeat(values, t) for t in tabs])
    p = I.sign_flip_p_rows(d)
    return equal_tail_floor(p, d.mean(1), delta, stats.multinomial.pmf(tabs, n, q))


def joint_steps(n: int, delta: float, tabs: np.ndarray, p: np.ndarray, agree: bool) -> list[tuple]:
    """The steps at each of MEANS of one interval that serves all three (the same miss sets L and U at a
    given Δ, whatever the mean) and covers ≥ 93% at each: `step_pair` per mean. L and U are enumerated
    (`down_sets`, U on the mirrored grid) and their masses summed (one set of those with equal masses to
    1e-4)."""
    grid = np.zeros((n + 1, n + 1, len(MEANS)))
    for j, mean in enumerate(MEANS):
        np.add.at(grid[..., j], (tabs[:, 1], tabs[:, 2]), table_probs(tabs, mean, delta))
    lim, cap = bounds_of_sets(n, delta, tabs, p, agree), np.full(len(MEANS), 0.07)
    low = down_sets(grid, lim["low_from"], lim["low_within"], cap)
    # U on the mirrored grid (rows c, columns b) is a down-set: column c is b ≥ the smallest b allowed
    first_u = np.full(n + 1, n + 1)
    for b in range(n + 1):
        for c in range(min(lim["high_within"][b], n - b) + 1):
            first_u[c] = min(first_u[c], b)
    high = down_sets(grid.transpose(1, 0, 2), first_u, np.full(n + 1, n + 1), cap)
    low, high = (x[np.unique(np.round(x, 4), axis=0, return_index=True)[1]] for x in (low, high))
    miss = (low[:, None, :] + high[None, :, :]).reshape(-1, len(MEANS))
    miss = miss[(miss <= 0.07 + 1e-9).all(1)]
    return [step_pair(1 - miss[:, j]) for j in range(len(MEANS))]


def discordance(mean: float) -> float:
    """The share of tasks where two equal models differ (one passes, the other fails): 2 E[θ(1 − θ)]."""
    return 2 * (mean - excess_moment(mean, 1, 0.0))  # E[θ θ] = E[θ²]


def run_paired_exact(a: argparse.Namespace) -> None:
    def f(pair: tuple) -> str:
        return " / ".join("none" if x is None else f"{x:.3f}" for x in pair)

    print("\n### Design 1/1, pass/fail: the default's exact coverage and the steps around 93–97%\n")
    head = ["mean", "tasks", "Δ", f"{METHODS[PAIRED_METHODS[0]]} (default): exact coverage",
            "steps, this cell: any interval (Δ = 0: any test of level 5%)", "agreeing with the test",
            "steps, one interval at the three means: any", "agreeing with the test",
            "equal tails, agreeing with the test: the least coverage"]  # fmt: skip
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for n in a.tasks:
        tabs, ya, yb = count_tables(n)
        d = ya - yb
        p = sign_test_p(tabs[:, 1], tabs[:, 2])
        lo, hi = I.agree_rows(
            *I.paired_bounds(d, ya, yb, PAIRED_METHODS[0], share=I.mover_share(True)), p, d.mean(1)
        )
        tests = level_tests(n, [discordance(m) for m in MEANS])
        joint = {x: [joint_steps(n, x, tabs, p, agree) for agree in (False, True)] for x in DELTAS[1:]}
        for j, mean in enumerate(MEANS):
            for delta in DELTAS:
                covered = (lo <= delta + 1e-12) & (delta - 1e-12 <= hi)
                r = paired_exact_cell(n, tabs, covered, p, mean, delta, tests[:, j])
                both = [f(r["any"]), f(r["test"])]
                both += [f(joint[delta][k][j]) for k in (0, 1)] if delta else [f(r["any"]), f(r["test"])]
                both.append(f"{r['equal']:.4f}" if delta else "–")
                print(
                    f"| {mean:g} | {n} | {delta:g} | {r['exact']:.4f} | " + " | ".join(both) + " |",
                    flush=True,
                )


# ------------------------------------------------------------------------------------------------- main


def run_tier(a: argparse.Namespace) -> None:
    runs = a.tier_runs or TIER_RUNS * a.reps
    head = ["rewards", "mean", "tasks", "repeats", *(f"{METHODS[m]}" + (" (default)" if m == MEAN_METHODS[0]
            else "") for m in MEAN_METHODS)]  # fmt: skip
    print(
        f"\n### Tier intervals ({runs} runs a cell; [misses below / above]: the share of runs whose "
        "interval lies wholly below / above the true mean)\n"
    )
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    seed = 100
    for kind in ("c", "b"):
        for mean in MEANS:
            for n in a.tasks:
                for rep in TIER_REPEATS:
                    seed += 1
                    if a.cells and f"{kind}:{mean:g}:{n}:{rep}" not in a.cells:
                        continue
                    # --cells: draws apart from the full table's (a re-measure, not the same runs again)
                    r = tier_cell(kind, mean, n, rep, runs, seed + (100_000 if a.cells else 0))
                    cells = [pm_sides(r[m], r[m + " sides"], runs) for m in MEAN_METHODS]
                    if kind == "b" and rep == "1":
                        exact, below = exact_tier(n, mean)
                        below = f"{below:.3f}" if below else "none"
                        cells[0] += f" (exact {exact:.3f}; step below {below})"
                    label = "continuous" if kind == "c" else "pass/fail"
                    print("| " + " | ".join([label, f"{mean:g}", str(n), rep, *cells]) + " |", flush=True)
    if a.cells:
        return
    print(f"\n### pass@2 ({runs} runs a cell; {METHODS[MEAN_METHODS[0]]})\n")
    print("| success rate | tasks | repeats | coverage |\n|---|---|---|---|")
    for rate in (0.8, 0.9):
        for n in a.tasks:
            for rep in (3, 5):
                seed += 1
                print(
                    f"| {rate:g} | {n} | {rep} | {pm(pass_k_cell(rate, n, rep, runs, seed), runs)} |",
                    flush=True,
                )


def picked(a: argparse.Namespace, kind: str, mean: float, n: int, design: str, delta: float) -> bool:
    """Whether --means, --tasks, --designs and --cells (KIND:MEAN:TASKS:DESIGN:DELTA, * for any) take this
    paired cell."""
    if mean not in a.means or n not in a.tasks or design not in a.designs:
        return False
    return not a.cells or any(fnmatch(f"{kind}:{mean:g}:{n}:{design}:{delta:g}", c) for c in a.cells)


def run_paired(a: argparse.Namespace) -> None:
    head = ["rewards", "mean", "tasks", "design", "Δ", *(METHODS[m] + (" (default)" if m == PAIRED_METHODS[0]
            else "") for m in PAIRED_SHOWN), "\"higher\" (Δ = 0)", "NI error (Δ > 0)"]  # fmt: skip
    print(f"\n### Paired intervals and verdicts ({a.reps} runs a cell)\n")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    seed = 1000
    for kind in ("c", "b"):
        for mean in MEANS:
            for n in (6, 10, 20, 60):
                for design in DESIGNS:
                    for delta in DELTAS:
                        seed += 1  # each cell its own seed, whichever cells are picked
                        if not picked(a, kind, mean, n, design, delta):
                            continue
                        r = paired_cell(
                            kind, mean, n, design, delta, a.reps, seed + a.seed_offset, a.all_methods
                        )
                        label = "continuous" if kind == "c" else "pass/fail"
                        cells = [label, f"{mean:g}", str(n), design, f"{delta:g}",
                                 *(pm(r[m], a.reps) for m in PAIRED_SHOWN),
                                 pm(r["higher"], a.reps) if delta == 0 else "",
                                 pm(r["ni"], a.reps) if delta > 0 else ""]  # fmt: skip
                        if delta > 0 and min(r[PAIRED_METHODS[0]], r["floor"]) > 0.97:
                            cells[5] += f" (equal tails: ≥ {r['floor']:.3f} forced)"
                        print("| " + " | ".join(cells) + " |", flush=True)


def run_mde(a: argparse.Namespace) -> None:
    """Issue 40's question, unchanged since: had the true difference been the MDE a run printed (for equal
    models), how often would the test have said "higher" for the better side? 80% is the promise."""
    from evalkit.analysis import power as P

    print(f"\n### Power at the printed MDE ({a.reps} runs a cell)\n")
    print("| rewards | tasks | repeats | power at MDE | MDE shown |\n|---|---|---|---|---|")
    seed = 5000
    for kind, mean in (("c", 0.5), ("b", 0.5), ("b", 0.9)):
        for n in a.tasks:
            for r in (1, 3):
                seed += 1
                rng = np.random.default_rng(seed)
                th = thetas(rng, mean, (a.reps, n))
                ya, yb = episodes(rng, kind, th, r).mean(-1), episodes(rng, kind, th, r).mean(-1)
                reps = np.full(n, r)
                mdes = [P.detectable(ya[i] - yb[i], (ya[i] + yb[i]) / 2, reps, reps, kind == "b", 0.05, i)
                        for i in range(a.reps)]  # fmt: skip
                shown = [m for m in mdes if m is not None]
                got = asked = 0
                for i, m in enumerate(shown):
                    s = shift_for(mean, m)
                    t2 = thetas(rng, mean, (1, n))
                    xa = episodes(rng, kind, t2, r).mean(-1)
                    xb = episodes(rng, kind, np.clip(t2 - s, 0, 1), r).mean(-1)
                    p = I.sign_flip_p_rows(xa - xb, seed=i)[0]
                    asked += 1
                    got += p < 0.05 and (xa - xb).mean() > 0
                label = "continuous" if kind == "c" else "pass/fail"
                print(f"| {label} {mean:g} | {n} | {r} | {pm(got / asked if asked else None, asked)} | "
                      f"{len(shown) / a.reps:.0%} |", flush=True)  # fmt: skip


def ni_cell(mean: float, n: int, design: str, delta: float, runs: int, seed: int) -> dict:
    """The default's coverage and NI error at one pass/fail cell, and the NI error had the bound been the
    95% interval's upper end: the default's ends all the way to MOVER's (the bound before), paired t's."""
    rng = np.random.default_rng(seed)
    shift = shift_for(mean, delta, design == "lost")
    d, d_test, ya, yb, bal = paired_values(rng, "b", mean, n, design, shift, runs)
    p = I.sign_flip_p_rows(d_test, BENCH_FLIPS, seed=seed)

    def ends(method: str, share: float | np.ndarray = 1.0) -> tuple[np.ndarray, np.ndarray]:
        return I.agree_rows(*I.paired_bounds(d, ya, yb, method, seed=seed, share=share), p, d.mean(1))

    lo, hi = ends(PAIRED_METHODS[0], shares(bal, "b", design))
    whole, t_hi = ends(PAIRED_METHODS[0])[1], ends("t")[1]
    ni = I.ni_upper_rows(d, ya, yb, p, PAIRED_METHODS[0], seed=seed)
    return {"coverage": hits(lo, hi, delta), "ni": float((ni < delta).mean()),
            "at 95%": float((whole < delta).mean()), "t at 95%": float((t_hi < delta).mean())}  # fmt: skip


def run_paired_between(a: argparse.Namespace) -> None:
    """Issue 51 (rounds five and six): the default's ends taken a share w of the way from paired t's (95%)
    toward MOVER's where MOVER's reach further (w = 1: the default before round six), and the default now
    (`intervals.mover_share`: w by the run's balance and reward kind), the NI bound untouched; then, per
    reward kind and design, how many cells with Δ > 0 each covers in 93–97% and under 93%."""
    weights = a.weights
    head = ["rewards", "mean", "tasks", "design", "Δ", *(f"w = {w:g}" for w in weights), "default"]
    print(f"\n### Paired ends between t and MOVER ({a.reps} runs a cell; [misses below / above])\n")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    seed, got = 1000, {}
    for kind in ("c", "b"):
        for mean in MEANS:
            for n in (6, 10, 20, 60):
                for design in DESIGNS:
                    for delta in DELTAS:
                        seed += 1  # the seeds of --part paired
                        if not picked(a, kind, mean, n, design, delta):
                            continue
                        s = seed + a.seed_offset  # --seed-offset: fresh draws, not the same runs again
                        rng = np.random.default_rng(s)
                        shift = shift_for(mean, delta, design == "lost")
                        d, d_test, ya, yb, bal = paired_values(rng, kind, mean, n, design, shift, a.reps)
                        p = I.sign_flip_p_rows(d_test, BENCH_FLIPS, seed=s)
                        (tl, th), (ml, mh) = I.t_bounds(d), I.mover_bounds(ya, yb, 0.95, s)
                        cells, covers = [], []
                        for w in (*weights, shares(bal, kind, design)):
                            lo = tl + w * np.minimum(ml - tl, 0.0)
                            hi = th + w * np.maximum(mh - th, 0.0)
                            lo, hi = I.agree_rows(lo, hi, p, d.mean(1))
                            covers.append(hits(lo, hi, delta))
                            cells.append(pm_sides(covers[-1], sides(lo, hi, delta), a.reps))
                        if delta > 0:
                            got.setdefault((kind, design), []).append(covers)
                        row = ["continuous" if kind == "c" else "pass/fail", f"{mean:g}", str(n), design]
                        print("| " + " | ".join([*row, f"{delta:g}", *cells]) + " |", flush=True)
    print_between_summary(got, head[5:])


def print_between_summary(got: dict, columns: list[str]) -> None:
    """Per reward kind and design, the cells with Δ > 0 in 93–97% / under 93% of each column of
    `run_paired_between`."""
    print("\n| rewards | design | cells | " + " | ".join(columns) + " |\n|" + "---|" * (3 + len(columns)))
    for (kind, design), rows in got.items():
        c = np.array(rows)
        counts = [f"{int(((x >= 0.93) & (x <= 0.97)).sum())} / {int((x < 0.93).sum())}" for x in c.T]
        label = "continuous" if kind == "c" else "pass/fail"
        print(f"| {label} | {design} | {len(c)} | " + " | ".join(counts) + " |")


def run_ni(a: argparse.Namespace) -> None:
    runs = a.ni_runs
    print(f"\n### Non-inferiority error, pass/fail rewards ({runs} runs a cell)\n")
    print(f"| mean | tasks | design | Δ | {METHODS[PAIRED_METHODS[0]]} (default): coverage | NI error | "
          "NI error at the 95% interval's end (before) | the same, paired t alone |"
          "\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    seed = 9000
    for mean in MEANS:
        for n in a.tasks:
            for design in DESIGNS:
                for delta in DELTAS[1:]:
                    seed += 1  # the same cell, the same seed, whichever cells --means and --designs pick
                    if mean not in a.means or design not in a.designs:
                        continue
                    r = ni_cell(mean, n, design, delta, runs, seed)
                    shown = " | ".join(pm(r[k], runs) for k in ("coverage", "ni", "at 95%", "t at 95%"))
                    print(f"| {mean:g} | {n} | {design} | {delta:g} | {shown} |", flush=True)


def run_lost_exact(a: argparse.Namespace) -> None:
    print("\n### Design lost, pass/fail: the equal-tails floor exactly (every table of differences)\n")
    print("| mean | tasks | Δ | equal tails, agreeing with the test: the floor |\n|---|---|---|---|")
    for n in (n for n in a.tasks if n <= I.EXACT_FLIPS):
        for mean in MEANS:
            for delta in DELTAS[1:]:
                print(f"| {mean:g} | {n} | {delta:g} | {lost_exact_floor(mean, n, delta):.4f} |", flush=True)


def run_ni_exact(a: argparse.Namespace) -> None:
    print("\n### Design 1/1, pass/fail: exact coverage and NI error (every 2 × 2 table)\n")
    print(f"| mean | tasks | Δ | {METHODS[PAIRED_METHODS[0]]} (default): coverage | NI error | "
          "NI error at the 95% interval's end (before) |\n|---|---|---|---|---|---|")  # fmt: skip
    for n in a.tasks:
        tabs, ya, yb = count_tables(n)
        d = ya - yb
        p = I.sign_flip_p_rows(d, BENCH_FLIPS, seed=n)
        lo, hi = I.agree_rows(
            *I.paired_bounds(d, ya, yb, PAIRED_METHODS[0], share=I.mover_share(True)), p, d.mean(1)
        )
        ni = I.ni_upper_rows(d, ya, yb, p, PAIRED_METHODS[0])
        for mean in MEANS:
            for delta in DELTAS[1:]:
                pr = table_probs(tabs, mean, delta)
                cov = pr @ ((lo <= delta + 1e-12) & (delta - 1e-12 <= hi))
                print(f"| {mean:g} | {n} | {delta:g} | {cov:.4f} | {pr @ (ni < delta):.4f} | "
                      f"{pr @ (hi < delta):.4f} |", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="simulated runs per paired cell (default 1000)")
    ap.add_argument("--tasks", type=int, nargs="*", default=[6, 10, 20, 60])
    ap.add_argument(
        "--part",
        choices=(
            "tier",
            "candidates",
            "paired",
            "mde",
            "ni",
            "ni-exact",
            "paired-exact",
            "paired-between",
            "lost-exact",
            "all",
        ),
        default="all",
    )
    ap.add_argument("--ni-runs", type=int, default=3000, help="simulated runs per cell of --part ni")
    ap.add_argument(
        "--means",
        type=float,
        nargs="*",
        default=list(MEANS),
        help="--part paired, ni, paired-between: these means",
    )
    ap.add_argument(
        "--designs", nargs="*", default=list(DESIGNS), help="--part paired, ni, paired-between: these designs"
    )
    ap.add_argument("--tier-runs", type=int, default=None, help="runs per tier cell (default 4 × --reps)")
    ap.add_argument(
        "--cells",
        nargs="*",
        default=[],
        help="--part tier: only these cells, KIND:MEAN:TASKS:REPEATS (c or b); --part paired, "
        "paired-between: KIND:MEAN:TASKS:DESIGN:DELTA, each may hold * (b:0.95:*:lost:*)",
    )
    ap.add_argument(
        "--weights",
        type=float,
        nargs="*",
        default=[0.0, 0.02, 0.05, 0.1, 0.3, 1.0],
        help="--part paired-between: the fixed shares w shown beside the default",
    )
    ap.add_argument(
        "--seed-offset",
        type=int,
        default=0,
        help="--part paired, paired-between: added to every seed (fresh draws)",
    )
    ap.add_argument("--all-methods", action="store_true", help="the paired bootstrap in every design")
    a = ap.parse_args(argv)
    assert min(a.tasks) >= MIN_TASKS
    t0 = time.monotonic()
    if a.part in ("tier", "all"):
        run_tier(a)
    if a.part in ("paired", "all"):
        run_paired(a)
    if a.part == "candidates":
        run_candidates(a)
    if a.part == "mde":
        run_mde(a)
    if a.part == "ni":
        run_ni(a)
    if a.part == "ni-exact":
        run_ni_exact(a)
    if a.part == "paired-exact":
        run_paired_exact(a)
    if a.part == "paired-between":
        run_paired_between(a)
    if a.part == "lost-exact":
        run_lost_exact(a)
    print(f"\n± one Monte Carlo standard error; {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
