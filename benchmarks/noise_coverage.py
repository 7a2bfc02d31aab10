"""Coverage of `ek.noise`'s intervals, and whether its "difference needed" holds, on simulated runs.

    PYTHONPATH=. python benchmarks/noise_coverage.py              # 300 runs per cell, a few minutes
    PYTHONPATH=. python benchmarks/noise_coverage.py --reps 1000  # the table in docs/statistics.md

Each run has `n` tasks; task i has a true success rate (pass/fail) or mean reward (continuous) θ_i drawn
from a Beta with mean `mu` and concentration `kappa` (so the intraclass correlation of pass/fail rewards
is 1 / (kappa + 1)), and `r` repeats: Bernoulli(θ_i), or a Beta with mean θ_i and concentration 8. The true
values: flip rate E[2 θ (1 − θ)] (pass/fail), within-task variance E[var of a repeat], between-task
variance var(θ), ICC their ratio. Columns: the share of runs whose 95% interval holds the true value
(`flip`, `within`, `between`, `icc`, `diff`: the difference needed, from the true within variance), each
over the runs that show one; `alpha`: how often two fresh single runs of the same model (one episode per
task) differ by more than the difference needed the run printed (5% is its promise; it varies with the
estimate: its mean over runs). Monte Carlo standard error of a 95% coverage over 300 runs: 1.3 points.

Also printed, to justify the choice: the coverage the normal-theory intervals would have had (the F
interval of the ICC, the χ² interval of the within variance), which assume normal rewards.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import polars as pl
from scipy import stats as sps

from evalkit.analysis.noise import between_and_icc, noise
from evalkit.analysis.stats import MIN_TASKS, Z_975

CELLS = [  # (rewards, n tasks, repeats, mean, kappa)
    ("pass/fail", 10, 2, 0.5, 2.0), ("pass/fail", 10, 4, 0.5, 2.0), ("pass/fail", 30, 2, 0.5, 2.0),
    ("pass/fail", 30, 4, 0.7, 2.0), ("pass/fail", 50, 4, 0.5, 1.0), ("pass/fail", 100, 4, 0.6, 3.0),
    ("pass/fail", 30, 4, 0.9, 2.0), ("continuous", 10, 3, 0.5, 2.0), ("continuous", 30, 4, 0.3, 3.0),
    ("continuous", 100, 2, 0.6, 2.0),
]  # fmt: skip
SPREAD = 8.0
"""Concentration of a continuous repeat's Beta about its task's mean."""


def truth(kind: str, mu: float, kappa: float) -> dict:
    a, b = mu * kappa, (1 - mu) * kappa
    var_theta = a * b / ((a + b) ** 2 * (a + b + 1))
    e_pq = mu * (1 - mu) - var_theta  # E[θ(1 − θ)]
    within = e_pq if kind == "pass/fail" else e_pq / (SPREAD + 1)
    return {"flip": 2 * e_pq if kind == "pass/fail" else None, "within": within, "between": var_theta,
            "icc": var_theta / (var_theta + within)}  # fmt: skip


def draw(rng: np.random.Generator, kind: str, n: int, r: int, mu: float, kappa: float) -> tuple:
    """(rewards, n × r; the tasks' true θ)."""
    theta = rng.beta(mu * kappa, (1 - mu) * kappa, size=n)
    theta = np.clip(theta, 1e-6, 1 - 1e-6)
    return repeat(rng, kind, theta, r), theta


def repeat(rng: np.random.Generator, kind: str, theta: np.ndarray, r: int) -> np.ndarray:
    if kind == "pass/fail":
        return (rng.random((len(theta), r)) < theta[:, None]).astype(float)
    t = theta[:, None] * np.ones((len(theta), r))
    return rng.beta(t * SPREAD, (1 - t) * SPREAD)


def frame(y: np.ndarray) -> pl.DataFrame:
    n, r = y.shape
    return pl.DataFrame({
        "model": ["m"] * (n * r), "env": ["e"] * (n * r), "surface": [""] * (n * r), "mode": [""] * (n * r),
        "task_id": [f"t{i}" for i in range(n) for _ in range(r)], "skin": [None] * (n * r),
        "reward": y.reshape(-1), "scored": [True] * (n * r),
    }, schema_overrides={"skin": pl.Utf8})  # fmt: skip


def normal_theory(y: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """The F interval of ICC(1) and the χ² interval of the within variance (balanced, normal rewards)."""
    n, r = y.shape
    m = y.mean(axis=1)
    msw = ((y - m[:, None]) ** 2).sum() / (n * (r - 1))
    msb = r * ((m - m.mean()) ** 2).sum() / (n - 1)
    f = msb / msw if msw > 0 else np.inf
    fl, fu = f / sps.f.ppf(0.975, n - 1, n * (r - 1)), f * sps.f.ppf(0.975, n * (r - 1), n - 1)
    icc = ((fl - 1) / (fl + r - 1), (fu - 1) / (fu + r - 1))
    dof = n * (r - 1)
    within = (dof * msw / sps.chi2.ppf(0.975, dof), dof * msw / sps.chi2.ppf(0.025, dof))
    return icc, within


def bca(y: np.ndarray, rng: np.random.Generator, n_boot: int = 1000) -> tuple:
    """Efron's bias-corrected and accelerated intervals of σ²_b and the ICC (the alternative to the
    percentile intervals `noise` gives): the percentiles moved by the bootstrap's median bias and the
    jackknife's skew."""
    k, r = y.shape
    m, v, n = y.mean(axis=1), y.var(axis=1, ddof=1), np.full(k, float(r))
    idx = rng.integers(0, k, size=(n_boot, k))
    boot = between_and_icc(m[idx], v[idx], n[idx])
    keep = ~np.eye(k, dtype=bool)
    jack = between_and_icc(*(np.broadcast_to(x, (k, k))[keep].reshape(k, k - 1) for x in (m, v, n)))
    est = between_and_icc(m[None, :], v[None, :], n[None, :])
    out = []
    for b, j, e in zip(boot, jack, est, strict=True):
        b, j = b[np.isfinite(b)], j[np.isfinite(j)]
        below = (np.sum(b < e[0]) + 0.5 * np.sum(b == e[0])) / max(len(b), 1)
        z0 = sps.norm.ppf(min(max(below, 1e-6), 1 - 1e-6))
        d = j.mean() - j
        den = 6 * float((d**2).sum()) ** 1.5
        a = float((d**3).sum()) / den if den > 0 else 0.0
        qs = [
            sps.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
            for z in (sps.norm.ppf(0.025), sps.norm.ppf(0.975))
        ]
        out.append(tuple(float(np.quantile(b, q)) if len(b) else math.nan for q in qs))
    return out[0], out[1]


def run_cell(kind: str, n: int, r: int, mu: float, kappa: float, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tv = truth(kind, mu, kappa)
    hits: dict[str, list[bool]] = {k: [] for k in ("flip", "within", "between", "icc", "diff", "F icc",
                                                     "chi2 within", "BCa betw", "BCa icc")}  # fmt: skip
    alpha = []
    true_diff = Z_975 * math.sqrt(2 * tv["within"] / n)
    for _ in range(reps):
        y, theta = draw(rng, kind, n, r, mu, kappa)
        row = noise(frame(y), n_boot=1000).row(0, named=True)
        for name, lo, hi in (("flip", "flip_low", "flip_high"), ("within", "within_low", "within_high"),
                             ("between", "between_low", "between_high"), ("icc", "icc_low", "icc_high"),
                             ("diff", "diff_low", "diff_high")):  # fmt: skip
            want = true_diff if name == "diff" else tv[name]
            if want is not None and row[lo] is not None:
                hits[name].append(row[lo] <= want <= row[hi])
        if n >= MIN_TASKS:
            (blo, bhi), (ilo, ihi) = bca(y, rng)
            hits["BCa betw"].append(blo <= tv["between"] <= bhi)
            hits["BCa icc"].append(ilo <= tv["icc"] <= ihi)
        (ilo, ihi), (wlo, whi) = normal_theory(y)
        hits["F icc"].append(ilo <= tv["icc"] <= ihi)
        hits["chi2 within"].append(wlo <= tv["within"] <= whi)
        # Two fresh single runs of the same model: how often do they differ by more than what was printed?
        pairs = [repeat(rng, kind, theta, 2) for _ in range(100)]  # two fresh single runs, the same tasks
        alpha.append(float(np.mean([abs((p[:, 0] - p[:, 1]).mean()) > row["diff_needed"] for p in pairs])))
    out = {k: (float(np.mean(v)) if v else None) for k, v in hits.items()}
    out["alpha"] = float(np.mean(alpha))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    t0 = time.perf_counter()
    cols = [
        "flip",
        "within",
        "between",
        "icc",
        "diff",
        "alpha",
        "BCa betw",
        "BCa icc",
        "F icc",
        "chi2 within",
    ]
    print(f"{'rewards':<11}{'n':>4}{'r':>3}{'mean':>6}{'ICC':>6}  " + "".join(f"{c:>12}" for c in cols))
    for i, (kind, n, r, mu, kappa) in enumerate(CELLS):
        res = run_cell(kind, n, r, mu, kappa, args.reps, seed=1000 + i)
        icc = truth(kind, mu, kappa)["icc"]
        cells = "".join(f"{'–' if res[c] is None else f'{res[c]:.3f}':>12}" for c in cols)
        print(f"{kind:<11}{n:>4}{r:>3}{mu:>6.2f}{icc:>6.2f}  {cells}", flush=True)
    print(f"({args.reps} runs per cell; {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
