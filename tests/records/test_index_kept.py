"""The index kept beside the trace as it is written (`evalkit.records.kept`): a run evalkit wrote loads
without reading its trace cold, and whatever happens between the trace and the journal (a kill between the
two appends, a journal write cut short, a trace rewritten, a second writer) the frame is the reference's."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalkit import analysis as A
from evalkit.records import _index, index_cache, kept, rundir
from evalkit.records.columns import PER_RUN
from evalkit.records.rundir import TraceWriter
from tests.records.test_index import make, odd_lines, rec
from tests.records.test_index_incremental import append, line, sound_reference


@pytest.fixture
def cold(monkeypatch) -> list[int]:
    """How many lines each load read from the trace itself (cold) rather than from what was kept."""
    counted: list[int] = []
    real = _index._part

    def spy(fd, lo, hi):
        part = real(fd, lo, hi)
        counted.append(len(part.offsets) + len(part.slow) // 2)
        return part

    monkeypatch.setattr(_index, "_part", spy)
    return counted


def loads(run: Path, cold: list[int]) -> int:
    """Load the run with no cached index but what is kept: the frame must be the reference's, and the
    unreadable lines counted as a cold load counts them. Gives the lines read cold."""
    for p in (run / ".evalkit").glob("index-v*.parquet"):
        p.unlink()
    cold.clear()
    df, unreadable = index_cache.read(run)
    read = sum(cold)
    assert_frame_equal(df, index_cache.build_reference(run), check_exact=True)
    assert unreadable == index_cache.read(run, cache=False)[1]
    assert_frame_equal(A.load_runs(run).drop(*PER_RUN), sound_reference(run), check_exact=True)
    return read


def journal(run: Path) -> Path:
    return run / ".evalkit" / kept.NAME


def test_a_run_evalkit_wrote_is_not_read_cold(tmp_path, cold):
    run = make(tmp_path / "r", 40, 2, 3, seed_lines=False)  # by a TraceWriter: a re-run key, unicode
    assert TraceWriter(run).keeping()
    assert loads(run, cold) == 0
    w = TraceWriter(run)
    for text in odd_lines():  # odd records, as a writer writes them
        try:
            d = json.loads(text)
        except ValueError:
            continue
        if isinstance(d, dict):
            w.append(d)
    w.append({"format_version": 1, "key": "nan", "reward": float("nan"), "grade": {"total": float("inf")}})
    w.append(rec(3, 0.25, error="line one\nline two\r\n"))  # a text with line breaks: read from the trace
    assert loads(run, cold) == 0
    assert A.load_runs(run).filter(pl.col("task_id") == "t3")["reward"].to_list() == [0.25]


def test_lines_another_program_appended_are_read_cold_then_caught_up(tmp_path, cold):
    run = make(tmp_path / "r", 30, 2, 3)  # odd lines and a torn last line, appended without the writer
    n_odd = len(odd_lines()) + 2
    assert 0 < loads(run, cold) <= n_odd
    TraceWriter(run).append(rec(50, 0.5))  # heals the torn line, catches up, appends
    assert loads(run, cold) == 0
    append(run, line("late", reward=0.3) + "not json\n" + line(None, reward=0.1))
    assert loads(run, cold) == 3
    TraceWriter(run)
    assert loads(run, cold) == 0


def _appended(run: Path, when: str) -> None:
    """In a child process: append a record, and die by SIGKILL at `when` (between the trace and the
    journal, or halfway through the journal's line)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            w = TraceWriter(run)
            w.keeping()
            real = kept.Journal._write

            def dies(self, data, end):
                if when == "mid-journal":
                    fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
                    os.write(fd, data[: len(data) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
                real(self, data, end)

            kept.Journal._write = dies
            w.append(rec(77, 0.77))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.parametrize("when", ["after-trace", "mid-journal"])
def test_a_kill_between_the_trace_and_the_journal(tmp_path, cold, when):
    run = make(tmp_path / "r", 20, 1, 2, seed_lines=False)
    size = journal(run).stat().st_size
    _appended(run, when)
    assert (journal(run).stat().st_size > size) == (when == "mid-journal")  # half a line, no newline
    assert loads(run, cold) == 1  # the record the journal lacks, read from the trace
    assert A.load_runs(run).filter(pl.col("task_id") == "t77")["reward"].to_list() == [0.77]
    w = TraceWriter(run)  # resume: the cut line goes, the record is caught up
    w.append(rec(78, 0.78))
    assert journal(run).read_bytes().endswith(b"\n")
    assert loads(run, cold) == 0


def test_a_trace_that_no_longer_matches_its_journal_is_read_cold(tmp_path, cold):
    run = make(tmp_path / "r", 20, 1, 2, seed_lines=False)
    path = run / rundir.TRACE
    data = path.read_bytes()
    i = data.index(b'"reward":0.1', len(data) // 3)
    path.write_bytes(data[:i] + b'"reward":0.7' + data[i + 12 :])  # same length, rewritten in the middle
    assert loads(run, cold) == data.count(b"\n")
    path.write_bytes(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n")  # shrunk
    assert loads(run, cold) > 0
    path.write_bytes(data)
    assert loads(run, cold) == 0  # as it was: the journal matches it again


def _lines(j: bytes) -> list[bytes]:
    return j.splitlines(keepends=True)


@pytest.mark.parametrize(
    "damage",
    [
        lambda j: j.replace(b"\n0,", b"\n7,", 1),  # a stretch that does not start where the trace does
        lambda j: b"".join(_lines(j)[:5] + _lines(j)[6:]),  # a record's line gone: a gap
        lambda j: b"".join(_lines(j)[:-3] + _lines(j)[-2:-1] + _lines(j)[-3:-2] + _lines(j)[-1:]),  # swapped
        lambda j: j[: len(j) // 2] + b'x,"y\n' + j[len(j) // 2 :],  # garbage in the middle
        lambda j: j + b"1,2,3\n",  # a line out of order
        lambda j: b"_at,_to\n" + j.split(b"\n", 1)[1],  # another header
        lambda j: j[:-2] + b"a\n",  # the last fingerprint changed
    ],
    ids=["start", "gap", "swapped", "garbage", "order", "header", "fingerprint"],
)
def test_a_damaged_journal_is_ignored(tmp_path, cold, damage):
    run = make(tmp_path / "r", 20, 1, 2, seed_lines=False)
    journal(run).write_bytes(damage(journal(run).read_bytes()))
    assert loads(run, cold) == (run / rundir.TRACE).read_bytes().count(b"\n")


def test_a_stretch_read_from_the_trace_is_checked_too(tmp_path, cold):
    """A stretch the writer read from the trace itself (its rows, then where it ends): a row twice, or the
    line saying where it ends lost (its write cut short), and its rows are not taken."""
    run = make(tmp_path / "r", 10, 1, 2)  # odd lines appended without the writer
    TraceWriter(run)  # caught up: rows, unreadable lines, then the stretch's end
    whole = journal(run).read_bytes()
    assert loads(run, cold) == 0
    rows = _lines(whole)
    journal(run).write_bytes(b"".join(rows[:-1]))  # cut before the stretch's end
    assert loads(run, cold) == len(odd_lines()) + 2
    journal(run).write_bytes(b"".join(rows[:-3] + rows[-3:-2] + rows[-3:]))  # a row twice
    assert loads(run, cold) == (run / rundir.TRACE).read_bytes().count(b"\n")
    at, rest = rows[-2].split(b",", 1)
    past = str((run / rundir.TRACE).stat().st_size + 5).encode()
    journal(run).write_bytes(b"".join([*rows[:-2], past + b"," + rest, rows[-1]]))  # a row past its end
    assert loads(run, cold) == (run / rundir.TRACE).read_bytes().count(b"\n")


def test_two_writers_interleaved_break_the_chain_safely(tmp_path, cold):
    run = make(tmp_path / "r", 10, 1, 2, seed_lines=False)
    a, b = TraceWriter(run), TraceWriter(run)
    for i in range(6):
        (a if i % 2 else b).append(rec(100 + i, i / 10))  # each catches up with the other's line
    assert loads(run, cold) == 0
    entries = journal(run).read_bytes()
    fd = os.open(journal(run), os.O_WRONLY | os.O_APPEND)
    os.write(fd, entries.splitlines(keepends=True)[-1])  # the same record kept twice: out of order
    os.close(fd)
    assert loads(run, cold) == (run / rundir.TRACE).read_bytes().count(b"\n")


def test_an_old_run_is_caught_up_whole_once(tmp_path, cold):
    run = tmp_path / "old"
    run.mkdir()
    (run / "run.json").write_text("{}")
    lines = [rec(i, i / 40).to_json() for i in range(40)] + odd_lines()
    (run / rundir.TRACE).write_bytes(("\n".join(lines) + "\n").encode() + b'{"key": "caf\xe9"}\n\n  \n')
    assert loads(run, cold) == (run / rundir.TRACE).read_bytes().count(b"\n")  # no journal: cold
    w = TraceWriter(run)
    assert w.keeping()
    w.append(rec(41, 0.5))
    assert loads(run, cold) == 0
    index_cache.read(run)  # a cached index, then a record appended: that index, and the journal's rest
    w.append(rec(42, 0.5))
    cold.clear()
    df, _ = index_cache.read(run)
    assert sum(cold) == 0
    assert_frame_equal(df, index_cache.build_reference(run), check_exact=True)


def test_writing_without_the_journal_still_writes_the_trace(tmp_path, cold, monkeypatch):
    run = make(tmp_path / "r", 5, 1, seed_lines=False)
    journal(run).unlink()
    journal(run).mkdir()  # a journal that cannot be opened
    w = TraceWriter(run)
    assert not w.keeping()
    w.append(rec(9, 0.9))
    assert loads(run, cold) > 0


def test_a_cached_index_reads_on_in_the_journal_from_where_it_stopped(tmp_path, cold, monkeypatch):
    run = make(tmp_path / "r", 20, 1, 2, seed_lines=False)
    index_cache.read(run)  # cached, with how much of the journal gave it
    w = TraceWriter(run)
    w.append(rec(30, 0.3))
    append(run, line("foreign", reward=0.2))
    w.append(rec(31, 0.4))
    read_from: list[int] = []
    real = kept._matched

    def spy(df, fd, start, pos, data):
        read_from.append(pos)
        return real(df, fd, start, pos, data)

    monkeypatch.setattr(kept, "_matched", spy)
    cold.clear()
    df, _ = index_cache.read(run)
    assert read_from[0] > len(kept._HEADER) and sum(cold) == 0  # the journal read on, nothing cold
    assert_frame_equal(df, index_cache.build_reference(run), check_exact=True)
    journal(run).write_bytes(journal(run).read_bytes()[:-40])  # that part damaged: read whole, then cold
    w2 = TraceWriter(run)
    w2.append(rec(32, 0.5))
    read_from.clear()
    df, _ = index_cache.read(run)
    assert_frame_equal(df, index_cache.build_reference(run), check_exact=True)


def test_a_row_longer_than_the_tail_a_writer_reads(tmp_path, cold):
    run = make(tmp_path / "r", 5, 1, seed_lines=False)
    TraceWriter(run).append(rec(8, 0.5, grade={"total": 0.5, "note": "x" * 70_000}))  # a 70 KB row
    w = TraceWriter(run)
    assert w.keeping()
    w.append(rec(9, 0.25))
    assert loads(run, cold) == 0
