"""The offline baselines through the whole harness: real Chromium, real servers, graded files and records
that analysis reads like any other run."""

from __future__ import annotations

import json

import pytest

from evalkit.ownloop import Settings, run_ownloop
from evalkit.records.rundir import read_records, safe_path
from tests.ownloop.conftest import TASKS

pytestmark = pytest.mark.browser


def test_dom_solver_and_random_clicks_are_told_apart(tmp_path, plans):
    plans(1280, 800)  # the DOM solver solved every test task (asserted inside)
    out = tmp_path / "random"
    run = run_ownloop(
        Settings(agent="random", max_steps=6), out, task_ids=TASKS, workers=2, log=lambda _: None
    )
    assert run.ran == 3 and run.unscored == 0
    assert [r.reward for r in run.records] == [0.0, 0.0, 0.0]
    for r in run.records:
        s = json.loads((out / r.task_id / "session.json").read_text())
        assert s["status"] == "finished" and s["reward"] == 0.0 and s["rounds"] == 6
        assert sorted(p.name for p in (out / r.task_id / "screens").iterdir())[-1] == "step_07.png"
        assert len((out / r.task_id / "steps.jsonl").read_text().splitlines()) == 6


def test_run_files_records_and_resume(tmp_path):
    out = tmp_path / "dom"
    ids = ["webapp-shop-skillet-price", "webapp-mail-star-lunch"]
    run = run_ownloop(Settings(agent="dom"), out, task_ids=ids, workers=1, servers=1, log=lambda _: None)
    assert run.ran == 2
    folder = out / "webapp-shop-skillet-price"
    s = json.loads((folder / "session.json").read_text())
    assert (
        s["answer"] == "$45.00"
        and s["reward"] == 1.0
        and s["rounds"] == 2
        and s["base"].startswith("http://")
    )
    assert {"task_id", "base", "answer", "status", "rounds", "error", "record", "log", "seconds",
            "parse_fails",
            "action_errors"} <= set(s)  # fmt: skip
    steps = [json.loads(x) for x in (folder / "steps.jsonl").read_text().splitlines()]
    assert [st["step"] for st in steps] == [1, 2] and steps[0]["actions"][0]["type"] == "click"
    assert sorted(p.name for p in (folder / "screens").iterdir()) == [
        "step_01.png",
        "step_02.png",
        "step_03.png",
    ]
    star = json.loads((out / "webapp-mail-star-lunch" / "session.json").read_text())
    assert [e["type"] for e in star["record"]] == ["mail_starred"] and star["log"]

    recs = {r.task_id: r for r in read_records(out)}
    rec = recs["webapp-shop-skillet-price"]
    assert (rec.model, rec.env, rec.surface, rec.mode, rec.tier) == (
        "ownloop:dom",
        "webapp",
        "gui",
        "ownloop",
        "easy",
    )
    assert (
        rec.reward == 1.0 and rec.error_class is None and rec.n_turns == 2 and rec.end_reason == "submitted"
    )
    assert rec.grade["passed"] == rec.grade["n_checks"] == 1
    assert (
        safe_path(out, rec.frame0)
        and safe_path(out, rec.render)
        and all(safe_path(out, t.frame) for t in rec.turns)
    )
    assert rec.info["seconds_split"]["screenshot"] > 0 and rec.turns[0].calls[0].name == "click"
    assert json.loads((out / "run.json").read_text())["kind"] == "ownloop"
    assert (out / "summary.md").exists()
    from evalkit.analysis import load_runs

    df = load_runs([out])
    assert df.height == 2 and df["reward"].to_list() == [1.0, 1.0] and set(df["env"]) == {"webapp"}

    again = run_ownloop(Settings(agent="dom"), out, task_ids=ids, workers=1, servers=1, log=lambda _: None)
    assert (again.ran, again.skipped) == (0, 2)
    from evalkit.records.lock import RunLock, RunLockedError

    before = (out / "run.json").read_bytes()
    with RunLock(out), pytest.raises(RunLockedError):  # another writer holds it: refused before run.json
        run_ownloop(Settings(agent="dom"), out, task_ids=ids, workers=1, log=lambda _: None, argv=["again"])
    assert (out / "run.json").read_bytes() == before
    with pytest.raises(Exception, match="max_steps=40"):
        run_ownloop(Settings(agent="dom", max_steps=5), out, task_ids=ids, log=lambda _: None)
