"""Outputs are whole or not there, on real machines: a bundle killed mid-write leaves the old one; a full
disk leaves the old bundle and no temporary folder; a run on a read-only file system is read, and what
cannot be written is one line; what killed writers leave is swept by the next; an evalset that lists a task
twice is refused in one line; a server stopped under its sessions says nothing of them. All through the
CLI, none with a traceback."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.records import outputs
from evalkit.records.lock import LOCK_FILE, RunLock
from evalkit.view.bundle import build
from tests.faults.test_machine import fill, small_fs  # noqa: F401 (a fixture)
from tests.fixtures.synth import make_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample-run"
EVALSET = ROOT / "data" / "evalsets" / "canvas-test-300.json"


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file()}  # fmt: skip


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if outputs.TEMP.match(p.name))


# ---- a bundle killed mid-write -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """240 episodes and their ~600 frames: a bundle of them writes for about a second, long enough to be
    killed in the middle."""
    return make_run(tmp_path_factory.mktemp("big") / "big", n_tasks=60, repeats=2)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """Six episodes without frames: a bundle or an ATIF job of them fits a 512 KiB file system."""
    return make_run(tmp_path_factory.mktemp("tiny") / "tiny", n_tasks=3, frames=False)


def bundle_argv(run: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "evalkit.cli", "bundle", str(run), "-o", str(out)]


def count_building(parent: Path) -> int:
    """Files in the folder a bundle is being built in (0 when there is none, or it was just swapped in)."""
    n = 0
    for folder in (p for p in parent.iterdir() if outputs.TEMP.match(p.name)):
        for _, _, names in os.walk(folder):
            n += len(names)
    return n


def kill_when_building(argv: list[str], parent: Path, files: int) -> bool:
    """Run `argv` and SIGKILL it once its temporary folder in `parent` holds `files` files (False when it
    ended before that)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    deadline = time.monotonic() + 120
    killed = False
    while proc.poll() is None and time.monotonic() < deadline:
        if count_building(parent) >= files:
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
        time.sleep(0.005)
    proc.wait(30)
    proc.stderr.close()
    return killed


def test_a_bundle_killed_mid_write_leaves_the_old_one_and_the_next_sweeps(big_run, tmp_path):
    site = tmp_path / "site"
    assert main(["bundle", str(SAMPLE), "-o", str(site)]) == 0
    old = snapshot(site)
    whole = len(snapshot(Path(build([big_run], tmp_path / "scratch" / "site").path)))
    shutil.rmtree(tmp_path / "scratch")
    for files in (1, whole // 3, 2 * whole // 3):
        assert kill_when_building(bundle_argv(big_run, site), tmp_path, files), f"done before {files} files"
        assert snapshot(site) == old, f"killed at {files} files: the old bundle changed"
        # What the kill left, and only that: each build swept the one killed before it.
        assert len(leftovers(tmp_path)) == 1
    done = subprocess.run(bundle_argv(big_run, site), capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "240 episodes" in done.stdout and snapshot(site) != old
    assert leftovers(tmp_path) == [], "the killed builds' folders were not swept"


def test_a_bundle_on_a_full_disk_keeps_the_old_one_in_one_line(small_fs, tiny_run, capsys):  # noqa: F811
    site = small_fs / "site"
    assert main(["bundle", str(tiny_run), "-o", str(site)]) == 0
    old = snapshot(site)
    capsys.readouterr()
    ballast = fill(small_fs, leave=20_000)
    status = main(["bundle", str(tiny_run), "-o", str(site)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 5 and len(err) == 1 and "no room" in err[0] and "bundle at" in err[0], err
    assert snapshot(site) == old and leftovers(small_fs) == []
    ballast.unlink()


def test_convert_on_a_full_disk_writes_no_half_job(small_fs, tiny_run, capsys):  # noqa: F811
    ballast = fill(small_fs, leave=8_000)
    status = main(["convert", str(tiny_run), "--to", "atif", "-o", str(small_fs / "job")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 5 and len(err) == 1 and "no ATIF job was written" in err[0], err
    assert not (small_fs / "job").exists() and leftovers(small_fs) == []
    ballast.unlink()
    assert main(["convert", str(tiny_run), "--to", "atif", "-o", str(small_fs / "job")]) == 0
    assert len(list((small_fs / "job").iterdir())) == 7  # 6 trials and the job's config


# ---- a read-only run ---------------------------------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path):
    """A copy of the sample run seen through a read-only bind mount (as root), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    src, where = tmp_path / "src", tmp_path / "ro"
    shutil.copytree(SAMPLE, src)
    where.mkdir()
    for cmd in (["mount", "--bind", str(src), str(where)], ["mount", "-o", "remount,ro,bind", str(where)]):
        made = subprocess.run(cmd, capture_output=True)
        if made.returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)
            pytest.skip(f"cannot mount read-only here: {made.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_read_only_run_is_read_and_what_cannot_be_written_is_one_line(read_only, tmp_path, capsys):
    run = read_only
    assert main(["summarise", str(run)]) == 0  # read: the summary is printed
    out, err = capsys.readouterr()
    assert "baseline:tracer" in out
    (line,) = err.strip().splitlines()
    assert "not written (Read-only file system" in line and "--out" in line
    assert main(["summarise", str(run), "--out", str(tmp_path / "sums")]) == 0  # written elsewhere
    capsys.readouterr()
    assert (tmp_path / "sums" / "summary.json").exists()
    for ok in (["bundle", str(run), "-o", str(tmp_path / "b")],
               ["compare", str(run), "--a", "baseline:tracer", "--b", "baseline:random"],
               ["convert", str(run), "--to", "atif", "-o", str(tmp_path / "job")]):  # fmt: skip
        assert main(ok) == 0, ok
    capsys.readouterr()
    for refused in (["bundle", str(SAMPLE), "-o", str(run / "b")],
                    ["run", "--env", "canvas", "--models", "baseline:tracer", "--out",
                     str(run / "more")]):  # fmt: skip
        assert main(refused) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "Read-only file system" in line, line


# ---- what killed writers leave -----------------------------------------------------------------------------


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(done.stdout)


def died_holding_the_lock(run: Path, pid: int) -> None:
    """What a writer killed holding the run's lock leaves of it: the JSON naming it (the lock is freed)."""
    (run / ".evalkit").mkdir(exist_ok=True)
    (run / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": 0}))


def test_stray_temporary_files_are_swept_at_the_next_writers_start(tmp_path):
    """Those of a process that is gone, or that is younger than they are (its pid reused), go; those of a
    live writer (this process; pid 1, older than its file) stay."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    gone = dead_pid()
    died_holding_the_lock(run, gone)  # (the frames and texts are written under the lock alone)
    frame = next((run / "frames").rglob("*.png"))
    stale = [run / f".trace.jsonl.{gone}-0.tmp", frame.with_name(f".{frame.name}.{gone}-3.tmp"),
             run / "texts" / f".x.txt.{gone}-1.tmp", run / ".summary.md.1-1.tmp"]  # fmt: skip
    kept = [run / f".summary.json.{os.getpid()}-9.tmp", run / ".run.json.1-0.tmp"]
    for p in stale + kept:
        p.write_bytes(b"half a file")
    pid1 = outputs._started(1)
    if pid1 is None:
        pytest.skip("no /proc to tell when a process started")
    os.utime(stale[-1], (pid1 - 100, pid1 - 100))  # written before pid 1's process began: not its file
    with RunLock(run):
        pass
    assert [p.name for p in stale if p.exists()] == []
    assert all(p.exists() for p in kept)


def test_the_stores_are_listed_only_after_a_writer_died_holding_the_lock(tmp_path):
    # A million frames at 100k episodes take seconds to list: a writer that left cleanly left none there.
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    frame = next((run / "frames").rglob("*.png"))
    stray = [frame.with_name(f".{frame.name}.{dead_pid()}-3.tmp"), run / f".run.json.{dead_pid()}-0.tmp"]
    for p in stray:
        p.write_bytes(b"half a file")
    with RunLock(run):
        pass
    assert stray[0].exists() and not stray[1].exists()  # (beside run.json: any writer's)
    died_holding_the_lock(run, dead_pid())
    with RunLock(run) as lock:
        assert lock.took_over is not None
    assert not stray[0].exists()


def test_an_output_swapped_out_by_a_killed_writer_is_put_back(tmp_path):
    site = tmp_path / "site"
    old = tmp_path / f".site.{dead_pid()}-0.old"
    old.mkdir()
    (old / "index.html").write_text("the old bundle")
    outputs.sweep(tmp_path, recursive=False)
    assert (site / "index.html").read_text() == "the old bundle" and leftovers(tmp_path) == []


# ---- duplicate task ids ------------------------------------------------------------------------------------


def test_an_evalset_listing_a_task_twice_is_refused_in_one_line(tmp_path, capsys):
    data = json.loads(EVALSET.read_text())
    data["tasks"] = data["tasks"][:3] + data["tasks"][:2]
    data.pop("evalset_id")
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(data))
    out = tmp_path / "run"
    status = main(["run", "--env", "canvas", "--models", "baseline:tracer", "--evalset", str(dup),
                   "--out", str(out), "--no-progress"])  # fmt: skip
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and "canvas-test-0000 ×2, canvas-test-0001 ×2" in line, line
    assert not out.exists()
    status = main(["run", "--env", "canvas", "--models", "baseline:tracer", "--task-ids",
                   "canvas-test-0004,canvas-test-0004", "--out", str(out), "--no-progress"])  # fmt: skip
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and "canvas-test-0004 ×2" in line and not out.exists()


# ---- a server stopped under its sessions -------------------------------------------------------------------


def test_a_server_stopped_under_its_sessions_says_nothing_of_them(capfd):
    """An app that fails as its session is cut (as an env's does, answering a call whose client is gone):
    uvicorn logs each one's traceback, which a batch stopping on a full disk printed before its one line."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocketDisconnect
    from websockets.sync.client import connect

    from evalkit.serving import ThreadedServer

    async def session(ws):
        await ws.accept()
        try:
            while True:
                await ws.receive_text()
        except WebSocketDisconnect:
            raise RuntimeError("a session cut off by the shutdown") from None

    routes = [Route("/health", lambda r: PlainTextResponse("ok")), WebSocketRoute("/ws", session)]
    app = Starlette(routes=routes)
    server = ThreadedServer(app, name="cut")
    with contextlib.ExitStack() as open_sessions:
        for _ in range(3):
            open_sessions.enter_context(connect(server.base_url.replace("http", "ws") + "/ws")).send("hello")
        time.sleep(0.2)
        capfd.readouterr()
        server.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "cut off" not in err, err
