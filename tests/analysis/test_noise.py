"""`ek.noise` against a hand computation, its intervals' coverage on simulated runs, and where it is shown:
`evalkit noise`, the summary of a run with repeats, the report's section."""

from __future__ import annotations

import json
import math
from fractions import Fraction as Fr

import numpy as np
import polars as pl
import pytest

import evalkit as ek
from evalkit.analysis.noise import format_noise, noise, noise_html
from evalkit.analysis.stats import Z_975, mean_interval
from evalkit.cli import main
from evalkit.records.columns import EPISODE_SCHEMA


def frame(rows: list[tuple]) -> pl.DataFrame:
    """Episodes (model, task, reward, error_class) with every other column of `load_runs` empty."""
    df = pl.DataFrame(
        {
            "model": [r[0] for r in rows], "env": ["e"] * len(rows), "surface": [""] * len(rows),
            "mode": [""] * len(rows), "task_id": [r[1] for r in rows], "reward": [r[2] for r in rows],
            "error_class": [r[3] if len(r) > 3 else None for r in rows],
        },
        schema_overrides={"reward": pl.Float64, "error_class": pl.Utf8},
    )  # fmt: skip
    df = df.with_columns((pl.col("error_class").is_null() & pl.col("reward").is_not_null()).alias("scored"))
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in EPISODE_SCHEMA.items() if c not in df.columns]
    return df.with_columns(missing).select(list(EPISODE_SCHEMA))


HAND = {  # task: pass/fail rewards of its repeats
    "A": [1, 1, 1], "B": [1, 0], "C": [0, 0], "D": [1, 0, 0], "E": [1, 1], "F": [0, 1, 1, 1], "G": [0],
}  # fmt: skip


def test_noise_matches_a_hand_computation():
    rows = [("m", t, float(r)) for t, rs in HAND.items() for r in rs]
    rows.append(("m", "A", None, "endpoint_error"))  # unscored: apart, never a 0
    got = noise(frame(rows)).row(0, named=True)
    # Tasks with two or more repeats: A–F (G has one). Per task: c successes of n; the pairs that disagree
    # 2c(n − c)/(n(n − 1)): A 0, B 1, C 0, D 2·1·2/6 = 2/3, E 0, F 2·3·1/12 = 1/2.
    assert (got["n_tasks"], got["n_tasks_run"], got["threshold"]) == (6, 7, 1.0)
    assert got["repeats"] == pytest.approx(16 / 6)
    assert got["flip_rate"] == pytest.approx(float((1 + Fr(2, 3) + Fr(1, 2)) / 6))  # 13/36
    assert got["tasks_mixed"] == pytest.approx(3 / 6)
    # Unbiased variances s²: B 1/2, D 1/3, F 1/4, the others 0; σ²_w their mean over tasks: 13/72.
    within = (Fr(1, 2) + Fr(1, 3) + Fr(1, 4)) / 6
    assert got["var_within"] == pytest.approx(float(within))
    # Task means 1, 1/2, 0, 1/3, 1, 3/4: their variance 677/4320, less the noise in each mean, mean(s²/n) =
    # (1/4 + 1/9 + 1/16)/6 = 61/864: σ²_b = 31/360; ICC = (31/360) / (31/360 + 13/72) = 31/96.
    between = Fr(677, 4320) - Fr(61, 864)
    assert between == Fr(31, 360) and got["var_between"] == pytest.approx(float(between))
    assert got["icc"] == pytest.approx(31 / 96)
    # Two single runs of the run's 7 tasks: 1.96 · sqrt(2 · 13/72 / 7).
    assert got["diff_needed"] == pytest.approx(Z_975 * math.sqrt(2 * float(within) / 7))
    flips = np.array([0, 1, 0, 2 / 3, 0, 1 / 2])
    assert (got["flip_low"], got["flip_high"]) == pytest.approx(mean_interval(flips, 16))
    lo, hi = mean_interval(np.array([0, 1 / 2, 0, 1 / 3, 0, 1 / 4]), 16)
    assert (got["within_low"], got["within_high"]) == pytest.approx((lo, hi))
    assert got["diff_low"] == pytest.approx(Z_975 * math.sqrt(2 * lo / 7))
    assert got["between_low"] <= got["var_between"] <= got["between_high"]
    assert got["icc_low"] <= got["icc"] <= got["icc_high"]


def test_few_tasks_no_repeats_and_continuous_rewards():
    few = noise(frame([("m", t, float(r)) for t in "abc" for r in (0, 1)])).row(0, named=True)
    assert few["flip_rate"] == 1.0 and few["flip_low"] is None and few["icc_low"] is None  # below six tasks
    once = noise(frame([("m", t, 1.0) for t in "abcdefg"])).row(0, named=True)
    assert once["n_tasks"] == 0 and once["n_tasks_run"] == 7 and once["diff_needed"] is None
    cont = frame([("m", t, r) for t in "abcdef" for r in (0.2, 0.6)])
    row = noise(cont).row(0, named=True)
    assert row["flip_rate"] is None and row["threshold"] is None  # no success without a threshold
    assert row["var_within"] == pytest.approx(0.08)
    assert noise(cont, threshold=0.5).row(0, named=True)["flip_rate"] == 1.0


def test_two_runs_of_one_model_are_its_repeats():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 20)
    rows = [("m", f"t{i}", float(rng.random() < p[i])) for _ in range(2) for i in range(20)]
    df = frame(rows).with_columns(pl.Series("run", ["r1"] * 20 + ["r2"] * 20))
    got = noise(df).row(0, named=True)
    assert got["n_tasks"] == 20 and got["repeats"] == 2.0
    by_run = noise(df, by=["model", "run"])
    assert by_run["n_tasks"].to_list() == [0, 0]  # each run alone has no repeat


def test_intervals_cover_on_simulated_runs():
    """A small version of benchmarks/noise_coverage.py: 30 pass/fail tasks × 4 repeats, rates from
    Beta(1, 1) (ICC 1/3). The flip rate's and the within variance's intervals hold the truth about 95% of
    the time, and two fresh single runs exceed the printed difference about 5% of the time."""
    rng = np.random.default_rng(11)
    n, r, runs = 30, 4, 150
    true_flip, true_within = 1 / 3, 1 / 6  # E[2θ(1 − θ)] and E[θ(1 − θ)] for θ ~ U(0, 1)
    flip_hit = within_hit = 0
    exceed = []
    for _ in range(runs):
        theta = rng.uniform(0, 1, n)
        y = (rng.random((n, r)) < theta[:, None]).astype(float)
        rows = [("m", f"t{i}", y[i, j]) for i in range(n) for j in range(r)]
        got = noise(frame(rows), n_boot=200).row(0, named=True)
        flip_hit += got["flip_low"] <= true_flip <= got["flip_high"]
        within_hit += got["within_low"] <= true_within <= got["within_high"]
        a = rng.random((50, n)) < theta
        b = rng.random((50, n)) < theta
        exceed.append(float((np.abs((a.astype(float) - b).mean(axis=1)) > got["diff_needed"]).mean()))
    assert 0.90 <= flip_hit / runs <= 0.99 and 0.90 <= within_hit / runs <= 0.99
    assert 0.03 <= float(np.mean(exceed)) <= 0.08


def test_evalkit_noise_and_the_summary_say_it(tmp_path, capsys):
    from tests.records.importers import seed_tau2

    path = seed_tau2.write_results(tmp_path / "airline.json")
    assert main(["noise", str(path)]) == 0
    out = capsys.readouterr().out
    assert "outcomes flip between two runs on 50% of tasks" in out and "must differ by 0.800" in out
    assert main(["summarise", str(path), "--out", str(tmp_path / "s")]) == 0
    assert "How noisy is it" in capsys.readouterr().out
    df = ek.load_runs(path)
    assert "<h2>How noisy is it</h2>" in noise_html(df) and "difference needed" in noise_html(df)
    single = df.filter(pl.col("repeat") == 0)
    assert format_noise(single) == "" and "One repeat per task" in noise_html(single)
    assert main(["noise", str(path), "--threshold", "nan"]) == 2


@pytest.mark.slow
def test_the_report_says_how_noisy_a_run_with_repeats_is(tmp_path):
    from evalkit.analysis import report
    from tests.fixtures.synth import make_run

    run = make_run(tmp_path / "run", models={"m-good": 0.7, "m-bad": 0.3}, n_tasks=8, repeats=2, frames=False)
    html = report.build_report([str(run)], tmp_path / "r.html").read_text()
    assert "How noisy is it" in html and "before they differ at α = 0.05" in html
    assert "Traceback" not in html


def test_a_runs_summary_files_say_how_noisy_it_is_only_with_repeats(tmp_path):
    from evalkit.analysis.summary import write_summary
    from tests.fixtures.synth import make_run

    twice = make_run(
        tmp_path / "twice", models={"m-good": 0.7, "m-bad": 0.3}, n_tasks=8, repeats=2, frames=False
    )
    data = write_summary(twice)
    on_disk = json.loads((twice / "summary.json").read_text())
    assert on_disk["noise"] == data["noise"] and {r["model"] for r in data["noise"]} == {"m-good", "m-bad"}
    assert all(r["n_tasks"] >= 7 and r["repeats"] == 2 for r in data["noise"])  # m-bad lost one episode
    md = (twice / "summary.md").read_text()
    assert "## How noisy is it" in md and md.count("before they differ at α = 0.05") == 2
    once = make_run(tmp_path / "once", models={"m-good": 0.7}, n_tasks=8, frames=False)
    assert write_summary(once)["noise"] is None
    assert "How noisy" not in (once / "summary.md").read_text()
