"""Own-loop agents offline: `evalkit ownloop AGENT --endpoint fake` serves a scripted model in the agent's
own released reply format that solves the web-app tasks from their task definitions — no GPU, no earlier
DOM-solver run — and each agent runs end to end against it on the webapp's pages. Released code that is not
on the package registry is said, in one line, what to fetch and where."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.ownloop import Settings, run_ownloop
from evalkit.ownloop.fake import FakeEndpoint, TaskPolicy, uitars_reply
from evalkit.records.rundir import read_records, read_run_json
from tests.ownloop.conftest import FAST, TASKS

pytestmark = pytest.mark.browser
STAND_IN = str(Path(__file__).parent / "stand_in")
PATH = [p for p in os.environ.get("OWNLOOP_PATH", "").split(":") if p]
HAS = {
    "fara7b": any((Path(p) / "fara" / "fara_agent.py").is_file() for p in PATH),
    "molmoweb": any((Path(p) / "agent" / "multimodal_agent.py").is_file() for p in PATH),
}
TWO = ["webapp-shop-skillet-price", "webapp-mail-login-ticket"]
"""An answer read off a page, and a login with typing: both kinds of step every agent's format writes."""


def _graded(run) -> list[tuple[str, float | None]]:
    return sorted((r.task_id, r.reward) for r in run.records)


def test_uitars_runs_offline_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["ownloop", "uitars", "--endpoint", "fake", "--out", str(out), "--task-ids", ",".join(TASKS),
            "--wait", "0.2", "--settle", "0.05", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    recs = {r.task_id: r for r in read_records(out)}
    assert sorted((t, r.reward) for t, r in recs.items()) == [(t, 1.0) for t in sorted(TASKS)]
    assert read_run_json(out)["endpoint"] == "fake" and recs[TASKS[0]].model == "ownloop:uitars/fake"
    # the released prompt's action space: points as <point>x y</point>, through the released parser
    raw = [json.loads(line)["raw"] for line in (out / TASKS[0] / "steps.jsonl").read_text().splitlines()]
    assert raw[0].startswith("Thought:") and "click(point='<point>" in raw[0]
    login = json.loads((out / "webapp-mail-login-ticket" / "session.json").read_text())
    assert login["answer"] == "HD-4471" and login["status"] == "finished"
    assert "ran 3 task(s)" in capsys.readouterr().out
    assert main(argv) == 0 and "skipped 3 already done" in capsys.readouterr().out  # resume: nothing to do


def test_the_fake_solves_a_task_from_its_definition_on_first_sight():
    """No plans given: the first request of a task has the DOM solver do it on the policy's own server."""
    from evalkit.envs.embedded.webapp.tasks import instruction, task_by_id

    task = task_by_id("webapp-shop-skillet-price")
    policy = TaskPolicy("uitars", 1280, 800)
    try:
        prompt = instruction(task["prompt"], "http://127.0.0.1:1/shop/")
        request = {"messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]}
        first = policy(request)
        assert first.startswith("Thought:") and "click(point='<point>" in first
        plan = policy.plans[task["prompt"].split("{BASE}")[0].strip()]
        assert plan[-1] == {"type": "finish", "answer": "$45.00"}
        assert policy({"messages": [{"role": "user", "content": "a task it was never given"}]}) == (
            "I do not know this task."
        )
    finally:
        policy.close()
    assert policy._site is None


def test_uitars_points_are_the_released_prompts_form():
    reply = uitars_reply({"type": "scroll", "x": 640, "y": 400, "dy": 500}, (1280, 800))  # → 1288×812
    assert reply.endswith("Action: scroll(point='<point>644 406</point>', direction='down')")


def test_opencua_runs_offline_with_its_code_on_the_path(tmp_path, released_code):
    s = Settings(agent="opencua", endpoint="fake", path=[STAND_IN], **FAST)
    run = run_ownloop(s, tmp_path, task_ids=TWO, workers=2, log=lambda _: None)
    assert _graded(run) == [(t, 1.0) for t in sorted(TWO)]
    assert {r.model for r in run.records} == {"ownloop:opencua/fake"}
    steps = (tmp_path / TWO[0] / "steps.jsonl").read_text()
    assert "pyautogui.click(x=" in steps and "computer.terminate" in steps


@pytest.mark.parametrize("agent", ["fara7b", "molmoweb"])
def test_released_clones_run_offline(tmp_path, agent, released_code):
    if not HAS[agent]:
        pytest.skip(f"{agent}'s released code is not on OWNLOOP_PATH")
    s = Settings(agent=agent, endpoint="fake", path=PATH, settle_s=0.05, retry_wait=0.05)
    run = run_ownloop(s, tmp_path, task_ids=TWO, workers=2, log=lambda _: None)
    assert _graded(run) == [(t, 1.0) for t in sorted(TWO)]


@pytest.mark.parametrize(
    ("agent", "repo", "path"),
    [
        ("opencua", "xlang-ai/OSWorld ~/ownloop/osworld", "osworld"),
        ("fara7b", "microsoft/fara ~/ownloop/fara", "fara/src"),
        ("molmoweb", "allenai/molmoweb ~/ownloop/molmoweb", "molmoweb"),
    ],
)
def test_missing_released_code_is_one_line_saying_what_to_fetch_and_where(
    tmp_path, capsys, monkeypatch, agent, repo, path
):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in PATH])
    for name in [m for m in sys.modules if m.split(".")[0] in ("fara", "agent", "utils", "mm_agents")]:
        monkeypatch.delitem(sys.modules, name)
    out = tmp_path / "run"
    assert main(["ownloop", agent, "--endpoint", "fake", "--path", "", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"evalkit: error: {agent} runs ")
    assert f"`git clone --depth 1 https://github.com/{repo} && pip install --no-deps --target" in err
    assert err.endswith(f"add --path ~/ownloop/{path}:~/ownloop/pkgs")
    assert not out.exists()  # refused before anything was written


def test_an_endpoint_is_still_asked_for_when_it_is_not_fake(tmp_path, capsys):
    assert main(["ownloop", "uitars", "--out", str(tmp_path / "run")]) == 2
    assert "--endpoint and --model (or --endpoint fake)" in capsys.readouterr().err


def test_a_fake_endpoint_stops_its_policy_with_it():
    closed = []

    class Policy:
        def __call__(self, request):
            return "x"

        def close(self):
            closed.append(True)

    with FakeEndpoint(Policy()):
        pass
    assert closed == [True]
