"""Coverage of evalkit's intervals, the false-positive rate of its headline and its power at the printed MDE,
on simulated runs (issue 40; the contract is DESIGN.md's "Statistics": 95% means 93–97% from six tasks).

    PYTHONPATH=. python benchmarks/coverage.py            # 200 runs per cell, about five minutes
    PYTHONPATH=. python benchmarks/coverage.py --reps 1000  # the table in docs/statistics.md, ~20 min

Each simulated run has `n` tasks; a task has its own success rate or mean θ drawn from a Beta around the
cell's mean (tasks differ: the intraclass correlation is about 1/3), and each of its `repeats` episodes a
reward around θ: continuous (a Beta with mean θ, skewed at the low means) or pass/fail (Bernoulli θ).
Columns, each with its Monte Carlo standard error:
  tier cov   the 95% interval of one model's task-weighted mean (`mean_interval`, as `by_tier` computes it)
             contains the true mean (over TIER_RUNS times the runs); for pass/fail rewards with one
             episode per task (a binomial count of successes) also its exact coverage, and the step below
             it: the most any interval that is a function of the count (symmetric at 0.5) can cover below;
  pair cov   the paired 95% interval (`sign_flip_interval`, as `compare`) contains the true difference,
             with B better (worse above a mean of 0.5) than A by the cell's median printed MDE;
  FPR        two equal models: how often the headline says one "scores higher" (p < 0.05);
  power      run i's question: had the true difference been the MDE run i printed (for equal models),
             how often would the test have said "higher" for the better side? Each equal-model run is
             followed by a run with the true difference at its own printed MDE; 80% is the MDE's promise.
             Over the runs that print an MDE ("MDE shown"; the others print "out of reach": no difference
             within the reward range has 80% power there). pair cov uses the same true differences, and
             OUT_OF_REACH where no MDE was printed. Runs whose MDE the simulated population cannot reach
             (shifting every θ to the bound gives less: "at the ceiling") are left out of the power.
The intervals are computed by the functions `by_tier` and `compare` call, on the per-task means they would
build; tests/analysis checks that the frames give the same numbers.
"""

from __future__ import annotations

import argparse
import math
import time
from math import comb

import numpy as np

from evalkit.analysis import power as P
from evalkit.analysis.stats import MIN_TASKS, mean_interval, sign_flip_interval

KAPPA_TASK = 2.0  # spread of θ between tasks: Beta(κm, κ(1 − m)), ICC ≈ 1 / (κ + 1) for pass/fail
KAPPA_EPISODE = 6.0  # continuous rewards around θ: Beta(κθ, κ(1 − θ))
OUT_OF_REACH = 0.3
"""The true difference for pair cov and power where most runs print no MDE (none within the range has 80%)."""
TIER_RUNS = 4
"""tier cov is over this many times the runs of the other columns."""
KINDS = {"continuous 0.3": ("c", 0.3), "pass/fail 0.5": ("b", 0.5), "pass/fail 0.9": ("b", 0.9)}


def _thetas(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    return rng.beta(KAPPA_TASK * mean, KAPPA_TASK * (1 - mean), n)


def _episodes(rng: np.random.Generator, kind: str, theta: np.ndarray, repeats: int) -> np.ndarray:
    t = np.clip(np.repeat(theta[:, None], repeats, 1), 1e-6, 1 - 1e-6)
    if kind == "b":
        return (rng.random(t.shape) < t).astype(float)
    return rng.beta(KAPPA_EPISODE * t, KAPPA_EPISODE * (1 - t))


def _shifted(theta: np.ndarray, s: float) -> np.ndarray:
    return np.clip(theta + s, 0.0, 1.0)


def _direction(mean: float) -> float:
    # Away from the nearer bound, so that the shift has room: B better below 0.5, worse above.
    return 1.0 if mean <= 0.5 else -1.0


def _shifts(mean: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Shifts s of every task's θ (clipped to [0, 1]) and the true mean difference each gives over the task
    population (clipping at a bound makes it smaller than s): interpolated to find the s of a difference."""
    big = _thetas(rng, mean, 200_000)
    grid = np.linspace(0.0, 1.0, 401)
    return grid, np.array([abs((_shifted(big, _direction(mean) * g) - big).mean()) for g in grid])


def _cell(kind: str, mean: float, n: int, repeats: int, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    pf = kind == "b"
    tier_hits = fp = 0
    mdes = []
    for i in range(reps):
        th = _thetas(rng, mean, n)
        ya = _episodes(rng, kind, th, repeats).mean(1)
        lo, hi = mean_interval(ya, n * repeats, pf)
        tier_hits += lo <= mean <= hi
        yb = _episodes(rng, kind, th, repeats).mean(1)  # B: the same tasks, the same θ
        d = ya - yb
        lo, hi, p = sign_flip_interval(d, seed=i)
        fp += p < 0.05
        mdes.append(_mde(d, ya, yb, repeats, pf, i))
    grid, diffs = _shifts(mean, rng)
    pair_hits = power = ceiling = 0
    for i, m in enumerate(mdes):
        # Run i's question: had the true difference been the MDE it printed, would the test have said so?
        want = OUT_OF_REACH if m is None else m
        s = _direction(mean) * float(np.interp(want, diffs, grid))
        true = float(np.interp(abs(s), grid, diffs)) * _direction(mean)  # B − A
        capped = m is not None and abs(true) < 0.99 * m  # the population's range cannot give the MDE
        ceiling += capped
        th = _thetas(rng, mean, n)
        ya = _episodes(rng, kind, th, repeats).mean(1)
        yb = _episodes(rng, kind, _shifted(th, s), repeats).mean(1)
        lo, hi, p = sign_flip_interval(ya - yb, seed=i)
        pair_hits += lo <= -true <= hi
        power += m is not None and not capped and p < 0.05 and (hi < 0 if true > 0 else lo > 0)
    shown = sum(m is not None for m in mdes)
    asked = shown - ceiling
    mde = float(np.median([math.inf if m is None else m for m in mdes]))
    tier_runs = TIER_RUNS * reps  # the interval alone is cheap: more runs, a smaller Monte Carlo error
    for _ in range(tier_runs - reps):
        lo, hi = mean_interval(_episodes(rng, kind, _thetas(rng, mean, n), repeats).mean(1), n * repeats, pf)
        tier_hits += lo <= mean <= hi
    return {"tier": tier_hits / tier_runs, "pair": pair_hits / reps, "fpr": fp / reps, "mde": mde,
            "power": power / asked if asked else None, "asked": asked, "shown": shown,
            "ceiling": ceiling}  # fmt: skip


def _mde(d: np.ndarray, ya: np.ndarray, yb: np.ndarray, repeats: int, pf: bool, seed: int) -> float | None:
    # As `stats._mde` calls it from `compare`'s per-task frame: pooled means, episodes per side.
    reps = np.full(len(d), repeats)
    return P.detectable(d, (ya + yb) / 2, reps, reps, pf, 0.05, seed)


def _exact_tier(n: int, p: float) -> tuple[float, float]:
    """The pass/fail tier interval's exact coverage over n tasks of one episode each (a Binomial(n, p)
    count), and the largest coverage below it that an interval which is a function of the count can have:
    it covers p for the counts a..b around np (b = n − a at p = 0.5), so its coverage takes few values."""
    pmf = [comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    got = 0.0
    for k in range(n + 1):
        lo, hi = mean_interval(np.array([1.0] * k + [0.0] * (n - k)), n, True)
        got += pmf[k] * (lo <= p <= hi)
    steps = [
        sum(pmf[a : b + 1])
        for a in range(n + 1)
        for b in range(a, n + 1)
        if a <= n * p <= b and (p != 0.5 or a == n - b)
    ]
    return got, max((s for s in steps if s < got - 1e-12), default=0.0)


def _pm(x: float | None, reps: int) -> str:
    if x is None or not reps:
        return "–"
    return f"{x:.3f} ± {math.sqrt(max(x * (1 - x), 1e-9) / reps):.3f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200, help="simulated runs per cell (default 200)")
    ap.add_argument("--tasks", type=int, nargs="*", default=[6, 10, 20, 60])
    a = ap.parse_args(argv)
    assert min(a.tasks) >= MIN_TASKS
    t0 = time.monotonic()
    head = ["rewards", "tasks", "repeats", "tier cov", "pair cov", "FPR", "power at MDE", "MDE shown",
            "median MDE"]  # fmt: skip
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    seed = 0
    for label, (kind, mean) in KINDS.items():
        for n in a.tasks:
            for repeats in (1, 3):
                seed += 1
                r = _cell(kind, mean, n, repeats, a.reps, seed)
                mde = f"{r['mde']:.3f}" if math.isfinite(r["mde"]) else "out of reach"
                if r["ceiling"]:
                    mde += f" ({r['ceiling']} at the ceiling)"
                tier = _pm(r["tier"], TIER_RUNS * a.reps)
                if kind == "b" and repeats == 1:
                    exact, below = _exact_tier(n, mean)
                    tier += f" (exact {exact:.3f}; step below {below:.3f})"
                cells = [label, str(n), str(repeats), tier, _pm(r["pair"], a.reps),
                         _pm(r["fpr"], a.reps), _pm(r["power"], r["asked"]), f"{r['shown'] / a.reps:.0%}",
                         mde]  # fmt: skip
                print("| " + " | ".join(cells) + " |", flush=True)
    took = time.monotonic() - t0
    print(f"\n{a.reps} simulated runs per cell (± one Monte Carlo standard error); {took:.0f} s")


if __name__ == "__main__":
    main()
