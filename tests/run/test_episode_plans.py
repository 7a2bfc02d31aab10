"""run_episode on the berth server with scripted agents: plans kept whole with the env's answers, drafts
counted, the submitted plan as the final document, an unfinished episode scored as the env says."""

from __future__ import annotations

import json

from evalkit.envs.embedded.berth.reference import frozen_row
from evalkit.records.plans import plan_rows, plan_summary, violation_rows
from evalkit.run.episode import run_episode
from evalkit.types import RESULT_CAP, Turn
from tests.support.scripted import call, factory

TASK = "berth-test-0002"


def best() -> list[dict]:
    return [{"vessel": v, "berth": b, "start": s} for v, b, s in frozen_row(TASK)["best_plan"]]


def test_plans_are_kept_whole_with_the_answers(berth_server):
    junk = [{"vessel": f"X{i:03d}", "berth": "B1", "start": 0} for i in range(60)]
    turns = [
        Turn(calls=[call("check_plan", plan=junk)]),
        Turn(calls=[call("check_plan", plan=json.dumps(best())), call("check_plan", plan=7)]),
        Turn(calls=[call("submit_plan", plan=best())]),
    ]
    rec = run_episode(factory(turns), berth_server, TASK, frames=False)
    assert rec.mode == "text" and rec.end_reason == "submitted" and rec.reward == 1.0
    first = rec.turns[0].calls[0]
    assert len(first.result) == RESULT_CAP and len(json.dumps(rec.plans[0].answer)) > 2 * RESULT_CAP
    assert rec.plans[0].plan == junk and len(rec.plans[0].answer["violations"]) > 60
    assert [(p.turn, p.tool, p.ok, p.final) for p in rec.plans] == [
        (1, "check_plan", True, False),
        (2, "check_plan", True, False),
        (2, "check_plan", False, False),
        (3, "submit_plan", True, True),
    ]
    assert rec.plans[1].plan == best() and rec.plans[1].answer["feasible"]  # the JSON string, parsed
    assert rec.plans[2].plan == 7 and "list" in rec.plans[2].answer
    assert rec.drafts == 2 and rec.final_doc == best()
    summary = plan_summary(rec)
    assert [s["feasible"] for s in summary] == [False, True, None, True]
    assert summary[3]["reward"] == 1.0 and summary[2]["answer"] and summary[0]["violations"] > 60
    rows = plan_rows(rec.plans[3])
    assert [r["vessel"] for r in rows] == [e["vessel"] for e in best()]
    assert all(r["end"] > r["start"] and r["waiting"] >= 0 and r["problems"] == "" for r in rows)
    assert violation_rows(rec.plans[3]) == []
    bad = violation_rows(rec.plans[0])
    assert {b["kind"] for b in bad} == {"unknown_vessel", "missing_vessel"} and all(b["message"] for b in bad)


def test_an_unfinished_episode_scores_what_the_env_says(berth_server):
    rec = run_episode(factory([Turn(calls=[call("check_plan", plan=best())])] * 2), berth_server, TASK,
                      max_turns=2, frames=False)  # fmt: skip
    assert rec.end_reason == "turn_limit" and rec.reward == 0.0 and rec.grade is None
    assert rec.drafts == 2 and rec.final_doc is None and not rec.auto_submitted
    silent = run_episode(factory([Turn(text="hmm")] * 5), berth_server, TASK, frames=False)
    assert silent.end_reason == "no_tool_call" and silent.reward == 0.0 and silent.plans == []
