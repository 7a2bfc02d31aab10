"""The smallest detectable difference and `plan` are the sign-flip test's (evalkit.analysis.power): checked
against the test itself (`stats.sign_flip_p`) on simulated runs, not against the formula they use
(CONVENTIONS §15). Each of these failed on the paired t-test's MDE and sample size they replace."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import evalkit as ek
from evalkit import analysis as A
from evalkit.analysis import power, report, stats
from tests.analysis.test_issue40 import episodes


def test_each_runs_threshold_is_where_the_sign_flip_test_starts_to_reject():
    rng = np.random.default_rng(0)
    for n in (6, 9, 12, 14):
        e = rng.normal(0, 1, (15, n))
        signs, exact = power._signs(n, rng)
        th = power._thresholds(e, signs, exact, 0.05)
        for k in range(15) if exact else ():
            assert stats.sign_flip_p(e[k] + th[k] - 1e-6) >= 0.05 > stats.sign_flip_p(e[k] + th[k] + 1e-6)
            assert (e[k] + th[k] + 1e-6).mean() > 0


def _pair(rows_a: np.ndarray, rows_b: np.ndarray) -> pl.DataFrame:
    """Two models' episodes: rows_x[i, j] is task i's repeat j."""
    rows = [(m, f"t{i}", float(x), j) for m, y in (("A", rows_a), ("B", rows_b))
            for i, r in enumerate(y) for j, x in enumerate(r)]  # fmt: skip
    return episodes(rows)


def test_compare_prints_the_mde_of_its_per_task_values():
    rng = np.random.default_rng(4)
    th = rng.beta(1.8, 0.2, 20)
    a = (rng.random((20, 3)) < th[:, None]).astype(float)
    b = (rng.random((20, 3)) < th[:, None]).astype(float)
    row = ek.compare(_pair(a, b), "A", "B", by=None).row(0, named=True)
    ya, yb = a.mean(1), b.mean(1)
    reps = np.full(20, 3)
    assert row["mde"] == power.detectable(ya - yb, (ya + yb) / 2, reps, reps, True, 0.05, 0)


def test_the_printed_mde_has_80_percent_power_at_six_continuous_tasks():
    # Equal models print an MDE; had the true difference been that MDE, how often would the test say so? At
    # six tasks it rejects only when all six differences are positive, so with normal differences of SD σ
    # the power at δ is Φ(δ/σ)⁶ exactly (checked against the test below). The t-test's MDE: about 62%.
    rng = np.random.default_rng(6)
    sd = 0.1 * math.sqrt(2)
    powers = []
    for _ in range(120):
        base = rng.uniform(0.2, 0.8, 6)[:, None]
        a, b = base + rng.normal(0, 0.1, (6, 1)), base + rng.normal(0, 0.1, (6, 1))
        mde = ek.compare(_pair(a, b), "A", "B", by=None)["mde"][0]
        powers.append((0.5 * (1 + math.erf(mde / sd / math.sqrt(2)))) ** 6)
    assert 0.74 <= np.mean(powers) <= 0.86
    d = np.array([0.3, 0.1, 0.2, 0.05, 0.4, 0.01])
    assert stats.sign_flip_p(d) < 0.05 <= stats.sign_flip_p(d * [1, 1, 1, 1, 1, -1])


def test_the_printed_mde_has_80_percent_power_for_pass_fail_rewards_near_a_ceiling():
    # 20 tasks × 3 repeats, success rates around 0.9: the t-test's MDE had 39% power here, since the spread
    # of equal models' differences understates the spread a real difference brings.
    rng = np.random.default_rng(9)
    hits, runs = 0, 40
    reps = np.full(20, 3)
    for i in range(runs):
        th = rng.beta(1.8, 0.2, 20)
        ya, yb = (rng.random((20, 3)) < th[:, None]).mean(1), (rng.random((20, 3)) < th[:, None]).mean(1)
        mde = power.detectable(ya - yb, (ya + yb) / 2, reps, reps, True, 0.05, i)  # as compare calls it
        th = rng.beta(1.8, 0.2, 20)
        tb = np.clip(th - mde / 0.97, 0, 1)  # mean θ − clip(θ − s) over Beta(1.8, 0.2) is 0.97 s here
        d = (rng.random((20, 3)) < th[:, None]).mean(1) - (rng.random((20, 3)) < tb[:, None]).mean(1)
        hits += stats.sign_flip_p(d, seed=i) < 0.05 and d.mean() > 0
    assert 0.6 <= hits / runs <= 0.97


def test_an_mde_out_of_reach_says_so():
    # Six pass/fail tasks, one repeat: the test rejects only if A succeeds and B fails on all six, which no
    # success rates but 1 and 0 make 80% likely. No number: "beyond the reward range".
    c = ek.compare(_pair(np.array([[1.0]] * 3 + [[0.0]] * 3), np.zeros((6, 1))), "A", "B", by=None)
    row = c.row(0, named=True)
    assert row["n_tasks"] == 6 and row["ci_low"] is not None and row["mde"] is None
    assert "beyond the reward range" in A.format_compare(c)
    df = _pair(np.array([[1.0]] * 3 + [[0.0]] * 3), np.zeros((6, 1)))
    assert "beyond the reward range" in report.headline_html(df, "A", "B")
    assert A.tables.mde_text(None, 3) == "too few tasks"


def test_plan_sizes_for_the_sign_flip_test_by_hand():
    # Differences of SD σ, δ = 1.5σ. The t-test's formula gives 6 tasks ((t₅ + t₅,₀.₈)² / 1.5² = 5.4), but at
    # six tasks the sign-flip test rejects only when all six differences are positive: Φ(1.5)⁶ = 0.66.
    sd = 0.2
    z = np.array([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5] * 4)
    d = z / z.std(ddof=1) * sd
    rows = [("A", f"t{i}", 0.5 + x, 0) for i, x in enumerate(d)] + [("B", f"t{i}", 0.5, 0) for i in range(28)]
    p = ek.plan(episodes(rows), "A", "B", delta=1.5 * sd)
    assert p["var_diff_pilot"][0] == pytest.approx(sd**2)
    need = p["n_tasks"][0]
    assert (0.5 * (1 + math.erf(1.5 / math.sqrt(2)))) ** 6 == pytest.approx(0.66, abs=0.005) and need >= 7
    # The count it gives reaches 80% with the test itself; one task fewer does not (by more than noise).
    rng = np.random.default_rng(1)
    for n, lo, hi in ((need, 0.77, 1.0), (need - 1, 0.0, 0.83)):
        sims = rng.normal(1.5 * sd, sd, (600, n))
        hits = np.mean([stats.sign_flip_p(x) < 0.05 and x.mean() > 0 for x in sims])
        assert lo <= hits <= hi, (n, hits)
