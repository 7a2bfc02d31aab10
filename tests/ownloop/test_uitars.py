"""UI-TARS-1.5's loop against a fake endpoint that answers in its format: the released prompt, history and
sampling go over real HTTP, its clicks land on real elements, and every task reaches a graded session."""

from __future__ import annotations

import json

import pytest

from evalkit.ownloop import Settings, run_ownloop
from evalkit.ownloop.fake import FakeEndpoint, PlanPolicy
from evalkit.records.rundir import completed_keys, read_records
from tests.ownloop.conftest import FAST, TASKS

pytestmark = pytest.mark.browser
MODEL = "fake-model"


def settings(fake: FakeEndpoint, **kw) -> Settings:
    return Settings(agent="uitars", endpoint=fake.url, model=MODEL, **{**FAST, **kw})


def test_uitars_solves_tasks_through_its_own_loop(tmp_path, plans):
    with FakeEndpoint(PlanPolicy(plans(1280, 800), "uitars"), model=MODEL) as fake:
        run = run_ownloop(settings(fake), tmp_path, task_ids=TASKS, workers=2, log=lambda _: None)
    assert run.ran == 3 and [r.reward for r in sorted(run.records, key=lambda r: r.task_id)] == [
        1.0,
        1.0,
        1.0,
    ]
    login = json.loads((tmp_path / "webapp-mail-login-ticket" / "session.json").read_text())
    assert login["answer"] == "HD-4471" and login["status"] == "finished" and login["rounds"] == 9
    assert [e["type"] for e in login["record"]] == ["login"]

    for req in fake.requests:
        assert req["roles"][0] == "system" and req["roles"][1] == "user"
        assert (req["temperature"], req["top_p"], req["max_tokens"], req["frequency_penalty"]) == (
            0.0,
            0.9,
            500,
            0.0,
        )
        assert (
            "You are a GUI agent" in req["text"]
            and "You are interacting with a web application at" in req["text"]
        )
        assert 1 <= len(req["images"]) <= 5 and set(req["images"]) == {(1280, 800)}
    last = max(fake.requests, key=lambda r: r["roles"].count("assistant"))
    assert last["roles"].count("assistant") == 8 and len(last["images"]) == 5  # full history, 5 screenshots

    rec = {r.task_id: r for r in read_records(tmp_path)}["webapp-mail-login-ticket"]
    assert rec.model == "ownloop:uitars/fake-model" and rec.coordinates == "qwen25vl-smart-resize"
    assert rec.usage["input"] > 0 and rec.usage["output"] > 0 and rec.model_seconds > 0
    assert rec.turns[0].text.startswith("Thought:") and rec.turns[0].calls[0].name == "click"
    typed = [c for t in rec.turns for c in t.calls if c.name == "type"]
    assert typed and all(c.ok for c in typed)


def test_unparsable_replies_are_resampled_then_end_the_episode(tmp_path):
    with FakeEndpoint(PlanPolicy({}, "uitars", garbage="I would rather not."), model=MODEL) as fake:
        run = run_ownloop(settings(fake, frequency_penalty=1.0), tmp_path, task_ids=TASKS[:1], workers=1,
                          servers=1, log=lambda _: None)  # fmt: skip
    assert [(r["temperature"], r["frequency_penalty"]) for r in fake.requests] == [
        (0.0, 1.0),
        (1.0, 1.0),
        (1.0, 1.0),
    ]
    rec = run.records[0]
    assert rec.reward == 0.0 and rec.error_class is None and rec.end_reason == "no_tool_call"  # scored
    s = json.loads((tmp_path / TASKS[0] / "session.json").read_text())
    assert s["status"] == "parse_error" and s["parse_fails"] == 3
    step = json.loads((tmp_path / TASKS[0] / "steps.jsonl").read_text())
    assert step["raw"] is None and len(step["fails"]) == 3


def test_endpoint_failures_are_unscored_and_rerun_on_resume(tmp_path, plans):
    task = TASKS[:1]
    with FakeEndpoint(PlanPolicy(plans(1280, 800), "uitars"), model=MODEL, fail_first=10**6) as down:
        run = run_ownloop(settings(down), tmp_path, task_ids=task, workers=1, servers=1, log=lambda _: None)
    rec = run.records[0]
    assert rec.error_class == "endpoint_error" and rec.reward is None and rec.end_reason == "error"
    assert len(down.requests) == 3  # the harness's three tries
    folder = tmp_path / task[0]
    assert (folder / "session_failed.json").exists() and not (folder / "session.json").exists()
    assert completed_keys(tmp_path) == set()

    with FakeEndpoint(PlanPolicy(plans(1280, 800), "uitars"), model=MODEL) as up:
        again = run_ownloop(settings(up), tmp_path, task_ids=task, workers=1, servers=1, log=lambda _: None)
    assert again.ran == 1 and again.records[0].reward == 1.0
    assert (folder / "session.json").exists() and not (folder / "session_failed.json").exists()
    assert [r.reward for r in read_records(tmp_path)] == [1.0]  # the latest record per key
