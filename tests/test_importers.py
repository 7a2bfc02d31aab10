"""Other harnesses' runs load, analyse and display like native ones."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit import display, importers, traces
from evalkit.errors import TraceError
from evalkit.types import EpisodeRecord

FIX = Path(__file__).parent / "fixtures"


def test_design_canvas_rollout():
    run = FIX / "design_canvas_run"
    assert importers.detect(run) == "design-canvas"
    df = A.load_runs(run)
    assert df.height == 4 and df.columns == list(A.EPISODE_COLUMNS)
    assert set(df["source"]) == {"design-canvas"}
    bad = df.filter(~pl.col("scored")).row(0, named=True)
    assert bad["reward"] is None and bad["error_class"] == "harness_error"
    assert df.filter(pl.col("task_id") == "canvas-test-0001")["end_reason"].to_list() == [
        "auto_submitted",
        "error",
    ]
    for row in df.iter_rows(named=True):
        for rel in (row["target"], row["frame0"], row["render"]):
            assert traces.safe_path(run, rel) is not None, rel
    recs = [EpisodeRecord.from_dict(d) for d in traces.iter_dicts(run)]
    call = recs[0].turns[0].calls[1]
    assert call.parse_error and not call.ok and call.args == "{not json"
    assert recs[0].turns[1].calls[0].images == [recs[0].turns[1].frame]
    assert recs[0].parse_errors == 1
    assert len({r.key for r in recs}) == 4


@pytest.mark.parametrize("src", ["tool_planning.jsonl", "tool_planning_dir"])
def test_tool_planning_rollout(src):
    path = FIX / src
    assert importers.detect(path) == "tool-planning"
    df = A.load_runs(path)
    assert df.height == 4
    assert df["input_tokens"].to_list()[0] == 900
    assert df.filter(pl.col("model") == "m-b")["scored"].to_list() == [True, False]
    rec = EpisodeRecord.from_dict(next(importers.read_foreign(path)))
    assert [t.text for t in rec.turns] == ["Checking a plan.", "Submitting."]
    first = rec.turns[0].calls[0]
    assert first.name == "check_plan" and first.args == {"plan": [["V1", 1]]}
    assert first.result == "conflict at berth 1" and not first.ok
    assert rec.grade["rubric"] == {"feasible": True} and rec.final_doc == [["V1", 2]]
    assert "Re-plan" in rec.info["prompt"]
    c = A.compare(df, "m-a", "m-b", by=None)
    assert c["n_tasks"][0] == 1 and c["n_dropped"][0] == 1


def test_ownloop_gui_run():
    run = FIX / "ownloop_run"
    assert importers.detect(run) == "ownloop-gui"
    df = A.load_runs(run).sort("task_id")
    assert df["task_id"].to_list() == ["task_admin", "task_broken", "task_login"]
    assert df["reward"].to_list() == [0.0, None, 1.0]
    assert df["error_class"].to_list() == [None, "env_error", None]
    assert set(df["model"]) == {"ownloop:ui-agent-1"}
    rec = EpisodeRecord.from_dict(next(d for d in traces.iter_dicts(run) if d["task_id"] == "task_login"))
    assert rec.turns[0].frame == "task_login/screens/step_00.png"
    assert rec.turns[0].calls[0].name == "click" and rec.turns[0].calls[0].args["x"] == 10
    assert rec.parse_errors == 1
    html = display.episode_html(run, rec)
    assert "data:image/jpeg;base64" in html and "<script>" not in html


def test_unknown_directory_is_one_line_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TraceError) as e:
        list(importers.read_foreign(tmp_path))
    assert "\n" not in str(e.value)
    (tmp_path / "x.jsonl").write_text(json.dumps({"a": 1}) + "\n")
    with pytest.raises(TraceError):
        A.load_runs(tmp_path / "x.jsonl")


def test_design_canvas_turn_without_frame_field_gets_its_frame_file():
    run = FIX / "design_canvas_run"
    rec = EpisodeRecord.from_dict([d for d in traces.iter_dicts(run)][2])
    stem = "gpt-y__canvas-test-0000__2"
    assert [t.frame for t in rec.turns] == [f"frames/{stem}/000.png", f"frames/{stem}/001.png"]
    assert A.load_runs(run)["n_frames"].to_list() == [2, 2, 2, 2]
    assert all(traces.safe_path(run, t.frame) is not None for t in rec.turns)


def test_tool_planning_steps_counted_from_one():
    recs = [EpisodeRecord.from_dict(d) for d in importers.read_foreign(FIX / "tool_planning_1based.jsonl")]
    check, submit = recs[0].turns[0].calls[0], recs[0].turns[1].calls[0]
    assert check.name == "check_plan" and not check.ok
    assert submit.name == "submit_plan" and submit.ok
    assert recs[0].tool_errors == 1


def test_tool_planning_steps_matched_by_tool_and_order_when_turns_fit_no_base(tmp_path):
    e = json.loads((FIX / "tool_planning_1based.jsonl").read_text().splitlines()[0])
    for s, t in zip(e["steps"], (10, 20), strict=True):
        s["turn"] = t  # neither 0- nor 1-based
    e["steps"].reverse()  # order within a tool is what counts
    (tmp_path / "ep.json").write_text(json.dumps(e))
    rec = EpisodeRecord.from_dict(next(importers.read_foreign(tmp_path / "ep.json")))
    assert [c.ok for t in rec.turns for c in t.calls] == [False, True]


def test_no_reward_without_error_is_not_an_infrastructure_error(tmp_path):
    df = A.load_runs(FIX / "tool_planning_1based.jsonl")
    quiet = df.filter(pl.col("reward").is_null()).row(0, named=True)
    assert quiet["error_class"] is None and quiet["end_reason"] == "turn_limit" and quiet["error"] is None
    assert not quiet["scored"]
    s = A.summarise(df).row(0, named=True)
    assert (s["n"], s["scored"], s["unscored"], s["no_reward"]) == (2, 1, 0, 1)
    assert s["mean_reward"] == s["mean_reward_unscored_as_0"] == pytest.approx(0.5)  # in neither mean
    assert "No reward" in A.format_summary(df) and "infrastructure" not in A.format_summary(df)
    # the same in a design-canvas rollout: no reward and no error is not a harness error
    line = json.loads((FIX / "design_canvas_run" / "trace.jsonl").read_text().splitlines()[0])
    (tmp_path / "trace.jsonl").write_text(json.dumps(line | {"reward": None, "grade": None}) + "\n")
    row = A.load_runs(tmp_path).row(0, named=True)
    assert row["error_class"] is None and row["reward"] is None and not row["scored"]


def test_unscored_as_zero_counts_failures_not_missing_rewards(tmp_path):
    from fixtures.synth import make_run

    df = A.load_runs(make_run(tmp_path / "r", models={"m": 0.5}, n_tasks=6, frames=False, unscored=1))
    df = df.with_columns(  # one more episode: ended without error, no reward
        pl.when(pl.col("task_id") == "canvas-test-0005")
        .then(None)
        .otherwise(pl.col("reward"))
        .alias("reward"),
    ).with_columns((pl.col("reward").is_not_null() & pl.col("error_class").is_null()).alias("scored"))
    rewards = df.filter(pl.col("scored"))["reward"]
    s = A.summarise(df).row(0, named=True)
    assert (s["scored"], s["unscored"], s["no_reward"]) == (4, 1, 1)
    assert s["mean_reward_unscored_as_0"] == pytest.approx(rewards.sum() / 5)
    t = A.by_tier(df, n_boot=200).filter(pl.col("tier") == "all").row(0, named=True)
    assert t["mean_reward_unscored_as_0"] == pytest.approx(rewards.sum() / 5)
    assert t["ci_low_unscored_as_0"] <= t["mean_reward_unscored_as_0"] <= t["ci_high_unscored_as_0"]
