"""Tool-planning rollouts (seed 003), written by tests/importers/seed_planning.py as the seed's loop writes
them: every end reason imports as documented, and the seed's own numbers are recovered from evalkit's."""

from __future__ import annotations

import json
import statistics

import pytest
from polars.testing import assert_frame_equal

from evalkit import analysis as A
from evalkit.records import importers, rundir
from tests.records.importers import seed_planning as S


@pytest.mark.parametrize("src", ["planning_jsonl", "planning_dir"])
def test_every_end_reason_maps_as_documented(seed_runs, src):
    path = seed_runs[src]
    assert importers.detect(path) == "tool-planning"
    got = [
        (r.model, r.task_id, r.repeat, r.end_reason, r.error_class, r.reward)
        for r in rundir.read_records(path)
    ]
    assert got == [
        (S.A, "berth-000", 0, "submitted", None, 0.9),
        (S.A, "berth-001", 0, "no_tool_call", None, 0.0),
        (S.A, "berth-002", 0, "turn_limit", None, 0.0),
        (S.A, "berth-000", 1, "submitted", None, 0.7),  # the same task again: a repeat, not a rerun
        (S.B, "berth-000", 0, "error", "endpoint_error", None),  # the provider failed mid-episode
        (S.B, "berth-001", 0, "error", "harness_error", None),  # the env session failed at reset
        (S.B, "berth-002", 0, "submitted", None, 0.55),
        (S.B, "berth-003", 0, "deadline", None, 0.0),
        (S.B, "berth-004", 0, "auto_submitted", None, 0.25),  # the server ended it on a check
    ]


def test_the_seed_mean_is_evalkits_mean_with_unscored_as_zero(seed_runs):
    """The seed scores an episode a provider failure ended as it stands (0.0); evalkit leaves it unscored and
    says so, so its unscored-as-zero mean is the seed's rewards averaged per task, then over tasks (the task
    is the unit: model A's two episodes of berth-000 are one task, not two)."""
    path = seed_runs["planning_jsonl"]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    recs = list(rundir.read_records(path))
    df = A.load_runs(path)
    for row in A.summarise(df).iter_rows(named=True):
        mine = [d for d in lines if d["model"] == row["model"]]
        assert row["n"] == len(mine)
        assert row["unscored"] == sum(bool(d["errors"]) for d in mine)
        by_task: dict[str, list[float]] = {}
        for d, r in zip(lines, recs, strict=True):
            if d["model"] == row["model"]:
                by_task.setdefault(r.task_id, []).append(d["reward"])
        per_task = statistics.mean(statistics.mean(v) for v in by_task.values())
        assert row["mean_reward_unscored_as_0"] == pytest.approx(per_task)
    err = next(r for r in rundir.read_records(path) if r.error_class == "endpoint_error")
    assert err.info["harness_reward"] == 0.0 and "scores it as it stands" in err.info["unscored_because"]
    assert err.info["harness_error"] == err.error
    assert err.error == "APIStatusError: Error code: 502 - bad gateway" and len(err.provider_switches) == 1


def test_fields_follow_the_writer(seed_runs):
    path = seed_runs["planning_jsonl"]
    recs = list(rundir.read_records(path))
    first = recs[0]
    assert [t.turn for t in first.turns] == [1, 2] and [t.text for t in first.turns] == [
        "Checking.",
        "Submitting.",
    ]
    check = first.turns[0].calls[0]
    assert check.name == "check_plan" and check.args == {"plan": S.PLAN} and check.ok
    assert json.loads(check.result) == {"feasible": False, "conflicts": 1}
    assert first.final_doc == S.PLAN and first.grade == {
        "total": 0.9,
        "feasible": True,
        "delay": 3,
        "rubric": {"delay": 0.5},
    }
    assert first.usage == {"input": 2400, "output": 600} and first.started == "2026-11-01T10:00:00Z"
    assert "Berth rules for berth-000." in first.info["prompt"] and "Vessel V2" in first.info["prompt"]
    # The plans as evalkit's own berth records keep them: matched to their calls, the submitted one final.
    assert [(p.turn, p.tool, p.ok, p.final) for p in first.plans] == [
        (1, "check_plan", True, False),
        (2, "submit_plan", True, True),
    ]
    assert [p.call_id for p in first.plans] == [c.id for t in first.turns for c in t.calls]
    assert first.plans[0].plan == S.PLAN and first.plans[0].answer == {"feasible": False, "conflicts": 1}
    assert first.drafts == 1 and "plans" not in first.info
    over = recs[3].turns[1].calls
    assert [c.ok for c in over] == [True, True, False] and "the episode is over" in over[2].result
    broken = recs[6].turns[0].calls[0]
    assert broken.parse_error and not broken.ok and broken.args == '{"plan": [["V1", 1'
    assert recs[6].parse_errors == 1 and recs[6].tool_calls == 1 and recs[6].turns[1].stop == "length"
    assert recs[1].info["end_reason"] == "no_tool_call" and recs[8].info["end_reason"] == "draft_limit"
    assert len({r.key for r in recs}) == len(recs)


def test_a_file_and_a_folder_of_the_same_records_load_alike(seed_runs):
    a = A.load_runs(seed_runs["planning_jsonl"]).drop("run", "run_name")
    b = A.load_runs(seed_runs["planning_dir"]).drop("run", "run_name")
    assert_frame_equal(a, b)
