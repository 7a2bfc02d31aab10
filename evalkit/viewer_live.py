"""A batch that is still running, as the viewer reads it: finished episodes from the trace (appended as each
ends), running ones from the small progress files the batch keeps in `<run>/.live/<key>.json` (model, task,
turn, latest frame; removed when the episode ends).

A progress file is read as data, never trusted: a field of the wrong type reads as missing, a torn file is
skipped, a frame path outside the run is dropped. A file left behind by a batch that was killed is shown as
stale once it has not changed for `STALE_S`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit import traces

LIVE_DIR = ".live"
STALE_S = 600.0
"""Seconds without an update after which a running episode is shown as stale (its batch may be gone)."""
ACTIVE_S = 600.0
"""A run whose trace changed this recently is polled often even with no progress file (between episodes)."""
MAX_FILE = 1 << 20
MAX_SHOWN = 64


@dataclass
class Running:
    """One episode in progress."""

    key: str
    model: str = ""
    task_id: str = ""
    surface: str = ""
    mode: str = ""
    turn: int | None = None
    max_turns: int | None = None
    frame: str | None = None
    """The latest frame, relative to the run; None when there is none yet (or it pointed outside)."""
    updated: float = 0.0
    """When the batch last wrote the file (seconds since the epoch)."""
    stale: bool = False


def _text(d: dict, *names: str) -> str:
    for n in names:
        v = d.get(n)
        if isinstance(v, str) and v:
            return v[:500]
    return ""


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 else None


def live_dir(run: str | Path) -> Path:
    return Path(run) / LIVE_DIR


def _files(run: str | Path) -> list[Path]:
    d = live_dir(run)
    try:
        return sorted(p for p in d.iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:  # no such folder, or the run is one file (a foreign rollout file)
        return []


def running(run: str | Path, now: float | None = None) -> list[Running]:
    """The episodes of `run` in progress, oldest update first (at most MAX_SHOWN)."""
    now = time.time() if now is None else now
    out = []
    for p in _files(run)[: MAX_SHOWN * 4]:
        try:
            st = p.stat()
            if st.st_size > MAX_FILE:
                continue
            d = json.loads(p.read_bytes())
        except (OSError, ValueError):
            continue  # removed as the episode ended, or caught mid-write
        if not isinstance(d, dict):
            continue
        updated = d.get("updated")
        updated = float(updated) if isinstance(updated, (int, float)) and updated > 0 else st.st_mtime
        frame = d.get("frame")
        out.append(
            Running(
                key=_text(d, "key") or p.stem,
                model=_text(d, "model"),
                task_id=_text(d, "task_id", "task"),
                surface=_text(d, "surface"),
                mode=_text(d, "mode"),
                turn=_int(d.get("turn")),
                max_turns=_int(d.get("max_turns")),
                frame=frame if traces.safe_path(run, frame) is not None else None,
                updated=updated,
                stale=now - updated > STALE_S,
            )
        )
    out.sort(key=lambda r: r.updated)
    return out[:MAX_SHOWN]


def signature(run: str | Path) -> tuple:
    """Changes when the trace grows or a progress file appears, changes or goes: what polling compares."""
    files = []
    for p in _files(run):
        try:
            st = p.stat()
        except OSError:
            continue
        files.append((p.name, st.st_size, st.st_mtime_ns))
    return (traces.trace_signature(run), tuple(files))


def active(run: str | Path, now: float | None = None) -> bool:
    """Whether `run` looks like a batch in progress: a progress file, or a trace that changed lately."""
    now = time.time() if now is None else now
    if _files(run):
        return True
    try:
        return now - (Path(run) / traces.TRACE).stat().st_mtime < ACTIVE_S
    except OSError:
        return False
