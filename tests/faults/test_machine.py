"""The machine under a run: a file system that fills up (a small tmpfs this test mounts, as root), a second
writer into the same run directory, a holder killed with its lock held, and a trace that is a symlink out of
its run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.errors import DiskFullError, TraceError
from evalkit.records import jsonl, rundir
from evalkit.records.lock import RunLock, RunLockedError

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample-run"


@pytest.fixture
def small_fs(tmp_path):
    """A 512 KiB tmpfs mounted on a fresh directory, unmounted after the test."""
    where = tmp_path / "fs"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; no other way to fill a file system safely")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, leave: int = 0) -> Path:
    """A ballast file that takes all the room but `leave` bytes (in whole pages)."""
    ballast = where / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    if leave:
        os.truncate(ballast, max(0, ballast.stat().st_size - leave))
    return ballast


def record(i: int, size: int = 9000) -> dict:
    return {"format_version": 1, "key": f"k{i:03d}", "task_id": f"t{i}", "pad": "x" * size}


def lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "the trace ends in a torn line"
    return [json.loads(raw) for raw in data.splitlines()]


def test_a_full_disk_keeps_whole_trace_records_and_room_lets_the_next_one_in(small_fs):
    run = small_fs / "run"
    writer = rundir.TraceWriter(run)
    ballast = fill(small_fs, leave=30_000)
    written = 0
    with pytest.raises(DiskFullError) as caught:
        for i in range(20):  # 9 KB records into ~30 KB: the fourth finds room for only part of itself
            writer.append(record(i))
            written += 1
    assert 1 <= written < 20
    message = str(caught.value)
    assert str(small_fs) in message and "trace.jsonl" in message and "\n" not in message
    assert caught.value.mount == str(small_fs) and caught.value.exit_status == 5
    assert [d["key"] for d in lines(run / "trace.jsonl")] == [f"k{i:03d}" for i in range(written)]

    ballast.unlink()  # room again: the record that failed goes in whole, on its own line
    rundir.TraceWriter(run).append(record(written))
    assert [d["key"] for d in lines(run / "trace.jsonl")] == [f"k{i:03d}" for i in range(written + 1)]
    assert rundir.completed_keys(run) == {f"k{i:03d}" for i in range(written + 1)}


def test_atomic_write_on_a_full_disk_says_so_and_keeps_the_old_file(small_fs):
    path = small_fs / "run" / "summary.json"
    rundir.atomic_write(path, '{"old": true}\n')
    ballast = fill(small_fs)
    with pytest.raises(DiskFullError) as caught:
        rundir.atomic_write(path, "y" * 200_000)
    assert "summary.json is as it was" in str(caught.value) and str(small_fs) in str(caught.value)
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.json"], "a temporary file was left"
    with pytest.raises(DiskFullError, match="report.html was not written"):
        rundir.atomic_write(small_fs / "report.html", "z" * 200_000)
    ballast.unlink()
    rundir.atomic_write(path, "y" * 50_000)
    assert path.stat().st_size == 50_000


def test_summarise_on_a_full_disk_is_one_line(small_fs, capsys):
    run = small_fs / "run"
    run.mkdir()
    for name in ("run.json", "trace.jsonl"):
        (run / name).write_bytes((SAMPLE / name).read_bytes())
    fill(small_fs)
    status = main(["summarise", str(run)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and status != 1
    assert len(err) == 1 and "has no room" in err[0] and str(small_fs) in err[0], err


# ---- a trace that leads out of its run ---------------------------------------------------------------------


@pytest.fixture
def symlinked(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "trace.jsonl").write_bytes((SAMPLE / "trace.jsonl").read_bytes())
    (outside / "run.json").write_bytes((SAMPLE / "run.json").read_bytes())
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes((SAMPLE / "run.json").read_bytes())
    (run / "trace.jsonl").symlink_to(outside / "trace.jsonl")
    return run, outside


def test_a_trace_symlinked_out_of_its_run_is_refused_by_every_reader(symlinked, capsys):
    import evalkit

    run, outside = symlinked
    for read in (
        lambda: evalkit.load_runs(run),
        lambda: list(rundir.read_records(run)),
        lambda: rundir.completed_keys(run),
        lambda: list(rundir.iter_offsets(run)),
        lambda: rundir.TraceWriter(run),
    ):
        with pytest.raises(TraceError, match="outside the run"):
            read()
    for command in (["summarise", str(run)], ["bundle", str(run), "-o", str(run.parent / "b.html")]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "outside the run" in err[0], err
    assert not (run.parent / "b.html").exists()
    # A symlink that stays inside the run is the run's own file.
    (run / "trace.jsonl").unlink()
    (run / "data").mkdir()
    (run / "data" / "trace.jsonl").write_bytes((SAMPLE / "trace.jsonl").read_bytes())
    (run / "trace.jsonl").symlink_to(run / "data" / "trace.jsonl")
    assert len(list(rundir.read_records(run))) > 0


def test_a_run_json_symlinked_out_of_its_run_is_refused(symlinked):
    run, outside = symlinked
    (run / "run.json").unlink()
    (run / "run.json").symlink_to(outside / "run.json")
    with pytest.raises(TraceError, match="outside the run"):
        rundir.read_run_json(run)


def test_a_trace_of_only_unreadable_lines_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(jsonl, "_said", set())
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes((SAMPLE / "run.json").read_bytes())
    (run / "trace.jsonl").write_text("not json\n{torn")
    assert main(["summarise", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 unreadable line(s)" in err[0], err


# ---- one writer per run directory --------------------------------------------------------------------------

HOLDER = """
import sys, time
from evalkit.records.lock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(120)
"""


def hold(out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, env=env)
    assert child.stdout is not None and child.stdout.readline().strip() == b"held"
    return child


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path):
    out = tmp_path / "run"
    child = hold(out)
    try:
        before = time.time()
        with pytest.raises(RunLockedError) as caught:
            RunLock(out).acquire()
        message = str(caught.value)
        assert f"PID {child.pid}" in message and "since " in message and "\n" not in message
        assert time.strftime("%Y-%m-%d", time.gmtime(before)) in message
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    # Killed with its lock held: the kernel dropped it, and the next writer takes the run over.
    with RunLock(out) as lock:
        assert lock.took_over is not None and lock.took_over["pid"] == child.pid
        with pytest.raises(RunLockedError, match=f"PID {os.getpid()}"):  # a second writer in this process
            RunLock(out).acquire()
    # Released cleanly: the next writer replaces nobody, and readers never needed the lock.
    child = hold(out)
    child.send_signal(signal.SIGTERM)
    child.wait(10)
    with RunLock(out) as lock:
        assert list(rundir.iter_dicts(SAMPLE))  # a reader beside a writer
    with RunLock(out) as lock:
        assert lock.took_over is None


def test_the_run_lock_on_a_full_disk_says_so_and_holds_nothing(small_fs):
    out = small_fs / "run"
    ballast = fill(small_fs)
    with pytest.raises(DiskFullError, match="writer.lock"):
        RunLock(out).acquire()
    ballast.unlink()
    with RunLock(out) as lock:
        assert lock.held and lock.took_over is None


RUN = ["run", "--env", "canvas", "--models", "baseline:tracer", "--evalset",
       str(ROOT / "data" / "evalsets" / "canvas-test-300.json"), "--no-progress"]  # fmt: skip


def test_two_evalkit_runs_into_one_out_one_is_refused(tmp_path, capsys):
    """The second writer exits 2 in one line naming the first, which goes on and finishes its batch."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "evalkit.cli", *RUN, "--limit", "6", "--concurrency", "1", "--out", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "trace.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert main([*RUN, "--limit", "6", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"PID {first.pid}" in err, err
    finally:
        _, said = first.communicate(timeout=300)
    assert first.returncode == 0, said
    keys = [d["key"] for d in lines(out / "trace.jsonl")]
    assert len(keys) == 6 == len(set(keys)), "every episode paid for once"


def test_evalkit_run_on_a_full_disk_stops_in_one_line_and_resume_completes(small_fs):
    out = small_fs / "run"
    cmd = [sys.executable, "-m", "evalkit.cli", *RUN, "--limit", "6", "--no-frames", "--concurrency", "2",
           "--out", str(out)]  # fmt: skip
    ballast = fill(small_fs, leave=100 * 1024)
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 5, ran.stderr
    assert ran.stderr.count("\n") == 1 and str(small_fs) in ran.stderr and "no room" in ran.stderr
    kept = lines(out / "trace.jsonl")  # whole records only
    assert len(kept) < 6
    ballast.unlink()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    keys = [d["key"] for d in lines(out / "trace.jsonl")]
    assert len(set(keys)) == 6 and len(keys) == 6 + sum(1 for d in kept if d.get("error_class"))


def test_a_reader_tells_a_run_being_written_without_touching_its_lock(tmp_path):
    """`evalkit view` waits for a run whose writer holds its lock: told from the lock's file alone (taking
    the lock to look could refuse a writer starting at that instant)."""
    from evalkit.records.lock import LOCK_FILE, writing
    from evalkit.view.serve import being_created

    out = tmp_path / "run"
    out.mkdir()
    assert not writing(out) and not being_created(out)
    with RunLock(out):
        assert writing(out) and being_created(out)
    assert not writing(out) and not being_created(out)  # released: its file emptied
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    held = json.loads((out / LOCK_FILE).read_text() or "{}") or {"host": os.uname().nodename}
    (out / LOCK_FILE).write_text(json.dumps({**held, "pid": int(dead.stdout), "host": os.uname().nodename}))
    assert not writing(out)  # a holder that died
