"""`evalkit convert`: the sample run out as ATIF (checked by Harbor's own models) and as Inspect logs (read by
Inspect's own reader and dataframes), and back in with the same keys, rewards, turns and calls."""

from __future__ import annotations

import hashlib
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
from evalkit.records import rundir, transcripts
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
CALL = ["key", "turn", "index", "id", "name", "args", "ok", "parse_error", "result"]


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


def _seen(run: Path, rec) -> list:
    """The conversation as the model saw it, images by their bytes' hash."""

    def digest(img: dict) -> str | None:
        return hashlib.sha256((run / img["path"]).read_bytes()).hexdigest() if img["path"] else None

    return [(m.role, m.turn, m.text, m.call_id, [digest(i) for i in m.images])
            for m in transcripts.messages(rec, run)]  # fmt: skip


def test_atif_keeps_what_the_model_saw(sample, atif_job):
    """System prompt, opening message with the target, each result as sent (notes and screenshots)."""
    original = {r.key: r for r in rundir.read_records(sample)}
    images = 0
    for rec in rundir.read_records(atif_job):
        seen = _seen(atif_job, rec)
        assert seen == _seen(sample, original[rec.key])
        images += sum(len(x[-1]) for x in seen)
    assert images >= 30


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
    recs = {r.key: r for r in rundir.read_records(sample)}
    job = json.loads((atif_job / "config.json").read_text())  # how Harbor's viewer tells a job folder
    assert job["job_name"] == atif_job.name and len(job["agents"]) == 3
    for trial in sorted(p for p in atif_job.iterdir() if p.is_dir()):
        res = json.loads((trial / "result.json").read_text())
        rec = recs[res["evalkit"]["key"]]
        assert res["trial_name"] == trial.name and res["task_name"] == rec.task_id
        assert json.loads((trial / "config.json").read_text()) == res["config"]
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


def test_inspect_keeps_what_the_model_saw_but_its_image_files(sample, inspect_logs):
    """Texts as sent, in order; images travel inside the log, so read back they are images not stored."""
    original = {r.key: r for r in rundir.read_records(sample)}

    def seen(run: Path, rec) -> list:
        return [(m.role, m.turn, m.text, m.call_id, len(m.images)) for m in transcripts.messages(rec, run)]

    for log in inspect_logs:
        for rec in rundir.read_records(log):
            assert seen(log, rec) == seen(sample, original[rec.key])


def test_cli_convert(sample, tmp_path, capsys):
    assert main(["convert", str(sample), "--to", "atif", "-o", str(tmp_path / "job")]) == 0
    assert "wrote 36 episode(s)" in capsys.readouterr().out
    assert main(["convert", str(sample), "--to", "atif", "-o", str(tmp_path / "job")]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["convert", str(sample), "--to", "inspect", "-o", str(tmp_path / "x.json")]) == 2
    assert "a .eval file" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "missing"), "--to", "atif", "-o", str(tmp_path / "j2")]) == 2
    assert main(["convert", str(sample), "--to", "inspect", "-o", str(sample / "x.eval")]) == 2
    assert "is inside the run" in capsys.readouterr().err and not list(sample.glob("*.eval"))
    assert not (tmp_path / "j2").exists()


def test_inspect_is_imported_only_when_a_log_is_read_or_written():
    code = "import sys, evalkit, evalkit.cli; evalkit.cli.build_parser(); print('inspect_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
