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
from evalkit.types import EpisodeRecord, Turn, TurnRecord
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


def test_a_live_file_is_written_at_once_then_at_most_once_a_gap_with_the_newest_state(tmp_path, monkeypatch):
    writes: list[tuple[str, int]] = []
    real = live._write

    def counted(path, data):
        writes.append((path.name, data["turn"]))
        real(path, data)

    monkeypatch.setattr(live, "_write", counted)
    monkeypatch.setattr(live, "MIN_GAP_S", 0.5)
    rec = EpisodeRecord(key="k", model="m", env="canvas", task_id="t")
    path = live.live_path(tmp_path, "k")
    live.publish(tmp_path, rec)
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert json.loads(path.read_text())["turn"] == 0  # the first state: at once
    for n in (1, 2, 3):  # three turns within the gap: one write, of the last
        rec.turns.append(TurnRecord(turn=n, text=f"turn {n}"))
        live.publish(tmp_path, rec)
    time.sleep(0.25)
    assert json.loads(path.read_text())["turn"] == 0
    while json.loads(path.read_text())["turn"] != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writes == [("k.json", 0), ("k.json", 3)]
    rec.turns.append(TurnRecord(turn=4, text="turn 4"))
    live.publish(tmp_path, rec)  # due within the gap: the end of the episode drops it
    live.finish(tmp_path, "k")
    assert not path.exists()
    time.sleep(0.7)
    assert not path.exists() and len(writes) == 2
    assert list(path.parent.iterdir()) == []  # no temporary file left either


def test_the_end_of_an_episode_waits_for_a_write_under_way(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = live._write

    def slow(path, data):
        started.set()
        release.wait(5)
        real(path, data)

    monkeypatch.setattr(live, "_write", slow)
    rec = EpisodeRecord(key="slow", model="m", env="canvas", task_id="t")
    live.publish(tmp_path, rec)
    assert started.wait(5)
    ended = threading.Thread(target=live.finish, args=(tmp_path, "slow"))
    ended.start()
    time.sleep(0.1)
    assert ended.is_alive()  # the write under way would otherwise land after the removal
    release.set()
    ended.join(5)
    assert not ended.is_alive() and not live.live_path(tmp_path, "slow").exists()
