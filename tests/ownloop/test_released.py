"""Fara-7B and MolmoWeb as released — their agent, browser and episode code from clones on OWNLOOP_PATH (with
their requirements) — against the fake endpoint, on real pages, to graded sessions. Skipped when the clones
are not there: they are not on the package registry."""

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
PATH = [p for p in os.environ.get("OWNLOOP_PATH", "").split(":") if p]


def _has(*rel: str) -> bool:
    return any((Path(p) / r).is_file() for p in PATH for r in rel)


HAS_FARA = _has("fara/fara_agent.py", "fara/fara_7b/fara_agent.py")
HAS_MOLMOWEB = _has("agent/multimodal_agent.py")


@pytest.mark.skipif(not HAS_FARA, reason="microsoft/fara src/ not on OWNLOOP_PATH")
def test_fara7b(tmp_path, plans, released_code):
    ids = TASKS[:2]
    with FakeEndpoint(PlanPolicy(plans(1440, 900, ids), "fara7b"), model="fake-model") as fake:
        s = Settings(agent="fara7b", endpoint=fake.url, model="fake-model", path=PATH, **FAST)
        run = run_ownloop(s, tmp_path, task_ids=ids, workers=2, log=lambda _: None)
    assert sorted((r.task_id, r.reward) for r in run.records) == [(t, 1.0) for t in sorted(ids)]
    first = json.loads((tmp_path / ids[0] / "session.json").read_text())
    assert first["status"] == "terminate" and "$45.00" in first["answer"]
    assert all(req["temperature"] == 0 and len(req["images"]) <= 3 for req in fake.requests)
    assert sorted(p.name for p in (tmp_path / ids[0] / "screens").iterdir()) == ["step_01.png", "step_02.png",
                                                                                 "step_03.png"]  # fmt: skip
    rec = {r.task_id: r for r in read_records(tmp_path)}[ids[0]]
    assert rec.model_seconds > 0 and rec.usage["input"] > 0 and rec.turns[0].calls[0].name == "left_click"


@pytest.mark.skipif(not HAS_MOLMOWEB, reason="allenai/molmoweb clone not on OWNLOOP_PATH")
def test_molmoweb(tmp_path, plans, released_code):
    ids = TASKS[:2]
    with FakeEndpoint(PlanPolicy(plans(1280, 720, ids), "molmoweb"), model="fake-model") as fake:
        s = Settings(agent="molmoweb", endpoint=fake.url, model="fake-model", path=PATH, **FAST)
        run = run_ownloop(s, tmp_path, task_ids=ids, workers=2, log=lambda _: None)
    assert sorted((r.task_id, r.reward) for r in run.records) == [(t, 1.0) for t in sorted(ids)]
    first = json.loads((tmp_path / ids[0] / "session.json").read_text())
    assert first["status"] == "exit" and first["answer"] == "$45.00"
    for req in fake.requests:  # one user turn: the prompt text, then the screenshot; their sampling
        assert req["roles"] == ["user"] and req["images"] == [(1280, 720)]
        assert (req["temperature"], req["top_p"], req["max_tokens"]) == (0.7, 0.8, 1024)
        assert req["text"].startswith("molmo_web_think:")
