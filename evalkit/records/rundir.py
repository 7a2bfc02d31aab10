"""Run-directory I/O: the trace writer and reader, the one "latest record per key" rule, the frame store,
safe paths, and where derived files go.

A run directory holds `run.json`, `trace.jsonl` (one EpisodeRecord per line, appended as episodes end),
`summary.json` / `summary.md`, content-addressed `frames/` and `renders/`. A process killed mid-write leaves
at most one torn last line: readers skip it, and the writer starts its next record on a fresh line, so
nothing already written is ever lost or rewritten. Directories written by other harnesses are read through
`evalkit.records.importers` and never written: what evalkit derives from them goes to `derived_dir`.

A key recorded twice (an episode re-run on resume) counts once, as its latest record: that one rule
(`evalkit.records.keys`, given here under the same names), and every reader of runs (records, the analysis
index, resume, the viewer's search) goes through it (`latest_records`, or `survivors` for a column of keys).
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalkit import secrets
from evalkit.errors import NOT_JSON, TraceError, no_space
from evalkit.records import importers
from evalkit.records.jsonl import iter_lines, placed_lines
from evalkit.records.keys import latest_records as latest_records
from evalkit.records.keys import record_key as record_key
from evalkit.records.keys import survivors as survivors
from evalkit.records.outputs import disk_full, failed
from evalkit.types import EpisodeRecord, Image, record_problems

log = logging.getLogger(__name__)

TRACE = "trace.jsonl"
RUN_JSON = "run.json"


_tmp_names = itertools.count()


def atomic_write(path: Path, data: bytes | str, sync: bool = True) -> None:
    """Write a whole file or nothing: a crash leaves the old file, never half a new one. Text never carries
    the value of a key the environment holds (`secrets.scrub_known`). `sync`: on disk before the file is in
    place (fsync), not only in the page cache, which a killed process does not lose either. A full file
    system (or quota) is a DiskFullError saying so, the old file left in place.

    In few system calls, each a point where a thread hands the GIL on (fifty episodes at once write several
    files each): the temporary file is made with the mode a new file of the user's gets (0666 less the
    umask, as the kernel applies it), and its directory only when it is missing. A place that cannot be
    written at all (a read-only file system) is a NotWritableError saying so."""
    path = Path(path)
    raw = secrets.scrub_known(data).encode() if isinstance(data, str) else data
    try:
        _write_whole(path, raw, sync)
    except OSError as exc:
        kept = f"{path.name} is as it was" if path.exists() else f"{path.name} was not written"
        raise failed(path, exc, kept) from None


def _write_whole(path: Path, raw: bytes, sync: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    made = False
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{next(_tmp_names)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileNotFoundError:
            if made:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            made = True
        except FileExistsError:  # left by a killed process that had this pid: the next name
            continue
    else:
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class FrameStore:
    """Images stored once by content under `frames/ab/<sha256>.<ext>`; returns run-relative paths."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)

    def put(self, image: Image) -> str:
        rel = image.frame_rel
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


class TextStore:
    """Texts stored once by content under `texts/ab/<sha256>.<ext>` (a system prompt a thousand episodes
    share is one file); returns run-relative paths. Files never change once written, so readers may cache
    them by path."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._known: set[str] = set()

    def put(self, text: str, ext: str = "txt") -> str:
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        rel = f"texts/{digest[:2]}/{digest}.{ext}"
        if rel not in self._known:
            path = self.run_dir / rel
            if not path.exists():
                atomic_write(path, data)
            self._known.add(rel)
        return rel


def read_text(run_dir: str | Path, rel: str | None) -> str | None:
    """A stored text (`TextStore`) of a run, or None when it is absent or outside the run."""
    path = safe_path(run_dir, rel)
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


_TRACE_LOCKS: dict[str, threading.Lock] = {}
_TRACE_LOCKS_LOCK = threading.Lock()


def _trace_lock(path: Path) -> threading.Lock:
    """The one lock of this process for appending to the trace at `path`, whichever writer appends: episodes
    run at once in threads (`run_episode(..., out=)` in a thread pool) each open a writer of their own, and a
    writer opening (its `_heal`) or appending while another is half-way through a record lost that record
    (4-8 of 480 records of 200 KB, eight threads each opening a writer per record)."""
    key = os.path.realpath(path)
    with _TRACE_LOCKS_LOCK:
        return _TRACE_LOCKS.setdefault(key, threading.Lock())


class TraceWriter:
    """Appends records to `trace.jsonl`, one flushed and fsynced line per episode; thread-safe, and writers
    of one trace in one process take turns (`_trace_lock`). The trace is
    made at once, empty: a run that has begun is a run with no episode yet to every reader, whatever
    happens before its first episode ends (every model's key refused, a kill).

    A record is written whole or not at all: a write that wrote less (a full file system) is cut back to
    the end of the record before it, and DiskFullError says so; once there is room, the next append lands
    on a line of its own and a resume runs the episode that could not be recorded.

    Beside the trace, the run's index is kept as records are appended (`evalkit.records.kept`), so that
    reading the run never reads the trace cold. Its first open imports Polars (~0.15 s): done in a thread
    beside the batch's start, unless this process has Polars already; records appended before it is open
    are read from the trace when it is."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = trace_file(self.run_dir)
        self._lock = _trace_lock(self.path)
        self._journal = None
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
            with self._lock:
                self._heal()
        except OSError as exc:
            if not no_space(exc):
                raise
            raise disk_full(self.path, exc, f"{self.path} is as it was; rerun once there is room") from None
        self._opener: threading.Thread | None = None
        if "polars" in sys.modules:
            self._keep()
        else:
            self._opener = threading.Thread(target=self._keep, name="evalkit-kept-index", daemon=True)
            self._opener.start()

    def _keep(self) -> None:
        try:
            # start-up: the kept index only for a writer
            from evalkit.records import kept

            journal = kept.Journal.open(self.run_dir, self.path)
            with self._lock:
                journal.catch_up()  # what was appended while it opened
                self._journal = journal if journal.end is not None else None
        except Exception as e:  # noqa: BLE001 - a cache: the trace is written all the same
            log.debug("%s: index not kept (%s)", self.path, e)

    def keeping(self, timeout: float | None = None) -> bool:
        """Whether the run's index is kept beside the trace (waiting up to `timeout` for it to open)."""
        if self._opener is not None:
            self._opener.join(timeout)
        return self._journal is not None

    def _heal(self) -> None:
        # A kill mid-write leaves a last line without its newline; start the next record on a line of its own
        # so the torn fragment stays one skippable line instead of corrupting the record after it. The newline
        # is appended, never written where the end was seen: another process's writer may be half-way
        # through a record there (its record is then followed by an empty line, not cut in two).
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")
        finally:
            os.close(fd)

    def append(self, record: EpisodeRecord | dict) -> None:
        line = record.to_json() if isinstance(record, EpisodeRecord) else json.dumps(record, default=str)
        data = (secrets.scrub_known(line) + "\n").encode()
        journal, row = self._journal, None
        if journal is not None:
            try:  # the row is made before the lock: other episodes' appends need not wait for it
                row = journal.row(data)
            except Exception:  # noqa: BLE001 - made again, or given up, by `add`
                row = None
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                if self._journal is not None and self._journal.end != start:
                    self._journal.catch_up()  # what another writer appended, before this record
                try:
                    view = memoryview(data)
                    while view:
                        n = os.write(fd, view)
                        if n <= 0:  # no progress and no error: as good as a full disk
                            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
                        view = view[n:]
                    os.fsync(fd)  # a file system that allocates late may find no room only here
                except OSError as exc:
                    # Whole records or none: what this record wrote goes, so that a later append is never
                    # glued onto half of it (shrinking a file needs no room).
                    os.ftruncate(fd, start)
                    if not no_space(exc):
                        raise
                    kept = f"{self.path} keeps every record before this one, whole; resume runs the rest"
                    raise disk_full(self.path, exc, kept) from None
            finally:
                os.close(fd)
            if self._journal is not None:
                self._journal.add(start, data, row)


def write_run_json(run_dir: str | Path, meta: dict) -> None:
    """`run.json`: what was asked, with every URL in it (a base URL, the command line) without credentials."""
    text = json.dumps(secrets.redact_json(meta), indent=2, default=str)
    atomic_write(Path(run_dir) / RUN_JSON, text + "\n")


def read_run_json(run_dir: str | Path) -> dict:
    path = run_file(run_dir, RUN_JSON)
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TraceError(f"{path}: unreadable run.json ({e})") from e


def iter_offsets(run_dir: str | Path) -> Iterator[tuple[int, dict]]:
    """(byte offset, dict) of each readable line of a native trace: an index of offsets lets a reader open
    one episode of a large run with `read_at` instead of parsing every line."""
    for start, _, obj in placed_lines(trace_file(run_dir)):
        if obj is not None:
            yield start, obj


def read_at(run_dir: str | Path, offset: int) -> EpisodeRecord:
    """The record on the line starting at byte `offset` of the run's trace."""
    path = trace_file(run_dir)
    with open(path, "rb") as f:
        f.seek(int(offset))
        raw = f.readline()
    try:
        d = json.loads(raw)
    except NOT_JSON as e:
        raise TraceError(f"{path}: no record at offset {offset}") from e
    if not isinstance(d, dict):
        raise TraceError(f"{path}: no record at offset {offset}")
    return _read_from(d, run_dir)


def store_files(out: Path, files: dict[str, bytes] | Path) -> None:
    """Pictures, shared texts and raw bodies that an episode wrote elsewhere (a Ray node's temporary
    directory, a debugger's), put into the run `out` by their run-relative paths: content-addressed files
    are written once; a render (named by key or task) is replaced when it differs. A directory given for
    `files` is read (its live files left out)."""
    if isinstance(files, Path):
        found = [p for p in files.rglob("*") if p.is_file() and p.relative_to(files).parts[0] != ".live"]
        files = {p.relative_to(files).as_posix(): p.read_bytes() for p in found}
    for rel, data in files.items():
        path = Path(out) / rel
        if not path.exists() or (rel.startswith("renders/") and path.read_bytes() != data):
            atomic_write(path, data)


def run_file(run_dir: str | Path, name: str) -> Path:
    """`run_dir/name`, refused (TraceError) when it is a symlink that leads out of the run: a reader must not
    publish another file's records as the run's, as it never shows a symlinked frame or text."""
    path = Path(run_dir) / name
    if path.is_symlink():
        root = Path(run_dir).resolve()
        target = path.resolve()
        if root not in target.parents:
            raise TraceError(f"{path} is a symlink to {target}, outside the run; refused")
    return path


def trace_file(run_dir: str | Path) -> Path:
    """The run's `trace.jsonl` (see `run_file`)."""
    return run_file(run_dir, TRACE)


def _leads_out(run_dir: str | Path, name: str) -> bool:
    try:
        run_file(run_dir, name)
    except TraceError:
        return True
    return False


def is_native(run_dir: str | Path) -> bool:
    """True for a run directory evalkit wrote (its trace lines carry `format_version`). A trace that is a
    symlink out of the run counts as native without being read, so that the readers refuse it (TraceError)
    instead of an importer reading it. Quiet: the readers say what lines they skipped, once."""
    path = Path(run_dir) / TRACE
    if not path.exists():
        return path.is_symlink() and _leads_out(run_dir, TRACE)
    if _leads_out(run_dir, TRACE):
        return True
    for _, _, obj in placed_lines(path):
        if obj is not None:
            return "format_version" in obj and "key" in obj
    return (Path(run_dir) / RUN_JSON).exists()


def begun(run_dir: str | Path) -> bool:
    """True for a run evalkit wrote (`is_native`), or began: its own run.json, and no trace yet because it
    was stopped (killed, interrupted) before its first episode ended. Such a run is resumed, not refused."""
    if is_native(run_dir):
        return True
    if (Path(run_dir) / TRACE).exists():
        return False
    try:
        meta = read_run_json(run_dir)
    except TraceError:
        return False
    return isinstance(meta, dict) and "evalkit_version" in meta


def iter_dicts(run_dir: str | Path, latest: bool = True) -> Iterator[dict]:
    """Episode dicts of a run, native or imported; with `latest`, each key once (see `latest_records`)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise TraceError(f"{run_dir}: no such run directory")
    rows: Iterable[dict] = (
        iter_lines(trace_file(run_dir)) if is_native(run_dir) else importers.read_foreign(run_dir)
    )
    yield from latest_records(rows) if latest else rows


def _read_from(d: dict, run_dir: str | Path) -> EpisodeRecord:
    rec = EpisodeRecord.from_dict(d)
    rec.run_dir = str(run_dir)  # where its pictures' paths lead
    return rec


def read_records(run_dir: str | Path, latest: bool = True) -> Iterator[EpisodeRecord]:
    for d in iter_dicts(run_dir, latest=latest):
        yield _read_from(d, run_dir)


def find_record(run_dir: str | Path, key: str) -> EpisodeRecord:
    """The latest record of `key` in a run."""
    found = None
    for d in iter_dicts(run_dir, latest=False):
        if record_key(d) == key:
            found = d
    if found is None:
        raise TraceError(f"{run_dir}: no episode with key {key!r}")
    return _read_from(found, run_dir)


def completed_keys(run_dir: str | Path) -> set[str]:
    """Keys whose latest record ended without an infrastructure error: resume skips these. A malformed latest
    record (`evalkit.wellformed`) is run again, as analysis cannot count it."""
    path = trace_file(run_dir)
    if not path.exists():
        return set()
    return {
        k
        for d in latest_records(iter_lines(path))
        if (k := record_key(d)) and not d.get("error_class") and not record_problems(d)
    }


def cache_home() -> Path:
    """evalkit's per-user cache: `$XDG_CACHE_HOME/evalkit` (an absolute path, as the XDG spec wants it), else
    `~/.cache/evalkit`."""
    xdg = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "evalkit"


def derived_dir(run_dir: str | Path) -> Path:
    """Where evalkit keeps what it derives from a run (the cached index; for a foreign run, its summaries
    too): `<run>/.evalkit` for a run evalkit wrote. A run another harness wrote is never written into, nor is
    anything around it (it may be one subfolder of that harness's output root): its derived files go to the
    per-user cache (`cache_home()/runs/<name>-<hash of its resolved path>`), where the index is named by the
    run's content signature (`trace_signature`), so a changed run is indexed afresh."""
    run = Path(run_dir)
    if run.is_dir() and is_native(run):
        return run / ".evalkit"
    run = run.resolve()
    digest = hashlib.sha256(str(run).encode()).hexdigest()[:12]
    return cache_home() / "runs" / f"{run.name}-{digest}"


def is_run(path: str | Path) -> bool:
    """True for a run evalkit wrote or a run (folder or file) one of `importers` reads."""
    path = Path(path)
    try:
        if path.is_dir() and is_native(path):
            return True
        importers.detect(path)
    except (TraceError, OSError):
        return False
    return True


def runs_in(folder: str | Path) -> list[Path]:
    """The runs directly inside a folder that is not a run itself (an output root holding one run per model,
    e.g. `s001/uitars15-7b`, `s001/fara-7b`), in name order; [] for a run, a file, or a folder of none."""
    folder = Path(folder)
    if not folder.is_dir() or is_run(folder):
        return []
    try:
        inside = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    return [p for p in inside if not p.name.startswith(".") and is_run(p)]


def expand_runs(paths: Iterable[str | Path]) -> tuple[list[str | Path], list[str]]:
    """`paths` with each folder of runs (`runs_in`) replaced by the runs inside it, and one line per such
    folder saying which runs it stands for. Paths keep the form they were given in (relative stays relative),
    so that the `run` column names them as the user did."""
    out: list[str | Path] = []
    notes = []
    for p in paths:
        found = runs_in(p)
        if not found:
            out.append(p)
            continue
        out += [os.path.join(os.fspath(p), f.name) for f in found]
        names = [f.name for f in found]
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        notes.append(f"{p}: a folder of {len(found)} run(s), read as each of them: {shown}")
    return out, notes


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
