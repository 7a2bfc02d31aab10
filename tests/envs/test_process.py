"""The embedded env in a child process: the records a threaded server gives; no child outlives its batch."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit import batch
from evalkit.envs.process import GRACE_S, ProcessServer
from tests.test_executors import MODELS, outcome, pictures

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
    served: list[ProcessServer] = []
    real = batch.serve_embedded

    def spy(name: str, concurrency: int):
        served.append(real(name, concurrency))
        return served[-1]

    monkeypatch.setattr(batch, "serve_embedded", spy)
    kw = dict(tasks=2, max_turns=8, progress=False)
    threads = batch.run_batch(MODELS, canvas_server, out=tmp_path / "threads", concurrency=3, **kw)
    child = batch.run_batch(MODELS, "canvas", out=tmp_path / "child", concurrency=batch.PROCESS_FROM, **kw)
    assert (threads.ran, child.ran, child.errors) == (4, 4, 0)
    assert [type(s) for s in served] == [ProcessServer] and not alive(served[0].pid)
    assert outcome(tmp_path / "child") == outcome(tmp_path / "threads")
    assert pictures(tmp_path / "child") == pictures(tmp_path / "threads")


def test_a_server_process_that_cannot_start_is_an_env_error_and_gone():
    from evalkit.errors import EnvError

    with pytest.raises(EnvError, match="exited with status 1"):
        ProcessServer("no-such-env")  # the child's build_app refuses the name


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_the_env_process_goes_with_its_batch(sig, tmp_path):
    """Ctrl-C (the batch stops it) and SIGKILL of the batch (its stdin closes with the parent)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "--env", "canvas", "--models", "baseline:random",
           "--evalset", EVALSET, "--limit", "200", "--max-turns", "2",
           "--concurrency", str(batch.PROCESS_FROM), "--no-progress", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trace = out / "trace.jsonl"
    deadline = time.monotonic() + 120
    while not (trace.exists() and trace.read_bytes().count(b"\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    kids = [
        k for k in _children(proc.pid) if "evalkit.envs.process" in Path(f"/proc/{k}/cmdline").read_text()
    ]
    assert len(kids) == 1, "the batch serves its env in one child process"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    deadline = time.monotonic() + GRACE_S + 5
    while alive(kids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(kids[0]), "the env's process outlived its batch"
    assert trace.read_bytes().count(b"\n") < 200
