"""A batch still running: progress files read as data (a gone batch, a torn or hostile file, a frame outside
the run), the Episodes view's "Running now" panel, and a trace that grows between two reruns."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

from streamlit.testing.v1 import AppTest

from evalkit.view import live
from tests.viewer.viewer_runs import APP


def progress(run, key: str, **fields) -> None:
    """A progress file as `evalkit.records.live` writes it (this process and host unless `fields` say
    otherwise)."""
    data = {"version": 1, "key": key, "model": "m", "env": "canvas", "surface": "tools", "mode": "reference",
            "task_id": f"task-{key}", "started": "2026-11-30T10:00:00+00:00", "updated": time.time(),
            "turn": 2, "max_turns": 12, "frame": None, "text": "adding a rect",
            "calls": [{"name": "add_element", "ok": True}, {"name": "view_canvas", "ok": False}],
            "pid": os.getpid(), "host": socket.gethostname()} | fields  # fmt: skip
    (run / ".live").mkdir(exist_ok=True)
    (run / ".live" / f"{key}.json").write_text(json.dumps(data))


def test_reading_progress_files(tmp_path, synth_run):
    run = tmp_path / "run"
    shutil.copytree(synth_run, run)
    frame = next((run / "frames").rglob("*.png")).relative_to(run).as_posix()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    progress(run, "a", frame=frame)
    progress(run, "dead", pid=dead.pid)  # this host, its process is gone: left behind by a killed batch
    progress(run, "far", host="elsewhere", pid=1)  # another host, recently written: still running
    past = time.time() - 2 * live.STALE_S
    progress(run, "old", host="elsewhere", pid=1, updated=past)
    os.utime(run / ".live" / "old.json", (past, past))
    progress(run, "hostile", frame="../../etc/passwd", turn="3", calls="x", model=["no"], started=7)
    (run / ".live" / "torn.json").write_text('{"key": "torn", "tur')
    (run / ".live" / "list.json").write_text("[1, 2]")
    got = {r.key: r for r in live.running(run)}
    assert set(got) == {"a", "far", "hostile"}
    a = got["a"]
    assert (a.model, a.task_id, a.turn, a.max_turns, a.frame) == ("m", "task-a", 2, 12, frame)
    assert a.calls == [("add_element", True), ("view_canvas", False)] and a.text == "adding a rect"
    h = got["hostile"]
    assert (h.frame, h.turn, h.calls, h.model) == (None, None, [], "")
    assert {r.key for r in live.running(run, finished={"a"})} == {"far", "hostile"}
    assert live.active(run)
    shutil.rmtree(run / ".live")
    assert live.running(run) == [] and live.active(run)  # its trace changed just now
    old = time.time() + 2 * live.ACTIVE_S
    assert not live.active(run, now=old)
    assert live.running(tmp_path / "no-such-run") == []


def test_running_episodes_and_a_growing_trace(tmp_path, monkeypatch, synth_run):
    run = tmp_path / "growing"
    shutil.copytree(synth_run, run)
    lines = (run / "trace.jsonl").read_text().splitlines(keepends=True)
    (run / "trace.jsonl").write_text("".join(lines[:3]))
    frame = next((run / "frames").rglob("*.png")).relative_to(run).as_posix()
    progress(run, "k1", frame=frame, model="anthropic:claude-x", task_id="canvas-test-0009")
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert "3 of 3 episodes" in [t.value for t in at.text]
    assert [s.value for s in at.subheader] == ["Running now: 1 episode"]
    assert "anthropic:claude-x · canvas-test-0009 · tools/reference" in [t.value for t in at.text]
    assert any(c.value.startswith("turn 2 of 12 · updated ") for c in at.caption)
    assert "add_element, view_canvas (error)" in [t.value for t in at.text]
    assert [c for img in at.image for c in img.captions] == ["Newest frame"]
    with open(run / "trace.jsonl", "a") as f:  # the episode ends: its record, then its file goes
        f.write(lines[3])
    (run / ".live" / "k1.json").unlink()
    at.run()  # what the poll does when the trace changed: the whole page again, from the new trace
    assert "4 of 4 episodes" in [t.value for t in at.text] and not at.subheader


def test_a_starting_episode_has_no_picture_caption(tmp_path, monkeypatch, synth_run):
    run = tmp_path / "starting"
    shutil.copytree(synth_run, run)
    progress(run, "k0", turn=None, frame=None, text="", calls=[])  # just started: no turn, no frame yet
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert any(c.value.startswith("starting · updated ") for c in at.caption)
    assert not any("Newest frame" in c.value for c in at.caption)  # no caption of a picture not there
