"""The steps benchmarks/coverage.py prints beside the paired pass/fail cells (`--part paired-exact`, issue
51): the coverages an interval of the discordant counts (b A-only, c B-only tasks) can have, checked on
cases small enough to count by hand."""

from __future__ import annotations

import importlib.util
import itertools
import re
from collections import Counter
from math import comb
from pathlib import Path

import numpy as np
import pytest

from evalkit.analysis import intervals as I

_SPEC = importlib.util.spec_from_file_location(
    "coverage_bench", Path(__file__).resolve().parents[2] / "benchmarks" / "coverage.py"
)
C = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(C)


def test_six_discordant_tasks_step_only_where_all_six_go_one_way():
    # Every task discordant, equal models: b ~ Binomial(6, 1/2), c = 6 − b. An interval that holds its
    # estimate misses 0 on a down-set of c > b ({(0, 6)}, then + (1, 5), + (2, 4): 1, 7, 22 of 64) and on
    # its mirror, so the misses can be 0, 1, 2, 7, 8, 14, … of 64: the only coverage in 93–97% is
    # 1 − 2/64 (both all-six cases missed), the exact test's, and the step below it is 1 − 7/64.
    grid = np.zeros((7, 7))
    for b in range(7):
        grid[b, 6 - b] = comb(6, b) / 64
    at = np.arange(7)
    masses = C.miss_masses(grid, at + 1, np.full(7, 7), at - 1)
    got = sorted(set(np.round(np.flatnonzero(masses) * C.STEP_RES * 64, 2)))
    assert got[:7] == [0, 1, 2, 7, 8, 14, 22]
    assert C.step_pair(C.reachable(masses)) == pytest.approx((1 - 2 / 64, 1 - 2 / 64), abs=1e-4)


def test_tests_of_level_five_percent_at_six_tasks():
    # Besides rejecting nothing, two tests of (b, c) hold 5% at every discordance rate q: the exact
    # sign-flip test (all six one way: 2 (q/2)^6) and the one that also rejects five to none with a tie,
    # whose size q^5 (3/8 − 11q/32) peaks at q = 10/11 at 0.0388. Five to one (7/64 each way at q = 1) or
    # four to none (its size passes 5%) would not.
    sizes = C.level_tests(6, [1.0, 10 / 11])
    assert len(sizes) == 3
    assert sorted(sizes[:, 0]) == pytest.approx([0, 2 / 64, 2 / 64])
    assert sorted(sizes[:, 1])[-1] == pytest.approx((10 / 11) ** 5 * (3 / 8 - 10 / 32), abs=1e-9)


def test_the_exact_sign_test_of_the_counts_is_evalkits_sign_flip_p():
    tabs, ya, yb = C.count_tables(10)
    assert C.sign_test_p(tabs[:, 1], tabs[:, 2]) == pytest.approx(I.sign_flip_p_rows(ya - yb))


def test_near_a_bound_one_interval_for_every_mean_cannot_step_into_93_to_97():
    # Six tasks, a true difference of 0.05 at a mean of 0.95: at this cell alone some interval of (b, c)
    # could cover 93–97%, but none that also covers ≥ 93% at means 0.5 and 0.9 (the same Δ, the same
    # interval): the default's 100% there is forced by the counts.
    n, delta = 6, 0.05
    tabs, _, _ = C.count_tables(n)
    p = C.sign_test_p(tabs[:, 1], tabs[:, 2])
    grid = np.zeros((n + 1, n + 1))
    np.add.at(grid, (tabs[:, 1], tabs[:, 2]), C.table_probs(tabs, 0.95, delta))
    alone = C.step_pair(C.reachable(C.miss_masses(grid, **C.bounds_of_sets(n, delta, tabs, p, False))))
    assert 0.93 <= alone[0] <= 0.97
    joint = C.joint_steps(n, delta, tabs, p, False)
    assert joint[C.MEANS.index(0.95)][0] is None
    assert joint[C.MEANS.index(0.95)][1] > 0.97


def test_the_step_search_finds_every_pair_of_miss_sets_a_brute_force_finds():
    # Four tasks, random (b, c) probabilities, Δ = 0.1: every down-set below the estimate's Δ and every
    # up-set above it, found by trying all subsets, against `miss_masses` (to its 1e-5 units) and
    # `down_sets`.
    rng = np.random.default_rng(3)
    n, delta = 4, 0.1
    cells = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    grid = np.zeros((n + 1, n + 1))
    for b, c in cells:
        grid[b, c] = rng.random()
    grid /= grid.sum()

    def closed(s: set, step: tuple) -> bool:
        return all((b + step[0], c) in s or not 0 <= b + step[0] <= n - c for b, c in s) and all(
            (b, c + step[1]) in s or not 0 <= c + step[1] <= n - b for b, c in s
        )

    def family(pool: list, step: tuple) -> list[float]:
        subsets = itertools.chain.from_iterable(itertools.combinations(pool, k) for k in range(len(pool) + 1))
        return [sum(grid[x] for x in s) for s in map(set, subsets) if closed(s, step)]

    low = family([x for x in cells if x[0] - x[1] < n * delta], (-1, 1))
    high = family([x for x in cells if x[0] - x[1] > n * delta], (1, -1))
    brute = sorted({round(a + b, 4) for a in low for b in high if a + b <= 0.499})
    tabs = np.array([(0, b, c, n - b - c) for b, c in cells])
    lim = C.bounds_of_sets(n, delta, tabs, np.ones(len(tabs)), False)
    found = sorted(
        {round(x, 4) for x in np.flatnonzero(C.miss_masses(grid, **lim)) * C.STEP_RES if x <= 0.499}
    )
    assert len(found) == len(brute)
    assert np.allclose(found, brute, atol=2e-4)
    got = C.down_sets(grid[..., None], lim["low_from"], lim["low_within"], np.array([9.0]))[:, 0]
    assert sorted(got) == pytest.approx(sorted(low))


def test_equal_tails_and_the_test_leave_no_coverage_under_the_floor():
    # Eight tasks, one pass/fail episode a side, mean 0.5, Δ 0.1, every table of counts weighed. An interval
    # that agrees with the test can lie wholly above Δ only where the test says A is higher and the estimate
    # is above Δ; with equal tails its upper end misses on a down-set of mass ≤ 2.5%. Every such down-set
    # leaves at least the floor: 97.5% less the tables A's rejections lift (0.15%), so above 97% is
    # forced here. evalkit's own interval is one such (it lies above Δ on no other table, its upper end
    # misses in 1.5%), so it covers at least that least coverage.
    n, delta = 8, 0.1
    tabs, ya, yb = C.count_tables(n)
    p = C.sign_test_p(tabs[:, 1], tabs[:, 2])
    est = (tabs[:, 1] - tabs[:, 2]) / n
    pr = C.table_probs(tabs, 0.5, delta)
    lifted = (p < I.ALPHA) & (est > delta)
    assert pr @ lifted == pytest.approx(0.0015, abs=2e-4)
    floor = 0.975 - pr @ lifted
    least = C.equal_tail_least(n, delta, tabs, p, pr)
    assert floor - 1e-12 <= least <= floor + 0.005
    assert least > 0.97

    share = I.mover_share(True)
    lo, hi = I.agree_rows(*I.paired_bounds(ya - yb, ya, yb, C.PAIRED_METHODS[0], share=share), p, est)
    assert not ((lo > delta + 1e-12) & ~lifted).any()
    assert pr @ (hi < delta - 1e-12) <= 0.025
    assert pr @ ((lo <= delta + 1e-12) & (hi >= delta - 1e-12)) >= least - 1e-12


def test_the_floor_of_simulated_runs_takes_off_only_a_rejection_for_a_above_the_truth():
    # Four runs at Δ 0.1: A's rejection above Δ (lifted), A's rejection below Δ, no rejection above Δ, B's
    # rejection: only the first can put an agreeing interval wholly above Δ.
    p, est = np.array([0.01, 0.01, 0.5, 0.01]), np.array([0.2, 0.05, 0.3, -0.2])
    assert C.equal_tail_floor(p, est, 0.1) == pytest.approx(0.975 - 0.25)


def test_the_exact_tables_weigh_each_count_by_its_closed_form_probability():
    # At a mean of 0.5 the tasks' θ is uniform (Beta(1, 1)) and B's is max(θ − s, 0), so the true A − B is
    # E[min(θ, s)] = s − s²/2: s = 1 − √(1 − 2Δ), and a task is passed by both with probability
    # ∫ₛ¹ θ (θ − s) dθ = 1/3 − s/2 + s³/6, by A alone ½ − that, by B alone (1 − s)²/2 − that.
    delta = 0.1
    s = 1 - np.sqrt(1 - 2 * delta)
    assert C.exact_shift(0.5, delta) == pytest.approx(s, abs=1e-12)
    both = 1 / 3 - s / 2 + s**3 / 6
    cells = [both, 0.5 - both, (1 - s) ** 2 / 2 - both]
    tabs, _, _ = C.count_tables(4)
    want = [comb(4, t[0]) * comb(4 - t[0], t[1]) * comb(4 - t[0] - t[1], t[2])
            * np.prod(np.array([*cells, 1 - sum(cells)]) ** t) for t in tabs]  # fmt: skip
    assert C.table_probs(tabs, 0.5, delta) == pytest.approx(want, abs=1e-12)
    assert C.discordance(0.5) == pytest.approx(1 / 3, abs=1e-12)  # 2 E[θ(1 − θ)], θ uniform


@pytest.mark.parametrize("mean", [0.5, 0.95])
def test_lost_cells_exactly_agree_with_the_runs_they_stand_for(mean):
    # Design "lost", pass/fail: a task's difference is −1, −½, 0, ½ or 1. Its exact distribution has mean
    # Δ (each cell's does), is symmetric for equal models, and matches the simulated runs' frequencies;
    # the floor from every table of ten tasks matches the floor of 20,000 simulated runs.
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    _, equal = C.lost_task_probs(mean, 0.0)
    assert equal == pytest.approx(equal[::-1], abs=1e-10)
    delta = 0.05
    s, q = C.lost_task_probs(mean, delta)
    assert q @ values == pytest.approx(delta, abs=1e-9)
    runs = 20_000
    d, d_test, *_ = C.paired_values(np.random.default_rng(7), "b", mean, 10, "lost", s, runs)
    seen = np.array([(d == v).mean() for v in values])
    assert (np.abs(seen - q) <= 4 * np.sqrt(q * (1 - q) / (10 * runs)) + 1e-4).all()
    p = I.sign_flip_p_rows(d_test)
    simulated = C.equal_tail_floor(p, d.mean(1), delta)
    lifted = 0.975 - simulated
    exact = C.lost_exact_floor(mean, 10, delta)
    assert exact == pytest.approx(simulated, abs=4 * np.sqrt(lifted * (1 - lifted) / runs) + 1e-4)


_MARKS = {  # the full table's reasons a cell lies above 97%, by what its default column says
    "agreeing with the test no step": "steps, agreeing with the test",
    "no step in 93–97%": "steps",
    "equal tails:": "equal tails",
    "wide by the method": "wide by the method",
}


def _full_table_cells(docs: str) -> list[tuple[tuple[str, ...], float, str | None]]:
    """(rewards, mean, tasks, design, Δ), its best figure (the exact one, else the last re-measured, else
    the first) and its mark, for every cell of docs/statistics.md's full paired table with Δ > 0."""
    start = docs.index("### The full paired table")
    rows = [r for r in docs[start : docs.index("\n## ", start)].splitlines() if r.startswith("| pass/fail")
            or r.startswith("| continuous")]  # fmt: skip
    number = r"(\d\.\d+)"
    cells = []
    for r in rows:
        col = [c.strip() for c in r.strip("|").split("|")]
        if float(col[4]) == 0:
            continue
        exact = re.search(f"exact {number}", col[5])
        again = re.findall(f"(?:8,000 runs|other draws): {number}", col[5])
        best = float(exact[1] if exact else again[-1] if again else re.match(number, col[5])[1])
        mark = next((m for key, m in _MARKS.items() if key in col[5]), None)
        cells.append((tuple(col[:5]), best, mark))
    return cells


def test_every_cell_of_the_full_table_above_97_percent_says_why_and_the_docs_count_them_right():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "statistics.md").read_text()
    cells = _full_table_cells(docs)
    assert len(cells) == 288
    over = [(cell, mark) for cell, best, mark in cells if best > 0.97]
    assert [cell for cell, mark in over if mark is None] == []
    assert sum(0.93 <= best <= 0.97 for _, best, _ in cells) == 216
    assert [cell for cell, best, _ in cells if best < 0.93] == []
    kinds = Counter(mark for _, mark in over)
    assert kinds == {"steps": 10, "steps, agreeing with the test": 2, "equal tails": 47,
                     "wide by the method": 13}  # fmt: skip
    said = "216 in 93–97%, none under, 72 over —\n10, 2, 47 and 13 of those kinds"
    assert said in docs and "covers 93–97% in 216\n  of the 288 cells" in docs
