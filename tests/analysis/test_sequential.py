"""Sequential paired comparisons: boundaries that spend α as planned, an error rate at α however often the
run looks, decisions and intervals that agree, looks recorded and read back, and `compare` reporting the
sequential result on a run that recorded looks."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

import evalkit as ek
from evalkit import analysis as A
from evalkit.analysis import sequential as S
from evalkit.analysis import stats


def test_boundaries_spend_alpha_as_planned():
    """Against Brownian paths (an independent computation): the chance of crossing by look k is α(t_k)."""
    rng = np.random.default_rng(1)
    for fractions, spending in (([0.2, 0.4, 0.6, 0.8, 1.0], "obrien-fleming"), ([0.3, 0.5, 1.0], "pocock")):
        c = np.array(S.boundaries(fractions, 0.05, spending))
        t = np.array(fractions)
        b = np.cumsum(rng.standard_normal((400_000, len(t))) * np.sqrt(np.diff(np.r_[0, t])), 1)
        crossed = np.maximum.accumulate(np.abs(b / np.sqrt(t)) >= c, 1).mean(0)
        assert crossed == pytest.approx([S.spent(x, 0.05, spending) for x in t], abs=0.0015)
    assert S.boundaries([1.0], 0.05) == [pytest.approx(1.959964, abs=1e-5)]  # one look: the fixed test


def simulate(rng: np.random.Generator, kind: str, delta: float, n: int, runs: int) -> np.ndarray:
    theta_a = delta + 0.02 + (0.96 - delta) * rng.beta(2.0, 2.0, size=(runs, n))
    theta_b = theta_a - delta
    if kind == "pass/fail":
        return (rng.random((runs, n)) < theta_a).astype(float) - (rng.random((runs, n)) < theta_b)
    return rng.beta(8 * theta_a, 8 * (1 - theta_a)) - rng.beta(8 * theta_b, 8 * (1 - theta_b))


def decided(d: np.ndarray, looks: list[int], crit: list[float]) -> np.ndarray:
    """Whether the design says A or B better at some look (as `next_look` does, vectorised)."""
    s, q = np.cumsum(d, 1), np.cumsum(d * d, 1)
    w = np.array([S.lattice_step(row) for row in d])
    out = np.zeros(len(d), bool)
    for k, c in zip(looks, crit, strict=True):
        out |= S.intervals(s[:, k - 1], q[:, k - 1], k, c, 1.0, w)[2]
    return out


@pytest.mark.parametrize("kind", ["pass/fail", "continuous"])
def test_the_error_rate_stays_at_alpha_however_often_it_looks(kind):
    """Two equal models, 40 tasks, a look after every task from the sixth: the design says "better" in at
    most 5% of runs (± Monte Carlo error); testing at 0.05 at every look says it twice as often or more."""
    rng = np.random.default_rng(7)
    n, runs = 40, 4000
    d = simulate(rng, kind, 0.0, n, runs)
    looks = list(range(6, n + 1))
    fpr = decided(d, looks, S.boundaries([k / n for k in looks], 0.05)).mean()
    naive = decided(d, looks, [stats.Z_975] * len(looks)).mean()
    assert fpr <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs) and naive > 0.08


def test_a_large_difference_stops_early_and_agrees_with_compare():
    rng = np.random.default_rng(3)
    d = rng.normal(0.2, 0.25, 200)
    design = S.Design("A", "B", max_tasks=200)
    looks: list[S.Look] = []
    for n in S.planned_looks(200):
        looks.append(S.next_look(d[:n], design, looks, final=n == 200))
        if looks[-1].decision != "continue":
            break
    last = looks[-1]
    assert last.decision == "a" and last.n_tasks <= 60 and last.ci_low > 0 and last.p < 0.05
    assert [x.look for x in looks] == list(range(1, len(looks) + 1))
    lo, hi, p = stats.sign_flip_interval(d[: last.n_tasks])
    assert lo > 0 and p < 0.05  # the fixed test on the same tasks agrees (its interval is narrower)
    assert last.ci_low <= lo and last.ci_high >= hi
    back = S.next_look(
        -d[: last.n_tasks], S.Design("B", "A", max_tasks=200), [_as(x, "B", "A") for x in looks[:-1]]
    )
    assert back.decision == "b" and back.ci_high == pytest.approx(-last.ci_low)


def _as(look: S.Look, a: str, b: str) -> S.Look:
    import dataclasses

    return dataclasses.replace(look, a=a, b=b)


def test_no_difference_of_delta_and_undecided():
    rng = np.random.default_rng(4)
    same = rng.normal(0.0, 0.15, 300)
    design = S.Design("A", "B", max_tasks=300, delta=0.1)
    looks: list[S.Look] = []
    for n in S.planned_looks(300):
        looks.append(S.next_look(same[:n], design, looks, final=n == 300))
        if looks[-1].decision != "continue":
            break
    assert looks[-1].decision == "no_difference" and looks[-1].n_tasks < 300
    assert -0.1 < looks[-1].ci_low < 0 < looks[-1].ci_high < 0.1 and looks[-1].p > 0.05
    few = S.next_look(same[:20], S.Design("A", "B", max_tasks=20), final=True)
    assert few.decision == "undecided" and few.final and few.fraction == 1.0
    small = S.next_look(same[:5], S.Design("A", "B", max_tasks=20))
    assert small.decision == "continue" and small.critical is None and small.alpha_spent == 0.0


def test_the_interval_excludes_zero_exactly_when_the_look_decides():
    rng = np.random.default_rng(5)
    design = S.Design("A", "B", max_tasks=30)
    for i in range(60):
        kind = ("pass/fail", "continuous")[i % 2]
        d = simulate(rng, kind, rng.choice([0.0, 0.2, 0.4]), 30, 1)[0]
        look = S.next_look(d, design, final=True)
        excludes = look.ci_low > 0 or look.ci_high < 0
        assert excludes == (look.decision in ("a", "b")) == (look.p < 0.05), (kind, d.tolist(), look)
        assert look.ci_high > look.ci_low  # never of zero width
    all_won = S.next_look(np.ones(12), S.Design("A", "B", max_tasks=12), final=True)
    assert all_won.decision == "a" and 0 < all_won.ci_low < all_won.ci_high <= 1


def test_looks_are_recorded_and_read_back(tmp_path):
    design = S.Design("A", "B", max_tasks=50, delta=0.1)
    d = np.random.default_rng(6).normal(0.3, 0.3, 50)
    first = S.next_look(d[:10], design)
    S.append_look(tmp_path, first)
    second = S.next_look(d[:20], design, [first], p=False)
    S.append_look(tmp_path, second)
    assert S.read_looks(tmp_path) == [first, second]
    assert S.read_looks(tmp_path, "B", "A") == [first, second] and S.read_looks(tmp_path, "A", "C") == []
    line = json.loads((tmp_path / S.LOOKS_FILE).read_text().splitlines()[0])
    assert line["format_version"] == 1 and line["decision"] == "continue" and line["max_tasks"] == 50
    with pytest.raises(ValueError, match="another design"):
        S.next_look(d[:30], S.Design("A", "B", max_tasks=60), [first, second])
    with pytest.raises(ValueError, match="more tasks"):
        S.next_look(d[:20], design, [first, second])


def test_a_torn_or_hostile_looks_file_is_read_without_failing(tmp_path):
    design = S.Design("A", "B", max_tasks=50)
    look = S.next_look(np.full(10, 0.1) + np.linspace(0, 0.1, 10), design)
    S.append_look(tmp_path, look)
    with open(tmp_path / S.LOOKS_FILE, "a") as f:
        f.write('{"a": "A", "b": "B", "look": 2, "n_tas')  # torn by a kill
    S.append_look(tmp_path, S.next_look(np.linspace(0, 0.2, 20), design, [look]))
    with open(tmp_path / S.LOOKS_FILE, "a") as f:
        f.write(json.dumps(look.to_dict() | {"ci_low": "zero"}) + "\n[1, 2]\nnull\n")
    with pytest.warns(RuntimeWarning, match="4 line"):
        looks = S.read_looks(tmp_path)
    assert [x.look for x in looks] == [1, 2]
    (tmp_path / S.LOOKS_FILE).write_bytes(b"\xff\xfe garbage")
    with pytest.warns(RuntimeWarning):
        assert S.read_looks(tmp_path) == []


def frame(run: str, a: np.ndarray, b: np.ndarray) -> pl.DataFrame:
    rows = [
        {"model": m, "task_id": f"t{i:03d}", "tier": ("easy", "hard")[i % 2], "repeat": 0, "reward": float(v)}
        for m, values in (("A", a), ("B", b))
        for i, v in enumerate(values)
    ]
    fixed = {"run": run, "run_name": "r", "env": "canvas", "surface": "tools", "mode": "reference"}
    df = pl.DataFrame(rows).with_columns(*(pl.lit(v).alias(k) for k, v in fixed.items()), scored=pl.lit(True))
    return df.with_columns(pl.lit(None).alias(c) for c in A.EPISODE_COLUMNS if c not in df.columns)


def test_compare_reports_the_sequential_result_on_a_run_that_recorded_looks(tmp_path):
    rng = np.random.default_rng(8)
    a = np.clip(rng.normal(0.7, 0.15, 100), 0, 1)
    b = np.clip(a - 0.15 + rng.normal(0, 0.1, 100), 0, 1)
    df = frame(str(tmp_path), a, b)
    plain = A.compare(df, "A", "B")
    assert plain.equals(stats.compare(df, "A", "B"))  # no looks: exactly stats' compare
    diffs = S.paired_differences(df, "A", "B")
    assert diffs.height == 100 and diffs["d"].mean() == pytest.approx(plain["diff"][-1])
    design, looks = S.Design("A", "B", max_tasks=100), []
    for n in S.planned_looks(100):
        looks.append(S.next_look(diffs["d"][:n].to_numpy(), design, looks))
        S.append_look(tmp_path, looks[-1])
        if looks[-1].decision != "continue":
            break
    got = A.compare(df, "A", "B")
    assert ek.compare(df, "A", "B").equals(got)
    row = got.filter(pl.col("group") == "all").row(0, named=True)
    assert row["decision"] == "a" and row["verdict"] == "A better" and row["looks"] == len(looks)
    assert (row["p_value"], row["ci_low"], row["ci_high"]) == (
        looks[-1].p,
        looks[-1].ci_low,
        looks[-1].ci_high,
    )
    assert row["tasks_after_stop"] == 100 - looks[-1].n_tasks and row["n_tasks"] == 100
    assert got.filter(pl.col("group") != "all")["p_value"].is_null().all()
    turned = A.compare(df, "B", "A").filter(pl.col("group") == "all").row(0, named=True)
    assert turned["verdict"] == "A better" and turned["ci_high"] == pytest.approx(-looks[-1].ci_low)
    text = A.format_sequential(got)
    assert "A better after" in text and "repeated p-value" in text and A.format_sequential(plain) == ""


def test_compare_from_the_command_line_says_the_sequential_result(tmp_path, capsys):
    """`evalkit compare` on a run directory with looks.jsonl: the sequential line under the table."""
    from evalkit import cli
    from evalkit.records.rundir import write_run_json
    from evalkit.types import EpisodeRecord

    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(9)
    lines = []
    for i in range(30):
        for model, reward in (("baseline:tracer", 1.0), ("baseline:random", float(rng.random() < 0.2))):
            rec = EpisodeRecord(model=model, env="canvas", surface="tools", mode="reference",
                                task_id=f"t{i:02d}", reward=reward, end_reason="submitted",
                                key=f"{model}{i}")  # fmt: skip
            lines.append(json.dumps(rec.to_dict()))
    (run / "trace.jsonl").write_text("\n".join(lines) + "\n")
    write_run_json(run, {"models": ["baseline:tracer", "baseline:random"], "env": "canvas"})
    df = A.load_runs([str(run)], cache="read")
    d = S.paired_differences(df, "baseline:tracer", "baseline:random")["d"].to_numpy()
    S.append_look(run, S.next_look(d[:20], S.Design("baseline:tracer", "baseline:random", 30)))
    assert cli.main(["compare", str(run), "--a", "baseline:tracer", "--b", "baseline:random"]) == 0
    out = capsys.readouterr().out
    assert "Sequential comparison" in out and "baseline:tracer better after 1 look" in out
