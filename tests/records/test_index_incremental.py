"""Extending a cached index when the trace grew: always the frame a full build by the reference gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalkit import analysis as A
from evalkit.records import _index, index_cache, rundir
from evalkit.records.columns import CACHED, PER_RUN
from evalkit.records.rundir import TraceWriter
from tests.records.test_index import make, rec


@pytest.fixture
def extended(monkeypatch) -> list[int]:
    """How many tail records each load extended a cached index with (a full build records nothing)."""
    calls: list[int] = []
    real = index_cache._extend

    def spy(old, tail):
        calls.append(tail.height)
        return real(old, tail)

    monkeypatch.setattr(index_cache, "_extend", spy)
    return calls


def sound_reference(run: Path) -> pl.DataFrame:
    """The reference index as load_runs gives it: without the malformed records and their column (a record
    whose one problem is its reward kept, its reward NaN and not scored)."""
    only_reward = pl.col("problem").str.starts_with("reward is ") & ~pl.col("problem").str.contains("; ")
    ref = index_cache.build_reference(run).with_columns(
        pl.when(only_reward).then(float("nan")).otherwise(pl.col("reward")).alias("reward"),
        pl.when(only_reward).then(False).otherwise(pl.col("scored")).alias("scored"),
    )
    return ref.filter(pl.col("problem").is_null() | only_reward).drop("problem")


def check(run: Path) -> pl.DataFrame:
    df = A.load_runs(run)
    assert_frame_equal(df.drop(*PER_RUN), sound_reference(run), check_exact=True)
    assert list((run / ".evalkit").glob("index-v*.parquet")) == [A.index_path(run)]  # old ones cleaned up
    assert_frame_equal(A.load_runs(run), df, check_exact=True)  # and read back as written
    return df


def append(run: Path, text: str) -> None:
    with open(run / rundir.TRACE, "a", encoding="utf-8") as f:
        f.write(text)


def line(key, **kw) -> str:
    return json.dumps({"format_version": 1, "model": "m", "task_id": str(key)} | kw | {"key": key}) + "\n"


def test_appends_extend_the_index(tmp_path, extended):
    run = make(tmp_path / "r", 30, 2, 3)  # odd lines (no keys, keys 1 / "1" / 1.0) and a torn last line
    check(run)
    assert extended == []  # nothing to extend yet

    TraceWriter(run)  # heals the torn line with a newline
    w = TraceWriter(run)
    w.append(rec(2, 0.11))  # supersedes an old row
    w.append(rec(100, 0.5))
    append(run, line(None, reward=0.2) + line("", reward=0.3) + line(1.0, reward=0.4) + line("1", reward=0.5))
    keyless = A.load_runs(run)["key"].null_count()
    append(run, line(None, reward=0.6) + line("1", reward=0.55))  # a key-less record replaces nothing
    df = check(run)
    assert extended == [6, 2]
    assert df.filter(pl.col("task_id") == "t2")["reward"].to_list() == [0.11]
    assert df["key"].null_count() == keyless + 1
    assert df.filter(pl.col("key") == "1")["reward"].to_list() == [0.55]

    # torn mid-way, then completed by the next append (no heal): the line starts where the index stopped
    append(run, '{"format_version": 1, "key": "late", "rew')
    check(run)
    append(run, 'ard": 0.7}\n' + line(None, reward=0.8) + line("dup-line", reward=0.05))
    df = check(run)
    assert df.filter(pl.col("key") == "late")["reward"].to_list() == [0.7]
    assert df.filter(pl.col("key") == "dup-line")["reward"].to_list() == [0.05]

    # torn mid-way, healed, then new records after it
    append(run, '{"format_version": 1, "key": "cut", "reward": 0.')
    check(run)
    TraceWriter(run).append(rec(101, 0.9))
    append(run, line(None, reward=0.1))
    check(run)
    assert len(extended) == 6


def test_a_torn_last_line_that_parses_is_not_extended(tmp_path, extended):
    run = make(tmp_path / "r", 5, 0, seed_lines=False)
    append(run, line("whole", reward=0.3).rstrip("\n"))  # all but its newline
    check(run)
    n = len(extended)
    TraceWriter(run).append(rec(7, 0.2))
    check(run)
    assert len(extended) == n  # that index included the unfinished line: built anew
    TraceWriter(run).append(rec(8, 0.2))
    check(run)
    assert len(extended) == n + 1


@pytest.mark.parametrize("seed", range(4))
def test_any_cut_of_an_appended_trace(tmp_path, extended, seed, monkeypatch):
    """The trace revealed a few bytes at a time, cut anywhere (mid-line, mid-character): each load equals
    the reference."""
    monkeypatch.setattr(_index, "_BLOCK", 3000)
    rng = random.Random(seed)
    src = make(tmp_path / "src", 25, 2, 4)
    TraceWriter(src)
    for i in range(15):
        append(src, line(rng.choice([None, "", f"k{i % 4}", 1, "1", True, "naïve 🙂"]), reward=i / 10))
        TraceWriter(src).append(rec(rng.randrange(30), rng.random()))
    data = (src / rundir.TRACE).read_bytes()
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text("{}")
    cuts = sorted(rng.sample(range(1, len(data)), 12)) + [len(data)]
    prev = 0
    for cut in cuts:
        with open(run / rundir.TRACE, "ab") as f:
            f.write(data[prev:cut])
        prev = cut
        check(run)
    assert len(extended) >= 8


def test_a_rewritten_trace_is_indexed_anew(tmp_path, extended):
    run = make(tmp_path / "r", 20, 1, 2, seed_lines=False)
    check(run)
    path = run / rundir.TRACE
    data = path.read_bytes()
    # same length, one record changed in the middle, then a record appended: not an append
    before = A.load_runs(run)["reward"].eq(0.7).sum()
    i = data.index(b'"reward":0.1', len(data) // 3)
    path.write_bytes(data[:i] + b'"reward":0.7' + data[i + 12 :] + line("new", reward=0.4).encode())
    df = check(run)
    assert extended == [] and df["reward"].eq(0.7).sum() == before + 1
    assert df.filter(pl.col("key") == "new").height == 1
    path.write_bytes(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n")  # shrunk
    check(run)
    assert extended == []
    path.write_bytes(b"")
    TraceWriter(run).append(rec(3, 0.3))  # emptied and written again
    check(run)
    assert extended == []


def test_a_foreign_or_damaged_cache_is_not_extended(tmp_path, extended):
    run = make(tmp_path / "r", 10, 0, seed_lines=False)
    check(run)
    idx = A.index_path(run)
    meta = json.loads(pl.read_parquet_metadata(idx)[index_cache._META])
    assert meta["indexed"] == (run / rundir.TRACE).stat().st_size and meta["rows"] == 12
    meta["version"] = index_cache.VERSION + 1
    index_cache._write(idx, index_cache.load(run).select(CACHED), meta)
    TraceWriter(run).append(rec(11, 0.5))
    check(run)
    assert extended == []
    A.index_path(run).write_bytes(b"not parquet")
    TraceWriter(run).append(rec(12, 0.5))
    check(run)
    assert extended == []
