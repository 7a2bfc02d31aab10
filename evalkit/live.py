"""Progress of the episodes a batch is running, for a viewer that watches a run while it grows.

A finished episode is a line of `trace.jsonl`; a running one has no record yet. While it runs, the loop keeps
one small file per episode, `<run>/.live/<key>.json`, replaced whole (write to a temporary file, rename)
after the reset and after every turn, and the batch removes it once the episode's record is in the trace.
A reader therefore sees each episode as running (a live file), finished (a record), or, for the instant
between the two, both: `running` leaves out keys the caller already holds a finished record of.

The files are written by one thread per process (`_Writer`), not by the episodes': a file is rewritten at
most once every MIN_GAP_S with the newest state it was given, so the start and the first frame of an
episode, a few milliseconds apart, are one write. Written by the episodes themselves (four files per
two-turn episode), they cost the harness 18.0/19.4/23.4 ms of CPU per sequential episode against
16.4/17.2/18.7 ms now (alternating runs, a 10 ms model), and each episode 8 ms of its wall.

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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_DIR = ".live"
LIVE_VERSION = 1
TEXT_CAP = 300
MIN_GAP_S = 1.0
"""A live file is rewritten at most this often (a viewer polls every few seconds)."""
STALE_S = 900.0
"""A live file on another host untouched this long belongs to a batch that died (a model call that takes
longer than this is rare, and a false 'gone' only hides a running episode until its next turn)."""

_HOST = socket.gethostname()


@dataclass
class LiveEpisode:
    """One running episode as its live file describes it, read as data (see `running`)."""

    key: str
    model: str = ""
    env: str = ""
    surface: str = ""
    mode: str = ""
    task_id: str = ""
    tier: str = ""
    repeat: int | None = None
    started: str = ""
    """ISO 8601 UTC."""
    updated: float = 0.0
    """When the batch last wrote the file (seconds since the epoch)."""
    turn: int | None = None
    """Model turns finished (0 right after the reset)."""
    max_turns: int | None = None
    frame: str | None = None
    """The newest frame, relative to the run; None when there is none yet (or it pointed outside)."""
    target: str | None = None
    text: str = ""
    calls: list[tuple[str, bool]] = field(default_factory=list)
    """The newest turn's calls: (name, ok)."""
    pid: int | None = None
    host: str = ""


def live_path(run_dir: str | Path, key: str) -> Path:
    return Path(run_dir) / LIVE_DIR / f"{key}.json"


def publish(run_dir: str | Path, rec: Any, max_turns: int | None = None) -> None:
    """Have the live file of the running episode `rec` (an EpisodeRecord being filled in) replaced with its
    state now, within MIN_GAP_S. Never raises: progress for a viewer is not worth an episode."""
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
        _writer().put(live_path(run_dir, rec.key), data)
    except Exception:  # a record that cannot be described costs the progress, never the episode
        pass


def finish(run_dir: str | Path, key: str) -> None:
    """Remove the live file of an episode whose record is written (or dropped), now: a write still to come
    is dropped, one under way is waited for."""
    _writer().remove(live_path(run_dir, key))


def _write(path: Path, data: dict) -> None:
    from evalkit.traces import atomic_write

    try:
        atomic_write(path, json.dumps(data, ensure_ascii=False, default=str).encode(), sync=False)
    except Exception:  # a full disk or a vanished directory costs the progress, never the batch
        pass


class _Writer:
    """The thread that writes a process's live files: for each file, the newest state it was given, the
    first at once, then at most once every MIN_GAP_S."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cv = threading.Condition()
        self._due: dict[Path, tuple[float, dict]] = {}
        """A file to write: (not before, monotonic seconds; its newest state)."""
        self._last: dict[Path, float] = {}
        """When each live file was last written."""
        self._writing: Path | None = None
        threading.Thread(target=self._run, name="evalkit-live", daemon=True).start()

    def put(self, path: Path, data: dict) -> None:
        with self._cv:
            due = self._due.get(path)
            if due is None:
                last = self._last.get(path)
                now = time.monotonic()
                due = (now if last is None else max(now, last + MIN_GAP_S), data)
            self._due[path] = (due[0], data)
            self._cv.notify()

    def remove(self, path: Path) -> None:
        with self._cv:
            self._due.pop(path, None)
            while self._writing == path:
                self._cv.wait()
            self._last.pop(path, None)
            try:  # under the lock, so that no write of this path can come after it
                path.unlink(missing_ok=True)
            except OSError:
                pass

    def _run(self) -> None:
        while True:
            with self._cv:
                while True:
                    now = time.monotonic()
                    path = next((p for p, (when, _) in self._due.items() if when <= now), None)
                    if path is not None:
                        break
                    soonest = min((when for when, _ in self._due.values()), default=None)
                    self._cv.wait(None if soonest is None else soonest - now)
                _, data = self._due.pop(path)
                self._writing = path
            try:
                _write(path, data)
            finally:
                with self._cv:
                    self._writing = None
                    self._last[path] = time.monotonic()
                    self._cv.notify_all()


_the_writer: _Writer | None = None
_writer_lock = threading.Lock()


def _writer() -> _Writer:
    """This process's writer (a forked child makes its own: the parent's thread is not in it)."""
    global _the_writer
    with _writer_lock:
        if _the_writer is None or _the_writer.pid != os.getpid():
            _the_writer = _Writer()
        return _the_writer


MAX_FILE = 1 << 20
MAX_SHOWN = 64


def _text(d: dict, name: str, cap: int = 500) -> str:
    v = d.get(name)
    return v[:cap] if isinstance(v, str) else ""


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 else None


def _alive(d: dict, mtime: float, now: float) -> bool:
    """The batch that wrote `d` is still there: its process, on this host; else a change within STALE_S
    (when it says it wrote the file, or else the file's time)."""
    pid = _int(d.get("pid"))
    if d.get("host") == _HOST and pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: it exists
            return True
        return True
    updated = d.get("updated")
    return now - (updated if isinstance(updated, int | float) and updated > 0 else mtime) < STALE_S


def files(run_dir: str | Path) -> list[Path]:
    try:
        return sorted(p for p in (Path(run_dir) / LIVE_DIR).iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:  # no such folder, or the run is one file (a foreign rollout file)
        return []


def _calls(v: Any) -> list[tuple[str, bool]]:
    calls = v if isinstance(v, list) else []
    return [(_text(c, "name", 80), c.get("ok") is not False) for c in calls[:20] if isinstance(c, dict)]


def running(
    run_dir: str | Path, finished: set[str] | None = None, now: float | None = None
) -> list[LiveEpisode]:
    """The episodes of a run in progress (less the keys in `finished`, whose records the caller has read),
    oldest start first, at most MAX_SHOWN. A live file is read as data, never trusted: a field of the wrong
    type reads as missing, a torn or foreign file is skipped, a frame path outside the run is dropped."""
    from evalkit.traces import safe_path

    now = time.time() if now is None else now
    out = []
    for p in files(run_dir)[: MAX_SHOWN * 4]:
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
        frame, target = d.get("frame"), d.get("target")
        out.append(
            LiveEpisode(
                key=d["key"][:200],
                model=_text(d, "model"),
                env=_text(d, "env"),
                surface=_text(d, "surface"),
                mode=_text(d, "mode"),
                task_id=_text(d, "task_id"),
                tier=_text(d, "tier", 40),
                repeat=_int(d.get("repeat")),
                started=_text(d, "started", 40),
                updated=float(updated) if isinstance(updated, int | float) and updated > 0 else st.st_mtime,
                turn=_int(d.get("turn")),
                max_turns=_int(d.get("max_turns")),
                frame=frame if safe_path(run_dir, frame) is not None else None,
                target=target if safe_path(run_dir, target) is not None else None,
                text=_text(d, "text", TEXT_CAP),
                calls=_calls(d.get("calls")),
                pid=_int(d.get("pid")),
                host=_text(d, "host", 200),
            )
        )
    out.sort(key=lambda r: (r.started, r.key))
    return out[:MAX_SHOWN]


def clear_stale(run_dir: str | Path) -> int:
    """Remove the live files a dead batch left (see `running`); returns how many."""
    gone, now = 0, time.time()
    for path in files(run_dir):
        try:
            data = json.loads(path.read_bytes())
            stale = not _alive(data, path.stat().st_mtime, now)
        except (OSError, ValueError, AttributeError):
            stale = True
        if stale:
            path.unlink(missing_ok=True)
            gone += 1
    return gone
