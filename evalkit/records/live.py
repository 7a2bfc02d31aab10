"""Progress of the episodes a batch is running, for a viewer that watches a run while it grows.

A finished episode is a line of `trace.jsonl`; a running one has no record yet. While it runs, its state
(after the reset and after every turn) goes into the live file of the process running it,
`<run>/.live/<pid>@<host>.json`, one per process and run, replaced whole (write to a temporary file,
rename) at once when the process's first episode in the run starts, then at most once every MIN_GAP_S with
the newest state of every episode it runs there; the file goes as the process's last episode in the run
ends. An episode whose record is in the trace leaves the file at its next write (within MIN_GAP_S): a reader
sees each episode as running, finished, or, for that moment, both, and `running` leaves out keys the caller
already holds a finished record of.

The files are written by one thread per process (`_Writer`), not by the episodes'. One file per process,
rather than one per episode (two writes and a removal each: at fifty episodes at once, ~3 ms of the
harness's CPU per two-turn episode and the writer thread woken at every turn of every episode), costs a
write a second whatever the concurrency.

A live file (`LIVE_VERSION` 2) holds `version`, `pid` and `host` of the process, `updated` (Unix seconds,
when it was written) and `episodes`, each with `key`, `model`, `env`, `surface`, `mode`, `task_id`, `tier`,
`repeat`, `started` (ISO 8601 UTC), `updated` (when its state was given), `turn` (model turns finished: 0
after the reset), `max_turns`, `frame` (run-relative path of the newest frame, or null), `target`
(run-relative, or null), `text` (the newest turn's text, at most TEXT_CAP characters), `calls` (the newest
turn's calls as `{"name", "ok"}`). A version 1 file (one episode's fields, with `pid` and `host`, at
`<run>/.live/<key>.json`) is read the same way.

A batch that was killed leaves its live file behind: `running` skips a file whose process is gone (same
host) or that has not changed for STALE_S seconds (another host), and the next batch into the run clears
the ones of dead processes (`clear_stale`).
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_DIR = ".live"
LIVE_VERSION = 2
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
    """When the batch last gave its state (seconds since the epoch)."""
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


def live_path(run_dir: str | Path) -> Path:
    """This process's live file in `run_dir`."""
    return _file(run_dir, os.getpid(), _HOST)


def _file(run_dir: str | Path, pid: int, host: str) -> Path:
    return Path(run_dir) / LIVE_DIR / f"{pid}@{re.sub(r'[^A-Za-z0-9._-]+', '_', host)[:100]}.json"


def publish(run_dir: str | Path, rec: Any, max_turns: int | None = None) -> None:
    """Give the state now of the running episode `rec` (an EpisodeRecord being filled in) to its process's
    live file, written within MIN_GAP_S. Never raises: progress for a viewer is not worth an episode."""
    try:
        last = rec.turns[-1] if rec.turns else None
        frame = next((t.frame for t in reversed(rec.turns) if t.frame), None) or rec.frame0
        data = {
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
        }
        _writer().put(live_path(run_dir), rec.key, data)
    except Exception:  # a record that cannot be described costs the progress, never the episode
        pass


def finish(run_dir: str | Path, key: str) -> None:
    """The episode `key` has ended (its record is written, or dropped): it leaves the live file at its next
    write, and when it was the process's last one in the run, the file goes now (a write under way is
    waited for)."""
    _writer().remove(live_path(run_dir), key)


def own(run_dir: str | Path) -> list[dict]:
    """The episodes this process's live file in `run_dir` holds now (a Ray runner's, for its driver)."""
    try:
        return _entries(json.loads(live_path(run_dir).read_bytes()))
    except (OSError, ValueError):
        return []


def relay(run_dir: str | Path, pid: int, host: str, episodes: list[dict]) -> None:
    """Write process `pid`@`host`'s live file in `run_dir` for it: its episodes run where the run directory
    is not (a Ray runner; its driver relays them). No episodes: the file goes. Never raises."""
    path = _file(run_dir, pid, host)
    if episodes:
        _write(path, episodes, pid, host)
        return
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _write(path: Path, episodes: list[dict], pid: int | None = None, host: str | None = None) -> None:
    # start-up: the run-directory layer (~40 modules) only for a writer
    from evalkit.records.rundir import atomic_write

    data = {"version": LIVE_VERSION, "pid": pid or os.getpid(), "host": host or _HOST,
            "updated": round(time.time(), 3), "episodes": episodes}  # fmt: skip
    try:
        atomic_write(path, json.dumps(data, ensure_ascii=False, default=str).encode(), sync=False)
    except Exception:  # a full disk or a vanished directory costs the progress, never the batch
        pass


class _Writer:
    """The thread that writes a process's live files: each with the newest state of its episodes, the first
    at once, then at most once every MIN_GAP_S. It runs while some episode does: started by the first
    episode's state, gone when the last one's file is (a notebook between batches holds no thread)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cv = threading.Condition()
        self._episodes: dict[Path, dict[str, dict]] = {}
        """Each live file's running episodes: key → newest state."""
        self._stale: set[Path] = set()
        """Files whose episodes changed since their last write."""
        self._last: dict[Path, float] = {}
        """When each live file was last written (monotonic seconds)."""
        self._writing: Path | None = None
        self._thread: threading.Thread | None = None

    def put(self, path: Path, key: str, data: dict) -> None:
        with self._cv:
            self._episodes.setdefault(path, {})[key] = data
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="evalkit-live", daemon=True)
                self._thread.start()
            if path not in self._stale:  # (one already due is written with this state: no need to wake)
                self._stale.add(path)
                self._cv.notify()

    def remove(self, path: Path, key: str) -> None:
        with self._cv:
            episodes = self._episodes.get(path)
            if episodes is None or episodes.pop(key, None) is None:
                return
            if episodes:
                if path not in self._stale:
                    self._stale.add(path)
                    self._cv.notify()
                return
            del self._episodes[path]
            self._stale.discard(path)
            while self._writing == path:
                self._cv.wait()
            self._last.pop(path, None)
            try:  # under the lock, so that no write of this path can come after it
                path.unlink(missing_ok=True)
            except OSError:
                pass
            if not self._episodes:
                self._cv.notify_all()  # the thread goes

    def _run(self) -> None:
        while True:
            with self._cv:
                while True:
                    if not self._episodes:
                        self._thread = None
                        return
                    now = time.monotonic()
                    due = {p: self._last.get(p, now - MIN_GAP_S) + MIN_GAP_S for p in self._stale}
                    path = next((p for p, when in due.items() if when <= now), None)
                    if path is not None:
                        break
                    self._cv.wait(min(due.values()) - now if due else None)
                self._stale.discard(path)
                episodes = list(self._episodes[path].values())
                self._writing = path
            try:
                _write(path, episodes)
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


MAX_FILE = 16 << 20
"""A live file larger than this is not read (an episode's state is ~1 KB at most: its text is capped)."""
MAX_SHOWN = 64


def _text(d: dict, name: str, cap: int = 500) -> str:
    v = d.get(name)
    return v[:cap] if isinstance(v, str) else ""


def _when(v: Any, default: float) -> float:
    """A time in seconds since the epoch, as written; `default` for anything else."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else default


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
    return now - _when(d.get("updated"), mtime) < STALE_S


def files(run_dir: str | Path) -> list[Path]:
    try:
        return sorted(p for p in (Path(run_dir) / LIVE_DIR).iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:  # no such folder, or the run is one file (a foreign rollout file)
        return []


def _calls(v: Any) -> list[tuple[str, bool]]:
    calls = v if isinstance(v, list) else []
    return [(_text(c, "name", 80), c.get("ok") is not False) for c in calls[:20] if isinstance(c, dict)]


def _entries(d: Any) -> list[dict]:
    """The episodes a live file holds: a version 2 file's list, or a version 1 file's one."""
    if not isinstance(d, dict):
        return []
    if isinstance(d.get("episodes"), list):
        return [e for e in d["episodes"] if isinstance(e, dict) and isinstance(e.get("key"), str)]
    return [d] if isinstance(d.get("key"), str) else []


def running(
    run_dir: str | Path, finished: set[str] | None = None, now: float | None = None
) -> list[LiveEpisode]:
    """The episodes of a run in progress (less the keys in `finished`, whose records the caller has read),
    oldest start first, at most MAX_SHOWN. A live file is read as data, never trusted: a field of the wrong
    type reads as missing, a torn or foreign file is skipped, a frame path outside the run is dropped."""
    # start-up (as above)
    from evalkit.records.rundir import safe_path

    now = time.time() if now is None else now
    out = []
    for p in files(run_dir)[: MAX_SHOWN * 4]:
        try:
            st = p.stat()
            d = json.loads(p.read_bytes()) if st.st_size <= MAX_FILE else None
        except (OSError, ValueError):
            continue  # removed as its last episode ended, or not ours
        entries = _entries(d)
        if not entries or not _alive(d, st.st_mtime, now):
            continue
        wrote = _when(d.get("updated"), st.st_mtime)
        for e in entries:
            if finished and e["key"] in finished:
                continue  # its record is in the trace already: it is about to leave the file
            frame, target = e.get("frame"), e.get("target")
            out.append(
                LiveEpisode(
                    key=e["key"][:200],
                    model=_text(e, "model"),
                    env=_text(e, "env"),
                    surface=_text(e, "surface"),
                    mode=_text(e, "mode"),
                    task_id=_text(e, "task_id"),
                    tier=_text(e, "tier", 40),
                    repeat=_int(e.get("repeat")),
                    started=_text(e, "started", 40),
                    updated=_when(e.get("updated"), wrote),
                    turn=_int(e.get("turn")),
                    max_turns=_int(e.get("max_turns")),
                    frame=frame if safe_path(run_dir, frame) is not None else None,
                    target=target if safe_path(run_dir, target) is not None else None,
                    text=_text(e, "text", TEXT_CAP),
                    calls=_calls(e.get("calls")),
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
