"""Own-loop GUI runs (seed 001), written by tests/importers/seed_ownloop.py as the seed's runners write them:
statuses, steps, screens, error attempts and resumes import as documented, ungraded until grades merge."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit.records import importers, rundir
from evalkit.types import EpisodeRecord
from tests.records.importers import seed_ownloop as S

AGENTS = ("uitars", "fara7b", "molmoweb", "opencua")
EXPECTED = {  # task → (end_reason, error_class)
    "u-finish": ("submitted", None),
    "u-maxsteps": ("turn_limit", None),
    "u-parse": ("no_tool_call", None),
    "u-calluser": ("submitted", None),
    "u-harness": ("error", "harness_error"),
    "u-timeout": ("deadline", None),
    "u-endpoint": ("submitted", None),
    "u-crash": ("error", "harness_error"),
    "u-backend": ("submitted", "env_error"),
    "f-terminate": ("submitted", None),
    "f-retry": ("submitted", None),
    "f-maxsteps": ("turn_limit", None),
    "f-timeout": ("deadline", None),
    "f-exhausted": ("error", None),
    "f-endpoint": ("error", "endpoint_error"),
    "m-exit": ("submitted", None),
    "m-max": ("turn_limit", None),
    "m-error": ("error", None),
    "m-nosteps": ("error", "harness_error"),
    "m-parse": ("submitted", None),
    "o-done": ("submitted", None),
    "o-fail": ("submitted", None),
    "o-noaction": ("no_tool_call", None),
    "o-parse": ("no_tool_call", None),
    "o-harness": ("error", "harness_error"),
    "o-max": ("turn_limit", None),
    "o-backend": ("submitted", "env_error"),
}


def recs(run: Path) -> dict[str, EpisodeRecord]:
    return {r.task_id: r for r in rundir.read_records(run)}


@pytest.mark.parametrize("agent", AGENTS)
def test_statuses_map_as_documented_and_nothing_is_scored(seed_runs, agent):
    run = seed_runs[agent]
    assert importers.detect(run) == "ownloop-gui"
    got = recs(run)
    assert {t: (r.end_reason, r.error_class) for t, r in got.items()} == {
        t: e for t, e in EXPECTED.items() if t[0] == agent[0]
    }
    assert all(r.reward is None for r in got.values())  # the files hold no reward: never 0
    assert {r.model for r in got.values()} == {f"{agent}:{run.name}"}
    assert {r.info["agent"] for r in got.values()} == {agent}
    for t, r in got.items():
        session = json.loads((run / t / r.info["file"].split("/", 1)[1]).read_text())
        assert r.info["status"] == session["status"] and r.final_doc == session["answer"]
        assert r.n_turns == (session["rounds"] or len(r.turns)) and r.error == (session["error"] or None)
        assert (r.parse_errors, r.tool_errors) == (
            session.get("parse_fails", 0),
            session.get("action_errors", 0),
        )
        seed_grades_it = r.info["file"].endswith("/session.json")
        assert ("unscored_because" in r.info) == (seed_grades_it and r.error_class is not None)


@pytest.mark.parametrize("agent", AGENTS)
def test_counts_agree_with_what_the_seed_grades(seed_runs, agent):
    """The seed's grading step grades every task with a session.json and reruns the others: evalkit counts
    the same tasks; its unscored are the others plus those it explains in `info.unscored_because`; the rest
    are "no reward" until the grades merge, then their mean is the grader's mean over them."""
    run = seed_runs[agent]
    graded = S.grader(run)
    df = A.load_runs(run)
    s = A.summarise(df).row(0, named=True)
    folders = [p for p in run.iterdir() if p.is_dir() and not p.name.startswith(".")]
    explained = {r.task_id for r in recs(run).values() if "unscored_because" in r.info}
    assert s["n"] == len(folders)
    assert s["unscored"] == len(folders) - len(graded) + len(explained)
    assert (s["scored"], s["no_reward"]) == (0, len(graded) - len(explained))
    grades = run.parent / f"{run.name}-grades.json"
    grades.write_text(json.dumps(graded))
    merged = A.summarise(A.load_runs(run, grades=grades)).row(0, named=True)
    kept = [v for t, v in graded.items() if t not in explained]
    assert (merged["scored"], merged["no_reward"], merged["unscored"]) == (len(kept), 0, s["unscored"])
    assert merged["mean_reward"] == pytest.approx(statistics.mean(kept))


def test_steps_become_turns_with_the_screen_after_each(seed_runs):
    run = seed_runs["uitars"]
    r = recs(run)["u-finish"]
    assert r.frame0 == "u-finish/screens/step_01.png"
    assert [t.frame for t in r.turns] == ["u-finish/screens/step_02.png", "u-finish/screens/step_03.png"]
    assert r.render == r.turns[-1].frame and (run / r.render).is_file()  # step_{rounds+1}: the final screen
    first, second = r.turns
    assert [c.parse_error for c in first.calls] == [True, False]  # a failed parse, then the click
    assert first.calls[0].args == "Action: clik(" and first.calls[1].name == "click"
    assert first.calls[1].args == {"start_box": "[0.1,0.2,0.1,0.2]"} and first.text.startswith("Thought:")
    assert [c.name for c in second.calls] == ["click", "finished"] and r.final_doc == "all done"
    assert r.tool_calls == 3 and r.parse_errors == 1
    bad = recs(run)["u-maxsteps"].turns[0].calls[0]
    assert not bad.ok and bad.result == "no start_box"
    parse = recs(run)["u-parse"].turns[1]
    assert [c.parse_error for c in parse.calls] == [True] * 3 and parse.text == "garbled 2"
    assert recs(run)["u-calluser"].turns[0].calls[0].ok  # call_user is not an action error


def test_each_runner_names_its_actions(seed_runs):
    fara = recs(seed_runs["fara7b"])["f-terminate"]
    assert [c.name for t in fara.turns for c in t.calls] == ["left_click", "left_click", "terminate"]
    assert fara.turns[0].calls[0].args == {"action": "left_click", "coordinate": [100, 200]}
    assert fara.render == "f-terminate/screens/step_04.png"  # screenshot3 → step_04: after the last action
    molmo = recs(seed_runs["molmoweb"])
    assert [c.name for t in molmo["m-exit"].turns for c in t.calls] == ["click"] + ["send_msg_to_user"] * 2
    assert molmo["m-exit"].turns[0].reasoning == "step 1: I click" and molmo["m-exit"].final_doc == "42"
    missed = molmo["m-max"].turns[1].calls[0]
    assert not missed.ok and missed.result == "element not found"
    assert molmo["m-parse"].turns[0].calls[0].parse_error and molmo["m-parse"].parse_errors == 1
    cua = recs(seed_runs["opencua"])
    names = [c.name for t in cua["o-done"].turns for c in t.calls]
    assert names == ["pyautogui.click", "", "pyautogui.click", "DONE"]  # a failed attempt before the retry
    assert cua["o-done"].turns[0].reasoning == "Click the button"
    assert cua["o-done"].turns[0].calls[0].args == {"code": "pyautogui.click(10, 20)"}
    assert [c.parse_error for c in cua["o-parse"].turns[1].calls] == [True] * 5
    assert not cua["o-max"].turns[1].calls[0].ok and cua["o-max"].tool_errors == 1


def test_fara_error_attempts_are_earlier_records_of_the_task(seed_runs):
    run = seed_runs["fara7b"]
    history = [r for r in rundir.read_records(run, latest=False) if r.task_id == "f-retry"]
    assert [r.info["status"] for r in history] == ["error", "parse_error", "terminate"]
    assert len({r.key for r in history}) == 1
    final = recs(run)["f-retry"]
    attempts = final.info["error_attempts"]
    assert [(a["attempt"], a["status"], a["folder"]) for a in attempts] == [
        (1, "error", "f-retry/error_attempt_1"),
        (2, "parse_error", "f-retry/error_attempt_2"),
    ]
    assert all((run / a["folder"] / "attempt.json").is_file() for a in attempts)
    assert history[1].turns[0].frame == "f-retry/error_attempt_2/screens/step_02.png"
    assert history[1].turns[1].calls[0].parse_error and final.parse_errors == 1 and final.tool_errors == 1
    assert A.load_runs(run).filter(pl.col("task_id") == "f-retry").height == 1


def test_a_failed_session_is_replaced_by_its_rerun(seed_runs):
    run = seed_runs["uitars"]
    assert (run / "u-endpoint" / "session_failed.json").is_file() and (
        run / "u-endpoint" / "session.json"
    ).is_file()
    old, new = [r for r in rundir.read_records(run, latest=False) if r.task_id == "u-endpoint"]
    assert (old.error_class, old.turns, old.frame0) == (
        "endpoint_error",
        [],
        None,
    )  # its steps were rewritten
    assert (new.end_reason, new.error_class, new.info["file"]) == (
        "submitted",
        None,
        "u-endpoint/session.json",
    )
    crash = recs(run)["u-crash"]
    assert crash.info["file"] == "u-crash/session_failed.json" and "unscored_because" not in crash.info


def test_a_session_without_a_recognisable_runner_still_reads(tmp_path):
    run = tmp_path / "mystery"
    (run / "t1").mkdir(parents=True)
    (run / "t1" / "session.json").write_text(json.dumps({"task_id": "t1", "status": "finished", "rounds": 0}))
    (r,) = rundir.read_records(run)
    assert (r.model, r.end_reason, r.reward, r.turns) == ("ownloop:mystery", "submitted", None, [])
