"""One rule wherever a number is shown: no CI below MIN_TASKS tasks, exact sign-flip p-values, the smallest
detectable difference, the same interval whatever the row order and wherever it is shown, Polars frames as
users hold them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from fixtures.synth import make_run
from scipy.special import stdtrit

from evalkit import analysis as A
from evalkit.analysis import display, plots, report, stats
from evalkit.analysis.summary import format_compare, format_summary
from evalkit.analysis.tables import ci_text
from evalkit.view import support as vs


def brute_force_p(d: list[float]) -> float:
    """The two-sided sign-flip p-value by listing every sign assignment with itertools."""
    observed = abs(sum(d))
    flips = [
        abs(sum(s * x for s, x in zip(signs, d, strict=True)))
        for signs in itertools.product((1, -1), repeat=len(d))
    ]
    return sum(f >= observed - 1e-9 for f in flips) / len(flips)


@pytest.mark.parametrize("n", range(1, 11))
def test_sign_flip_p_is_the_brute_force_one(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        # Differences as rewards make them: many ties at 0, repeated values, mixed signs.
        d = rng.choice([-0.5, -0.2, 0.0, 0.0, 0.1, 0.3, 0.7, rng.uniform(-1, 1)], size=n)
        assert stats.sign_flip_p(d) == pytest.approx(brute_force_p(list(d)), abs=1e-12)
    assert stats.sign_flip_p(np.full(n, 0.4)) == pytest.approx(2 / 2**n)  # all one side: the smallest p
    assert stats.sign_flip_p(-np.full(n, 0.4)) == pytest.approx(2 / 2**n)


def test_one_task_is_never_significant_and_more_tasks_sample_the_flips():
    assert stats.sign_flip_p([0.9]) == 1.0 and stats.sign_flip_p([]) is None
    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 0.3, 16)
    exact = stats.sign_flip_p(d)
    sampled = stats.sign_flip_p(np.concatenate([d, [0.0]]), n_flips=20_000)  # 17 tasks: random flips
    assert sampled == pytest.approx(exact, abs=0.015)  # a zero difference changes no sum
    assert stats.sign_flip_p(np.full(40, 0.3)) == pytest.approx(1 / (1 + stats.N_FLIPS))  # never 0


def test_the_smallest_detectable_difference_is_the_paired_t_tests():
    for n in (6, 7, 10, 25, 100):
        t = stdtrit(n - 1, 0.975) + stdtrit(n - 1, 0.80)
        assert stats.min_detectable(0.2, n) == pytest.approx(t * 0.2 / math.sqrt(n), rel=1e-4)
    assert stats.min_detectable(0.2, stats.MIN_TASKS - 1) is None and stats.min_detectable(None, 50) is None


def test_below_the_minimum_there_is_no_interval_and_no_conclusion(tmp_path):
    for n_tasks, shown in ((1, False), (3, False), (6, True), (60, True)):
        run = make_run(tmp_path / f"r{n_tasks}", n_tasks=n_tasks, frames=False, unscored=0)
        df = A.load_runs([run])
        row = A.compare(df, "baseline:tracer", "baseline:random", by=None).row(0, named=True)
        assert row["n_tasks"] == n_tasks
        assert (row["ci_low"] is not None) is shown and (row["mde"] is not None) is shown
        assert row["p_value"] == (1.0 if n_tasks == 1 else pytest.approx(max(2 / 2**n_tasks, 0), abs=1e-3))
        tiers = A.by_tier(df).filter(pl.col("tier") == "all").row(0, named=True)
        assert (tiers["ci_low"] is not None) is shown and tiers["n_tasks"] == n_tasks
        line = vs.difference_line(row)
        head = report.headline_html(df, "baseline:tracer", "baseline:random")
        if shown:
            assert "95% CI [+" in line and "No conclusion" not in line and "scores higher" in head
        else:
            assert line.startswith(f"No conclusion: only {n_tasks} task")
            assert f"No conclusion: only {n_tasks} task(s) in common" in head and "95% CI" not in head
            assert "&lt; 0.001" not in head and "too few tasks" in format_compare(
                A.compare(df, "baseline:tracer", "baseline:random")
            )


def shuffled(df: pl.DataFrame, seed: int) -> pl.DataFrame:
    return df.sample(fraction=1.0, shuffle=True, seed=seed)


def test_intervals_are_a_function_of_the_data_not_of_the_row_order(tmp_path):
    run = make_run(tmp_path / "r", models={"m-a": 0.7, "m-b": 0.5, "m-c": 0.4}, n_tasks=30, repeats=2)
    df = A.load_runs([run])
    tiers, cmp = A.by_tier(df), A.compare(df, "m-a", "m-b")
    for seed in range(4):
        other = shuffled(df, seed)
        assert A.by_tier(other).equals(tiers) and A.compare(other, "m-a", "m-b").equals(cmp)
        assert format_summary(other) == format_summary(df)
    # A tier's interval is the same whether the CLI groups by tier or the viewer filters to it, and B
    # against A is A against B negated: the same tasks give the same resamples.
    easy = cmp.filter(pl.col("group") == "medium").row(0, named=True)
    alone = A.compare(df.filter(pl.col("tier") == "medium"), "m-a", "m-b", by=None).row(0, named=True)
    assert (alone["ci_low"], alone["ci_high"], alone["p_value"]) == (
        easy["ci_low"],
        easy["ci_high"],
        easy["p_value"],
    )
    back = A.compare(df, "m-b", "m-a", by=None).row(0, named=True)
    whole = cmp.filter(pl.col("group") == "all").row(0, named=True)
    assert (
        back["ci_low"] == pytest.approx(-whole["ci_high"], abs=1e-12) and back["p_value"] == whole["p_value"]
    )
    # Without the other models' rows, a model's interval does not move.
    assert A.by_tier(df.filter(pl.col("model") == "m-c")).equals(tiers.filter(pl.col("model") == "m-c"))


def test_every_place_says_the_same_interval(tmp_path):
    run = make_run(tmp_path / "r", n_tasks=12, repeats=1, unscored=0)
    df = A.load_runs([run])
    all_tier = A.by_tier(df).filter((pl.col("tier") == "all") & (pl.col("model") == "baseline:tracer"))
    said = ci_text(all_tier["ci_low"][0], all_tier["ci_high"][0])
    assert said in format_summary(df) and said in display.run_html(run)
    row = A.compare(df, "baseline:tracer", "baseline:random").row(-1, named=True)
    signed = ci_text(row["ci_low"], row["ci_high"], signed=True)
    sides = vs.with_labels(vs.episode_table(run), {str(run): "r"})
    viewer = vs.ab_difference(sides, "baseline:tracer · r", "baseline:random · r")
    assert signed in vs.difference_line(viewer) and signed in report.headline_html(df, *report.pick_pair(df))
    assert signed in A.compare(df, "baseline:tracer", "baseline:random")._repr_html_()
    assert ci_text(row["ci_low"], row["ci_high"]) in format_compare(
        A.compare(df, "baseline:tracer", "baseline:random")
    )


def test_lazy_frames_work_and_pandas_is_named(tmp_path):
    run = make_run(tmp_path / "r", n_tasks=9, frames=False)
    df = A.load_runs([run])
    lazy = df.lazy()
    assert A.by_tier(lazy).equals(A.by_tier(df)) and A.summarise(lazy).equals(A.summarise(df))
    assert A.compare(lazy, "baseline:tracer", "baseline:random").equals(
        A.compare(df, "baseline:tracer", "baseline:random")
    )
    assert A.load_runs(lazy).equals(df) and A.turns(lazy).height == A.turns(df).height > 0
    plots.reward_by_tier(lazy).to_dict()
    plots.forest(A.compare(df, "baseline:tracer", "baseline:random").lazy()).to_dict()
    pandas = pytest.importorskip("pandas")
    with pytest.raises(TypeError, match=r"not a pandas\.DataFrame \(convert it with pl\.from_pandas\(df\)\)"):
        A.by_tier(df.to_pandas())
    assert isinstance(df.to_pandas(), pandas.DataFrame)


def test_a_wrong_model_name_lists_the_models(tmp_path):
    df = A.load_runs([make_run(tmp_path / "r", n_tasks=3, frames=False)])
    with pytest.raises(
        ValueError, match=r"'baseline:trace' is neither .*'baseline:random', 'baseline:tracer'"
    ):
        A.compare(df, "baseline:trace", "baseline:random")


def test_an_ungraded_model_reads_no_grades_not_zero(tmp_path):
    run = make_run(
        tmp_path / "r", models={"graded": 0.6, "ungraded": 0.5}, n_tasks=6, frames=False, unscored=0
    )
    df = (
        A.load_runs([run])
        .with_columns(
            pl.when(pl.col("model") == "ungraded").then(None).otherwise(pl.col("reward")).alias("reward")
        )
        .with_columns((pl.col("reward").is_not_null() & pl.col("error_class").is_null()).alias("scored"))
    )
    text = format_summary(df)
    ungraded = [x for x in text.splitlines() if x.startswith("ungraded")]
    assert ungraded and all("no grades" in x and "0.000" not in x for x in ungraded)
    table = report.table_html(A.summarise(df), [("model", "model", "text"), ("mean_reward", "r", "reward")])
    assert "no grades" in table and ">0.000<" not in table
    spec = plots.reward_by_tier(df).to_dict()
    notes = [v.get("note") for v in spec["data"]["values"] if v.get("note")]
    assert notes == ["no grades"] * 4  # easy, medium, hard, all
