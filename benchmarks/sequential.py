"""Sequential against fixed paired comparisons on simulated experiments (issue 57): which sequential design
evalkit uses, and what it saves.

    PYTHONPATH=. python benchmarks/sequential.py              # 1,000 runs per cell, ~5 minutes
    PYTHONPATH=. python benchmarks/sequential.py --reps 2000  # the tables in docs/statistics.md, ~9 minutes

Each simulated experiment has N tasks available (20, 50, 100, 300); task i has A's success rate or mean
θ_A = δ + 0.02 + (0.96 − δ)·Beta(2, 2) and B's θ_B = θ_A − δ, so the true difference in task-weighted mean
reward is exactly δ (0, 0.05, 0.1, 0.2); each side runs one episode per task, a reward that is pass/fail
(Bernoulli θ) or continuous (a Beta with mean θ and concentration 8: SD of a task's difference about 0.2).
Every design sees the same tasks in the same order, and may stop for "no difference of D or more" with
D = 0.1 as well as for A or B better:

  fixed      all N tasks, then evalkit's test: the sign-flip interval (`compare`'s; random sign assignments
             as `power` simulates them), A/B better when it excludes 0, no difference ≥ D inside ±D;
  gsd-obf    evalkit's design (`evalkit.analysis.sequential`): looks after every tenth of N (the first at 6
             tasks), O'Brien–Fleming-type alpha spending over N, the repeated interval of each look;
  gsd-pocock the same with Pocock-type spending (more α early);
  cs-betting an anytime-valid confidence sequence (Waudby-Smith and Ramdas' hedged betting capital with
             predictable plug-in bets, on the bounded differences), read at the same looks;
  cs-normal  an asymptotic anytime-valid confidence sequence (Waudby-Smith et al.'s normal mixture, its
             mixing tuned to be tightest at N tasks), read at the same looks.

Columns: "wrong" how often a design's decision is false (A or B better at δ = 0; B better, or no difference
≥ D where δ ≥ D); "A better" (at δ = 0: A or B, the false-positive rate); "no diff ≥ D"; "agree" how often
the design's decision is the fixed design's (no difference ≥ D agrees with a fixed interval inside ±D,
whichever side of 0); "tasks" the mean share of the N tasks used (episodes: the same share).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from evalkit.analysis import power as P
from evalkit.analysis import sequential as S

DELTAS = (0.0, 0.05, 0.1, 0.2)
SIZES = (20, 50, 100, 300)
KINDS = ("pass/fail", "continuous")
D = 0.1
ALPHA = 0.05
KAPPA = 8.0
GRID = 401
"""Candidate means of the betting confidence sequence, on [−1, 1]."""
DESIGNS = ("fixed", "gsd-obf", "gsd-pocock", "cs-betting", "cs-normal")


def simulate(rng: np.random.Generator, kind: str, delta: float, n: int, runs: int) -> np.ndarray:
    """Runs × tasks differences A − B with true mean δ."""
    theta_a = delta + 0.02 + (0.96 - delta) * rng.beta(2.0, 2.0, size=(runs, n))
    theta_b = theta_a - delta
    if kind == "pass/fail":
        return (rng.random((runs, n)) < theta_a).astype(float) - (rng.random((runs, n)) < theta_b)
    return rng.beta(KAPPA * theta_a, KAPPA * (1 - theta_a)) - rng.beta(KAPPA * theta_b, KAPPA * (1 - theta_b))


def decide(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """1 A better, −1 B better, 2 no difference ≥ D, 0 none."""
    return np.select([lo > 0, hi < 0, (lo > -D) & (hi < D)], [1, -1, 2], 0)


def fixed(d: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(decision, the fixed interval's being inside ±D) of the sign-flip interval over all N tasks."""
    n = d.shape[1]
    signs, exact = P._signs(n, rng)
    lo = -P._thresholds(d, signs, exact, ALPHA)
    hi = P._thresholds(-d, signs, exact, ALPHA)
    return decide(lo, hi), (lo > -D) & (hi < D)


def gsd(d: np.ndarray, looks: list[int], spending: str) -> tuple[np.ndarray, np.ndarray]:
    """(decision, tasks used) of `sequential`'s design: the first look whose repeated interval decides."""
    n_max = d.shape[1]
    crit = S.boundaries([k / n_max for k in looks], ALPHA, spending)
    s, q = np.cumsum(d, 1), np.cumsum(d * d, 1)
    r = np.maximum(1.0, np.abs(d).max(1))
    w = np.array([S.lattice_step(row) for row in d])  # the same for every prefix of these runs
    out, used = np.zeros(len(d), int), np.full(len(d), n_max)
    open_ = np.ones(len(d), bool)
    for k, c in zip(looks, crit, strict=True):
        lo, hi, crossed = S.intervals(s[:, k - 1], q[:, k - 1], k, c, r, w)
        dec = np.where(crossed, np.sign(s[:, k - 1]).astype(int), np.where((lo > -D) & (hi < D), 2, 0))
        stop = open_ & (dec != 0)
        out[stop], used[stop] = dec[stop], k
        open_ &= ~stop
    return out, used


def first_decision(lo: np.ndarray, hi: np.ndarray, looks: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Decision and tasks used of a confidence sequence (runs × tasks ends) read at the looks."""
    runs, n_max = lo.shape
    out, used, open_ = np.zeros(runs, int), np.full(runs, n_max), np.ones(runs, bool)
    for k in looks:
        dec = decide(lo[:, k - 1], hi[:, k - 1])
        stop = open_ & (dec != 0)
        out[stop], used[stop] = dec[stop], k
        open_ &= ~stop
    return out, used


def cs_normal(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Asymptotic confidence sequence: mean ± σ̂ √(2(tρ² + 1)/(t²ρ²) · log(√(tρ² + 1)/α)), intersected."""
    n_max = d.shape[1]
    t = np.arange(1, n_max + 1)
    rho2 = (-2 * math.log(ALPHA) + math.log(-2 * math.log(ALPHA) + 1)) / n_max
    m = np.cumsum(d, 1) / t
    var = np.maximum(np.cumsum(d * d, 1) / t - m * m, 0.0) * t / np.maximum(t - 1, 1)
    half = np.sqrt(var) * np.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * np.log(np.sqrt(t * rho2 + 1) / ALPHA))
    half[:, :1] = np.inf
    return np.maximum.accumulate(np.clip(m - half, -1, 1), 1), np.minimum.accumulate(
        np.clip(m + half, -1, 1), 1
    )


def cs_betting(d: np.ndarray, chunk: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Hedged betting confidence sequence for the mean of x = (d + 1)/2 ∈ [0, 1], mapped back to d: the
    candidate means whose capital never reached 1/α."""
    runs, n_max = d.shape
    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    x = (d + 1) / 2
    t = np.arange(1, n_max + 1)
    mu = (0.5 + np.cumsum(x, 1)) / (t + 1)
    var = (0.25 + np.cumsum((x - mu) ** 2, 1)) / (t + 1)
    prev = np.concatenate([np.full((runs, 1), 0.25), var[:, :-1]], 1)
    lam = np.sqrt(2 * math.log(2 / ALPHA) / (prev * t * np.log1p(t)))
    lo, hi = np.empty((runs, n_max)), np.empty((runs, n_max))
    for i in range(0, runs, chunk):
        xs, ls = x[i : i + chunk, :, None], lam[i : i + chunk, :, None]
        up = np.cumsum(np.log1p(np.minimum(ls, 0.5 / grid) * (xs - grid)), 1)
        down = np.cumsum(np.log1p(-np.minimum(ls, 0.5 / (1 - grid)) * (xs - grid)), 1)
        capital = np.logaddexp(up, down) - math.log(2)
        out = np.maximum.accumulate(capital >= math.log(1 / ALPHA), 1)  # rejected at some look so far
        kept = ~out
        first = np.where(kept.any(2), kept.argmax(2), GRID - 3)
        last = np.where(kept.any(2), GRID - 3 - kept[:, :, ::-1].argmax(2), 0)
        lo[i : i + chunk], hi[i : i + chunk] = 2 * grid[first] - 1, 2 * grid[last] - 1
    return lo, hi


def cell(kind: str, delta: float, n: int, runs: int, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    d = simulate(rng, kind, delta, n, runs)
    looks = S.planned_looks(n)
    base, inside = fixed(d, rng)
    results = {"fixed": (base, np.full(runs, n))}
    results["gsd-obf"] = gsd(d, looks, "obrien-fleming")
    results["gsd-pocock"] = gsd(d, looks, "pocock")
    results["cs-betting"] = first_decision(*cs_betting(d), looks)
    results["cs-normal"] = first_decision(*cs_normal(d), looks)
    out = {}
    for name, (dec, used) in results.items():
        wrong = (dec != 0) & (dec != 2) if delta == 0 else (dec == -1) | ((dec == 2) & (delta >= D))
        agree = np.where(dec == 2, inside, dec == base)
        out[name] = {
            "wrong": float(wrong.mean()),
            "a": float((dec == 1).mean() if delta else (np.isin(dec, (1, -1))).mean()),
            "nd": float((dec == 2).mean()),
            "agree": float(agree.mean()),
            "tasks": float(used.mean() / n),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=57)
    a = ap.parse_args()
    t0 = time.monotonic()
    rows = {}
    for kind in KINDS:
        for n in SIZES:
            for delta in DELTAS:
                seed = a.seed + 1000 * KINDS.index(kind) + 10 * n + int(delta * 100)
                rows[kind, n, delta] = cell(kind, delta, n, a.reps, seed)
    print(f"{a.reps} runs per cell, {time.monotonic() - t0:.0f} s; D = {D}, α = {ALPHA}\n")
    print("| design | wrong (max over cells) | FPR at δ = 0 (max) | agree with fixed (min, δ ≥ 0.1) "
          "| tasks at δ = 0.2 where fixed power ≥ 0.9 (mean) | tasks over all cells (mean) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in DESIGNS:
        vals = [rows[k][name] for k in rows]
        fpr = max(rows[k][name]["a"] for k in rows if k[2] == 0)
        big = [k for k in rows if k[2] == 0.2 and rows[k]["fixed"]["a"] >= 0.9]
        agree = min(rows[k][name]["agree"] for k in rows if k[2] >= 0.1)
        saved = np.mean([rows[k][name]["tasks"] for k in big])
        print(f"| {name} | {max(v['wrong'] for v in vals):.3f} | {fpr:.3f} | {agree:.3f} | {saved:.2f} | "
              f"{np.mean([v['tasks'] for v in vals]):.2f} |")  # fmt: skip
    print("\n| rewards | N | δ | fixed: A better | no diff ≥ D | gsd-obf: A better | no diff ≥ D | agree | "
          "tasks (share of fixed) | cs-betting: A better | tasks |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (kind, n, delta), r in rows.items():
        f, g, c = r["fixed"], r["gsd-obf"], r["cs-betting"]
        print(f"| {kind} | {n} | {delta:g} | {f['a']:.3f} | {f['nd']:.3f} | {g['a']:.3f} | {g['nd']:.3f} | "
              f"{g['agree']:.3f} | {g['tasks']:.2f} | {c['a']:.3f} | {c['tasks']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
