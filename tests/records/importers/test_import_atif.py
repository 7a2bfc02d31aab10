"""ATIF trajectories and Harbor jobs as other writers leave them: the reward from each trial's result file
(none, never 0, without one), the calls and usage from the steps, one line for a trajectory that is not ATIF,
and the job left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import evalkit as ek
from evalkit.cli import main
from evalkit.records import rundir, transcripts
from evalkit.types import SCRIPTED


def _job(root: Path) -> Path:
    """A Harbor job as Harbor's own agents write one: two trials, one verified, one not."""
    step_user = {"step_id": 1, "source": "user", "message": "Fix the failing test."}
    for name, rewards in (("fix-tests__a1", {"reward": 1}), ("fix-tests__b2", None)):
        traj = {
            "schema_version": "ATIF-v1.4",
            "session_id": name,
            "agent": {"name": "terminus-2", "version": "2.0", "model_name": "openai/gpt-x"},
            "steps": [
                step_user,
                {
                    "step_id": 2,
                    "source": "agent",
                    "message": "Running the tests.",
                    "reasoning_content": "First look.",
                    "tool_calls": [
                        {"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "pytest"}}
                    ],
                    "observation": {
                        "results": [
                            {
                                "source_call_id": "c1",
                                "content": "1 failed",
                                "extra": {"is_error": rewards is None},
                            }
                        ]
                    },
                    "metrics": {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 100},
                },
            ],
        }
        (root / name / "agent").mkdir(parents=True)
        (root / name / "agent" / "trajectory.json").write_text(json.dumps(traj))
        result = {
            "task_name": "fix-tests",
            "trial_name": name,
            "verifier_result": {"rewards": rewards} if rewards else None,
            "exception_info": None,
        }
        (root / name / "result.json").write_text(json.dumps(result))
    (root / "config.json").write_text("{}")
    return root


def _snapshot(root: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_harbor_job_reads_its_reward_from_the_result_file_and_is_never_written(tmp_path):
    job = _job(tmp_path / "job")
    before = _snapshot(job)
    df = ek.load_runs(job)
    assert df.height == 2 and set(df["model"]) == {"openai/gpt-x"} and set(df["task_id"]) == {"fix-tests"}
    assert sorted(df["repeat"]) == [0, 1]
    verified = df.filter(pl.col("repeat") == 0).row(0, named=True)
    assert verified["reward"] == 1.0 and verified["error_class"] is None
    assert df.filter(pl.col("repeat") == 1)["reward"].to_list() == [None]  # no reward → none, never 0
    assert df.sort("repeat")["tool_errors"].to_list() == [
        0,
        1,
    ]  # a result's is_error, as other writers say it
    assert ek.summarise(df)["no_reward"].to_list() == [1]
    (rec,) = [r for r in rundir.read_records(job) if r.reward == 1.0]
    call = rec.turns[0].calls[0]
    assert (call.name, call.args, call.result) == ("bash", {"cmd": "pytest"}, "1 failed")
    assert rec.turns[0].usage == {"input": 20, "output": 30, "cache_read": 100, "cache_write": 0}
    assert rec.turns[0].reasoning == "First look." and "Fix the failing test." in rec.info["prompt"]
    assert _snapshot(job) == before  # its index went to the user cache, nothing beside the trials


def test_a_trajectory_file_alone_loads_without_a_reward(tmp_path):
    f = _job(tmp_path / "job") / "fix-tests__a1" / "agent" / "trajectory.json"
    one = tmp_path / "traj.json"
    one.write_bytes(f.read_bytes())
    df = ek.load_runs(one)
    assert df.height == 1 and df["reward"].to_list() == [None] and df["n_turns"].to_list() == [1]


def test_a_trajectory_missing_fields_is_one_line(tmp_path, capsys):
    job = _job(tmp_path / "job")
    f = job / "fix-tests__a1" / "agent" / "trajectory.json"
    traj = json.loads(f.read_text())
    del traj["steps"][1]["source"]
    f.write_text(json.dumps(traj))
    assert main(["summarise", str(job)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ATIF step 2 has no source" in err


def test_a_folder_of_jobs_reads_as_each_job(tmp_path):
    for name in ("job-a", "job-b"):
        _job(tmp_path / "jobs" / name)
    df = ek.load_runs(tmp_path / "jobs")
    assert df.height == 4 and sorted(set(df["run_name"])) == ["job-a", "job-b"]


def _trial(root: Path, name: str, reward: float | None, exc: str | None, valid: bool | None) -> None:
    (root / name).mkdir(parents=True)
    result = {"task_name": name, "trial_name": name,
              "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None}  # fmt: skip
    if exc:
        when = "2026-12-01T10:00:00Z"
        result["exception_info"] = {"exception_type": exc, "exception_message": "it failed",
                                    "exception_traceback": "", "occurred_at": when}  # fmt: skip
    if valid is not None:
        result["reward_valid"] = valid
    (root / name / "result.json").write_text(json.dumps(result))


def test_an_exception_leaves_the_reward_as_harbor_classifies_it(tmp_path):
    """Harbor marks by exception type whether the verifier's reward stands: an agent timeout is graded on
    what it left (as evalkit's own deadline), an API failure is not (unscored, never 0)."""
    job = tmp_path / "job"
    _trial(job, "timeout", 0.5, "AgentTimeoutError", True)
    _trial(job, "ratelimit", 0.0, "ApiRateLimitError", False)
    _trial(job, "sandbox", None, "SandboxBuildFailedError", False)
    _trial(job, "unsaid", 1.0, "SomethingElse", None)
    got = {r.task_id: r for r in rundir.read_records(job)}
    assert (got["timeout"].reward, got["timeout"].end_reason, got["timeout"].error_class) == (
        0.5,
        "deadline",
        None,
    )
    assert got["timeout"].error == "AgentTimeoutError: it failed"
    assert (got["ratelimit"].reward, got["ratelimit"].error_class) == (None, "endpoint_error")
    assert got["ratelimit"].info["harness_reward"] == 0.0 and "ApiRateLimitError" in got["ratelimit"].info[
        "unscored_because"
    ]  # fmt: skip
    assert (got["sandbox"].reward, got["sandbox"].error_class) == (None, "harness_error")
    assert (got["unsaid"].reward, got["unsaid"].error_class) == (None, "harness_error")
    assert not got["sandbox"].turns and got["sandbox"].info["missing"]


def _v18(steps_cost: bool = True) -> dict:
    """An ATIF-v1.8 trajectory as Harbor's newest models define it: a voice user turn (an audio part), an
    agent's scripted greeting and a deterministic dispatch (llm_call_count 0, v1.7), per-step costs without
    a total, an embedded subagent (v1.7)."""
    audio = {
        "type": "audio",
        "source": {"media_type": "audio/mp3", "path": "audio/turn1.mp3", "duration_sec": 2.5},
    }
    metrics = {"prompt_tokens": 50, "completion_tokens": 5, **({"cost_usd": 0.01} if steps_cost else {})}
    sub = {
        "schema_version": "ATIF-v1.8",
        "trajectory_id": "sub-1",
        "agent": {"name": "helper", "version": "1.0"},
        "steps": [{"step_id": 1, "source": "user", "message": "look it up"}],
    }
    return {
        "schema_version": "ATIF-v1.8", "session_id": "s", "trajectory_id": "t",
        "agent": {"name": "voice-agent", "version": "1.0", "model_name": "gpt-realtime-x"},
        "steps": [
            {"step_id": 1, "source": "agent", "message": "Hello, how can I help?", "llm_call_count": 0},
            {"step_id": 2, "source": "user", "message": [{"type": "text", "text": "Book a table."}, audio]},
            {"step_id": 3, "source": "agent", "message": "", "llm_call_count": 1, "metrics": metrics,
             "tool_calls": [{"tool_call_id": "c1", "function_name": "book", "arguments": {"n": 2}}],
             "observation": {"results": [{"source_call_id": "c1", "content": "booked",
                                          "extra": {"score": 0.9}}]}},
            {"step_id": 4, "source": "agent", "message": "", "llm_call_count": 0,
             "tool_calls": [{"tool_call_id": "c2", "function_name": "notify", "arguments": {}}],
             "observation": {"results": [{"source_call_id": "c2", "content": "sent"}]}},
            {"step_id": 5, "source": "agent", "message": "Done.", "llm_call_count": 1, "metrics": metrics},
        ],
        "subagent_trajectories": [sub],
    }  # fmt: skip


def test_atif_v1_8_as_harbor_defines_it(tmp_path, harbor):
    traj = _v18()
    harbor.Trajectory.model_validate(traj)  # the shape Harbor's newest models accept
    f = tmp_path / "voice.json"
    f.write_text(json.dumps(traj))
    (rec,) = rundir.read_records(f)
    # The greeting is no turn; the dispatch is one (its call was made), without an inference behind it.
    assert rec.n_turns == 3 and [t.stop for t in rec.turns] == ["", "dispatch", ""]
    assert rec.tool_calls == 2 and rec.cost_usd == pytest.approx(0.02)  # the steps' costs, no total given
    assert rec.info["subagent_trajectories"] == 1 and rec.info["schema_version"] == "ATIF-v1.8"
    msgs = transcripts.messages(rec, f.parent)
    assert (msgs[0].role, msgs[0].text, msgs[0].note) == ("assistant", "Hello, how can I help?", SCRIPTED)
    assert msgs[1].text == "Book a table.\n(audio audio/mp3: audio/turn1.mp3, 2.5 s)"
    no_total = tmp_path / "partial.json"
    partial = _v18(steps_cost=False)
    no_total.write_text(json.dumps(partial))
    assert next(rundir.read_records(no_total)).cost_usd is None  # unknown, never 0
