"""A running episode publishes its progress in `<run>/.live/<key>.json` and removes it once its record is
written; readers skip files whose process is gone."""

from __future__ import annotations

import json
import os
import threading
import time

from evalkit import live
from evalkit.batch import run_batch
from evalkit.episode import run_episode
from evalkit.traces import read_records, safe_path
from evalkit.types import Turn
from tests.support.scripted import call, factory

RECT = dict(kind="rect", x=10, y=10, width=120, height=60, fill="#ff0000")


def test_a_running_episode_shows_its_turn_and_frame_then_leaves(canvas_server, tmp_path):
    gate, seen = threading.Event(), []

    def held() -> Turn:
        # The second model call: turn 1 is finished, and is published with its frame while this call runs
        # (the frame is taken beside the model call, not before it).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = live.running(tmp_path)
            if now and now[0].turn == 1:
                seen.extend(now)
                break
            time.sleep(0.01)
        gate.wait(10)
        return Turn(text="done", calls=[call("submit")])

    turns = [Turn(text="adding a red box", calls=[call("add_element", **RECT)]), held]
    worker = threading.Thread(
        target=run_episode, args=(factory(turns), canvas_server, "canvas-test-0003"), kwargs={"out": tmp_path}
    )
    worker.start()
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    gate.set()
    worker.join(30)
    (ep,) = seen
    assert ep.turn == 1 and ep.text == "adding a red box" and ep.calls == [("add_element", True)]
    assert ep.task_id == "canvas-test-0003" and ep.model == "scripted" and ep.pid == os.getpid()
    assert safe_path(tmp_path, ep.frame) is not None and safe_path(tmp_path, ep.target) is not None
    (rec,) = read_records(tmp_path)
    assert rec.key == ep.key and live.running(tmp_path) == []
    assert not live.live_path(tmp_path, rec.key).exists()


def test_finished_keys_and_dead_processes_are_not_running(tmp_path):
    folder = tmp_path / live.LIVE_DIR
    folder.mkdir()
    mine = {"key": "k1", "pid": os.getpid(), "host": live._HOST, "turn": 3, "updated": time.time()}
    dead = {"key": "k2", "pid": 2**22 + 12345, "host": live._HOST, "updated": time.time()}
    far = {"key": "k3", "pid": 1, "host": "elsewhere", "updated": time.time() - live.STALE_S - 1}
    for d in (mine, dead, far):
        (folder / f"{d['key']}.json").write_text(json.dumps(d))
    (folder / "torn.json").write_text('{"key": ')
    assert [e.key for e in live.running(tmp_path)] == ["k1"]
    assert live.running(tmp_path, finished={"k1"}) == []
    assert live.clear_stale(tmp_path) == 3  # the dead, the far and the torn one
    assert sorted(p.name for p in folder.iterdir()) == ["k1.json"]


def test_a_batch_leaves_no_live_files(canvas_server, tmp_path):
    kw = dict(out=tmp_path, task_ids=["canvas-test-0001", "canvas-test-0002"], max_turns=3, progress=False)
    run_batch(["baseline:random"], canvas_server, **kw)
    folder = tmp_path / live.LIVE_DIR
    assert not folder.exists() or list(folder.iterdir()) == []
    # A batch killed mid-episode left a live file; the next batch into the run (a resume) clears it.
    folder.mkdir(exist_ok=True)
    (folder / "old.json").write_text(json.dumps({"key": "old", "pid": 2**22 + 12345, "host": live._HOST}))
    run_batch(["baseline:random"], canvas_server, **kw)
    assert list(folder.iterdir()) == []
    assert len(list(read_records(tmp_path))) == 2
