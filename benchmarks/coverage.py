"""Coverage of evalkit's intervals, the false-positive rate of its headline and its power at the printed MDE,
on simulated runs (issue 40; the contract is DESIGN.md's "Statistics": 95% means 93–97% from six tasks).

    PYTHONPATH=. python benchmarks/coverage.py            # 200 runs per cell, about three minutes
    PYTHONPATH=. python benchmarks/coverage.py --reps 2000

Each simulated run has `n` tasks; a task has its own success rate or mean θ drawn from a Beta around the
cell's mean (tasks differ: the intraclass correlation is about 1/3), and each of its `repeats` episodes a
reward around θ: continuous (a Beta with mean θ, skewed at the low means) or pass/fail (Bernoulli θ).
Columns, each with its Monte Carlo standard error:
  tier cov   the 95% interval of one model's task-weighted mean (`mean_interval`, as `by_tier` computes it)
             contains the true mean;
  pair cov   the paired 95% interval (`sign_flip_interval`, as `compare`) contains the true difference,
             with B better (worse above a mean of 0.5) than A by the cell's median printed MDE;
  FPR        two equal models: how often the headline says one "scores higher" (p < 0.05);
  power      how often it does with the true difference at the median MDE printed for equal models (80%
             is the MDE's promise; the MDE is printed from the data, so its median is a fair stand-in).
The intervals are computed by the functions `by_tier` and `compare` call, on the per-task means they would
build; tests/analysis checks that the frames give the same numbers.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from evalkit.analysis.stats import MIN_TASKS, mean_interval, min_detectable, sign_flip_interval

KAPPA_TASK = 2.0  # spread of θ between tasks: Beta(κm, κ(1 − m)), ICC ≈ 1 / (κ + 1) for pass/fail
KAPPA_EPISODE = 6.0  # continuous rewards around θ: Beta(κθ, κ(1 − θ))
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


def _shift_for(diff: float, mean: float, rng: np.random.Generator) -> float:
    """The shift s of every task's θ (clipped to [0, 1]) whose true mean difference, over the task
    population, is `diff`: clipping at 1 makes it smaller than s, so solve for it."""
    big = _thetas(rng, mean, 400_000)
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if abs((_shifted(big, _direction(mean) * mid) - big).mean()) < diff else (lo, mid)
    return (lo + hi) / 2


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
        mdes.append(min_detectable(float(d.std(ddof=1)), n, (hi - lo) / 2))
    mde = float(np.median(mdes))
    s = _direction(mean) * _shift_for(mde, mean, rng)
    big = _thetas(rng, mean, 400_000)
    true = float((_shifted(big, s) - big).mean())  # B − A
    pair_hits = power = 0
    for i in range(reps):
        th = _thetas(rng, mean, n)
        ya = _episodes(rng, kind, th, repeats).mean(1)
        yb = _episodes(rng, kind, _shifted(th, s), repeats).mean(1)
        lo, hi, p = sign_flip_interval(ya - yb, seed=i)
        pair_hits += lo <= -true <= hi
        power += p < 0.05 and (hi < 0 if true > 0 else lo > 0)
    return {"tier": tier_hits / reps, "pair": pair_hits / reps, "fpr": fp / reps, "power": power / reps,
            "mde": mde, "true": true}  # fmt: skip


def _pm(x: float, reps: int) -> str:
    return f"{x:.3f} ± {math.sqrt(max(x * (1 - x), 1e-9) / reps):.3f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200, help="simulated runs per cell (default 200)")
    ap.add_argument("--tasks", type=int, nargs="*", default=[6, 10, 20, 60])
    a = ap.parse_args(argv)
    assert min(a.tasks) >= MIN_TASKS
    t0 = time.monotonic()
    head = [
        "rewards",
        "tasks",
        "repeats",
        "tier cov",
        "pair cov",
        "FPR",
        "power at MDE",
        "median MDE",
        "true diff",
    ]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    seed = 0
    for label, (kind, mean) in KINDS.items():
        for n in a.tasks:
            for repeats in (1, 3):
                seed += 1
                r = _cell(kind, mean, n, repeats, a.reps, seed)
                ceiling = " (ceiling)" if abs(r["true"]) < 0.95 * r["mde"] else ""
                cells = [label, str(n), str(repeats), _pm(r["tier"], a.reps), _pm(r["pair"], a.reps),
                         _pm(r["fpr"], a.reps), _pm(r["power"], a.reps), f"{r['mde']:.3f}",
                         f"{abs(r['true']):.3f}{ceiling}"]  # fmt: skip
                print("| " + " | ".join(cells) + " |", flush=True)
    took = time.monotonic() - t0
    print(f"\n{a.reps} simulated runs per cell (± one Monte Carlo standard error); {took:.0f} s")


if __name__ == "__main__":
    main()
