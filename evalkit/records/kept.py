"""The index of a trace evalkit writes, kept as it writes it: the writer (`rundir.TraceWriter`) appends each
record's row beside the trace, so that a run evalkit wrote is never read cold (`index_cache` reads it).

The journal is `<run>/.evalkit/kept-v<INDEX_VERSION>.csv`: a CSV (Polars reads it in one call, several
times faster than the same rows as JSON lines) whose columns are `_at`, `_to`, `_fp`, `_mark`, then the
index's (`columns.CACHED`). Each line is one of:
- a record appended: where its line starts (`_at`) and ends (`_to`, after its newline), the fingerprint of
  the trace up to there (`_fp`), and its row: `columns.episode_row` (the reference) of the line as written;
- lines read from the trace itself (`catch_up`: lines another program appended, a record whose row a kill
  lost, a whole trace an older evalkit wrote): each one's row, or `_mark` 1 for a line that holds no record;
  then one line (`_mark` 3) saying where that stretch starts and ends, with its `_fp`;
- a record whose row has a line break in a text (`_mark` 2): no row, the reader reads that line itself. So
  no field ever holds a newline, and a write cut short by a kill is a last line without one, left out.

A journal matches the trace when its stretches follow each other from the trace's start, its rows lie in
them in order, and the trace's fingerprint where the last one ends is the one recorded (`fingerprint`: 16
windows of the bytes up to there, the last one included, as the cached index checks it). Then a reader takes
its rows and reads only what follows cold; a journal that does not match is ignored, never trusted: the
trace is the truth, this is a cache. One writer at a time (`lock.RunLock`); a second process appending
without the lock breaks the chain, and the journal is then ignored until a writer catches it up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import polars as pl

from evalkit.errors import NOT_JSON
from evalkit.records.columns import CACHED, INDEX_COLUMNS, INDEX_VERSION, episode_row

log = logging.getLogger(__name__)

NAME = f"kept-v{INDEX_VERSION}.csv"
SCHEMA = pl.Schema(INDEX_COLUMNS)
_I = pl.Int64
_META = {"_at": _I, "_to": _I, "_fp": pl.Utf8, "_mark": _I}
_COLUMNS = pl.Schema({**_META, **INDEX_COLUMNS})
_HEADER = (",".join(_COLUMNS) + "\n").encode()
BAD, READ_IT, STRETCH = 1, 2, 3
"""`_mark`: a line that holds no record; a record the reader reads itself; the end of a stretch read."""
_WINDOW = 4096  # bytes per window of the trace's fingerprint
_N_WINDOWS = 16
_TAIL = 1 << 16  # bytes of the journal's end a writer reads to find where it stopped


def fingerprint(fd: int, size: int) -> str:
    """A hash of the first `size` bytes of the open file `fd`, from 16 windows of 4 KB spread over them (the
    first and the last included): cheap, and an append leaves it as it was."""
    h = hashlib.sha256(str(size).encode())
    last = max(size - _WINDOW, 0)
    for k in range(_N_WINDOWS):
        at = last * k // (_N_WINDOWS - 1)
        h.update(os.pread(fd, min(_WINDOW, size - at), at))
    return h.hexdigest()


def path(run: str | Path) -> Path:
    return Path(run) / ".evalkit" / NAME


def _field(v: Any) -> str:
    if v is None:
        return ""
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '""') + '"'
    return repr(v) if isinstance(v, float) else str(v)  # repr: the float back exactly, nan and inf too


def _csv(row: tuple) -> str | None:
    """The CSV fields of a row, or None when a text in it holds a line break."""
    text = ",".join(map(_field, row))
    return None if "\n" in text or "\r" in text else text


class Journal:
    """The kept index of one run's trace, as its writer appends to it. Nothing here raises: a journal that
    cannot be read or written is dropped (`end` None), and readers read the trace cold instead."""

    def __init__(self, run: Path, trace: Path):
        self.path, self.trace = path(run), trace
        self.end: int | None = None
        """The bytes of the trace the journal covers (it is kept while that is where the trace ends)."""

    @classmethod
    def open(cls, run: Path, trace: Path) -> Journal:
        """The journal of `run`, caught up with its trace as it is now (started anew when it does not match
        the trace, or is of another version)."""
        journal = cls(run, trace)
        try:
            with open(trace, "rb") as f:
                end = journal._where(f.fileno())
                if end is None:
                    journal.path.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(journal.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        os.write(fd, _HEADER)
                    finally:
                        os.close(fd)
                    end = 0
                journal.end = end
                journal._catch_up(f)
        except Exception as e:  # noqa: BLE001 - a cache: whatever goes wrong, the trace is still written
            log.debug("%s: not kept (%s)", journal.path, e)
            journal.end = None
        return journal

    def _where(self, fd: int) -> int | None:
        """Where in the trace (open as `fd`) the journal stops, when its end matches the trace; a last line
        cut short (a kill mid-write) is cut off first."""
        try:
            jfd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(jfd).st_size
            if os.pread(jfd, len(_HEADER), 0) != _HEADER:
                return None
            tail = os.pread(jfd, min(_TAIL, size), max(size - _TAIL, 0))
            cut = tail.rfind(b"\n") + 1
            if not cut:  # a line longer than the tail read: started anew
                return None
            if cut < len(tail):
                os.ftruncate(jfd, size - len(tail) + cut)
                tail = tail[:cut]
        finally:
            os.close(jfd)
        if size == len(_HEADER):
            return 0
        lines = tail.split(b"\n")[:-1]
        if len(tail) < size:  # read from within the journal: its first line may be the end of one
            lines = lines[1:]
        for line in reversed(lines):
            at, to, fp = (line.split(b",", 3) + [b"", b""])[:3]
            if line.startswith(b"_at,"):  # the header: no stretch ends in what it wrote
                return None
            if to:  # the last end of a stretch: where the rows after it (a cut write) are not counted
                end, fp = int(to) if to.isdigit() else -1, fp.decode("ascii", "replace")
                if not 0 <= end <= os.fstat(fd).st_size or fingerprint(fd, end) != fp:
                    return None
                return end
        return None  # a stretch longer than the tail read: started anew

    def _catch_up(self, f: BinaryIO) -> None:
        """Append the rows of the trace's lines after the journal's end, as one stretch."""
        size = os.fstat(f.fileno()).st_size
        if self.end is None or self.end >= size:
            return
        start = self.end
        f.seek(start)
        from evalkit.records import _index  # the cold reader brings NumPy: not for the viewer's first page

        counts: dict = {}
        rows = _index.records(f, episode_row, SCHEMA, self.trace, counts)
        end = start + counts["complete"]
        if end == start:
            return
        rows = rows.with_columns(pl.col("offset") + start).filter(pl.col("offset") < end)
        broken = pl.any_horizontal(pl.col(pl.Utf8).str.contains("[\r\n]")).fill_null(False)
        bad = [start + a for a in counts["bad_at"]]
        lines = pl.concat(
            [
                rows.filter(~broken).select(pl.col("offset").alias("_at"), pl.all()),
                rows.filter(broken).select(pl.col("offset").alias("_at"), pl.lit(READ_IT).alias("_mark")),
                pl.DataFrame(
                    {"_at": bad, "_mark": [BAD] * len(bad)}, schema={"_at": pl.Int64, "_mark": pl.Int64}
                ),
            ],
            how="diagonal_relaxed",
        ).sort("_at")
        done = pl.DataFrame(
            {"_at": [start], "_to": [end], "_fp": [fingerprint(f.fileno(), end)], "_mark": [STRETCH]}
        )
        frame = pl.concat([lines, done], how="diagonal_relaxed")
        frame = frame.select(
            pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t).alias(c) for c, t in _COLUMNS.items()
        )
        self._write(frame.write_csv(include_header=False).encode(), end)

    def row(self, line: bytes) -> tuple[tuple, str | None]:
        """The row of a record's line as it is written (its offset left for `add`), and its CSV fields."""
        row = episode_row(json.loads(line), None)
        return row, _csv(row[1:])

    def catch_up(self) -> None:
        """Append the rows of what was appended to the trace since it was opened, by another writer (which
        may have kept them too) or while it opened."""
        if self.end is None:
            return
        try:
            with open(self.trace, "rb") as f:
                self.end = self._where(f.fileno())
                self._catch_up(f)
        except Exception as e:  # noqa: BLE001 - a cache: whatever goes wrong, the trace is still written
            log.debug("%s: no longer kept (%s)", self.path, e)
            self.end = None

    def add(self, start: int, line: bytes, row: tuple[tuple, str | None] | None) -> None:
        """Keep the row (`row`, or None to make it here) of the record whose line was just written at `start`
        of the trace."""
        if self.end is None:
            return
        try:
            if start != self.end:
                raise ValueError(f"the trace is at {start}, the journal at {self.end}")
            if row is None:
                row = self.row(line)
            end = start + len(line)
            fields = f"{start},{row[1]}" if row[1] is not None else "," * (len(CACHED) - 1)
            mark = "" if row[1] is not None else str(READ_IT)
            fd = os.open(self.trace, os.O_RDONLY)
            try:
                fp = fingerprint(fd, end)
            finally:
                os.close(fd)
            self._write(f"{start},{end},{fp},{mark},{fields}\n".encode(), end)
        except Exception as e:  # noqa: BLE001 - a cache: whatever goes wrong, the trace is still written
            log.debug("%s: no longer kept (%s)", self.path, e)
            self.end = None

    def _write(self, data: bytes, end: int) -> None:
        """Append `data` to the journal in one write, all of it or nothing; it then covers the trace to
        `end`."""
        jfd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            before = os.lseek(jfd, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(jfd, view) :]
            except OSError:
                os.ftruncate(jfd, before)
                raise
        finally:
            os.close(jfd)
        self.end = end


class Kept(NamedTuple):
    """What a journal that matches the trace holds (`read`)."""

    rows: pl.DataFrame
    """The rows of the records it holds (every one, a key's earlier records too), in order (`CACHED`)."""
    read_it: list[int]
    """Where the records it holds no row of start: the reader reads each itself."""
    bad: list[int]
    """Where the lines that hold no record start."""
    end: int
    """The bytes of the trace it covers."""
    size: int
    """The bytes of the journal that cover them: a later `read` may read on from there (`since`)."""

    def after(self, at: int) -> Kept:
        """What it holds of the trace's lines from `at` (a line start) on."""
        return Kept(
            self.rows.filter(pl.col("offset") >= at),
            [a for a in self.read_it if a >= at],
            [a for a in self.bad if a >= at],
            self.end,
            self.size,
        )


def read(run: Path, fd: int, since: tuple[int, int] | None = None) -> Kept | None:
    """The journal of `run` when it matches its trace (open as `fd`), else None; with `since` (a `Kept`'s
    `size` and `end`), only what it holds after that, which must go on from there (a cached index built
    from it need not read it all again)."""
    at, start = since if since is not None else (len(_HEADER), 0)
    try:
        with open(path(run), "rb") as f:
            if f.read(len(_HEADER)) != _HEADER or at < len(_HEADER):
                return None
            f.seek(at)
            data = f.read()
    except OSError:
        return None
    data = data[: data.rfind(b"\n") + 1]
    try:
        df = pl.read_csv(_HEADER + data, schema=_COLUMNS, has_header=True)
    except Exception as e:  # noqa: BLE001 - a damaged journal is ignored, never fatal
        log.debug("%s: unreadable (%s)", path(run), e)
        return None
    return _matched(df, fd, start, at, data)


def _matched(df: pl.DataFrame, fd: int, start: int, pos: int, data: bytes) -> Kept | None:
    """The journal's lines (`data`, from its byte `pos` on) as a `Kept`, when its stretches follow each
    other from `start` in the trace, its lines lie in them in order, and the trace matches its fingerprint
    where they end."""
    stops = df["_to"].is_not_null().arg_true()
    if not len(stops):
        return Kept(SCHEMA.to_frame(), [], [], start, pos) if df.height == 0 else None
    used = len(data)
    for _ in range(df.height - stops[-1] - 1):  # lines after the last stretch's end: a write cut short
        used = data.rfind(b"\n", 0, used - 1) + 1
    df = df.head(stops[-1] + 1)
    ends = df.filter(pl.col("_to").is_not_null())
    at, to = ends["_at"], ends["_to"]
    # Each line lies in the stretch whose end comes after it: [its start, its end).
    span = df.select(
        pl.col("_at"),
        pl.col("_mark"),
        pl.when(pl.col("_to").is_not_null()).then(pl.col("_at")).backward_fill().alias("lo"),
        pl.col("_to").backward_fill().alias("hi"),
    )
    inside = span.filter(pl.col("_mark").fill_null(0) != STRETCH)
    lines_at = inside["_at"]
    sound = (
        at[0] == start
        and (at.slice(1) == to.slice(0, len(to) - 1)).all()
        and (to > at).all()
        and inside.select(((pl.col("_at") >= pl.col("lo")) & (pl.col("_at") < pl.col("hi"))).all()).item()
        and (lines_at.diff().drop_nulls() > 0).all()
    )
    end, fp = int(to[-1]), ends["_fp"][-1]
    if not sound or fp is None or end > os.fstat(fd).st_size or fingerprint(fd, end) != fp:
        return None
    mark = pl.col("_mark")
    return Kept(
        df.filter(mark.is_null()).with_columns(pl.col("_at").alias("offset")).select(CACHED),
        df.filter(mark == READ_IT)["_at"].to_list(),
        df.filter(mark == BAD)["_at"].to_list(),
        end,
        pos + used,
    )


def reference_rows(f: BinaryIO, starts: list[int]) -> tuple[list[tuple], int]:
    """The rows (`episode_row`) of the records whose lines start at `starts`, and how many of those lines
    hold none (rewritten since, or cut)."""
    rows, bad = [], 0
    for at in starts:
        f.seek(at)
        raw = f.readline()
        try:
            d = json.loads(raw)
        except NOT_JSON:
            d = None
        if isinstance(d, dict) and raw.endswith(b"\n"):
            rows.append(episode_row(d, at))
        else:
            bad += 1
    return rows, bad
