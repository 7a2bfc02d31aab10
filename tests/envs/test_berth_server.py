"""The berth env over the real wire: uvicorn on a loopback port, OpenEnv's MCPToolClient over WebSocket, and
the frozen evalset's best plans."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from evalkit.envs.embedded.berth.grade import check
from evalkit.envs.embedded.berth.reference import frozen_row
from evalkit.envs.embedded.berth.tasks import task_from_id

TASK = "berth-test-0002"


@pytest.fixture
def client(berth_server):
    with MCPToolClient(berth_server.base_url, message_timeout_s=60).sync() as c:
        yield c


def call(c, name, **args):
    return c.step(CallToolAction(tool_name=name, arguments=args))


def answer(result) -> dict:
    assert result.observation.error is None, result.observation.error
    return json.loads(result.observation.result["content"][0]["text"])


def best_plan(task_id: str) -> list[dict]:
    return [{"vessel": v, "berth": b, "start": s} for v, b, s in frozen_row(task_id)["best_plan"]]


def test_reset_metadata_and_tools(client):
    meta = client.reset(task_id=TASK).observation.metadata
    inst = task_from_id(TASK).instance
    assert meta["task_id"] == TASK and meta["episode_id"] and meta["tier"] == frozen_row(TASK)["tier"]
    assert meta["unfinished_reward"] == 0.0 and meta["mode"] == "text" and meta["surface"] == "tools"
    assert "check_plan" in meta["instructions"] and "1 / (1 + gap)" in meta["instructions"]
    assert meta["prompt"].startswith(meta["situation"]) and "submit_plan" in meta["prompt"]
    assert all(f"| {v.id} |" in meta["situation"] for v in inst.vessels + inst.berthed)
    tools = {t.name: t for t in client.list_tools()}
    assert set(tools) == {"check_plan", "submit_plan"}
    plan_schema = tools["check_plan"].input_schema["properties"]["plan"]
    assert [s["type"] for s in plan_schema["anyOf"]] == ["array", "string"]


def test_check_plan_takes_a_list_or_a_json_string(client):
    client.reset(task_id=TASK)
    plan = best_plan(TASK)
    listed = answer(call(client, "check_plan", plan=plan))
    as_text = answer(call(client, "check_plan", plan=json.dumps(plan)))
    assert listed == as_text and listed["feasible"] and listed["violations"] == []
    assert listed["objective"] == frozen_row(TASK)["best_objective"]
    assert len(listed["schedule"]) == len(plan)


@pytest.mark.parametrize("bad", [{"V01": "B1"}, "V01 at B1 from 4", 42, '{"plan": []}'])
def test_a_plan_of_the_wrong_shape_is_a_tool_error_and_the_episode_goes_on(client, bad):
    client.reset(task_id=TASK)
    r = call(client, "submit_plan", plan=bad)
    assert r.observation.error is not None and not r.done
    assert "list" in r.observation.error.message and '"vessel"' in r.observation.error.message
    assert answer(call(client, "check_plan", plan=[]))["feasible"] is False


def test_submitting_the_best_known_plan_scores_one(client):
    client.reset(task_id=TASK)
    r = call(client, "submit_plan", plan=best_plan(TASK))
    got = answer(r)
    assert r.done and r.reward == 1.0 == got["reward"]
    grade = r.observation.metadata["grade"]
    assert grade == got["rubric"] and grade["best_known_optimal"] is frozen_row(TASK)["best_optimal"]
    assert grade["feasible"] and grade["gap"] == 0.0 and not grade["beats_best_known"]
    after = call(client, "check_plan", plan=best_plan(TASK))
    assert after.observation.error.message == "episode is over" and after.done


def _later(plan: list[dict], hours: int) -> list[dict]:
    """The plan with its last-starting vessel held back `hours`: still feasible on these tasks, and worse."""
    last = max(range(len(plan)), key=lambda i: plan[i]["start"])
    return [{**e, "start": e["start"] + hours * (i == last)} for i, e in enumerate(plan)]


def test_a_worse_plan_scores_less_and_an_infeasible_one_zero(client):
    inst = task_from_id(TASK).instance
    worse = _later(best_plan(TASK), 3)
    c = check(inst, worse)
    assert c.feasible and c.objective > frozen_row(TASK)["best_objective"]
    client.reset(task_id=TASK)
    r = call(client, "submit_plan", plan=worse)
    assert r.done and 0 < r.reward < 1 and r.observation.metadata["grade"]["objective"] == c.objective
    client.reset(task_id=TASK)
    clash = [{**e, "start": 0} for e in best_plan(TASK)]
    r = call(client, "submit_plan", plan=clash)
    grade = r.observation.metadata["grade"]
    assert r.done and r.reward == 0.0 and not grade["feasible"] and grade["violations"] > 0


def test_the_step_budget_ends_an_unsubmitted_episode_at_zero(client):
    client.reset(task_id=TASK, max_steps=2)
    assert not call(client, "check_plan", plan=[]).done
    r = call(client, "check_plan", plan=[])
    assert r.done and r.reward == 0.0 and r.observation.metadata["auto_submitted"] is True
    assert r.observation.metadata["grade"]["submitted"] is False


@pytest.mark.parametrize(
    "kwargs", [{"task_id": "berth-test-99x"}, {"mode": "reference"}, {"surface": "gui"}, {"max_steps": 0}]
)
def test_bad_reset_arguments_reach_the_client_as_errors(client, kwargs):
    with pytest.raises(RuntimeError, match="Server error"):
        client.reset(**kwargs)
    assert client.reset(task_id=TASK).observation.metadata["task_id"] == TASK


def test_concurrent_sessions_each_grade_their_own_task(berth_server):
    tasks = ["berth-test-0000", "berth-test-0002", "berth-test-0008", "berth-test-0011"]

    def one(task_id: str) -> float:
        with MCPToolClient(berth_server.base_url, message_timeout_s=60).sync() as c:
            c.reset(task_id=task_id)
            return call(c, "submit_plan", plan=best_plan(task_id)).reward

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, tasks)) == [1.0] * 4
