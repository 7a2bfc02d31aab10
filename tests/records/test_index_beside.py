"""A large trace read in two processes (`_index._scan`: its later lines read and decoded beside, in a fork)
gives the frame the reference gives, wherever the split falls, however the chunks cut its lines, and
whatever goes wrong beside."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import msgspec
import polars as pl
import pytest
from polars.testing import assert_frame_equal, assert_series_equal

from evalkit import analysis
from evalkit.records import _index, beside, index_cache, jsonl, rundir
from evalkit.records.columns import EPISODE_COLUMNS
from evalkit.records.rundir import TraceWriter
from tests.records.test_index import make, rec, same_as_reference
from tests.records.test_index_incremental import append, check, line
from tests.records.test_index_wellformed import WRONG
from tests.records.test_index_wellformed import lines as wellformed_lines

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
PARENT = os.getpid()
REAL_PART = _index._part


@pytest.fixture
def here(monkeypatch) -> list[int]:
    """Every trace is read with a process beside, in chunks shorter than some of its lines; gives how many
    lines this process read itself (the child's own list is its copy)."""
    monkeypatch.setattr(_index, "_BESIDE_BYTES", 0)
    monkeypatch.setattr(_index, "_CHUNK", 700)
    monkeypatch.setattr(beside, "spare_cpu", lambda: True)
    counted: list[int] = []

    def spy(fd, lo, hi):
        part = REAL_PART(fd, lo, hi)
        if os.getpid() == PARENT:
            counted.append(len(part.offsets) + len(part.slow) // 2)
        return part

    monkeypatch.setattr(_index, "_part", spy)
    return counted


def n_lines(run: Path) -> int:
    data = (run / rundir.TRACE).read_bytes()
    return data.count(b"\n") + (not data.endswith(b"\n"))


# The share is what the process beside takes: from the whole trace to none of it (the cut in the torn line).
@pytest.mark.parametrize("share", [0.9999, 0.8, 0.5, 0.3, 0.02, 0.0001])
def test_any_split_gives_the_reference_frame(tmp_path, here, monkeypatch, share):
    monkeypatch.setattr(_index, "_BESIDE_SHARE", share)
    run = make(tmp_path / "r", 40, 2, 3)  # odd lines, a torn last line
    same_as_reference(run)
    total = n_lines(run)
    if share >= 0.3:
        assert sum(here) < total - 5
    elif share > 0.001:
        assert sum(here) < total
    else:
        assert sum(here) == total


@pytest.mark.parametrize("chunk", [1, 64, 333, 4096, 1 << 20])
def test_any_chunk_size_gives_the_reference_frame(tmp_path, monkeypatch, chunk):
    """Chunks shorter than a line (read again, twice as long), cut mid-line or mid-character, or holding
    the whole trace: one process or two."""
    monkeypatch.setattr(_index, "_CHUNK", chunk)
    run = make(tmp_path / "r", 30, 2, 3)
    with open(run / rundir.TRACE, "ab") as f:
        f.write(b'\n{"format_version": 1, "key": "latin", "model": "caf\xe9"}\n{"key": "na\xc3\xafve"}\n')
        f.write(rec(99, 0.7).to_json().encode())  # whole, but its newline not yet written
    same_as_reference(run)
    monkeypatch.setattr(_index, "_BESIDE_BYTES", 0)
    monkeypatch.setattr(beside, "spare_cpu", lambda: True)
    same_as_reference(run)


def test_non_utf8_and_a_last_line_without_newline_beside(tmp_path, here, monkeypatch):
    monkeypatch.setattr(_index, "_BESIDE_SHARE", 0.6)
    run = make(tmp_path / "r", 30, 1, 2, seed_lines=False)
    with open(run / rundir.TRACE, "ab") as f:
        f.write(b'{"format_version": 1, "key": "latin", "model": "caf\xe9", "reward": 0.5}\n')
        f.write(rec(99, 0.7).to_json().encode())  # whole, but its newline not yet written
    same_as_reference(run)
    assert sum(here) < n_lines(run)


def _raise(fd, lo, hi):
    if os.getpid() != PARENT:
        raise MemoryError
    return REAL_PART(fd, lo, hi)


def _killed(fd, lo, hi):
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_PART(fd, lo, hi)


def _other_start(fd, lo, hi):
    part = REAL_PART(fd, lo, hi)
    if os.getpid() != PARENT:
        part.lo += 1
    return part


def _short_column(fd, lo, hi):
    part = REAL_PART(fd, lo, hi)
    if os.getpid() != PARENT:
        part.cols["reward"].pop()
    return part


@pytest.mark.parametrize("fails", [_raise, _killed, _other_start, _short_column])
def test_what_goes_wrong_beside_is_read_here(tmp_path, here, monkeypatch, fails):
    def spy(fd, lo, hi):
        part = fails(fd, lo, hi)
        if os.getpid() == PARENT:
            here.append(len(part.offsets) + len(part.slow) // 2)
        return part

    monkeypatch.setattr(_index, "_part", spy)
    run = make(tmp_path / "r", 40, 2, 3)
    same_as_reference(run)
    assert sum(here) == n_lines(run)  # every line read in this process


def test_an_extended_index_reads_its_tail_beside(tmp_path, here, monkeypatch):
    monkeypatch.setattr(_index, "_BESIDE_SHARE", 0.5)
    run = make(tmp_path / "r", 30, 2, 3)
    check(run)
    w = TraceWriter(run)
    for i in range(40):
        w.append(rec(100 + i, 0.01 * i, 2))
        append(run, line(f"k{i % 7}", reward=i / 40))
    here.clear()
    check(run)  # extended from the cache: only the appended bytes are read, from past the file's start
    assert 0 < sum(here) < 80


@pytest.mark.parametrize(
    "kind,col",
    [
        (_index._S, ["a", "b\u00e9", "", "🙂"]),
        (_index._S, [None, "x", None, ""]),
        (_index._S, [None, None]),
        (_index._S, ["with\x00nul", None, "y"]),  # a NUL in a text: sent as a list
        (_index._S, ["one"]),
        (_index._S, []),
        (_index._F, [0.5, None, -0.0, 1e308, 5e-324]),
        (_index._I, [1, None, -(2**63) + 1, 2**63 - 1]),
        (_index._B, [True, None, False]),
        (_index._BIN, [b'{"a": 1}', None, b"{}"]),
        (_index._BIN, [None, None, None]),
    ],
)
def test_columns_packed_beside_read_back_as_here(kind, col):
    """What the process beside sends of a column reads back as the column this process builds itself, but
    for what `_fast_columns` reads as the same (a null count or flag as 0 or false)."""
    here = pl.Series(col, dtype=kind)
    if kind is _index._BIN:
        here = here.cast(_index._S)
    elif kind in (_index._I, _index._B):
        here = here.fill_null(0 if kind is _index._I else False)
    packed = msgspec.msgpack.decode(msgspec.msgpack.encode(_index._pack(list(col), kind)))
    back = _index._unpack(packed, kind, len(col))
    if kind in (_index._I, _index._B) and here.null_count() == 0 and back.null_count() == len(col) > 0:
        back = back.fill_null(0 if kind is _index._I else False)
    assert_series_equal(back, here, check_names=False, check_exact=True)


def test_a_bad_nested_field_read_beside_is_named_and_counted_as_the_reference_does(
    tmp_path, here, monkeypatch, caplog
):
    """A trace evalkit did not write (no index kept beside it), its sound records between lines holding a
    value of the wrong kind in a turn, a call or a plan (each kind, as the last of a duplicate key, under an
    escaped key), read in two processes: every such line is named malformed in one line and left out, and
    the table's numbers are those of the reference reader (`json.loads` a line). A shallower decode in
    either process (one that skips the nested records' check) keeps those lines and fails this."""
    monkeypatch.setattr(jsonl, "_said", set())
    nested = [
        t for t in wellformed_lines(WRONG) if any(f'"key": "{w}-' in t for w in ("turn", "call", "plan"))
    ]
    sound = [rec(i, round(0.05 * i, 2), frames=2).to_json() for i in range(len(nested))]
    run = tmp_path / "foreign"
    run.mkdir()
    mixed = [line for pair in zip(sound, nested, strict=True) for line in pair]
    (run / rundir.TRACE).write_text("".join(t + "\n" for t in mixed), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        df = analysis.load_runs(run)
    assert 0 < sum(here) < len(mixed)  # the later lines were read beside
    assert sorted(df["key"]) == sorted(json.loads(t)["key"] for t in sound)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [
        f"{run}: {len(nested)} malformed record(s) left out of the analysis (first: turn 2: turn is a string)"
    ]
    ref = index_cache.build_reference(run)
    assert_frame_equal(index_cache.build(run), ref, check_exact=True)
    assert ref.filter(pl.col("problem").is_not_null()).height == len(nested)
    by_ref = ref.filter(pl.col("problem").is_null()).with_columns(
        pl.lit(str(run)).alias("run"),
        pl.lit(run.name).alias("run_name"),
        pl.lit(None, pl.Utf8).alias("env_config"),
    )
    assert_frame_equal(df, by_ref.select(list(EPISODE_COLUMNS)), check_exact=True)
    assert_frame_equal(analysis.summarise(df), analysis.summarise(by_ref), check_exact=True)
