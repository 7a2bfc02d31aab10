"""Grades from elsewhere fill in the episodes a run holds no reward for, and nothing else."""

from __future__ import annotations

import json
import logging

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit.errors import ConfigError
from evalkit.records import grades
from evalkit.records.rundir import TraceWriter
from evalkit.types import EpisodeRecord, episode_key


def rec(model: str, task: str, reward: float | None, error_class: str | None = None, repeat: int = 0):
    return EpisodeRecord(
        key=episode_key(model, "webapp", "gui", "ownloop", task, None, repeat),
        model=model,
        env="webapp",
        surface="gui",
        mode="ownloop",
        task_id=task,
        repeat=repeat,
        reward=reward,
        error_class=error_class,
        end_reason="error" if error_class else "submitted",
    )


@pytest.fixture
def run(tmp_path):
    w = TraceWriter(tmp_path / "run")
    for r in (
        rec("m", "t1", None),
        rec("m", "t2", None),
        rec("m", "t3", 0.25),
        rec("m", "t4", None, "env_error"),
    ):
        w.append(r)
    return tmp_path / "run"


def test_a_csv_grades_only_the_ungraded(run, tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("task_id,reward,why\nt1,1,found the order\nt3,1.0,x\nt4,1,x\nt9,0.5,x\n")
    df = A.load_runs(run, grades=path).sort("task_id")
    assert df["reward"].to_list() == [1.0, None, 0.25, None]  # t2 has no grade; t3 keeps its own; t4 unscored
    assert df["scored"].to_list() == [True, False, True, False]
    assert (
        json.loads(df["grade"][0]) == {"total": 1.0, "why": "found the order"} and df["grade_total"][0] == 1.0
    )
    _, merged = grades.apply(A.load_runs(run), path)
    assert (merged.graded, merged.left, merged.unused) == (1, 1, 3)
    s = A.summarise(df).row(0, named=True)
    assert (s["scored"], s["unscored"], s["no_reward"], s["mean_reward"]) == (2, 1, 1, 0.625)


@pytest.mark.parametrize(
    "content",
    [
        {"t1": True, "t2": {"reward": 0.0, "note": "wrong page"}},
        [{"task_id": "t1", "reward": 1}, {"task_id": "t2", "reward": False, "note": "wrong page"}],
    ],
)
def test_json_grades_in_both_shapes(run, tmp_path, content):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(content))
    df = A.load_runs(run, grades=path).sort("task_id")
    assert df["reward"].to_list()[:2] == [1.0, 0.0]


def test_a_grade_that_fits_several_episodes_is_refused(tmp_path):
    w = TraceWriter(tmp_path / "r")
    for r in (
        rec("a", "t1", None),
        rec("b", "t1", None),
        rec("b", "t2", None),
        rec("b", "t2", None, repeat=1),
    ):
        w.append(r)
    path = tmp_path / "g.csv"
    path.write_text("task_id,reward\nt1,1\n")
    with pytest.raises(ConfigError, match="add a model column"):
        A.load_runs(tmp_path / "r", grades=path)
    path.write_text("task_id,model,reward\nt1,a,1\nt1,b,0\nt2,b,1\n")
    with pytest.raises(ConfigError, match="add a repeat column"):
        A.load_runs(tmp_path / "r", grades=path)
    path.write_text("task_id,model,repeat,reward\nt1,a,0,1\nt1,b,0,0\nt2,b,1,0.5\n")
    df = A.load_runs(tmp_path / "r", grades=path)
    assert df.sort("model", "task_id", "repeat")["reward"].to_list() == [1.0, 0.0, None, 0.5]


@pytest.mark.parametrize(
    "name, text, says",
    [
        ("g.txt", "t1 1", "expected a .json or .csv file"),
        ("g.csv", "task,score\nt1,1\n", "task_id and reward columns"),
        ("g.csv", "task_id,reward\nt1,high\n", "is not a number"),
        ("g.csv", "task_id,reward\nt1,1\nt1,0\n", "graded twice"),
        ("g.csv", "task_id,reward\n,1\n", "no task_id"),
        ("g.json", "{not json", "not valid JSON"),
        ("g.json", '[{"task_id": "t1", "reward": NaN}]', "not a finite number"),
        ("g.json", '"t1"', "expected a list of objects"),
        ("g.csv", "task_id,model,reward\nt1,,1\n", "names none"),
    ],
)
def test_bad_grade_files_are_one_line(run, tmp_path, name, text, says):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        A.load_runs(run, grades=path)
    assert says in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="not found"):
        grades.read(tmp_path / "missing.csv")


def test_an_empty_reward_leaves_the_episode_ungraded(run, tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("task_id,reward\nt1,\nt2,0.5\n")
    df = A.load_runs(run, grades=path).sort("task_id")
    assert (
        df["reward"].to_list()[:2] == [None, 0.5] and df.filter(pl.col("task_id") == "t1")["grade"][0] is None
    )


def test_grades_that_matched_nothing_are_named(run, tmp_path, caplog):
    """The CLI line and the warning of `load_runs(grades=...)` name the grades they could not use: a few, then
    how many more."""
    path = tmp_path / "g.csv"
    path.write_text("task_id,reward\nt1,1\nt3,1\nt4,1\n" + "".join(f"gone-{k},0\n" for k in range(6)))
    with caplog.at_level(logging.INFO, logger="evalkit"):
        A.load_runs(run, grades=path)
    (said,) = [r for r in caplog.records if "grades from" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert said.getMessage().endswith(
        "1 episode(s) graded, 1 left without a reward, 8 grade(s) matched no ungraded episode: "
        "t3, t4, gone-0, gone-1, gone-2 and 3 more"
    )
    path.write_text("task_id,model,repeat,reward\nt1,m,0,1\nt1,m,1,1\n")
    _, merged = grades.apply(A.load_runs(run), path)
    assert merged.line().endswith("1 grade(s) matched no ungraded episode: t1 (model m, repeat 1)")
    path.write_text("task_id,reward\nt1,1\n")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="evalkit"):
        A.load_runs(run, grades=path)
    assert [r.levelno for r in caplog.records if "grades from" in r.getMessage()] == [logging.INFO]


def test_a_run_graded_elsewhere_keeps_the_graders_reward_for_its_harness(seed_runs, tmp_path):
    """An own-loop episode evalkit leaves unscored (the harness raised mid-episode) is still graded by the
    seed's grader: its grade becomes the episode's harness_reward, never its reward."""
    path = tmp_path / "g.csv"
    path.write_text("task_id,reward\nu-finish,1\nu-harness,0.5\nu-crash,1\n")
    df = A.load_runs(seed_runs["uitars"], grades=path)
    got = {r["task_id"]: (r["reward"], r["harness_reward"]) for r in df.iter_rows(named=True)}
    assert got["u-finish"] == (1.0, 1.0)
    assert got["u-harness"] == (None, 0.5)  # unscored here; the grader's 0.5 kept for its own mean
    assert got["u-crash"] == (None, 1.0)  # a grade the file gives is kept, whichever file the session is in
    assert sum(v is not None for _, v in got.values()) == 3
