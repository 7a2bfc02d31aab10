"""The run directory survives kills, torn lines and hostile paths."""

from __future__ import annotations

import json
import os

import pytest

from evalkit.records.rundir import (
    FrameStore,
    TraceWriter,
    completed_keys,
    find_record,
    iter_offsets,
    read_at,
    read_records,
    safe_path,
)
from evalkit.types import EpisodeRecord, Image, TurnRecord


def _rec(key: str, reward: float | None = 0.5, error_class: str | None = None) -> EpisodeRecord:
    return EpisodeRecord(
        key=key,
        model="m",
        env="canvas",
        task_id=f"t-{key}",
        reward=reward,
        error_class=error_class,
        turns=[TurnRecord(turn=1, text="hi")],
    )


def test_round_trip_and_latest_record_wins(tmp_path):
    w = TraceWriter(tmp_path)
    w.append(_rec("a", reward=None, error_class="endpoint_error"))
    w.append(_rec("b"))
    w.append(_rec("a", reward=0.9))
    recs = {r.key: r for r in read_records(tmp_path)}
    assert recs["a"].reward == 0.9 and recs["a"].turns[0].text == "hi"
    assert len(list(read_records(tmp_path, latest=False))) == 3
    assert find_record(tmp_path, "a").reward == 0.9


def test_torn_last_line_is_skipped_and_healed(tmp_path):
    w = TraceWriter(tmp_path)
    w.append(_rec("a"))
    with open(tmp_path / "trace.jsonl", "a") as f:
        f.write('{"format_version": 1, "key": "b", "rew')  # a kill mid-write
    assert [r.key for r in read_records(tmp_path)] == ["a"]
    assert completed_keys(tmp_path) == {"a"}
    TraceWriter(tmp_path).append(_rec("c"))  # the next writer starts on a fresh line
    assert [r.key for r in read_records(tmp_path)] == ["a", "c"]
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["key"] == "c"


def test_writers_opened_while_others_append_lose_no_record(tmp_path):
    """Episodes run at once in threads, each writing through a writer of its own (`run_episode(...,
    out=)` in a thread pool), lose nothing: a writer opening while another was half-way through a large
    record wrote its healing newline where it had seen the trace end, cutting that record in two (records
    lost in 5 of 5 runs of this test; 2-8 of 320 records of 150 KB in a loop outside it)."""
    import threading

    import evalkit as ek

    def work(t: int) -> None:
        for i in range(40):
            rec = _rec(f"{t}-{i}")
            rec.turns[0].text = "x" * 400_000
            TraceWriter(tmp_path).append(rec)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lines = (tmp_path / "trace.jsonl").read_bytes().splitlines()
    assert len(lines) == 320 and all(json.loads(line)["turns"][0]["text"] for line in lines)
    assert ek.load_runs(tmp_path).height == 320  # the index the writers kept beside it says so too


def test_errored_keys_are_not_completed(tmp_path):
    w = TraceWriter(tmp_path)
    w.append(_rec("a", reward=None, error_class="env_error"))
    w.append(_rec("b"))
    assert completed_keys(tmp_path) == {"b"}


def test_offsets_open_one_record(tmp_path):
    w = TraceWriter(tmp_path)
    for k in "abc":
        w.append(_rec(k))
    offsets = {d["key"]: off for off, d in iter_offsets(tmp_path)}
    assert read_at(tmp_path, offsets["b"]).key == "b"


def test_frames_are_content_addressed(tmp_path):
    store = FrameStore(tmp_path)
    img = Image(b"\x89PNG fake", "image/png")
    p1, p2 = store.put(img), store.put(Image(b"\x89PNG fake"))
    assert p1 == p2 and p1.startswith(f"frames/{img.sha256[:2]}/")
    assert len(list((tmp_path / "frames").rglob("*.png"))) == 1
    assert store.put_render("../../etc/passwd", img).startswith("renders/")


def test_written_files_follow_the_umask_not_mkstemp(tmp_path):
    from evalkit.records.rundir import atomic_write

    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "f.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "f.json").stat().st_mode & 0o777 == 0o640


def test_a_write_makes_its_directory_again_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import itertools
    import shutil

    from evalkit.records import rundir

    run = tmp_path / "run"
    rundir.atomic_write(run / "frames" / "ab" / "x.png", b"one")
    shutil.rmtree(run)  # a user removed the run directory between two batches of one notebook
    rundir.atomic_write(run / "frames" / "ab" / "x.png", b"two")
    assert (run / "frames" / "ab" / "x.png").read_bytes() == b"two"
    # A temporary name a killed process with this pid left behind is passed over.
    monkeypatch.setattr(rundir, "_tmp_names", itertools.count(7))
    (run / f".y.json.{os.getpid()}-7.tmp").write_text("stale")
    rundir.atomic_write(run / "y.json", "{}")
    assert (run / "y.json").read_text() == "{}"
    # A rename that fails (onto a directory) raises and takes its temporary file with it.
    (run / "d").mkdir()
    with pytest.raises(OSError):
        rundir.atomic_write(run / "d", b"x")
    stale = f".y.json.{os.getpid()}-7.tmp"
    assert sorted(p.name for p in run.iterdir()) == sorted(["frames", "y.json", "d", stale])


def test_safe_path_refuses_escapes(tmp_path):
    run = tmp_path / "run"
    (run / "frames").mkdir(parents=True)
    (run / "frames" / "ok.png").write_bytes(b"x")
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    os.symlink(secret, run / "frames" / "link.png")
    assert safe_path(run, "frames/ok.png") == (run / "frames" / "ok.png").resolve()
    for bad in [
        "../secret.txt",
        str(secret),
        "frames/../../secret.txt",
        "frames/link.png",
        "/etc/passwd",
        "frames/missing.png",
        "",
        None,
        "frames/\x00.png",
        "C:/x.png",
    ]:
        assert safe_path(run, bad) is None, bad


def test_signature_tracks_native_and_imported_runs(tmp_path):
    import time

    from evalkit.records.rundir import trace_signature

    assert trace_signature(tmp_path / "missing") == (0, 0)
    w = TraceWriter(tmp_path / "native")
    w.append(_rec("a"))
    first = trace_signature(tmp_path / "native")
    w.append(_rec("b"))
    assert trace_signature(tmp_path / "native") != first
    one_file = tmp_path / "episodes.jsonl"
    one_file.write_text("{}\n")
    assert trace_signature(one_file) == (3, one_file.stat().st_mtime_ns)
    folder = tmp_path / "ownloop" / "task-1"
    folder.mkdir(parents=True)
    (folder / "session.json").write_text("{}")
    before = trace_signature(tmp_path / "ownloop")
    time.sleep(0.01)
    (folder / "steps.jsonl").write_text("{}\n")
    assert trace_signature(tmp_path / "ownloop") != before


def test_one_rule_for_the_latest_record_of_a_key():
    from evalkit.records.rundir import latest_records, record_key, survivors

    keys = ["a", None, "b", "a", None, "", "b", "c"]
    assert survivors(keys) == [1, 3, 4, 5, 6, 7]
    assert survivors([record_key({"key": k}) for k in keys]) == [1, 3, 4, 5, 6, 7]  # "" is no key
    assert [record_key(d) for d in ({"key": 1}, {"key": "1"}, {}, {"key": ["a"]})] == [None, "1", None, None]
    rows = [{"key": k, "n": n} for n, k in enumerate(keys)]
    assert [d["n"] for d in latest_records(rows)] == [1, 3, 4, 5, 6, 7]
    assert latest_records(range(5), key=lambda n: "even" if n % 2 == 0 else None) == [1, 3, 4]


def test_the_viewer_search_and_resume_follow_the_same_rule(tmp_path):
    from evalkit.view import support as vs

    w = TraceWriter(tmp_path)
    w.append(_rec("a", reward=None, error_class="endpoint_error"))
    w.append(_rec("a"))
    with open(tmp_path / "trace.jsonl", "a") as f:  # records another writer left without keys
        for text in ("first", "second"):
            f.write(json.dumps({"format_version": 1, "model": "m", "turns": [{"text": text}]}) + "\n")
    w.append(_rec("b", reward=None, error_class="env_error"))
    idx = vs.text_index(tmp_path)
    table = vs.episode_table(tmp_path)
    assert sorted(idx["key"]) == sorted(table["key"]) and len(idx) == 4  # a, b and both key-less ones
    hits = vs.search(idx, "second")
    assert vs.apply_filters(table, vs.Filters(), hits).height == 1
    assert completed_keys(tmp_path) == {"a"}


def test_derived_files_of_a_foreign_run_go_to_the_user_cache(tmp_path, monkeypatch):
    from evalkit.records.rundir import cache_home, derived_dir

    TraceWriter(tmp_path / "native").append(_rec("a"))
    assert derived_dir(tmp_path / "native") == tmp_path / "native" / ".evalkit"
    foreign = tmp_path / "theirs" / "run1"
    foreign.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    got = derived_dir(foreign)
    assert got.parent == tmp_path / "cache" / "evalkit" / "runs" and got.name.startswith("run1-")
    assert list((tmp_path / "theirs").iterdir()) == [foreign] and list(foreign.iterdir()) == []
    twin = tmp_path / "more" / "run1"  # the same name elsewhere: its own cache folder
    twin.mkdir(parents=True)
    assert derived_dir(twin).parent == got.parent and derived_dir(twin) != got
    assert derived_dir(tmp_path / "theirs" / "." / "run1") == got  # keyed by the resolved path
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_home() == tmp_path / "home" / ".cache" / "evalkit"


def test_a_record_converts_to_what_asdict_makes():
    import dataclasses
    import datetime as dt
    from collections import OrderedDict, namedtuple
    from pathlib import Path

    from evalkit.types import CallRecord

    Point = namedtuple("Point", "x y")
    rec = next(iter(read_records(Path(__file__).resolve().parents[2] / "data" / "sample-run")))
    rec.info = {"point": Point(1, 2), "pair": (1, [2, {"a": (3,)}]), "when": dt.date(2026, 12, 1),
                "ordered": OrderedDict(b=1), 3: "an int key",
                "nested": [CallRecord(id="c", name="n")]}  # fmt: skip
    d = rec.to_dict()
    want = dataclasses.asdict(rec)
    del want["problems"], want["run_dir"]
    assert d == want
    assert rec.to_json() == json.dumps(want, ensure_ascii=False, separators=(",", ":"), default=str)
    assert type(d["info"]["point"]) is Point and type(d["info"]["ordered"]) is OrderedDict
    # A copy: the record keeps its own lists and dicts.
    d["info"]["pair"][1][1]["a"] = None
    d["turns"][0]["calls"].clear()
    d["grade"].clear()
    assert rec.info["pair"][1][1]["a"] == (3,) and rec.turns[0].calls and rec.grade
