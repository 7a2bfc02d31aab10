"""The episode index of a run (one `columns.CACHED` row per episode that counts), cached as Parquet.

A native run's index holds the byte offset of each record's line (for `rundir.read_at`) and is built by
msgspec (`evalkit.records._index`); `build_reference`, one `json.loads` per line, is what it must equal. It is
cached under `<run>/.evalkit/`, named by the trace's size and mtime: a changed trace gets a new index, a
read-only run gets none. Traces are append-only, so a trace that grew since its cached index is indexed from
where that index stopped (`_extend`), not anew. Both keep each key's latest record by `rundir.survivors`.

A run another harness wrote is read through `evalkit.records.importers` and its index cached in
`rundir.derived_dir` (the per-user cache: never inside the run nor beside it, which may be inside another
harness's output root), named by the run's content signature and the importers' version.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.errors import DiskFullError, TraceError
from evalkit.records import importers, kept, rundir
from evalkit.records.columns import CACHED, INDEX_COLUMNS, INDEX_VERSION, episode_row, frame

log = logging.getLogger(__name__)

VERSION = INDEX_VERSION
SCHEMA = pl.Schema(INDEX_COLUMNS)
_index: Any = None
"""`evalkit.records._index` once `_read_on` has needed it (benchmarks/analysis.py puts another here)."""
_META = "evalkit_index"  # the Parquet metadata key of what an index covers (see `_extend`)


def _latest(df: pl.DataFrame) -> pl.DataFrame:
    """The rows that count, by `rundir.survivors`' rule (each key's last row, every row without a key) in
    Polars: 4-7 ms on a 100k-row index where the keys as a list and a dict took 25 ms (the reference,
    `build_reference`, goes through `survivors` itself, and the index tests compare the two)."""
    return df.filter(pl.col("key").is_last_distinct() | pl.col("key").is_null())


def build(run: Path, counts: dict | None = None) -> pl.DataFrame:
    """The index of a run, read anew; `counts` gets the unreadable lines of a native trace (see
    `_index.records`)."""
    if rundir.is_native(run):
        trace = rundir.trace_file(run)
        with open(trace, "rb") as f:
            return _latest(_read_on(f, trace, {} if counts is None else counts))
    return frame([episode_row(d, None) for d in rundir.iter_dicts(run)], dict(SCHEMA))


def build_reference(run: Path) -> pl.DataFrame:
    """`build` one `json.loads` at a time: the definition the fast reader is tested against."""
    if rundir.is_native(run):
        pairs = rundir.latest_records(rundir.iter_offsets(run), key=lambda p: rundir.record_key(p[1]))
    else:
        pairs = [(None, d) for d in rundir.iter_dicts(run)]
    return frame([episode_row(d, off) for off, d in pairs], dict(SCHEMA))


def index_path(run: str | Path) -> Path:
    """Where the cached index of `run` lives for the run as it is now."""
    size, mtime = rundir.trace_signature(run)
    if rundir.is_native(run):
        return Path(run) / ".evalkit" / f"index-v{VERSION}-{size}-{mtime}.parquet"
    return rundir.derived_dir(run) / f"index-v{VERSION}-i{importers.cache_tag(run)}-{size}-{mtime}.parquet"


def _read_on(f: Any, trace: Path, counts: dict) -> pl.DataFrame:
    """`_index.records` of the open trace `f` from its position; the cold reader is imported only when there
    is something to read. It brings NumPy: ~0.1-0.4 s of the viewer's first page on a run evalkit wrote,
    whose kept index leaves nothing to read cold (py-spy, benchmarks/viewer.py --first)."""
    global _index
    if os.fstat(f.fileno()).st_size <= f.tell():
        counts.update(unreadable=0, torn=0, bad_at=[], complete=0)  # as `_index.records` counts nothing
        return SCHEMA.to_frame()
    if _index is None:
        from evalkit.records import _index
    return _index.records(f, episode_row, SCHEMA, trace, counts)


def _covered(recs: pl.DataFrame, indexed: int) -> bool:
    """Whether the records read stop before `indexed`: a last line without its newline that still parsed
    is in the index but not in the prefix a later append would extend (so that index is not extended)."""
    return recs.height == 0 or recs["offset"][-1] < indexed


def _index_native(run: Path) -> tuple[pl.DataFrame, dict | None]:
    """The index of a native run, from what is known of its trace (the rows its writer kept beside it,
    `kept`, or a cached index it only appended to since: whichever covers more) and the rest read cold;
    and what it covers (None when a later one cannot extend it)."""
    trace = rundir.trace_file(run)
    with open(trace, "rb") as f:
        base = _extendable(run, f)
        start = base[1]["indexed"] if base else 0
        before = base[1].get("unreadable", 0) if base else 0  # unreadable lines add up over extensions
        known = []
        since = base[1].get("kept") if base else None  # what the journal had given that index
        journal = kept.read(run, f.fileno(), tuple(since)) if isinstance(since, list) else None
        if journal is None:
            journal = kept.read(run, f.fileno())
        kept_meta = [journal.size, journal.end] if journal is not None else since
        if journal is not None and (journal.end > start or base is None):
            journal = journal.after(start)
            rows, bad = kept.reference_rows(f, journal.read_it)
            known = [journal.rows, frame(rows, dict(SCHEMA))] if rows else [journal.rows]
            before += len(journal.bad) + bad
            start = journal.end
        f.seek(start)
        counts: dict = {}
        tail = _read_on(f, trace, counts)
        recs = pl.concat([*known, tail.with_columns(pl.col("offset") + start)], how="vertical")
        if len(known) > 1:
            recs = recs.sort("offset")
        indexed = start + counts["complete"]
        df = _latest(recs) if base is None else _extend(base[0], recs)
        # A torn last line is read again by the next one.
        meta = {"version": VERSION, "torn": counts["torn"], "unreadable": before + counts["unreadable"]}
        if kept_meta:
            meta["kept"] = kept_meta
        if _covered(tail, indexed - start):
            meta |= {
                "indexed": indexed,
                "rows": df.height,
                "fingerprint": kept.fingerprint(f.fileno(), indexed),
            }
    return df, meta


def _extend(old: pl.DataFrame, tail: pl.DataFrame) -> pl.DataFrame:
    """The cached index `old` followed by the records read after it (`tail`, offsets absolute), as one pass
    over the whole trace would keep them. `old` already holds only the records that counted, and only a
    tail record with its key can replace one of them, so the rule runs over those rows and the tail alone."""
    hit = old["key"].is_in(tail["key"].drop_nulls().implode()).fill_null(False)  # no key: never replaced
    return pl.concat([old.filter(~hit), _latest(pl.concat([old.filter(hit), tail], how="vertical"))])


def _extendable(run: Path, f: Any) -> tuple[pl.DataFrame, dict] | None:
    """The newest cached index of `run` that the open trace `f` only appended to, and what it covers."""
    folder = run / ".evalkit"
    try:
        found = sorted(
            folder.glob(f"index-v{VERSION}-*.parquet"), key=lambda p: p.stat().st_mtime_ns, reverse=True
        )
    except OSError:
        return None
    size = os.fstat(f.fileno()).st_size
    for path in found:
        try:
            meta = json.loads(pl.read_parquet_metadata(path).get(_META) or "null")
            if not isinstance(meta, dict) or meta.get("version") != VERSION or "indexed" not in meta:
                continue
            if (
                not 0 < meta["indexed"] <= size
                or kept.fingerprint(f.fileno(), meta["indexed"]) != meta["fingerprint"]
            ):
                continue
            df = pl.read_parquet(path, glob=False)
        except Exception as e:  # a damaged cache is skipped, never fatal
            log.debug("%s: not extended (%s)", path, e)
            continue
        if df.height == meta["rows"] and df.columns == CACHED:
            return df, meta
    return None


def _write(path: Path, df: pl.DataFrame, meta: dict | None = None) -> None:
    try:
        buf = io.BytesIO()
        extra = {_META: json.dumps(meta)} if meta else None
        df.write_parquet(buf, compression="lz4", statistics=False, metadata=extra)
        rundir.atomic_write(path, buf.getvalue(), sync=False)  # a cache: one cut short is read anew
        for old in path.parent.glob("index-v*.parquet"):
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, DiskFullError):
        pass  # a read-only or full place just goes without a cache


# An index this large is written in a thread (~0.1 s per 100,000 rows): the frame is returned without waiting
# for it. A later read of the run waits for it first; the interpreter waits for it before it exits.
_LATER_ROWS = 20_000
_writing: dict[Path, threading.Thread] = {}
_writing_lock = threading.Lock()


def _write_soon(path: Path, df: pl.DataFrame, meta: dict | None) -> None:
    if df.height < _LATER_ROWS:
        _write(path, df, meta)
        return

    def write() -> None:
        try:
            _write(path, df, meta)
        finally:
            with _writing_lock:
                if _writing.get(path.parent) is thread:
                    del _writing[path.parent]

    thread = threading.Thread(target=write, name="evalkit-index-cache")
    with _writing_lock:
        _writing[path.parent] = thread
    thread.start()


def flush(folder: Path | None = None) -> None:
    """Wait for the cached index being written in a thread into `folder` (every one, when None)."""
    with _writing_lock:
        pending = [t for f, t in _writing.items() if folder is None or f == folder]
    for thread in pending:
        thread.join()


def load(run: Path, cache: bool | str = True) -> pl.DataFrame:
    """The index of `run`: read from its cache when that is current, else built (extended when a native
    trace only grew) and cached. Malformed records are in it, with their `problem`. `cache="read"` uses a
    current cache but writes none (a command that may still be refused writes nothing)."""
    return read(run, cache)[0]


def read(run: Path, cache: bool | str = True) -> tuple[pl.DataFrame, int]:
    """`load`, and how many lines of the run's trace hold no JSON object (a torn last line included)."""
    if not run.exists():
        raise TraceError(f"{run}: no such run directory")
    if run.is_dir():
        rundir.trace_file(run)  # a trace that leads out of the run is refused, even with an index cached
    if not cache:
        counts: dict = {}
        df = build(run, counts)
        return df, counts.get("unreadable", 0) + counts.get("torn", 0)
    path = index_path(run)
    flush(path.parent)
    if path.exists():
        try:
            # A run path may hold glob characters ([, *, ?): it names one file, never a pattern.
            df = pl.read_parquet(path, glob=False)
            meta = json.loads(pl.read_parquet_metadata(path).get(_META) or "null")
            return df, _unreadable(meta)
        except Exception as e:  # a damaged cache is rebuilt, never fatal
            log.debug("%s: unreadable index, rebuilding (%s)", path, e)
    native = run.is_dir() and rundir.is_native(run)
    df, meta = _index_native(run) if native else (build(run), None)
    if cache != "read":
        _write_soon(path, df, meta)
    return df, _unreadable(meta)


def _unreadable(meta: Any) -> int:
    if not isinstance(meta, dict):
        return 0
    return int(meta.get("unreadable") or 0) + int(meta.get("torn") or 0)
