"""Imports that add up: `summarise(df, as_harness=True)` and `evalkit summarise --as-harness` give each
harness's own summary to the last digit, the default summary says in one line where and why evalkit's numbers
differ, and a run without grades reads as no grades, never as 0."""

from __future__ import annotations

import json
import statistics

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit.analysis import harness
from evalkit.cli import main
from tests.records.importers import seed_canvas as SC
from tests.records.importers import seed_ownloop as SO

CANVAS = ["canvas_issue", "canvas", "canvas_indexed"]
SEED_GROUP = {  # the seed's summary.json name → the as-harness column
    "n": "n", "mean_reward": "mean_reward", "min": "min_reward", "max": "max_reward",
    "mean_turns": "mean_turns", "mean_tool_calls": "mean_tool_calls", "tool_errors": "tool_errors",
    "failed": "failed", "input_tokens": "input_tokens", "output_tokens": "output_tokens",
    "reasoning_tokens": "reasoning_tokens", "reasoning_chars": "reasoning_chars",
}  # fmt: skip


@pytest.mark.parametrize("name", CANVAS)
def test_canvas_as_harness_is_the_seeds_own_summary_json(seed_runs, name):
    """The generator runs the seed's own `summarise` (re-enacted statement by statement in
    tests/records/importers/seed_canvas.py) on the records it wrote: its summary.json is the reference."""
    run = seed_runs[name]
    seed = json.loads((run / "summary.json").read_text())
    df = A.load_runs(run)
    ours = {(r["model"], r["surface"], r["mode"]): r for r in A.summarise(df, as_harness=True).to_dicts()}
    assert set(ours) == {(g["model"], g["surface"], g["mode"]) for g in seed["groups"]}
    for g in seed["groups"]:
        mine = ours[(g["model"], g["surface"], g["mode"])]
        assert {k: mine[c] for k, c in SEED_GROUP.items()} == {k: g[k] for k in SEED_GROUP}
        assert mine["source"] == "design-canvas"
    # The seed's main overwrites its summary's "tiers" with its --tiers option (None): its tier table lives
    # in summary.md alone, each number to 3 places.
    assert seed["tiers"] is None
    md = ((run / "summary.md").read_text().split("| tier |", 1) + [""])[1].splitlines()[2:]
    theirs = [[c.strip() for c in row.strip("|").split("|")] for row in md if row.startswith("|")]
    ours = [[t["model"], t["surface"], t["mode"], t["tier"], str(t["n"]), f"{t['mean_reward']:.3f}",
             f"{t['ci_low']:.3f}–{t['ci_high']:.3f}"] for t in harness.tiers(df).to_dicts()]  # fmt: skip
    assert ours == theirs and (len(ours) >= 2 or name == "canvas_indexed")  # that run has no tiers


def test_the_seeds_tier_ci_follows_the_order_its_summary_met_the_jobs(tmp_path):
    """Six of sixteen jobs fail and a resume reruns them: the seed's summary meets them where they first
    appear in the trace, evalkit keeps their latest records (at its end). The seed's CI bootstraps episodes in
    its order with Python's random, so only that order gives its CI back."""
    run = tmp_path / "resumed"
    tasks = [{"task_id": f"crello-test-{i:04d}", "tier": "hard", "score": 2.0} for i in range(16)]
    entries = {e["task_id"]: (pos, e) for pos, e in enumerate(tasks)}
    rewards = {e["task_id"]: round((i * 37 % 16) / 16, 4) for i, e in enumerate(tasks)}
    for attempt in (0, 1):
        SC.rollout(run, [SC.A], ["tools"], ["reference"], list(entries), entries=entries,
                   evalset_id=SC.EVALSET_ID,
                   plans=lambda j, a=attempt: SC.Plan([], crash="refused") if a == 0 and int(j[3][-4:]) < 6
                   else SC.Plan([[SC.Call("submit")]], reward=rewards[j[3]]))  # fmt: skip
    df = A.load_runs(run)
    assert df["task_id"].to_list()[:2] == ["crello-test-0006", "crello-test-0007"]  # not the seed's order
    md = (run / "summary.md").read_text().split("| tier |", 1)[1].splitlines()[2:]
    theirs = [row.strip("|").split("|")[-1].strip() for row in md if row.startswith("|")]
    ours = [f"{t['ci_low']:.3f}–{t['ci_high']:.3f}" for t in harness.tiers(df).to_dicts()]
    assert ours == theirs and len(ours) == 2


def test_the_issue_example_reproduces_0_55_and_says_why_it_differs(tmp_path, capsys):
    """A record with an error and a reward (the seed graded what was there after the failed call) is unscored
    here; its 0.2 is kept, so the seed's 0.55 comes back with --as-harness, and the default summary says
    why."""
    run = tmp_path / "rollout"

    def plans(job):
        if job[3] == "crello-test-0001":
            return SC.Plan([[SC.Call("add_element")], SC.APIConnectionError("overloaded")], reward=0.2)
        return SC.Plan([[SC.Call("submit")]], reward=0.9)

    entries = {e["task_id"]: (pos, e) for pos, e in enumerate(SC.TASKS[:2])}
    SC.rollout(run, [SC.A], ["tools"], ["reference"], list(entries), entries=entries,
               evalset_id=SC.EVALSET_ID, plans=plans)  # fmt: skip
    seed = json.loads((run / "summary.json").read_text())["groups"][0]
    assert (seed["mean_reward"], seed["failed"]) == (0.55, 1)
    df = A.load_runs(run)
    s = A.summarise(df).row(0, named=True)
    assert (s["mean_reward"], s["mean_reward_unscored_as_0"]) == (0.9, 0.45)
    failed = df.filter(pl.col("error_class").is_not_null())
    assert failed.select("harness_reward", "harness_error").row(0) == (0.2, "APIConnectionError: overloaded")
    assert A.summarise(df, as_harness=True)["mean_reward"].to_list() == [0.55]

    assert main(["summarise", str(run)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "the harness scored" in x)
    assert line == (
        "1 episode(s) the harness scored are not scored here: 1 unscored by an infrastructure error "
        '(endpoint_error ×1: "APIConnectionError: overloaded"); `--as-harness` gives the harness\'s own '
        "numbers"
    )
    md = (A.summary_dir(run) / "summary.md").read_text()
    assert "the harness scored are not scored here: 1 unscored" in md  # Markdown-escaped: episode\(s\)
    assert main(["summarise", str(run), "--as-harness"]) == 0
    out = capsys.readouterr().out
    assert "the harness scored" not in out
    row = next(x for x in out.splitlines() if x.startswith(SC.A))
    assert row.split()[4:8] == ["design-canvas", "2", "1", "0.55"]  # harness, n, failed, mean reward


def test_every_status_run_says_how_many_differ_and_why(seed_runs):
    df = A.load_runs(seed_runs["canvas"])
    line = harness.differences(df)
    unscored = df.filter(pl.col("error_class").is_not_null()).height
    quiet = df.filter(~pl.col("scored") & pl.col("error_class").is_null()).height
    assert (unscored, quiet) == (2, 1)  # B's endpoint error, B's gui job that failed twice; a submit ungraded
    assert line.startswith(
        f"{unscored + quiet} episode(s) the harness scored are not scored here: 2 unscored"
    )
    assert "endpoint_error ×1" in line and "harness_error ×1" in line
    assert line.endswith("1 without a reward, which the harness counted as 0.0; `--as-harness` gives the "
                         "harness's own numbers")  # fmt: skip
    assert harness.differences(A.load_runs(seed_runs["canvas_issue"])) is None  # the resumed job now scored


@pytest.mark.parametrize("src", ["planning_jsonl", "planning_dir"])
def test_planning_as_harness_is_the_records_own_mean(seed_runs, src):
    """Seed 003 writes no summary of its own: its numbers are its records' rewards as they stand (an episode
    an error ended keeps the 0.0 it started with). Reimplemented here from the files, not from evalkit's
    frame."""
    path = seed_runs[src]
    files = sorted(path.glob("*.json")) if path.is_dir() else None
    lines = ([json.loads(p.read_text()) for p in files] if files else
             [json.loads(x) for x in path.read_text().splitlines()])  # fmt: skip
    ours = {r["model"]: r for r in A.summarise(A.load_runs(path), as_harness=True).to_dicts()}
    assert set(ours) == {d["model"] for d in lines}
    for model, row in ours.items():
        mine = [d for d in lines if d["model"] == model]
        assert row["n"] == len(mine) and row["failed"] == sum(bool(d["errors"]) for d in mine)
        assert row["mean_reward"] == statistics.mean(d["reward"] for d in mine)  # every digit
        assert row["input_tokens"] == sum(d["usage"]["input_tokens"] for d in mine)
    assert any(r["failed"] for r in ours.values())  # a run where evalkit's own mean differs


@pytest.mark.parametrize("agent", ["uitars", "fara7b", "molmoweb", "opencua"])
def test_ownloop_as_harness_is_the_graders_mean(seed_runs, tmp_path, agent):
    """Seed 001 grades in a separate step, over every task with a session.json, the ones evalkit leaves
    unscored included (`seed_ownloop.grader`). Without its grades there are none to show; with them, its mean
    over exactly what it graded."""
    run = seed_runs[agent]
    bare = A.summarise(A.load_runs(run), as_harness=True).row(0, named=True)
    assert (bare["n"], bare["mean_reward"]) == (0, None)
    graded = SO.grader(run)
    grades = tmp_path / "grades.json"
    grades.write_text(json.dumps(graded))
    df = A.load_runs(run, grades=grades)
    row = A.summarise(df, as_harness=True).row(0, named=True)
    assert (row["n"], row["mean_reward"]) == (len(graded), statistics.mean(graded.values()))
    assert (row["min_reward"], row["max_reward"]) == (min(graded.values()), max(graded.values()))
    unscored_graded = df.filter(pl.col("error_class").is_not_null() & pl.col("harness_reward").is_not_null())
    if unscored_graded.height:
        assert f"{unscored_graded.height} episode(s) the harness scored" in harness.differences(df)


def test_ungraded_model_reads_as_no_grades_not_zero(seed_runs):
    """An own-loop run without grades: no reward anywhere. Both means and every CI are null (the table shows
    "-", never 0.000 [0, 0]), and `no_reward` + `unscored` make up n."""
    df = A.load_runs(seed_runs["uitars"])
    s = A.summarise(df).row(0, named=True)
    assert s["scored"] == 0 and s["unscored"] > 0 and s["no_reward"] + s["unscored"] == s["n"]
    assert (s["mean_reward"], s["mean_reward_unscored_as_0"], s["min_reward"]) == (None, None, None)
    for t in A.by_tier(df).iter_rows(named=True):
        assert [t[c] for c in ("mean_reward", "ci_low", "ci_high", "mean_reward_unscored_as_0",
                               "ci_low_unscored_as_0", "ci_high_unscored_as_0")] == [None] * 6  # fmt: skip
    text = A.format_summary(df)
    assert "0.000" not in text and "[0.000, 0.000]" not in text


def test_native_runs_keep_evalkits_rule_and_no_harness_columns(tmp_path):
    from tests.fixtures.synth import make_run

    run = make_run(tmp_path / "r", n_tasks=3, frames=False)
    df = A.load_runs(run)
    assert df["harness_reward"].null_count() == df["harness_error"].null_count() == df.height
    assert harness.differences(df) is None
    plain = A.summarise(df).sort("model")
    theirs = A.summarise(df, as_harness=True).sort("model")
    assert theirs["source"].unique().to_list() == ["evalkit"]
    assert theirs["n"].to_list() == plain["scored"].to_list()
    assert theirs["mean_reward"].to_list() == pytest.approx(plain["mean_reward"].to_list())


def test_as_harness_on_an_ungraded_own_loop_run_says_why_there_are_no_numbers(seed_runs, capsys):
    assert main(["summarise", str(seed_runs["opencua"]), "--as-harness"]) == 0
    out = capsys.readouterr().out
    row = next(x for x in out.splitlines() if x.startswith("opencua:"))
    assert row.split()[4:8] == ["ownloop-gui", "0", "0", "-"]  # harness, n, failed, no mean: not 0
    assert "no grades were given (--grades)" in out
