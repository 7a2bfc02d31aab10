"""The embedded env in a child process: the records a threaded server gives; no child outlives its batch."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.envs.embedded import process
from evalkit.envs.embedded.process import GRACE_S, ProcessServer, ProcessServers
from evalkit.run import batch
from tests.run.test_executors import MODELS, outcome, pictures

EVALSET = str(Path(__file__).resolve().parents[2] / "data/evalsets/canvas-test-300.json")


def alive(pid: int) -> bool:
    """Running (a zombie nobody has reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_batch_served_by_a_process_records_what_a_thread_served_one_does(
    canvas_server, tmp_path, monkeypatch
):
    served: list[ProcessServers] = []
    real = process.serve_embedded

    def spy(name: str, concurrency: int):
        served.append(real(name, concurrency))
        return served[-1]

    monkeypatch.setattr(process, "serve_embedded", spy)
    kw = dict(tasks=2, max_turns=8, progress=False)
    threads = batch.run_batch(MODELS, canvas_server, out=tmp_path / "threads", concurrency=3, **kw)
    child = batch.run_batch(MODELS, "canvas", out=tmp_path / "child", concurrency=process.PROCESS_FROM, **kw)
    assert (threads.ran, child.ran, child.errors) == (4, 4, 0)
    assert [type(s) for s in served] == [ProcessServers] and len(served[0].pids) == 1
    assert not alive(served[0].pids[0])
    assert outcome(tmp_path / "child") == outcome(tmp_path / "threads")
    assert pictures(tmp_path / "child") == pictures(tmp_path / "threads")


def test_many_episodes_at_once_are_spread_over_several_env_processes(canvas_server, tmp_path, monkeypatch):
    """Past EPISODES_PER_PROCESS episodes at once (and with a core for each), the env is served by several
    processes; sessions take them in turn, each keeping to its own; the records are a thread's; all go."""
    from evalkit.envs.client import openenv

    monkeypatch.setattr(process.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(process, "EPISODES_PER_PROCESS", 4)
    assert [process.env_processes(c) for c in (3, process.PROCESS_FROM, 64)] == [0, 2, 2]
    served, urls = [], []
    real_serve, real_session = process.serve_embedded, openenv.OpenEnvSession.__init__

    def spy(name: str, concurrency: int):
        served.append(real_serve(name, concurrency))
        return served[-1]

    def session(self, base_url, **kw):
        urls.append(base_url)
        real_session(self, base_url, **kw)

    monkeypatch.setattr(process, "serve_embedded", spy)
    monkeypatch.setattr(openenv.OpenEnvSession, "__init__", session)
    kw = dict(tasks=4, max_turns=8, progress=False)
    threads = batch.run_batch(MODELS, canvas_server, out=tmp_path / "threads", concurrency=3, **kw)
    urls.clear()
    two = batch.run_batch(MODELS, "canvas", out=tmp_path / "two", concurrency=process.PROCESS_FROM, **kw)
    assert (threads.ran, two.ran, two.errors) == (8, 8, 0)
    (group,) = served
    assert isinstance(group, ProcessServers) and len(set(group.base_urls)) == 2
    first, second = group.base_urls
    assert (urls.count(first), urls.count(second)) == (1 + 4, 4)  # the preflight's probe asks the first
    assert outcome(tmp_path / "two") == outcome(tmp_path / "threads")
    assert pictures(tmp_path / "two") == pictures(tmp_path / "threads")
    assert not any(alive(pid) for pid in group.pids)


def test_a_canvas_process_loads_the_grader_of_its_own_as_it_starts_serving():
    """Its `warm()` runs beside the first sessions rather than before the port is announced: the matcher's
    native module is mapped soon after, though no episode has asked for a grade."""
    with ProcessServer("canvas") as server:
        deadline = time.monotonic() + 30
        while "scipy/optimize/_lsap" not in Path(f"/proc/{server.pid}/maps").read_text():
            assert time.monotonic() < deadline, "the grader was never loaded"
            time.sleep(0.05)


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[7])


def test_an_env_process_draws_new_frames_in_memory_it_already_has():
    """Each new frame's buffers come from what earlier ones freed, not from pages the kernel maps afresh
    (~1000 faults a frame, half of its CPU, when malloc handed them back)."""
    from evalkit.envs.client.openenv import OpenEnvSession

    rect = {"kind": "rect", "x": 40, "y": 30, "width": 200, "height": 120}
    with ProcessServer("canvas") as server:
        sessions = [OpenEnvSession(server.base_url) for _ in range(25)]
        try:
            for i, session in enumerate(sessions):  # a batch's episodes, each a turn in
                session.reset(split="test", index=i)
                session.call("add_element", {**rect, "fill": f"#{40 + 8 * i:02x}3366"})
            # What is loaded once is not a frame's: the grader the process warms beside its first sessions
            # (mapping scipy faulted ~6,000 pages into the frames when it ended late) and a first render.
            deadline = time.monotonic() + 30
            while "scipy/optimize/_lsap" not in Path(f"/proc/{server.pid}/maps").read_text():
                assert time.monotonic() < deadline, "the grader was never loaded"
                time.sleep(0.05)
            assert sessions[0].render() is not None
            faults = []
            for session in sessions[1:]:
                before = minor_faults(server.pid)
                assert session.render() is not None
                faults.append(minor_faults(server.pid) - before)
        finally:
            for session in sessions:
                session.close()
    # The median frame: a one-off mapping (a lazy import, the allocator growing once) lands on one frame
    # and put the mean over 200 in 1 of ~10 runs of a busy machine; handing memory back faults every frame.
    assert statistics.median(faults) < 200, faults


def test_a_server_process_that_cannot_start_is_an_env_error_and_gone():
    from evalkit.errors import EnvError

    with pytest.raises(EnvError, match="exited with status 1"):
        ProcessServer("no-such-env")  # the child's build_app refuses the name


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended meanwhile (each WebSocket has one)
            pass
    return kids


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
    ids=["ctrl-c", "sigterm", "sighup", "sigkill"],
)
def test_the_env_process_goes_with_its_batch(sig, tmp_path):
    """Ctrl-C, SIGTERM and SIGHUP (the batch stops it, with one line and the signal's status) and SIGKILL of
    the batch (its stdin closes with the parent)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "--env", "canvas", "--models", "baseline:random",
           "--evalset", EVALSET, "--limit", "200", "--max-turns", "2",
           "--concurrency", str(process.PROCESS_FROM), "--no-progress", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    trace = out / "trace.jsonl"
    deadline = time.monotonic() + 120
    while not (trace.exists() and trace.read_bytes().count(b"\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    kids = [
        k
        for k in _children(proc.pid)
        if "evalkit.envs.embedded.process" in Path(f"/proc/{k}/cmdline").read_text()
    ]
    assert len(kids) == 1, "the batch serves its env in one child process"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    if sig != signal.SIGKILL:
        assert proc.returncode == (130 if sig == signal.SIGINT else 128 + sig)
        assert err.count("\n") == 1 and "rerun the same command to resume" in err, err
    deadline = time.monotonic() + (2 if sig != signal.SIGKILL else GRACE_S + 5)
    while alive(kids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(kids[0]), "the env's process outlived its batch"
    assert trace.read_bytes().count(b"\n") < 200
