"""Run-directory I/O: the trace writer and reader, the frame store, safe paths.

A run directory holds `run.json`, `trace.jsonl` (one EpisodeRecord per line, appended as episodes end),
`summary.json` / `summary.md`, content-addressed `frames/` and `renders/`. A process killed mid-write leaves
at most one torn last line: readers skip it, and the writer starts its next record on a fresh line, so
nothing already written is ever lost or rewritten. Directories written by other harnesses are read through
`evalkit.importers`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import TraceError
from evalkit.types import EpisodeRecord, Image

log = logging.getLogger(__name__)

TRACE = "trace.jsonl"
_UMASK = os.umask(0o022)
os.umask(_UMASK)
RUN_JSON = "run.json"


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write a whole file or nothing: a crash leaves the old file, never half a new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; a run or report is meant to be shared like any file the user writes.
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FrameStore:
    """Images stored once by content under `frames/ab/<sha256>.<ext>`; returns run-relative paths."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)

    def put(self, image: Image) -> str:
        digest = image.sha256
        rel = f"frames/{digest[:2]}/{digest}.{image.ext}"
        path = self.run_dir / rel
        if not path.exists():
            atomic_write(path, image.data)
        return rel

    def put_render(self, name: str, image: Image) -> str:
        """A named picture under `renders/` (final render of an episode, target of a task)."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "render"
        rel = f"renders/{stem}.{image.ext}"
        path = self.run_dir / rel
        if not path.exists() or path.read_bytes() != image.data:
            atomic_write(path, image.data)
        return rel


class TraceWriter:
    """Appends records to `trace.jsonl`, one flushed and fsynced line per episode; thread-safe."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / TRACE
        self._lock = threading.Lock()
        self._heal()

    def _heal(self) -> None:
        # A kill mid-write leaves a last line without its newline; start the next record on a line of its own
        # so the torn fragment stays one skippable line instead of corrupting the record after it.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def append(self, record: EpisodeRecord | dict) -> None:
        line = (
            record.to_json() if isinstance(record, EpisodeRecord) else json.dumps(record, default=str)
        ) + "\n"
        data = line.encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)


def write_run_json(run_dir: str | Path, meta: dict) -> None:
    atomic_write(Path(run_dir) / RUN_JSON, json.dumps(meta, indent=2, default=str) + "\n")


def read_run_json(run_dir: str | Path) -> dict:
    path = Path(run_dir) / RUN_JSON
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TraceError(f"{path}: unreadable run.json ({e})") from e


def iter_lines(path: str | Path) -> Iterator[dict]:
    """Parsed JSON objects of a JSONL file; a torn or corrupt line is skipped with a warning, never fatal."""
    path = Path(path)
    bad = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                bad += 1
    if bad:
        log.warning("%s: skipped %d unreadable line(s)", path, bad)


def iter_offsets(run_dir: str | Path) -> Iterator[tuple[int, dict]]:
    """(byte offset, dict) of each readable line of a native trace: an index of offsets lets a reader open
    one episode of a large run with `read_at` instead of parsing every line."""
    path = Path(run_dir) / TRACE
    with open(path, "rb") as f:
        offset = 0
        for raw in f:
            start, offset = offset, offset + len(raw)
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield start, obj


def read_at(run_dir: str | Path, offset: int) -> EpisodeRecord:
    """The record on the line starting at byte `offset` of the run's trace."""
    path = Path(run_dir) / TRACE
    with open(path, "rb") as f:
        f.seek(int(offset))
        raw = f.readline()
    try:
        return EpisodeRecord.from_dict(json.loads(raw))
    except ValueError as e:
        raise TraceError(f"{path}: no record at offset {offset}") from e


def is_native(run_dir: str | Path) -> bool:
    """True for a run directory evalkit wrote (its trace lines carry `format_version`)."""
    path = Path(run_dir) / TRACE
    if not path.exists():
        return False
    for obj in iter_lines(path):
        return "format_version" in obj and "key" in obj
    return (Path(run_dir) / RUN_JSON).exists()


def iter_dicts(run_dir: str | Path, latest: bool = True) -> Iterator[dict]:
    """Episode dicts of a run, native or imported. With `latest`, a key recorded twice (an episode re-run on
    resume after an infrastructure error) yields only its last record."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise TraceError(f"{run_dir}: no such run directory")
    if is_native(run_dir):
        rows: Any = iter_lines(run_dir / TRACE)
    else:
        from evalkit import importers

        rows = importers.read_foreign(run_dir)
    if not latest:
        yield from rows
        return
    by_key: dict[str, dict] = {}
    for d in rows:
        k = d.get("key") or f"#{len(by_key)}"
        by_key.pop(k, None)
        by_key[k] = d
    yield from by_key.values()


def read_records(run_dir: str | Path, latest: bool = True) -> Iterator[EpisodeRecord]:
    for d in iter_dicts(run_dir, latest=latest):
        yield EpisodeRecord.from_dict(d)


def find_record(run_dir: str | Path, key: str) -> EpisodeRecord:
    found = None
    for d in iter_dicts(run_dir, latest=False):
        if d.get("key") == key:
            found = d
    if found is None:
        raise TraceError(f"{run_dir}: no episode with key {key!r}")
    return EpisodeRecord.from_dict(found)


def completed_keys(run_dir: str | Path) -> set[str]:
    """Keys whose latest record ended without an infrastructure error: resume skips these."""
    path = Path(run_dir) / TRACE
    if not path.exists():
        return set()
    status: dict[str, bool] = {}
    for d in iter_lines(path):
        if "key" in d:
            status[d["key"]] = not d.get("error_class")
    return {k for k, ok in status.items() if ok}


def trace_signature(run_dir: str | Path) -> tuple[int, int]:
    """A cache key that changes whenever the run changes: (size, mtime_ns) of a native run's trace; for a
    run written by another harness (one file, or a folder of them), (total size, newest mtime_ns) of its
    JSON files, up to two folders deep. (0, 0) when there is nothing to read."""
    path = Path(run_dir)
    try:
        st = (path / TRACE).stat() if path.is_dir() and (path / TRACE).exists() else path.stat()
    except OSError:
        return (0, 0)
    if not path.is_dir() or (path / TRACE).exists():
        return (st.st_size, st.st_mtime_ns)
    size = newest = 0
    for pattern in ("*.json*", "*/*.json*", "*/*/*.json*"):
        for f in path.glob(pattern):
            try:
                fst = f.stat()
            except OSError:
                continue
            size += fst.st_size
            newest = max(newest, fst.st_mtime_ns)
    return (size, newest)


def safe_path(run_dir: str | Path, rel: str | None) -> Path | None:
    """The file `rel` names inside `run_dir`, or None when it is absent or resolves outside the run
    (absolute paths, `..`, symlinks pointing elsewhere): a hostile trace must not read other files."""
    if not rel or not isinstance(rel, str) or "\x00" in rel:
        return None
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", rel):
        return None
    root = Path(run_dir).resolve()
    try:
        target = (root / rel).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if target != root and root not in target.parents:
        return None
    return target if target.is_file() else None
