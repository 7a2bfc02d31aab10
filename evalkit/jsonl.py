"""JSON files as a reader of other people's runs meets them: a torn or corrupt line is skipped, never fatal.

Shared by the native trace reader (`evalkit.traces`) and the importers (`evalkit.importers`), which must not
depend on each other's module for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


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


def load_json(path: str | Path) -> Any:
    """The JSON value of a file, or None when it is missing or unreadable (a file cut off mid-write)."""
    try:
        return json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
