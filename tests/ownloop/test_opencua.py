"""OpenCUA-7B's loop: OSWorld's agent (or, without OSWorld on OWNLOOP_PATH, a stand-in with its interface)
with only its model call swapped, its pyautogui code run by the safe interpreter on a 1920×1080 page."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evalkit.ownloop import Settings, run_ownloop
from evalkit.ownloop.fake import FakeEndpoint, PlanPolicy
from evalkit.records.rundir import read_records
from tests.ownloop.conftest import FAST, TASKS

pytestmark = pytest.mark.browser
STAND_IN = str(Path(__file__).parent / "stand_in")
AGENT = "mm_agents/opencua/opencua_agent.py"
RELEASED = [p for p in os.environ.get("OWNLOOP_PATH", "").split(":") if p and (Path(p) / AGENT).is_file()]


@pytest.mark.parametrize(
    "path",
    [pytest.param(RELEASED, id="osworld",
                  marks=pytest.mark.skipif(not RELEASED, reason="OSWorld not on OWNLOOP_PATH")),
     pytest.param([STAND_IN], id="stand-in",
                  marks=pytest.mark.skipif(bool(RELEASED), reason="OSWorld is on the path"))],
)  # fmt: skip
def test_opencua_solves_tasks_through_its_own_loop(tmp_path, plans, path, released_code):
    with FakeEndpoint(PlanPolicy(plans(1920, 1080), "opencua"), model="fake-model") as fake:
        s = Settings(agent="opencua", endpoint=fake.url, model="fake-model", path=path, **FAST)
        run = run_ownloop(s, tmp_path, task_ids=TASKS, workers=2, log=lambda _: None)
    assert sorted((r.task_id, r.reward) for r in run.records) == [(t, 1.0) for t in sorted(TASKS)]
    login = json.loads((tmp_path / "webapp-mail-login-ticket" / "session.json").read_text())
    assert login["status"] == "done" and "HD-4471" in login["answer"] and login["rounds"] == 9
    for req in fake.requests:
        assert (req["temperature"], req["top_p"], req["max_tokens"]) == (0.0, 0.9, 2048)
        assert 1 <= len(req["images"]) <= 3 and set(req["images"]) == {(1920, 1080)}
    rec = {r.task_id: r for r in read_records(tmp_path)}["webapp-mail-login-ticket"]
    assert rec.model == "ownloop:opencua/fake-model" and rec.coordinates == "qwen25"
    names = [c.name for t in rec.turns for c in t.calls]
    assert names[:2] == ["click", "hotkey"] and "write" in names and names[-1] == "DONE"
