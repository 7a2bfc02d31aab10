"""run_batch: jobs, concurrency, resume (also after a SIGKILL), run.json and summaries."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from evalkit.envs.client.resolved import ResolvedEnv, embedded
from evalkit.errors import ConfigError, MissingKeyError
from evalkit.records.rundir import TraceWriter, iter_lines, read_records
from evalkit.run.batch import run_batch
from evalkit.run.jobs import plan_jobs
from evalkit.types import AgentOptions, EpisodeRecord

EVALSET = "data/evalsets/canvas-test-300.json"


def test_batch_writes_a_complete_run_and_resume_skips_it(canvas_server, tmp_path):
    out = tmp_path / "run"
    kw = dict(evalset=EVALSET, limit=6, out=out, concurrency=3, max_turns=6, progress=False)
    run = run_batch(["baseline:random", "baseline:tracer"], canvas_server, **kw)
    assert run.ran == 12 and run.skipped == 0 and run.errors == 0
    recs = list(read_records(out))
    assert len(recs) == 12 and len({r.key for r in recs}) == 12
    assert Counter(r.model for r in recs) == {"baseline:random": 6, "baseline:tracer": 6}
    assert all(r.reward is not None and r.evalset_task for r in recs)
    meta = json.loads((out / "run.json").read_text())
    assert meta["models"] == ["baseline:random", "baseline:tracer"] and meta["evalset_id"]
    assert meta["prices"]["library"] == "genai-prices" and meta["prices"]["version"]
    assert (out / "summary.json").exists() and (out / "summary.md").exists()
    again = run_batch(["baseline:random", "baseline:tracer"], canvas_server, **kw)
    assert again.ran == 0 and again.skipped == 12
    assert len(list(iter_lines(out / "trace.jsonl"))) == 12
    assert len(json.loads((out / "run.json").read_text())["invocations"]) == 2


def test_resume_reruns_what_ended_in_an_infrastructure_error(canvas_server, tmp_path):
    out = tmp_path / "run"
    kw = dict(evalset=EVALSET, task_ids=["canvas-test-0001", "canvas-test-0002"], out=out, progress=False)
    run_batch(["baseline:random"], canvas_server, **kw)
    first = {r.key: r for r in read_records(out)}
    victim = next(iter(first))
    broken = EpisodeRecord.from_dict(
        {**first[victim].to_dict(), "reward": None, "error_class": "endpoint_error"}
    )
    TraceWriter(out).append(broken)
    again = run_batch(["baseline:random"], canvas_server, **kw)
    assert again.ran == 1 and again.skipped == 1
    latest = {r.key: r for r in read_records(out)}
    assert latest[victim].error_class is None and latest[victim].reward is not None


def test_split_selection_without_an_evalset(canvas_server, tmp_path):
    run = run_batch(
        "baseline:random",
        canvas_server,
        split="train",
        tasks=2,
        start=5,
        stride=10,
        out=tmp_path / "r",
        progress=False,
        frames=False,
    )
    recs = sorted(read_records(tmp_path / "r"), key=lambda r: r.task_id)
    assert run.ran == 2 and [r.task_id for r in recs] == ["canvas-train-0005", "canvas-train-0015"]
    assert all(r.frame0 is None and all(t.frame is None for t in r.turns) for r in recs)


@pytest.mark.parametrize(
    "kw, exc",
    [
        (dict(models=["nosuch:x"]), ConfigError),
        (dict(models=["anthropic:claude-sonnet-5"]), MissingKeyError),
        (dict(evalset="data/evalsets/missing.json"), ConfigError),
        (dict(evalset=EVALSET, subset="nope"), ConfigError),
        (dict(surfaces=["paint"]), ConfigError),
        (dict(modes=["telepathy"]), ConfigError),
        (dict(concurrency=0), ConfigError),
        (dict(options=AgentOptions(keep_images=2, image_window=(6, 2))), ConfigError),
        (dict(options=AgentOptions(image_window=(4, 4))), ConfigError),
        (dict(models=["vllm:m"]), MissingKeyError),
        (dict(models=["openai-chat:m"]), ConfigError),  # OPENAI_BASE_URL: nothing listens there
        (dict(surfaces=["gui"], skins=["neon"]), ConfigError),
        (dict(coordinates="polar"), ConfigError),
    ],
)
def test_config_errors_come_before_any_work(tmp_path, monkeypatch, kw, exc):
    from evalkit.serving import free_port

    monkeypatch.chdir(tmp_path)  # no .env up the tree supplies a key
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    args = dict(models=["baseline:random"], env="canvas", out=tmp_path / "never", progress=False)
    args.update(kw)
    with pytest.raises(exc):
        run_batch(args.pop("models"), args.pop("env"), **args)
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_killed_batch_resumes_without_losing_or_duplicating(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "evalkit.cli",
        "run",
        "--env",
        "canvas",
        "--models",
        "baseline:random",
        "--evalset",
        EVALSET,
        "--limit",
        "16",
        "--concurrency",
        "2",
        "--max-turns",
        "4",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    trace = out / "trace.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if trace.exists() and len(trace.read_bytes().splitlines()) >= 4:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {d["key"] for d in iter_lines(trace)}
    assert 4 <= len(before) < 16, "the kill should land mid-batch"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = list(iter_lines(trace))
    keys = Counter(d["key"] for d in rows)
    assert len(keys) == 16 and max(keys.values()) == 1, "every job exactly once"
    assert before <= set(keys)
    assert all(d["reward"] is not None for d in rows)


@pytest.mark.slow
def test_ctrl_c_stops_promptly_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "--env", "canvas", "--models", "baseline:tracer",
           "--evalset", EVALSET, "--limit", "8", "--concurrency", "2", "--no-progress",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    trace = out / "trace.jsonl"
    deadline = time.monotonic() + 120
    while not (trace.exists() and trace.read_bytes().count(b"\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "rerun the same command to resume" in err
    assert time.monotonic() - t < 15
    saved = list(iter_lines(trace))
    assert 2 <= len(saved) < 8
    assert all(d["error_class"] is None for d in saved), "the interruption is not an env failure"
    assert subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    keys = Counter(d["key"] for d in iter_lines(trace))
    assert len(keys) == 8 and max(keys.values()) == 1


def test_skins_multiply_screen_surfaces_and_coordinates_follow_the_model():
    hf, tracer = "hf:Qwen/Qwen3-VL-8B-Instruct", "baseline:tracer"
    task = [({"task_id": "canvas-test-0001"}, "canvas-test-0001")]
    jobs = plan_jobs(
        [hf, tracer], embedded("canvas"), task, ["tools", "gui"], ["reference"], 1, skins=["classic", "paper"]
    )
    assert Counter((j.surface, j.skin) for j in jobs) == {("tools", None): 2, ("gui", "classic"): 2,
                                                           ("gui", "paper"): 2}  # fmt: skip
    assert len({j.key for j in jobs}) == 6
    coords = {(j.model, j.surface): j.coordinates for j in jobs}
    assert coords == {(hf, "tools"): None, (tracer, "tools"): None, (hf, "gui"): "normalized",
                      (tracer, "gui"): "pixels"}  # fmt: skip
    canvas = embedded("canvas")
    fixed = plan_jobs([hf], canvas, task, ["tools", "gui"], ["reference"], 1, coordinates="pixels")
    assert {j.coordinates for j in fixed} == {"pixels"}
    # an env evalkit does not know: skins apply to every surface, auto coordinates are left to it
    theirs = ResolvedEnv("http://127.0.0.1:1", "openenv", None)
    foreign = plan_jobs([hf], theirs, task, ["a", "b"], ["m"], 1, skins=["s", "t"])
    assert len(foreign) == 4 and {j.coordinates for j in foreign} == {None}


@pytest.mark.browser
def test_a_gui_batch_in_two_skins(canvas_server, tmp_path):
    from evalkit.browser import chromium_executable

    if chromium_executable() is None:
        pytest.skip("no Chromium")
    out = tmp_path / "run"
    kw = dict(
        task_ids=["canvas-test-0028"], surfaces=["gui"], skins="classic,studio", out=out, progress=False
    )
    run = run_batch(["baseline:random", "baseline:tracer"], canvas_server, **kw)
    recs = list(read_records(out))
    assert run.ran == 4 and run.errors == 0
    assert sorted((r.model, r.skin) for r in recs) == [
        ("baseline:random", "classic"), ("baseline:random", "studio"),
        ("baseline:tracer", "classic"), ("baseline:tracer", "studio"),
    ]  # fmt: skip
    assert all(r.coordinates == "pixels" and r.frame0 and r.turns[0].frame for r in recs)
    assert min(r.reward for r in recs if r.model == "baseline:tracer") > 0.9
    meta = json.loads((out / "run.json").read_text())
    assert (
        meta["skins"] == ["classic", "studio"] and meta["coordinates"] == "auto" and meta["max_turns"] is None
    )
    with pytest.raises(ConfigError, match="coordinates"):
        run_batch(["baseline:random"], canvas_server, **{**kw, "coordinates": "normalized"})
    assert run_batch(["baseline:random", "baseline:tracer"], canvas_server, **kw).skipped == 4


def test_a_one_session_server_caps_concurrency_and_nothing_goes_unscored(
    standin, guess_server, tmp_path, caplog
):
    from evalkit.analysis import load_runs
    from tests.support.standin import MODEL, bisect_guess

    standin.play(bisect_guess)
    out = tmp_path / "r"
    resets = [{"seed": s} for s in range(5)]
    with caplog.at_level(logging.INFO, logger="evalkit"):
        run = run_batch(
            MODEL, guess_server.base_url, reset=resets, concurrency=4, max_turns=8, out=out, progress=False
        )
    said = "guess accepts 1 session(s) at a time: running 1 episode(s) at once instead of 4"
    assert said in caplog.messages
    recs = list(read_records(out))
    assert run.ran == 5 and run.errors == 0
    assert all(r.error_class is None and r.reward in (0.0, 1.0) and r.end_reason == "done" for r in recs)
    assert sorted(r.task_id for r in recs) == [f'{{"seed":{s}}}' for s in range(5)]
    assert {r.mode for r in recs} == {""} and {r.env for r in recs} == {"guess"}
    meta = json.loads((out / "run.json").read_text())
    assert meta["concurrency"] == 1 and meta["server_sessions"] == 1 and meta["env_kind"] == "typed"
    assert meta["modes"] == [""] and meta["reset"] == resets
    assert load_runs([out]).height == 5
    again = run_batch(MODEL, guess_server.base_url, reset=resets, out=out, progress=False, max_turns=8)
    assert again.ran == 0 and again.skipped == 5  # the same reset arguments are the same tasks


def test_modes_exist_only_where_the_env_declares_them(canvas_server, tmp_path):
    with pytest.raises(ConfigError, match=r"canvas has no mode hard \(it has: reference, description\)"):
        run_batch(
            "baseline:random", canvas_server, modes=["hard"], tasks=1, out=tmp_path / "a", progress=False
        )
    assert not (tmp_path / "a").exists()


def test_an_env_without_tools_is_refused_before_any_work(tmp_path):
    class Silent:
        def reset(self, **kw):
            return {"task_id": "x"}

        def tools(self):
            return []

        def call(self, name, args):
            raise AssertionError("never called")

        def close(self):
            pass

    with pytest.raises(ConfigError, match="offers no tools"):
        run_batch("baseline:random", Silent, task_ids=["x"], out=tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_a_run_stopped_before_its_first_record_is_resumed(canvas_server, tmp_path):
    """A batch killed before its first episode ended leaves its run.json (and frames, live files) but no
    trace yet: that is a run evalkit began, resumed; a directory whose run.json is another tool's is not."""
    from evalkit.errors import ConfigError

    out = tmp_path / "r"
    kw = dict(task_ids=["canvas-test-0001", "canvas-test-0002"], max_turns=2, progress=False)
    run_batch(["baseline:random"], canvas_server, out=out, **kw)
    (out / "trace.jsonl").unlink()
    assert any(out.iterdir())
    again = run_batch(["baseline:random"], canvas_server, out=out, **kw)
    assert again.ran == 2 and len(list(read_records(out))) == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.json").write_text('{"name": "somebody else\'s"}')
    with pytest.raises(ConfigError, match="holds no evalkit run"):
        run_batch(["baseline:random"], canvas_server, out=other, **kw)


def test_the_heap_is_frozen_while_batches_run_and_given_back_after(canvas_server, tmp_path, monkeypatch):
    import gc

    from evalkit.run import batch

    before, seen = gc.get_freeze_count(), []
    real = batch._collect

    def collect(rec, *a):
        seen.append(gc.get_freeze_count())
        return real(rec, *a)

    monkeypatch.setattr(batch, "_collect", collect)
    kw = dict(evalset=EVALSET, limit=2, max_turns=2, progress=False)
    run_batch(["baseline:random"], canvas_server, out=tmp_path / "a", **kw)
    assert len(seen) == 2 and min(seen) > before and gc.get_freeze_count() == before
    # Another batch of this process still running (a notebook's other thread) keeps it frozen.
    with batch.heap_frozen():
        run_batch(["baseline:random"], canvas_server, out=tmp_path / "b", **kw)
        assert gc.get_freeze_count() > before
    assert gc.get_freeze_count() == before
