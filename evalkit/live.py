"""Progress of the episodes a batch is running, for a viewer that watches a run while it grows.

A finished episode is a line of `trace.jsonl`; a running one has no record yet. While it runs, the loop keeps
one small file per episode, `<run>/.live/<key>.json`, replaced whole (write to a temporary file, rename)
after the reset and after every turn, and the batch removes it once the episode's record is in the trace.
A reader therefore sees each episode as running (a live file), finished (a record), or, for the instant
between the two, both: `running` leaves out keys the caller already holds a finished record of.

A live file (`LIVE_VERSION` 1) holds: `version`, `key`, `model`, `env`, `surface`, `mode`, `task_id`,
`tier`, `repeat`, `started` (ISO 8601 UTC), `updated` (Unix seconds), `turn` (model turns finished: 0
after the reset), `max_turns`, `frame` (run-relative path of the newest frame, or null), `target`
(run-relative, or null), `text` (the newest turn's text, at most TEXT_CAP characters), `calls` (the newest
turn's calls as `{"name", "ok"}`), `pid` and `host` of the process running it.

A batch that was killed leaves its live files behind: `running` skips a file whose process is gone (same
host) or that has not changed for STALE_S seconds (another host), and the next batch into the run clears
the ones of dead processes (`clear_stale`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_DIR = ".live"
LIVE_VERSION = 1
TEXT_CAP = 300
STALE_S = 900.0
"""A live file on another host untouched this long belongs to a batch that died (a model call that takes
longer than this is rare, and a false 'gone' only hides a running episode until its next turn)."""

_HOST = socket.gethostname()


@dataclass
class LiveEpisode:
    """One running episode as its live file describes it."""

    key: str
    model: str = ""
    env: str = ""
    surface: str = ""
    mode: str = ""
    task_id: str = ""
    tier: str | None = None
    repeat: int = 0
    started: str | None = None
    updated: float = 0.0
    turn: int = 0
    max_turns: int | None = None
    frame: str | None = None
    target: str | None = None
    text: str = ""
    calls: list[dict] = field(default_factory=list)
    pid: int | None = None
    host: str | None = None


def live_path(run_dir: str | Path, key: str) -> Path:
    return Path(run_dir) / LIVE_DIR / f"{key}.json"


def publish(run_dir: str | Path, rec: Any, max_turns: int | None = None) -> None:
    """Write (replace) the live file of the running episode `rec` (an EpisodeRecord being filled in). Never
    raises: progress for a viewer is not worth an episode."""
    try:
        last = rec.turns[-1] if rec.turns else None
        frame = next((t.frame for t in reversed(rec.turns) if t.frame), None) or rec.frame0
        data = {
            "version": LIVE_VERSION,
            "key": rec.key,
            "model": rec.model,
            "env": rec.env,
            "surface": rec.surface,
            "mode": rec.mode,
            "task_id": rec.task_id,
            "tier": rec.tier,
            "repeat": rec.repeat,
            "started": rec.started,
            "updated": round(time.time(), 3),
            "turn": len(rec.turns),
            "max_turns": max_turns,
            "frame": frame,
            "target": rec.target,
            "text": (last.text if last else "")[:TEXT_CAP],
            "calls": [{"name": c.name, "ok": c.ok} for c in (last.calls if last else [])],
            "pid": os.getpid(),
            "host": _HOST,
        }
        path = live_path(run_dir, rec.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False, default=str))
        os.replace(tmp, path)
    except Exception:  # a full disk or a vanished directory costs the progress, never the episode
        pass


def finish(run_dir: str | Path, key: str) -> None:
    """Remove the live file of an episode whose record is written (or dropped)."""
    try:
        live_path(run_dir, key).unlink(missing_ok=True)
    except OSError:
        pass


def _alive(pid: Any, host: Any, updated: Any) -> bool:
    if host == _HOST and isinstance(pid, int) and pid > 0:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: it exists
            return True
        return True
    return isinstance(updated, int | float) and time.time() - updated < STALE_S


def running(run_dir: str | Path, finished: set[str] | None = None) -> list[LiveEpisode]:
    """The episodes running in a run, oldest start first: every readable live file of a live process, less
    the keys in `finished` (records the caller has already read)."""
    folder = Path(run_dir) / LIVE_DIR
    if not folder.is_dir():
        return []
    names = set(LiveEpisode.__dataclass_fields__)
    out = []
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # removed while listed, or not ours
            continue
        if not isinstance(data, dict) or not isinstance(data.get("key"), str):
            continue
        if finished and data["key"] in finished:
            continue
        if not _alive(data.get("pid"), data.get("host"), data.get("updated")):
            continue
        try:
            out.append(LiveEpisode(**{k: v for k, v in data.items() if k in names}))
        except TypeError:
            continue
    return sorted(out, key=lambda e: (e.started or "", e.key))


def clear_stale(run_dir: str | Path) -> int:
    """Remove the live files a dead batch left (see `running`); returns how many."""
    folder = Path(run_dir) / LIVE_DIR
    if not folder.is_dir():
        return 0
    gone = 0
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stale = not _alive(data.get("pid"), data.get("host"), data.get("updated"))
        except (OSError, ValueError, AttributeError):
            stale = True
        if stale:
            path.unlink(missing_ok=True)
            gone += 1
    return gone
