"""What scanners found in a run and what a person said of it, kept beside the run: the last scan's rows, the
judge's answers (the cache that makes a rerun free) and a person's labels.

All three live in `scan_dir(run)`: `<run>/.evalkit/scans/` for a run evalkit wrote; for a run another
harness wrote, which is never written into nor beside, the per-user cache `rundir.derived_dir` keeps for it.

    scan.parquet    the rows `evalkit scan` (or `ek.scanners.save`) wrote: one per episode × scanner
    judged.jsonl    one line per answer a judge gave, appended and flushed as it arrives (a kill loses none)
    labels.csv      key, scanner, label (yes / no), note, who, at: appended one row at a time

Readers tolerate a torn last line in either log; of an answer or a label given twice, the last counts.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.errors import ConfigError, no_space
from evalkit.records import rundir
from evalkit.records.jsonl import iter_lines

SCAN_FILE = "scan.parquet"
JUDGED_FILE = "judged.jsonl"
LABELS_FILE = "labels.csv"
LABEL_FIELDS = ("key", "scanner", "label", "note", "who", "at")
_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def scan_dir(run: str | Path) -> Path:
    """Where a run's scan results, judged answers and labels live (see the module doc)."""
    return rundir.derived_dir(run) / "scans"


def _lock(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


def append_line(path: Path, line: str, header: str | None = None) -> None:
    """Append one line to `path`, whole (one write, O_APPEND) and on disk (fsync) before returning; a new
    file starts with `header` (made with O_EXCL, so two writers never both write it). A last line left torn
    by a kill is ended first, so this line stands on its own."""
    data = (line if line.endswith("\n") else line + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path):
        if header is not None:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                pass
            else:
                try:
                    os.write(fd, (header + "\n").encode())
                finally:
                    os.close(fd)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            if no_space(exc):
                raise rundir.disk_full(path, exc, f"{path} keeps every line before this one") from None
            raise
        finally:
            os.close(fd)


# ------------------------------------------------------------------------------------------- scan results


def write_scan(run: str | Path, rows: pl.DataFrame) -> Path:
    """Keep `rows` (a scan of this run) as the run's last scan: the rows of the scanners they hold replace
    those an earlier scan wrote; the other scanners' rows stay. Written whole or not at all."""
    path = scan_dir(run) / SCAN_FILE
    old = read_scan(run)
    if old is not None and old.height:
        kept = old.filter(~pl.col("scanner").is_in(rows["scanner"].unique().implode()))
        if kept.height:
            rows = pl.concat([kept, rows], how="diagonal_relaxed")
    buf = io.BytesIO()
    rows.write_parquet(buf, compression="lz4")
    rundir.atomic_write(path, buf.getvalue())
    return path


def read_scan(run: str | Path) -> pl.DataFrame | None:
    """The run's last scan (`write_scan`), or None when it has none (or it cannot be read)."""
    path = scan_dir(run) / SCAN_FILE
    if not path.is_file():
        return None
    try:
        return pl.read_parquet(path, glob=False)
    except Exception:  # a damaged file is no scan: scanning again writes a fresh one
        return None


def read_scans(runs: str | Path | Iterable[str | Path]) -> pl.DataFrame | None:
    """The last scans of several runs in one frame (the runs that have none left out), or None when none
    has one: what a viewer of the runs shows."""
    if isinstance(runs, str | os.PathLike):
        runs = [runs]
    found = [df for df in (read_scan(r) for r in runs) if df is not None and df.height]
    return pl.concat(found, how="diagonal_relaxed") if found else None


# ----------------------------------------------------------------------------------------- judged answers


def judged(run: str | Path) -> dict[str, dict]:
    """The judge's answers kept for a run, by request id (the last of an id counts)."""
    path = scan_dir(run) / JUDGED_FILE
    if not path.is_file():
        return {}
    out: dict[str, dict] = {}
    for d in iter_lines(path):
        if isinstance(d.get("id"), str):
            out[d["id"]] = d
    return out


def keep_judged(run: str | Path, answer: dict) -> None:
    """Append one answer of a judge (with its request `id`) to the run's cache, on disk before returning."""
    append_line(scan_dir(run) / JUDGED_FILE, json.dumps(answer, ensure_ascii=False, default=str))


# ------------------------------------------------------------------------------------------------ labels


def labels_path(run: str | Path) -> Path:
    return scan_dir(run) / LABELS_FILE


def _yes_no(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    return True if text in _YES else False if text in _NO else None


def label(
    run: str | Path,
    key: str,
    scanner: str,
    yes: bool,
    note: str = "",
    who: str | None = None,
    path: str | Path | None = None,
) -> Path:
    """Record a person's verdict: did `scanner` rightly fire on (or rightly stay quiet for) episode `key` of
    `run`? `yes` means the failure is there. Appended as one row of the run's labels file (or `path`); a
    later label of the same episode and scanner replaces an earlier one when read. Returns the file."""
    if not isinstance(key, str) or not key or not isinstance(scanner, str) or not scanner:
        raise ConfigError("a label needs an episode key and a scanner name")
    if not isinstance(yes, bool):
        raise ConfigError(f"a label is yes or no (True or False), not {yes!r}")
    target = Path(path) if path is not None else labels_path(run)
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(
        [key, scanner, "yes" if yes else "no", note or "", who or os.environ.get("USER", ""), at]
    )
    append_line(target, buf.getvalue(), header=",".join(LABEL_FIELDS))
    return target


LABEL_SCHEMA = {"run": pl.Utf8, "key": pl.Utf8, "scanner": pl.Utf8, "label": pl.Boolean, "note": pl.Utf8,
                "who": pl.Utf8, "at": pl.Utf8}  # fmt: skip


def _label_rows(path: Path, run: str | None) -> Iterator[tuple]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ConfigError(f"cannot read the labels file {path}: {e}") from None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"key", "scanner", "label"} <= set(reader.fieldnames):
        raise ConfigError(f"{path}: a labels file needs the columns key, scanner and label (yes / no)")
    for row in reader:
        yes = _yes_no(row.get("label"))
        key, scanner = (row.get("key") or "").strip(), (row.get("scanner") or "").strip()
        if yes is None or not key or not scanner:  # a torn last row, or one nobody finished
            continue
        yield (run if run is not None else row.get("run") or None, key, scanner, yes, row.get("note") or "",
               row.get("who") or "", row.get("at") or "")  # fmt: skip


def read_labels(runs: str | Path | Iterable[str | Path] = (), path: str | Path | None = None) -> pl.DataFrame:
    """The labels of `runs` (each run's labels file), or of the CSV `path` (columns key, scanner, label, and
    optionally run, note): one row per episode and scanner, its latest label."""
    rows: list[tuple] = []
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"no labels file {path}")
        rows += _label_rows(Path(path), None)
    if isinstance(runs, str | os.PathLike):
        runs = [runs]
    for run in runs:
        p = labels_path(run)
        if p.is_file():
            rows += _label_rows(p, os.fspath(run))
    df = pl.DataFrame(rows, schema=LABEL_SCHEMA, orient="row")
    return df.unique(["run", "key", "scanner"], keep="last", maintain_order=True)
