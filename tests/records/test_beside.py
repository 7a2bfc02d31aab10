"""`evalkit.records.beside`: part of a job in a forked copy of the process, or None and no trace of it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from evalkit.records import beside

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def run(fn):
    with beside.beside(fn) as result:
        return result()


def test_the_child_gives_back_what_it_computed():
    value = {"text": ["naïve 🙂", None], "raw": [b'{"a": 1}'], "n": [2**62, -1.5, True]}
    got = run(lambda: value | {"pid": os.getpid()})
    assert got.pop("pid") != os.getpid()
    assert got == value


def _kill_self():
    os.kill(os.getpid(), signal.SIGKILL)


def _fail():
    raise ValueError("no")


@pytest.mark.parametrize(
    "fn",
    [_fail, _kill_self, lambda: os._exit(3), lambda: object()],
    ids=["raises", "killed", "exits-3", "unencodable"],
)
def test_whatever_goes_wrong_beside_gives_none(fn):
    assert run(fn) is None


def test_the_parents_signal_handlers_are_not_the_childs(tmp_path):
    mark = tmp_path / "handled"
    old = signal.signal(signal.SIGTERM, lambda *_: mark.write_text(str(os.getpid())))
    try:
        assert run(lambda: os.kill(os.getpid(), signal.SIGTERM) or time.sleep(5) or "late") is None
    finally:
        signal.signal(signal.SIGTERM, old)
    assert not mark.exists()


def test_leaving_early_stops_and_reaps_the_child(tmp_path):
    pid_file = tmp_path / "pid"

    def slow():
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with beside.beside(slow):
            while not pid_file.exists() or not pid_file.read_text():
                time.sleep(0.01)
            raise KeyboardInterrupt
    assert time.monotonic() - t0 < 30
    with pytest.raises(ProcessLookupError):  # gone, and no zombie left
        os.kill(int(pid_file.read_text()), 0)


def test_from_a_thread_beside_others():
    out = []
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait)  # another thread, as in the viewer or a kernel
    busy.start()
    worker = threading.Thread(target=lambda: out.append(run(lambda: sum(range(1000)))))
    worker.start()
    worker.join(30)
    stop.set()
    busy.join()
    assert out == [499500]


def test_spare_cpu_needs_two(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert not beside.spare_cpu()
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert beside.spare_cpu() == os.uname().sysname.startswith("Linux")


def test_a_child_reaped_elsewhere_still_answers(monkeypatch):
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps children: waitpid finds none
    try:
        assert run(lambda: [1, "two"]) == [1, "two"]
        assert run(_kill_self) is None  # and a reply cut short is still no reply
    finally:
        signal.signal(signal.SIGCHLD, old)
