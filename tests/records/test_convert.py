"""`evalkit convert`: the sample run out as ATIF (checked by Harbor's own models) and as Inspect logs (read by
Inspect's own reader and dataframes), and back in with the same keys, rewards, turns and calls."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import evalkit as ek
from evalkit.cli import main
from evalkit.records import traces
from evalkit.records.exporters import convert

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample-run"
EPISODE = [
    "key",
    "model",
    "env",
    "surface",
    "mode",
    "task_id",
    "repeat",
    "reward",
    "end_reason",
    "error_class",
    "n_turns",
    "tool_calls",
    "tool_errors",
    "parse_errors",
    "cost_usd",
]
TURN = ["key", "turn", "text", "reasoning", "stop", "n_calls", "input_tokens", "output_tokens"]
CALL = ["key", "turn", "index", "id", "name", "args", "ok", "parse_error"]


@pytest.fixture(scope="session")
def harbor(tmp_path_factory):
    """Harbor's ATIF models (`harbor.models.trajectories`) from its wheel, unpacked into a temporary folder:
    the distribution installs only on Python ≥ 3.12, but these models import on 3.11."""
    try:
        return importlib.import_module("harbor.models.trajectories")
    except ImportError:
        pass
    where = tmp_path_factory.mktemp("harbor")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--python-version",
        "3.12",
        "--only-binary=:all:",
        "harbor",
        "-d",
        str(where),
    ]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        wheel = next(where.glob("harbor-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(where / "unpacked")
        sys.path.insert(0, str(where / "unpacked"))
        return importlib.import_module("harbor.models.trajectories")
    except (subprocess.SubprocessError, OSError, StopIteration, ImportError) as e:
        pytest.skip(f"Harbor's ATIF models could not be had (pip download of its wheel failed: {e})")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """A copy of the sample run: reading a native run caches its index inside it."""
    dst = tmp_path_factory.mktemp("sample") / "sample-run"
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns(".evalkit"))
    return dst


@pytest.fixture(scope="module")
def atif_job(sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("atif") / "job"
    done = convert(sample, "atif", out)
    assert done.episodes == 36
    return out


@pytest.fixture(scope="module")
def inspect_logs(sample, tmp_path_factory):
    pytest.importorskip("inspect_ai")
    out = tmp_path_factory.mktemp("inspect") / "sample.eval"
    done = convert(sample, "inspect", out)
    assert done.episodes == 36 and len(done.paths) == 6  # 3 models × 2 modes: one log each
    return done.paths


def _same(a: pl.DataFrame, b: pl.DataFrame, cols: list[str], by: list[str]) -> None:
    assert_frame_equal(a.select(cols).sort(by), b.select(cols).sort(by))


def _round_trip(source: Path, back: list[Path] | Path) -> None:
    _same(ek.load_runs(source), ek.load_runs(back), EPISODE, ["key"])
    _same(ek.turns(source), ek.turns(back), TURN, ["key", "turn"])
    _same(ek.calls(source), ek.calls(back), CALL, ["key", "turn", "index"])


def test_atif_round_trip_keeps_keys_rewards_turns_and_calls(sample, atif_job):
    _round_trip(sample, atif_job)
    back = ek.load_runs(atif_job)
    assert back.filter(pl.col("error_class").is_not_null())["reward"].null_count() == 2  # unscored stays so


def test_a_synthetic_run_round_trips_too(tmp_path):
    """Turns counted from 0, a frame per turn, repeats, no transcript (the conversation is rebuilt)."""
    pytest.importorskip("inspect_ai")
    from tests.fixtures.synth import make_run

    run = make_run(tmp_path / "synth", n_tasks=6, repeats=2)
    convert(run, "atif", tmp_path / "job")
    logs = convert(run, "inspect", tmp_path / "synth.eval").paths
    for back in (tmp_path / "job", logs):
        _round_trip(run, back)
    from inspect_ai.log import read_eval_log

    scored = ek.load_runs(run).filter(pl.col("reward").is_not_null())
    for log in map(read_eval_log, map(str, logs)):  # as Inspect: the mean over samples of their epochs' mean
        tasks = (
            scored.filter(pl.col("model") == log.eval.model).group_by("task_id").agg(pl.col("reward").mean())
        )
        assert log.results.scores[0].metrics["mean"].value == pytest.approx(tasks["reward"].mean())
    frames = ek.turns(tmp_path / "job")["frame"]
    assert frames.null_count() == 0 and all((tmp_path / "job" / f).is_file() for f in frames)


def test_atif_is_valid_for_harbor(atif_job, harbor):
    steps = images = 0
    for f in sorted(atif_job.glob("*/agent/trajectory.json")):
        t = harbor.Trajectory.model_validate(json.loads(f.read_text()))
        steps += len(t.steps)
        for s in t.steps:
            results = s.observation.results if s.observation else []
            for part in [p for r in results if isinstance(r.content, list) for p in r.content] + (
                s.message if isinstance(s.message, list) else []
            ):
                if part.type == "image":
                    images += 1
                    assert (f.parent / part.source.path).is_file()  # relative to the trajectory, and there
    assert steps == 228 and images >= 30
    assert {s.source for s in t.steps} >= {"system", "user", "agent"}


def test_atif_trials_carry_the_outcome_where_harbor_keeps_it(sample, atif_job):
    recs = {r.key: r for r in traces.read_records(sample)}
    for trial in sorted(p for p in atif_job.iterdir() if p.is_dir()):
        res = json.loads((trial / "result.json").read_text())
        rec = recs[res["evalkit"]["key"]]
        assert res["trial_name"] == trial.name and res["task_name"] == rec.task_id
        traj = json.loads((trial / "agent" / "trajectory.json").read_text())
        assert traj["extra"]["evalkit"]["reward"] == rec.reward
        assert traj["extra"]["evalkit"]["unscored"] is (not rec.scored)
        if rec.reward is None:
            assert res["verifier_result"] is None and not (trial / "verifier" / "reward.txt").exists()
            assert res["exception_info"]["exception_type"] == rec.error_class == "endpoint_error"
        else:
            assert res["verifier_result"] == {"rewards": {"reward": rec.reward}}
            assert float((trial / "verifier" / "reward.txt").read_text()) == rec.reward
        assert traj["final_metrics"].get("total_cost_usd") == rec.cost_usd  # absent when unknown, never 0
        u = rec.usage
        assert traj["final_metrics"]["total_completion_tokens"] == u["output"]
        assert traj["final_metrics"]["total_prompt_tokens"] == u["input"] + u["cache_read"] + u["cache_write"]


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
    (rec,) = [r for r in traces.read_records(job) if r.reward == 1.0]
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


def test_inspect_logs_read_by_inspect(inspect_logs, sample):
    from inspect_ai.analysis import events_df, messages_df, samples_df
    from inspect_ai.log import read_eval_log

    n = 0
    for path in inspect_logs:
        log = read_eval_log(str(path))
        assert log.status == "success" and log.eval.dataset.sample_ids
        for s in log.samples:
            n += 1
            assert s.epoch == 1 and s.id in log.eval.dataset.sample_ids
            turns = [m for m in s.messages if m.role == "assistant"]
            calls = sum(len(m.tool_calls or []) for m in turns)
            kinds = [e.event for e in s.events]
            assert kinds.count("model") == len(turns) and kinds.count("tool") == calls
    assert n == 36
    files = [str(p) for p in inspect_logs]
    assert len(samples_df(files)) == 36
    assert len(messages_df(files)) > 36 and len(events_df(files)) > 36


def test_inspect_round_trip_keeps_keys_rewards_turns_and_calls(sample, inspect_logs):
    _round_trip(sample, inspect_logs)


def _log(path: Path, scorers: dict[str, list], epochs: int = 2) -> Path:
    """An Inspect log written with Inspect's own classes: 3 samples × `epochs`, scored by `scorers`
    (name → values, one per sample and epoch in order)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall

    ids = ["q1", "q2", "q3"]
    samples, k = [], 0
    for epoch in range(1, epochs + 1):
        for sid in ids:
            msgs = [
                ChatMessageUser(content=f"Question {sid}"),
                ChatMessageAssistant(
                    content="Let me check.",
                    tool_calls=[ToolCall(id="t1", function="lookup", arguments={"q": sid})],
                ),
                ChatMessageTool(content="42", tool_call_id="t1", function="lookup"),
                ChatMessageAssistant(content="42"),
            ]
            scores = {name: Score(value=vals[k]) for name, vals in scorers.items()}
            samples.append(
                EvalSample(
                    id=sid,
                    epoch=epoch,
                    input=f"Question {sid}",
                    target="42",
                    messages=msgs,
                    output=ModelOutput.from_content("m", "42"),
                    scores=scores,
                )
            )
            k += 1
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created="2026-12-01T10:00:00+00:00",
            task="quiz",
            dataset=EvalDataset(name="quiz", samples=3, sample_ids=ids),
            model="mockllm/model",
            config=EvalConfig(epochs=epochs),
        ),
        samples=samples,
    )
    write_eval_log(log, str(path))
    return path


def test_an_inspect_log_of_3_samples_by_2_epochs_scored_c_i(tmp_path):
    pytest.importorskip("inspect_ai")
    values = ["C", "I", "C", "I", "I", "C"]
    path = _log(tmp_path / "quiz.eval", {"match": values})
    before = _snapshot(tmp_path)
    df = ek.load_runs(path).sort("repeat", "task_id")
    assert _snapshot(tmp_path) == before  # read-only: the index went to the user cache
    assert df.height == 6 and df["repeat"].to_list() == [0, 0, 0, 1, 1, 1]
    assert df["task_id"].to_list() == ["q1", "q2", "q3"] * 2
    assert df["reward"].to_list() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert set(df["model"]) == {"mockllm/model"} and set(df["env"]) == {"quiz"}
    calls = ek.calls(tmp_path / "quiz.eval")
    assert (
        calls.height == 6
        and set(calls["name"]) == {"lookup"}
        and set(calls["args"]) <= {'{"q": "q1"}', '{"q": "q2"}', '{"q": "q3"}'}
    )


def test_a_log_with_several_scorers_reads_the_one_asked(tmp_path, caplog, capsys):
    pytest.importorskip("inspect_ai")
    path = _log(tmp_path / "two.eval", {"match": ["C", "I", "P"], "judge": [0.2, True, "no"]}, epochs=1)
    df = ek.load_runs(path, cache=False).sort("task_id")
    assert df["reward"].to_list() == [1.0, 0.0, 0.5]  # the first scorer, said in a warning
    assert "'judge'" in caplog.text and "--scorer" in caplog.text
    df = ek.load_runs(path, scorer="judge").sort("task_id")
    assert df["reward"].to_list() == [0.2, 1.0, 0.0]
    assert ek.load_runs(path, scorer="match").sort("task_id")["reward"].to_list() == [1.0, 0.0, 0.5]
    assert main(["summarise", str(path), "--scorer", "nope"]) == 2
    assert "no scorer 'nope' in this log (its scorers: match, judge)" in capsys.readouterr().err
    assert main(["summarise", str(path), "--scorer", "judge"]) == 0
    assert "0.400" in capsys.readouterr().out  # the mean of 0.2, 1 and 0


@pytest.mark.parametrize(
    "value, reward",
    [
        (1, 1.0),
        (0.25, 0.25),
        (True, 1.0),
        (False, 0.0),
        ("C", 1.0),
        ("I", 0.0),
        ("P", 0.5),
        ("N", 0.0),
        ("yes", 1.0),
        ("0.75", 0.75),
        ("maybe", None),
        ({"a": 1}, None),
        ([1], None),
        (float("nan"), None),
    ],
)
def test_score_values_read_as_inspect_reads_them_but_never_a_made_up_zero(value, reward):
    from evalkit.records.importers.inspect_log import to_float

    assert to_float(value) == reward


def test_corrupt_logs_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.eval"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["summarise", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable Inspect log" in err


def test_cli_convert(sample, tmp_path, capsys):
    assert main(["convert", str(sample), "--to", "atif", "-o", str(tmp_path / "job")]) == 0
    assert "wrote 36 episode(s)" in capsys.readouterr().out
    assert main(["convert", str(sample), "--to", "atif", "-o", str(tmp_path / "job")]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["convert", str(sample), "--to", "inspect", "-o", str(tmp_path / "x.json")]) == 2
    assert "a .eval file" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "missing"), "--to", "atif", "-o", str(tmp_path / "j2")]) == 2
    assert not (tmp_path / "j2").exists()


def test_inspect_is_imported_only_when_a_log_is_read_or_written():
    code = "import sys, evalkit, evalkit.cli; evalkit.cli.build_parser(); print('inspect_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
