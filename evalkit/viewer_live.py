"""A batch that is still running, as the viewer reads it: finished episodes from the trace (appended as each
ends), running ones from the progress files the batch keeps, one per episode, in `<run>/.live/<key>.json`
(`evalkit.live` writes them: model, task, turn, newest frame, the newest turn's text and calls, the pid and
host of the batch; replaced after every turn, removed once the record is in the trace).

A progress file is read as data, never trusted: a field of the wrong type reads as missing, a torn or
foreign file is skipped, a frame path outside the run is dropped. A file whose batch is gone (its process
on this host no longer exists, or, from another host, no change for `STALE_S`) is not a running episode.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit import traces

LIVE_DIR = ".live"
STALE_S = 900.0
"""Seconds without a change after which a progress file from another host counts as left behind."""
ACTIVE_S = 600.0
"""A run whose trace changed this recently is polled often even with no progress file (between episodes)."""
MAX_FILE = 1 << 20
MAX_SHOWN = 64
_HOST = socket.gethostname()


@dataclass
class Running:
    """One episode in progress, as its progress file describes it."""

    key: str
    model: str = ""
    task_id: str = ""
    surface: str = ""
    mode: str = ""
    turn: int | None = None
    """Model turns finished (0 right after the reset)."""
    max_turns: int | None = None
    frame: str | None = None
    """The newest frame, relative to the run; None when there is none yet (or it pointed outside)."""
    text: str = ""
    calls: list[tuple[str, bool]] = field(default_factory=list)
    """The newest turn's calls: (name, ok)."""
    started: str = ""
    """ISO 8601 UTC."""
    updated: float = 0.0
    """When the batch last wrote the file (seconds since the epoch)."""


def _text(d: dict, name: str, cap: int = 500) -> str:
    v = d.get(name)
    return v[:cap] if isinstance(v, str) else ""


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 else None


def _alive(d: dict, mtime: float, now: float) -> bool:
    """The batch that wrote `d` is still there: its process, on this host; else a recent change."""
    pid = _int(d.get("pid"))
    if d.get("host") == _HOST and pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: it exists
            return True
        return True
    return now - mtime < STALE_S


def _files(run: str | Path) -> list[Path]:
    try:
        return sorted(p for p in (Path(run) / LIVE_DIR).iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:  # no such folder, or the run is one file (a foreign rollout file)
        return []


def _calls(v: Any) -> list[tuple[str, bool]]:
    calls = v if isinstance(v, list) else []
    return [(_text(c, "name", 80), c.get("ok") is not False) for c in calls[:20] if isinstance(c, dict)]


def running(run: str | Path, finished: set[str] | None = None, now: float | None = None) -> list[Running]:
    """The episodes of `run` in progress (not in `finished`), longest-running first (at most MAX_SHOWN)."""
    now = time.time() if now is None else now
    out = []
    for p in _files(run)[: MAX_SHOWN * 4]:
        try:
            st = p.stat()
            d = json.loads(p.read_bytes()) if st.st_size <= MAX_FILE else None
        except (OSError, ValueError):
            continue  # removed as the episode ended, or not ours
        if not isinstance(d, dict) or not isinstance(d.get("key"), str) or not _alive(d, st.st_mtime, now):
            continue
        if finished and d["key"] in finished:
            continue  # its record is in the trace already: the file is about to go
        updated = d.get("updated")
        frame = d.get("frame")
        out.append(
            Running(
                key=d["key"][:200],
                model=_text(d, "model"),
                task_id=_text(d, "task_id"),
                surface=_text(d, "surface"),
                mode=_text(d, "mode"),
                turn=_int(d.get("turn")),
                max_turns=_int(d.get("max_turns")),
                frame=frame if traces.safe_path(run, frame) is not None else None,
                text=_text(d, "text", 300),
                calls=_calls(d.get("calls")),
                started=_text(d, "started", 40),
                updated=float(updated) if isinstance(updated, (int, float)) and updated > 0 else st.st_mtime,
            )
        )
    out.sort(key=lambda r: (r.started, r.key))
    return out[:MAX_SHOWN]


def active(run: str | Path, now: float | None = None) -> bool:
    """Whether `run` looks like a batch in progress: a progress file, or a trace that changed lately."""
    now = time.time() if now is None else now
    if _files(run):
        return True
    try:
        return now - (Path(run) / traces.TRACE).stat().st_mtime < ACTIVE_S
    except OSError:
        return False
