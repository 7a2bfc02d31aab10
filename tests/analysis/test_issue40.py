"""Issue 40: the verdict follows the test, a task is a task, intervals that cover, and what comes next
(pass@k, pass^k, plan, Holm, non-inferiority). Each defect's test failed on the code before the issue; each
new function is checked against a hand computation or an independent one (CONVENTIONS §15)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import polars as pl
import pytest

import evalkit as ek
from evalkit import analysis as A
from evalkit.analysis import report, stats


def episodes(rows: list[tuple]) -> pl.DataFrame:
    """An episode frame from (model, task, reward, repeat[, skin[, tier]]) rows, every reward scored."""
    out = []
    for r in rows:
        model, task, reward, repeat = r[:4]
        skin = r[4] if len(r) > 4 else None
        tier = r[5] if len(r) > 5 else "easy"
        out.append(
            {
                "model": model,
                "env": "canvas",
                "surface": "reference",
                "mode": "tools",
                "task_id": task,
                "skin": skin,
                "repeat": repeat,
                "tier": tier,
                "reward": reward,
                "scored": reward is not None,
                "error_class": None,
                "key": f"{model}/{task}/{skin}/{repeat}",
                "n_turns": 1,
                "tool_calls": 0,
                "tool_errors": 0,
                "parse_errors": 0,
                "tokens": 0,
                "reasoning_tokens": 0,
                "reasoning_chars": 0,
                "cost_usd": 0.01,
                "seconds": 1.0,
                "source": "evalkit",
            }  # fmt: skip
        )
    schema = {"reward": pl.Float64, "skin": pl.Utf8, "error_class": pl.Utf8, "cost_usd": pl.Float64}
    df = pl.DataFrame(out, schema_overrides=schema)
    # The other columns of a loaded frame, empty: what the text summaries read beside the rewards.
    return df.with_columns(
        pl.lit(None, dtype).alias(c) for c, dtype in A.EPISODE_SCHEMA.items() if c not in df.columns
    )


# ------------------------------------------------------------------ defects


def test_the_headline_does_not_say_higher_while_p_is_above_alpha():
    # Six tasks, A = 1,1,1,0,0,0 against B = 0: the exact sign-flip p is 0.25, and the old percentile CI
    # [+0.167, +0.833] excluded 0, so the report said "A scores higher".
    df = episodes(
        [("A", f"t{i}", float(i < 3), 0) for i in range(6)] + [("B", f"t{i}", 0.0, 0) for i in range(6)]
    )
    row = ek.compare(df, "A", "B", by=None).row(0, named=True)
    assert row["p_value"] == pytest.approx(0.25)
    assert row["ci_low"] <= 0 <= row["ci_high"]
    head = report.headline_html(df, "A", "B")
    assert "scores higher" not in head and "No clear difference" in head


def test_the_interval_excludes_zero_exactly_when_the_test_rejects():
    rng = np.random.default_rng(4)
    for n in (6, 8, 12, 16, 17, 30):
        for _ in range(25):
            d = rng.normal(rng.uniform(-0.3, 0.3), 0.3, n)
            if rng.random() < 0.3:
                d = np.round(d)  # pass/fail-like: ties and repeated values
            lo, hi, p = stats.sign_flip_interval(d)
            assert (p < 0.05) == (lo > 0 or hi < 0), (n, d, lo, hi, p)
            assert p == pytest.approx(stats.sign_flip_p(d))


def test_the_inverted_interval_is_what_brute_force_inversion_gives():
    # An independent inversion: every candidate shift on a fine grid, each tested by full enumeration.
    d = np.array([0.3, -0.1, 0.5, 0.2, 0.0, 0.4, 0.25])
    signs = np.array(list(itertools.product([1, -1], repeat=len(d))))
    kept = [x for x in np.linspace(-1, 1, 4001)
            if (np.abs(signs @ (d - x)) >= abs((d - x).sum()) - 1e-9).mean() >= 0.05]  # fmt: skip
    lo, hi, _ = stats.sign_flip_interval(d)
    assert lo == pytest.approx(min(kept), abs=1e-3) and hi == pytest.approx(max(kept), abs=1e-3)


def test_skins_are_one_task_in_compare():
    # 2 tasks × 3 skins used to be compared as "6 tasks" with a CI and p = 0.031.
    rows = []
    for t, skin in itertools.product(range(2), "xyz"):
        rows += [("A", f"t{t}", 0.9 - 0.05 * "xyz".index(skin), 0, skin), ("B", f"t{t}", 0.45, 0, skin)]
    row = ek.compare(episodes(rows), "A", "B", by=None).row(0, named=True)
    assert row["n_tasks"] == 2 and row["ci_low"] is None and row["p_value"] == pytest.approx(0.5)
    assert row["diff"] == pytest.approx(0.4)


def test_twenty_perfect_tasks_give_an_interval_below_one_and_no_zero_mde():
    df = episodes([("A", f"t{i}", 1.0, 0) for i in range(20)] + [("B", f"t{i}", 1.0, 0) for i in range(20)])
    t = ek.by_tier(df).filter((pl.col("model") == "A") & (pl.col("tier") == "all")).row(0, named=True)
    assert t["ci_low"] < 0.9 and t["ci_high"] > 0.9999
    row = ek.compare(df, "A", "B", by=None).row(0, named=True)
    assert row["ci_low"] < 0 < row["ci_high"] and row["mde"] > 0.05
    assert not A.format_compare(ek.compare(df, "A", "B", by=None)).splitlines()[2].rstrip().endswith("0.000")


def test_constant_continuous_rewards_get_an_interval_of_some_width():
    lo, hi = stats.mean_interval(np.full(20, 0.7), 20, pass_fail=False)
    assert lo < 0.7 < hi and hi - lo > 0.05


def test_perfect_tasks_run_often_are_still_few_tasks():
    # 20 tasks × 3 repeats all at 1.0 gave [0.94, 1]: sixty episodes as if independent. What they show of
    # the tasks not drawn is what 20 tasks show, however often each ran.
    # (Wilson's interval, the default before issue 51; the Bayesian bootstrap's takes tasks only.)
    w = {"method": "wilson"}
    one, three = (
        stats.mean_interval(np.ones(20), 20, True, **w),
        stats.mean_interval(np.ones(20), 60, True, **w),
    )
    assert one[0] == pytest.approx(20 / (20 + stats.Z_975**2)) and one[1] == three[1] == 1
    assert 0.83 < three[0] <= one[0]  # Student's quantile on 59 degrees of freedom: a little wider
    assert stats.mean_interval(np.zeros(20), 60, True, **w) == pytest.approx((0.0, 1 - three[0]))
    assert stats.mean_interval(np.ones(20), 20, True) == stats.mean_interval(np.ones(20), 60, True)


def _exact_coverage(n: int, repeats: int, weights: list[float], truth: float) -> float:
    """The pass/fail tier interval's exact coverage when each of `n` tasks has k of `repeats` successes
    with probability weights[k], every outcome enumerated."""
    hit = 0.0
    for ks in itertools.product(range(repeats + 1), repeat=n):
        lo, hi = stats.mean_interval(np.array(ks) / repeats, n * repeats, True, method="wilson")
        hit += math.prod(weights[k] for k in ks) * (lo <= truth <= hi)
    return hit


def test_pass_fail_intervals_cover_exactly_where_the_lattice_allows():
    # Repeats: tasks whose success rates are uniform (k of 3 successes equally likely, mean 0.5). The normal
    # quantile covered 92.5%, Student's on n − 1 = 5 degrees of freedom 98%.
    assert 0.95 <= _exact_coverage(6, 3, [0.25] * 4, 0.5) <= 0.96
    # One episode per task: a binomial count, whose interval can cover only in steps. At 10 tasks near 0.9
    # the step below 0.987 is 0.930: Wilson's takes it; at 6 tasks no step lies in 93–97%.
    binom = [math.comb(10, k) * 0.9**k * 0.1 ** (10 - k) for k in range(11)]
    got = sum(
        w
        for k, w in enumerate(binom)
        if (lambda lh: lh[0] <= 0.9 <= lh[1])(
            stats.mean_interval(np.array([1.0] * k + [0.0] * (10 - k)), 10, True, method="wilson")
        )
    )
    assert got == pytest.approx(sum(binom[8:]), abs=1e-12)


def test_the_tier_table_and_compare_use_the_same_task_weighted_mean():
    # 4 tasks × 1 repeat at 1 and 4 tasks × 5 repeats at 0, against B = 0.5: A − B was −0.333 in the tier
    # table (episode-weighted) and +0.000 in compare.
    rows = [("A", f"a{i}", 1.0, 0) for i in range(4)]
    rows += [("A", f"b{i}", 0.0, r) for i in range(4) for r in range(5)]
    rows += [("B", t, 0.5, 0) for t in [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]]
    df = episodes(rows)
    tiers = ek.by_tier(df).filter(pl.col("tier") == "all")
    mean = dict(zip(tiers["model"], tiers["mean_reward"], strict=True))
    assert mean["A"] == pytest.approx(0.5)
    assert ek.summarise(df).filter(pl.col("model") == "A")["mean_reward"][0] == pytest.approx(0.5)
    assert ek.compare(df, "A", "B", by=None)["diff"][0] == pytest.approx(mean["A"] - mean["B"]) == 0


def test_pairing_is_by_task_not_by_repeat_number():
    # A's repeats {0, 1} and B's repeat {2} on the same 10 tasks "shared no scored task".
    rows = [("A", f"t{i}", 0.6 + 0.01 * i, r) for i in range(10) for r in (0, 1)]
    rows += [("B", f"t{i}", 0.5, 2) for i in range(10)]
    row = ek.compare(episodes(rows), "A", "B", by=None).row(0, named=True)
    assert row["n_tasks"] == 10 and row["n_unpaired"] == 0 and row["diff"] == pytest.approx(0.145)


def test_above_sixteen_tasks_the_p_is_stable_and_marked_approximate():
    rng = np.random.default_rng(8)
    d = rng.normal(0.06, 0.3, 40)
    ps = [stats.sign_flip_p(d, seed=s) for s in range(8)]
    assert max(ps) - min(ps) < 0.01  # 2,000 flips moved it by ~0.025 here
    assert math.sqrt(0.05 * 0.95 / stats.N_FLIPS) < 0.005
    df = episodes(
        [("A", f"t{i}", 0.5 + x / 4, 0) for i, x in enumerate(d)]
        + [("B", f"t{i}", 0.5, 0) for i in range(40)]
    )
    c = ek.compare(df, "A", "B", by=None)
    assert c["p_exact"][0] is False and "≈" in A.format_compare(c)
    assert "≈" in report.headline_html(df, "A", "B")
    small = ek.compare(df.filter(pl.col("task_id").is_in([f"t{i}" for i in range(10)])), "A", "B", by=None)
    assert small["p_exact"][0] is True and "≈" not in A.format_compare(small).splitlines()[2]


def test_rewards_outside_zero_one_and_nan_rewards():
    df = episodes([("A", f"t{i}", r, 0) for i, r in enumerate([7.5, -3.0, 2.0, 1.0, 0.5, 4.0])])
    t = ek.by_tier(df).filter(pl.col("tier") == "all").row(0, named=True)
    assert t["mean_reward"] == pytest.approx(2.0) and t["ci_low"] < 2.0 < t["ci_high"] and t["ci_high"] <= 7.5
    nan = episodes([("A", f"t{i}", r, 0) for i, r in enumerate([0.5, float("nan"), 0.7])])
    s = ek.summarise(nan).row(0, named=True)
    assert s["nan_reward"] == 1 and s["scored"] == 2 and s["mean_reward"] == pytest.approx(0.6)
    assert "not a number" in A.format_summary(nan)


def test_the_mde_is_the_sign_flip_tests():
    # At 6 tasks the sign-flip test needs all six on one side: its MDE is well above the t-test's (its
    # power: tests/analysis/test_power.py).
    rng = np.random.default_rng(2)
    a = rng.uniform(0.3, 0.7, 6)
    b = a - rng.normal(0.1, 0.2, 6)
    rows = [("A", f"t{i}", x, 0) for i, x in enumerate(a)] + [("B", f"t{i}", x, 0) for i, x in enumerate(b)]
    row = ek.compare(episodes(rows), "A", "B", by=None).row(0, named=True)
    assert row["mde"] > 1.1 * stats.min_detectable(row["sd_diff"], 6)


def test_many_equal_models_rarely_show_a_holm_p_below_alpha():
    rng = np.random.default_rng(1)
    hits_raw = hits_holm = 0
    for _ in range(40):
        tasks = rng.uniform(0.2, 0.8, 20)
        rows = [(m, f"t{i}", float(rng.random() < p), 0) for m in [f"m{j}" for j in range(10)] + ["B"]
                for i, p in enumerate(tasks)]  # fmt: skip
        many = ek.compare_many(episodes(rows), "B")
        hits_raw += bool((many["p_value"] < 0.05).any())
        hits_holm += bool((many["p_holm"] < 0.05).any())
    assert hits_holm <= 4 and hits_holm <= hits_raw


def test_holm_matches_a_hand_computation():
    assert stats.holm([0.01, 0.04, None, 0.03]) == [0.03, 0.06, None, 0.06]
    assert stats.holm([0.2, 0.9]) == [0.4, 0.9] and stats.holm([0.5, 0.9]) == [1.0, 1.0]


# ------------------------------------------------------------------ new functions


def test_pass_at_k_and_pass_hat_k_by_hand():
    # 2 successes in 4 repeats: pass@2 = 1 − C(2,2)/C(4,2) = 5/6, pass^2 = C(2,2)/C(4,2) = 1/6.
    df = episodes([("A", "t0", r, i) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])])
    at = ek.pass_at_k(df, 2).filter(pl.col("tier") == "all").row(0, named=True)
    hat = ek.pass_hat_k(df, 2).filter(pl.col("tier") == "all").row(0, named=True)
    assert at["pass_at_k"] == pytest.approx(5 / 6) and hat["pass_hat_k"] == pytest.approx(1 / 6)
    assert at["ci_low"] is None  # one task: too few for an interval
    # By enumeration of every 2 of the 4 repeats, independently of the formula.
    pairs = list(itertools.combinations([1, 0, 1, 0], 2))
    assert at["pass_at_k"] == pytest.approx(np.mean([max(p) for p in pairs]))
    assert hat["pass_hat_k"] == pytest.approx(np.mean([min(p) for p in pairs]))


def test_pass_at_k_threshold_short_tasks_and_interval():
    rows = [("A", f"t{i}", r, j) for i in range(8) for j, r in enumerate([0.95, 0.2, 0.5])]
    rows += [("A", "short", 1.0, 0)]
    df = episodes(rows)
    at = ek.pass_at_k(df, 2, threshold=0.9).filter(pl.col("tier") == "all").row(0, named=True)
    # 1 success of 3: pass@2 = 1 − C(2,2)/C(3,2) = 2/3 on each of 8 tasks; the 1-repeat task is left out.
    assert at["pass_at_k"] == pytest.approx(2 / 3) and at["n_tasks"] == 8 and at["n_tasks_short"] == 1
    assert at["ci_low"] < 2 / 3 < at["ci_high"]
    assert "pass@k" in A.format_summary(df)


def test_plan_recovers_the_variances_of_a_simulated_pilot():
    rng = np.random.default_rng(0)
    n, r, sb, sw = 400, 4, 0.1, 0.2
    rows = []
    for i in range(n):
        shift = rng.normal(0, sb)
        for j in range(r):
            rows += [
                ("A", f"t{i}", 0.5 + shift + rng.normal(0, sw), j),
                ("B", f"t{i}", 0.5 + rng.normal(0, sw), j),
            ]
    p = ek.plan(episodes(rows), "A", "B", delta=0.05)
    row = p.filter(pl.col("repeats") == 1).row(0, named=True)
    assert row["var_between"] == pytest.approx(sb**2, rel=0.25)
    assert row["var_within"] == pytest.approx(2 * sw**2, rel=0.1)
    assert row["icc"] == pytest.approx(sb**2 / (sb**2 + 2 * sw**2), abs=0.05)
    # At this many tasks the sign-flip test is about the z-test: n ≈ (z₀.₉₇₅ + z₀.₈)² (σ²_b + σ²_w / r) / δ²
    # (plan simulates the test itself, 500 runs per count: a few percent of Monte Carlo error).
    for reps in (1, 3):
        need = p.filter(pl.col("repeats") == reps)["n_tasks"][0]
        z = (stats.Z_975 + stats.Z_80) ** 2 * (row["var_between"] + row["var_within"] / reps) / 0.05**2
        assert 0.95 * z <= need <= 1.08 * z
    from evalkit.analysis.repeats import format_plan

    assert "tasks" in format_plan(p) and "intraclass correlation" in format_plan(p)


def test_plan_power_holds_in_simulation():
    # With the n_tasks plan gives at 1 repeat, the sign-flip test detects δ about 80% of the time.
    rng = np.random.default_rng(3)
    sd = 0.25
    pilot = [("A", f"t{i}", 0.5 + rng.normal(0, sd), 0) for i in range(60)]
    pilot += [("B", f"t{i}", 0.5, 0) for i in range(60)]
    need = ek.plan(episodes(pilot), "A", "B", delta=0.1)["n_tasks"][0]
    est_sd = math.sqrt(ek.plan(episodes(pilot), "A", "B", delta=0.1)["var_diff_pilot"][0])
    hits = sum(stats.sign_flip_p(rng.normal(0.1, est_sd, need), seed=k) < 0.05 for k in range(200))
    assert 0.7 <= hits / 200 <= 0.92


def test_noninferiority_with_a_margin():
    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.7, 40)
    rows = [("A", f"t{i}", float(x), 0) for i, x in enumerate(base)]
    rows += [("B", f"t{i}", float(x - 0.005 + rng.normal(0, 0.01)), 0) for i, x in enumerate(base)]
    c = ek.compare(episodes(rows), "A", "B", by=None, margin=0.03)
    row = c.row(0, named=True)
    # The bound is the 97.5% interval's upper end (one-sided 98.75%), further out than the 95% one's.
    assert row["noninferior"] is True and row["ci_high"] < row["ni_upper"] < 0.03
    c2 = ek.compare(episodes(rows), "A", "B", by=None, margin=0.001)
    assert c2["noninferior"][0] is False
    assert "non-inferior" in A.format_compare(c)
    assert "noninferior" not in ek.compare(episodes(rows), "A", "B", by=None).columns


def test_cost_frontier_draws_points_intervals_and_the_frontier():
    rows = []
    for m, reward in {"cheap": 0.3, "mid": 0.6, "dear": 0.5}.items():
        rows += [(m, f"t{i}", reward + 0.01 * (i % 3), 0) for i in range(8)]
    df = episodes(rows).with_columns(
        pl.col("model").replace_strict({"cheap": 0.01, "mid": 0.05, "dear": 0.2}).alias("cost_usd")
    )
    chart = ek.plots.cost_frontier(df)
    spec = chart.to_dict()
    text = str(spec)
    assert "frontier" in text and "cost" in text
    table = ek.plots.frontier_table(df)
    assert table.filter(pl.col("on_frontier"))["model"].sort().to_list() == ["cheap", "mid"]


# ------------------------------------------------------------------ the CLI


def test_cli_plan_compare_margin_and_summarise_pass_k(tmp_path, capsys):
    from fixtures.synth import make_run

    from evalkit.cli import main

    run = make_run(
        tmp_path / "r", models={"A": 0.6, "B": 0.5}, n_tasks=12, repeats=3, frames=False, unscored=0
    )
    assert main(["plan", str(run), "--a", "A", "--b", "B", "--delta", "0.05"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"3 repeat\(s\) per task: [\d,]+ tasks", out) and "intraclass correlation" in out
    assert main(["compare", str(run), "--a", "A", "--b", "B", "--margin", "0.03"]) == 0
    out = capsys.readouterr().out
    assert "B non-inferior (margin 0.03)" in out and "Paired like with like" in out
    assert main(["summarise", str(run), "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "pass@k" in out and "task-weighted" in out
    assert main(["plan", str(run), "--a", "A", "--b", "B", "--delta", "0"]) == 2
