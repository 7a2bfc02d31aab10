"""JSON files as a reader of other people's runs meets them: a torn or corrupt line is skipped, never fatal.

Shared by the native trace reader (`evalkit.records.rundir`) and the importers (`evalkit.records.importers`),
which must not depend on each other's module for it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import NOT_JSON

log = logging.getLogger(__name__)

_said: set = set()
_lock = threading.Lock()


def warn_once(key: Any, message: str) -> None:
    """Log `message` as a warning unless one with the same `key` was logged already in this process: a run
    read several times by one command (its summary written, then printed) warns once. Put what the warning
    counts in the key, so that a run that got worse warns again."""
    with _lock:
        if key in _said:
            return
        _said.add(key)
    log.warning("%s", message)


def forget_warnings() -> None:
    """Start afresh: each command of the CLI says its warnings once (it may run in-process, several times)."""
    with _lock:
        _said.clear()


def warn_unreadable(path: str | Path, n: int) -> None:
    """The one warning about the lines of a JSONL file that hold no JSON object."""
    warn_once(("unreadable", str(path), n), f"{path}: skipped {n} unreadable line(s)")


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
            except NOT_JSON:
                bad += 1
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                bad += 1
    if bad:
        warn_unreadable(path, bad)


def placed_lines(
    path: str | Path, start: int = 0, whole: bool = False
) -> Iterator[tuple[int, int, dict | None]]:
    """(where it starts, where it ends, its JSON object) of each line of a JSONL file from byte `start`, the
    object None on a line that holds none. With `whole`, a last line without its newline (one still being
    written) is left out, for a reader that comes back for the rest."""
    with open(path, "rb") as f:
        f.seek(start)
        end = start
        for raw in f:
            if whole and not raw.endswith(b"\n"):
                return
            offset, end = end, end + len(raw)
            try:
                obj = json.loads(raw)
            except NOT_JSON:
                obj = None
            yield offset, end, obj if isinstance(obj, dict) else None


def load_json(path: str | Path) -> Any:
    """The JSON value of a file, or None when it is missing or unreadable (a file cut off mid-write)."""
    try:
        return json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
