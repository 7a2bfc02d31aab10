"""A running episode publishes its progress in its process's `<run>/.live/<pid>@<host>.json`, and leaves it
once its record is written (the file goes with the process's last episode); readers skip files whose process
is gone."""

from __future__ import annotations

import json
import os
import threading
import time

from evalkit.records import live
from evalkit.records.rundir import read_records, safe_path
from evalkit.run.batch import run_batch
from evalkit.run.episode import run_episode
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
    assert not live.live_path(tmp_path).exists()


def test_finished_keys_and_dead_processes_are_not_running(tmp_path):
    folder = tmp_path / live.LIVE_DIR
    folder.mkdir()
    mine = {"key": "k1", "pid": os.getpid(), "host": live._HOST, "turn": 3, "updated": time.time()}
    dead = {"key": "k2", "pid": 2**22 + 12345, "host": live._HOST, "updated": time.time()}
    far = {"key": "k3", "pid": 1, "host": "elsewhere", "updated": time.time() - live.STALE_S - 1}
    for d in (mine, dead, far):
        (folder / f"{d['key']}.json").write_text(json.dumps(d))
    (folder / "torn.json").write_text('{"key": ')
    # A process's file of today (version 2): its episodes, the process's pid and host beside them.
    two = [{"key": "k4", "turn": 1, "started": "b"}, {"key": "k5", "started": "a"}, {"key": 7}, "junk"]
    ours = {"version": 2, "pid": os.getpid(), "host": live._HOST, "updated": 5.0, "episodes": two}
    gone = {**ours, "pid": 2**22 + 12345, "episodes": [{"key": "k6"}]}
    (folder / "1@here.json").write_text(json.dumps(ours))
    (folder / "2@here.json").write_text(json.dumps(gone))
    shown = live.running(tmp_path)
    assert [e.key for e in shown] == ["k1", "k5", "k4"]  # oldest start first
    assert shown[2].turn == 1 and shown[2].pid == os.getpid() and shown[2].updated == 5.0
    assert [e.key for e in live.running(tmp_path, finished={"k1", "k4"})] == ["k5"]
    assert live.clear_stale(tmp_path) == 4  # the dead, the far, the torn one and the gone process's
    assert sorted(p.name for p in folder.iterdir()) == ["1@here.json", "k1.json"]


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
    writes: list[dict[str, int]] = []
    real = live._write

    def counted(path, episodes):
        writes.append({e["key"]: e["turn"] for e in episodes})
        real(path, episodes)

    def shown() -> dict[str, int]:
        return {e["key"]: e["turn"] for e in json.loads(path.read_text())["episodes"]}

    monkeypatch.setattr(live, "_write", counted)
    monkeypatch.setattr(live, "MIN_GAP_S", 0.5)
    recs = [EpisodeRecord(key=f"k{i}", model="m", env="canvas", task_id="t") for i in range(20)]
    path = live.live_path(tmp_path)
    live.publish(tmp_path, recs[0])
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert shown() == {"k0": 0}  # the first state: at once
    for rec in recs:  # twenty episodes, three turns each, within the gap: one write, of the last states
        for n in (1, 2, 3):
            rec.turns.append(TurnRecord(turn=n, text=f"turn {n}"))
            live.publish(tmp_path, rec)
    time.sleep(0.25)
    assert shown() == {"k0": 0}
    while shown() != {r.key: 3 for r in recs} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writes == [{"k0": 0}, {r.key: 3 for r in recs}]
    for rec in recs[1:]:  # ended: they leave the file at its next write
        live.finish(tmp_path, rec.key)
    while shown() != {"k0": 3} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(writes) == 3
    recs[0].turns.append(TurnRecord(turn=4, text="turn 4"))
    live.publish(tmp_path, recs[0])  # due within the gap: the end of the last episode drops it
    live.finish(tmp_path, "k0")
    assert not path.exists()
    time.sleep(0.7)
    assert not path.exists() and len(writes) == 3
    assert list(path.parent.iterdir()) == []  # no temporary file left either


def test_the_end_of_an_episode_waits_for_a_write_under_way(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = live._write

    def slow(path, episodes):
        started.set()
        release.wait(5)
        real(path, episodes)

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
    assert not ended.is_alive() and not live.live_path(tmp_path).exists()
