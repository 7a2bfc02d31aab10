"""Analysis on synthetic runs: declared columns, the cached index, summaries, tier CIs, paired comparison."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from fixtures.synth import make_run
from scipy.special import stdtrit

from evalkit import analysis as A
from evalkit.records import rundir
from evalkit.records.rundir import TraceWriter
from evalkit.types import EpisodeRecord, episode_key


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "r", n_tasks=12, repeats=2)


def rec(
    model: str, task: str, reward: float | None, repeat: int = 0, tier: str = "easy", **kw
) -> EpisodeRecord:
    return EpisodeRecord(
        key=episode_key(model, "canvas", "tools", "reference", task, None, repeat),
        model=model,
        env="canvas",
        surface="tools",
        mode="reference",
        task_id=task,
        tier=tier,
        repeat=repeat,
        reward=reward,
        grade=None if reward is None else {"total": reward},
        n_turns=2,
        end_reason="submitted",
        **kw,
    )


def write(run_dir: Path, records: list[EpisodeRecord]) -> Path:
    w = TraceWriter(run_dir)
    for r in records:
        w.append(r)
    return run_dir


def test_columns_are_declared_and_typed(run):
    df = A.load_runs([run])
    assert df.columns == list(A.EPISODE_COLUMNS)
    assert df.schema == A.EPISODE_SCHEMA
    assert df.height == 2 * 12 * 2
    assert df["run"].unique().to_list() == [str(run)]
    assert A.load_runs([]).columns == list(A.EPISODE_COLUMNS)


def test_offsets_open_the_same_episode(run):
    df = A.load_runs(run)
    for row in df.sample(5, seed=1).iter_rows(named=True):
        r = rundir.read_at(row["run"], row["offset"])
        assert r.key == row["key"] and r.reward == row["reward"]


def test_unscored_is_never_zero(run):
    df = A.load_runs(run)
    bad = df.filter(pl.col("error_class").is_not_null())
    assert bad.height == 1 and bad["reward"][0] is None and not bad["scored"][0]
    s = A.summarise(df).filter(pl.col("model") == "baseline:random").row(0, named=True)

    assert s["unscored"] == 1 and s["scored"] == 23
    # Task-weighted: each task's scored episodes first become one value.
    mine = df.filter(pl.col("model") == "baseline:random")
    per_task = mine.filter(pl.col("scored")).group_by("task_id").agg(pl.col("reward").mean())["reward"]
    assert s["mean_reward"] == pytest.approx(per_task.mean())
    with_zero = mine.group_by("task_id").agg(pl.col("reward").fill_null(0.0).mean())["reward"]
    assert s["mean_reward_unscored_as_0"] == pytest.approx(with_zero.mean())


def test_index_is_cached_and_rebuilt_when_the_trace_changes(tmp_path):
    run = write(tmp_path / "r", [rec("m", f"t{i}", 0.5) for i in range(3)])
    df1 = A.load_runs(run)
    idx = A.index_path(run)
    assert idx.exists()
    assert A.load_runs(run).equals(df1)
    write(run, [rec("m", "t9", 1.0)])
    assert not idx.exists() or A.index_path(run) != idx
    df2 = A.load_runs(run)
    assert df2.height == 4 and A.index_path(run).exists()
    assert len(list((run / ".evalkit").glob("index-v*.parquet"))) == 1


def test_read_only_run_loads_without_cache(tmp_path, monkeypatch):
    run = write(tmp_path / "r", [rec("m", "t0", 0.5)])

    def refuse(*a, **k):
        raise PermissionError("read-only")

    monkeypatch.setattr(rundir, "atomic_write", refuse)
    assert A.load_runs(run).height == 1
    assert not list((run / ".evalkit").glob("index-*"))  # (the writer keeps its own index there)


def test_torn_line_and_rerun_keys(tmp_path):
    run = write(tmp_path / "r", [rec("m", "t0", None, error_class="endpoint_error"), rec("m", "t1", 0.2)])
    write(run, [rec("m", "t0", 0.9)])  # resume re-ran the failed episode: the latest record counts
    with open(run / "trace.jsonl", "a") as f:
        f.write('{"format_version": 1, "key": "torn')
    df = A.load_runs(run, cache=False)
    assert df.height == 2
    assert df.filter(pl.col("task_id") == "t0")["reward"].to_list() == [0.9]


def test_turns_and_calls(run):
    df = A.load_runs(run)
    t = A.turns(df.filter(pl.col("model") == "baseline:tracer"))
    assert t.columns == list(A.TURN_COLUMNS)
    assert t.height == df.filter(pl.col("model") == "baseline:tracer")["n_turns"].sum()
    c = A.calls(run)
    assert c.columns == list(A.CALL_COLUMNS)
    assert c.height == df["tool_calls"].sum()
    assert json.loads(c["args"][0])["kind"] == "rect"


def test_by_tier_ci_is_seeded_and_brackets_the_mean(run):
    df = A.load_runs(run)
    t1 = A.by_tier(df)
    assert t1.equals(A.by_tier(df))
    assert set(t1["tier"]) == {"easy", "medium", "hard", "all"}
    assert t1["tier"].to_list()[:4] == ["easy", "medium", "hard", "all"]
    for r in t1.iter_rows(named=True):
        if r["tier"] != "all":  # 4 tasks a tier: too few for an interval, whatever the spread
            assert r["n_tasks"] == 4 < A.MIN_TASKS and r["ci_low"] is r["ci_high"] is None
            assert r["ci_low_unscored_as_0"] is None and r["mean_reward"] is not None
            continue
        assert r["n_tasks"] == 12
        assert r["ci_low"] <= r["mean_reward"] + 1e-12 <= r["ci_high"] + 2e-12
        assert r["ci_low_unscored_as_0"] <= r["mean_reward_unscored_as_0"] + 1e-12


def test_cluster_bootstrap_matches_the_normal_approximation():
    rng = np.random.default_rng(3)
    x = rng.normal(0.5, 0.2, 400)
    boot = A.cluster_bootstrap(x, np.ones_like(x), seed=1)
    assert boot.std() == pytest.approx(x.std(ddof=1) / math.sqrt(len(x)), rel=0.1)
    assert boot.mean() == pytest.approx(x.mean(), abs=0.005)


def test_compare_pairs_by_task_with_known_difference(tmp_path):
    rng = np.random.default_rng(0)
    recs = []
    for i in range(40):
        base = float(rng.uniform(0.2, 0.7))
        tier = ("easy", "hard")[i % 2]
        for r in range(2):
            recs.append(rec("A", f"t{i}", base + 0.1 + 0.01 * r, repeat=r, tier=tier))
            recs.append(rec("B", f"t{i}", base + 0.01 * r, repeat=r, tier=tier))
    recs.append(rec("A", "only-a", 1.0))  # no pair: dropped
    recs.append(rec("B", "t0", None, repeat=5, error_class="env_error"))  # unscored: left out
    df = A.load_runs(write(tmp_path / "r", recs))
    c = A.compare(df, "A", "B")
    assert c.columns == list(A.COMPARE_COLUMNS)
    assert c["group"].to_list() == ["easy", "hard", "all"]
    row = c.filter(pl.col("group") == "all").row(0, named=True)
    assert row["n_tasks"] == 40 and row["n_dropped"] == 1 and row["n_unscored_b"] == 1
    assert row["diff"] == pytest.approx(0.1)
    # Every task's difference is exactly 0.1: no spread, so the interval is the share-of-tasks bound
    # (`_constant`), not [0.1, 0.1], and excludes 0 as the test does.
    assert 0 < row["ci_low"] < 0.1 < row["ci_high"] < 0.2
    assert row["wins"] == 40 and row["losses"] == 0
    assert row["p_value"] < 0.01
    assert row["mde"] > 0.05
    assert "A − B" in A.format_compare(c)


def test_compare_of_equal_models_is_not_significant(tmp_path):
    rng = np.random.default_rng(1)
    recs = [rec(m, f"t{i}", float(rng.uniform())) for i in range(60) for m in ("A", "B")]
    c = A.compare(A.load_runs(write(tmp_path / "r", recs)), "A", "B", by=None)
    assert c.height == 1
    assert c["ci_low"][0] < 0 < c["ci_high"][0]
    assert c["p_value"][0] > 0.05
    with pytest.raises(ValueError):
        A.compare(A.load_runs(tmp_path / "r"), "A", "nope")


def frame(a: np.ndarray, b: np.ndarray) -> pl.DataFrame:
    """An episode frame of models A and B from (tasks × repeats) reward arrays, every episode scored."""
    rows = []
    for model, m in (("A", a), ("B", b)):
        n, k = m.shape
        rows.append(
            pl.DataFrame(
                {
                    "model": [model] * (n * k),
                    "task_id": [f"t{t}" for t in range(n) for _ in range(k)],
                    "tier": [("easy", "hard")[t % 2] for t in range(n) for _ in range(k)],
                    "repeat": np.tile(np.arange(k), n),
                    "reward": m.ravel(),
                }
            )
        )
    fixed = {"run": "r", "run_name": "r", "env": "canvas", "surface": "tools", "mode": "reference"}
    df = pl.concat(rows).with_columns(*(pl.lit(v).alias(k) for k, v in fixed.items()), scored=pl.lit(True))
    return df.with_columns(pl.lit(None).alias(c) for c in A.EPISODE_COLUMNS if c not in df.columns).select(
        pl.col(c).cast(t) for c, t in A.EPISODE_COLUMNS.items()
    )


def noisy_pair(rng: np.random.Generator, n: int = 100, k: int = 4, delta: float = 0.05):
    """Rewards of A and B on n tasks × k repeats: a shared task difficulty, a small task × model
    interaction, and within-task noise that dominates the spread of the per-task differences."""
    mu = rng.normal(0.5, 0.2, (n, 1))
    a = mu + delta + rng.normal(0, 0.02, (n, 1)) + rng.normal(0, 0.15, (n, k))
    return a, mu + rng.normal(0, 0.15, (n, k))


def test_compare_bootstrap_se_is_that_of_the_per_task_differences():
    # Repeats travel with their task: the SE of the mean difference is sd(d)/sqrt(n) over tasks, where d is
    # a task's mean paired difference. Resampling repeats again inside each task made it ~30% wider here.
    a, b = noisy_pair(np.random.default_rng(5))
    d = (a - b).mean(1)
    se = d.std(ddof=1) / math.sqrt(len(d))
    row = A.compare(frame(a, b), "A", "B", by=None).row(0, named=True)
    assert row["n_tasks"] == 100 and row["n_unpaired"] == 0
    assert row["diff"] == pytest.approx(d.mean()) and row["sd_diff"] == pytest.approx(d.std(ddof=1))
    assert (row["ci_high"] - row["ci_low"]) / (2 * A.Z_975) == pytest.approx(se, rel=0.1)
    assert A.paired_bootstrap(d, 4000, seed=2).std() == pytest.approx(se, rel=0.1)
    # The sign-flip test's MDE (simulated, evalkit.analysis.power): at 100 tasks of continuous differences
    # within a few percent of the paired t-test's.
    t = stdtrit(99, 0.975) + stdtrit(99, 0.80)
    assert row["mde"] == pytest.approx(t * d.std(ddof=1) / 10, rel=0.05)


def test_compare_ci_covers_the_true_difference_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    hits = 0
    for i in range(200):
        a, b = noisy_pair(rng)
        row = A.compare(frame(a, b), "A", "B", by=None, seed=i).row(0, named=True)
        hits += row["ci_low"] <= 0.05 <= row["ci_high"]
    assert 0.90 <= hits / 200 <= 0.99  # the nested bootstrap covered 99.5% of these


def test_compare_pairs_each_sides_mean_over_all_its_repeats():
    # Changed with issue 40: pairing is by task, each side's mean over all its scored repeats (it was repeat
    # r with repeat r, which left A's third repeat out).
    a = np.array([[0.2, 0.4, 1.0], [0.5, 0.5, 0.5]])
    b = np.array([[0.1, 0.2], [0.5, 0.3]])
    df = frame(a, np.pad(b, ((0, 0), (0, 1))))
    df = df.filter(~((pl.col("model") == "B") & (pl.col("repeat") == 2)))  # B has no repeat 2
    row = A.compare(df, "A", "B", by=None).row(0, named=True)
    assert row["n_tasks"] == 2 and row["n_unpaired"] == 0 and row["n_dropped"] == 0
    assert row["mean_a"] == pytest.approx((1.6 / 3 + 0.5) / 2) and row["mean_b"] == pytest.approx(
        (0.15 + 0.4) / 2
    )
    assert row["diff"] == pytest.approx(((1.6 / 3 - 0.15) + (0.5 - 0.4)) / 2)


def test_by_tier_ci_is_task_clustered():
    # by_tier resamples tasks with their repeats (one stage): its SE is that of the task means.
    a, _ = noisy_pair(np.random.default_rng(11), n=150)
    df = frame(a, a).filter(pl.col("model") == "A")
    t = A.by_tier(df).filter(pl.col("tier") == "all").row(0, named=True)
    means = a.mean(1)
    assert t["mean_reward"] == pytest.approx(means.mean())
    se = means.std(ddof=1) / math.sqrt(len(means))
    assert (t["ci_high"] - t["ci_low"]) / (2 * A.Z_975) == pytest.approx(se, rel=0.1)


def test_compare_by_run(tmp_path):
    a = write(tmp_path / "ra", [rec("m", f"t{i}", 0.8) for i in range(5)])
    b = write(tmp_path / "rb", [rec("m", f"t{i}", 0.3) for i in range(5)])
    c = A.compare(A.load_runs([a, b]), "ra", "rb", by=None)
    assert c["diff"][0] == pytest.approx(0.5) and c["ties"][0] == 0


def test_compare_many(run):
    df = A.load_runs(run)
    m = A.compare_many(df, "baseline:random")
    assert m["a"].to_list() == ["baseline:tracer"] and m["b"].to_list() == ["baseline:random"]
    assert m["diff"][0] > 0.3


def test_write_summary_and_text(run):
    data = A.write_summary(run)
    assert (run / "summary.json").exists() and (run / "summary.md").exists()
    j = json.loads((run / "summary.json").read_text())
    assert j["n_episodes"] == 48 and j["n_unscored"] == 1 and len(j["by_tier"]) == 8
    assert data["summary"][0]["model"] == "baseline:random"
    md = (run / "summary.md").read_text()
    assert "reward (unscored=0)" in md and "| baseline:tracer |" in md
    text = A.format_summary(A.load_runs(run))
    assert "reward (scored)" in text and "95% CI" in text and "endpoint_error ×1" in text


def test_grade_components(run):
    g = A.grade_components(A.load_runs(run))
    assert set(g["component"]) == {"structure", "visual", "coverage", "order", "background"}


def test_cost_is_unknown_unless_every_episode_has_a_price(tmp_path):
    from evalkit.records.rundir import TraceWriter
    from evalkit.types import EpisodeRecord

    w = TraceWriter(tmp_path)
    for i, (model, cost) in enumerate(
        [("priced", 0.25), ("priced", 0.5), ("partly", 0.5), ("partly", None), ("free", None)]
    ):
        w.append(
            EpisodeRecord(
                key=f"k{i}",
                model=model,
                env="canvas",
                surface="tools",
                mode="reference",
                task_id=f"t{i}",
                reward=0.5,
                end_reason="submitted",
                cost_usd=cost,
            )
        )
    rows = A.summarise(A.load_runs([tmp_path])).iter_rows(named=True)
    s = {r["model"]: r["cost_usd"] for r in rows}
    assert s == {"priced": 0.75, "partly": None, "free": None}


def test_summary_markdown_cannot_inject_html_or_links(tmp_path):
    from evalkit.records.rundir import TraceWriter
    from evalkit.types import EpisodeRecord

    hostile = "m<img src=https://evil.example/x.png>[click](https://evil.example)"
    TraceWriter(tmp_path).append(EpisodeRecord(key="k", model=hostile, env="canvas", surface="tools",
                                               mode="reference", task_id="t", reward=0.5))  # fmt: skip
    A.write_summary(tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "\\<img" in md
    assert not re.search(r"(?<!\\)<", md) and not re.search(r"(?<!\\)\]\(", md)


def test_small_costs_keep_their_digits(tmp_path):
    """A cheap run's summary must not read $0.00; an unknown cost reads as unknown, never as zero."""
    cheap = write(
        tmp_path / "cheap", [rec("m", "t0", 0.5, cost_usd=0.0012), rec("m", "t1", 0.7, cost_usd=0.0022)]
    )
    line = next(
        x for x in A.format_summary(A.load_runs([cheap]), tiers=False).splitlines() if " m " in f" {x} "
    )
    assert line.split()[-1] == "0.0034"
    unknown = write(tmp_path / "unknown", [rec("m", "t0", 0.5, cost_usd=0.0012), rec("m", "t1", None)])
    line = next(
        x for x in A.format_summary(A.load_runs([unknown]), tiers=False).splitlines() if " m " in f" {x} "
    )
    assert line.split()[-1] == "-"
    from evalkit.analysis.tables import usd

    assert [usd(v) for v in (0.0, 0.000012, 0.05, 1234.5)] == ["$0.00", "$0.000012", "$0.05", "$1,234.50"]


def test_unscored_as_zero_counts_failures_not_missing_rewards(tmp_path):
    df = A.load_runs(make_run(tmp_path / "r", models={"m": 0.5}, n_tasks=8, frames=False, unscored=1))
    df = df.with_columns(  # one more episode: ended without error, no reward
        pl.when(pl.col("task_id") == "canvas-test-0005")
        .then(None)
        .otherwise(pl.col("reward"))
        .alias("reward"),
    ).with_columns((pl.col("reward").is_not_null() & pl.col("error_class").is_null()).alias("scored"))
    rewards = df.filter(pl.col("scored"))["reward"]
    s = A.summarise(df).row(0, named=True)
    assert (s["scored"], s["unscored"], s["no_reward"]) == (6, 1, 1)
    assert s["mean_reward_unscored_as_0"] == pytest.approx(rewards.sum() / 7)
    t = A.by_tier(df).filter(pl.col("tier") == "all").row(0, named=True)
    assert t["mean_reward_unscored_as_0"] == pytest.approx(rewards.sum() / 7)
    assert t["ci_low_unscored_as_0"] <= t["mean_reward_unscored_as_0"] <= t["ci_high_unscored_as_0"]
