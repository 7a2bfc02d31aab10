"""One writer per run directory: `RunLock(out)` is held by whatever writes a run (`evalkit run`, `run_batch`,
`evalkit ownloop`, the debugger's `save`) for as long as it writes; readers (summarise, view, live,
load_runs) never take it.

The lock is a POSIX record lock (`fcntl.lockf`) on `<run>/.evalkit/writer.lock`, beside a small JSON of who
holds it (pid, host, since when) for the message a second writer gets. A record lock belongs to the process:
the kernel drops it the moment its holder dies, however it dies (a kill -9, an OOM kill), and a child the
holder forked (an env server) never holds it, unlike `flock`, whose lock lives on in every process that
inherited its descriptor. So a lock whose holder is dead is simply free: the next writer takes it over, and
the JSON it finds only says whom it replaced. Local file systems only: record locks over NFS depend on the
server's lock daemon.

Two writers in one process (two batches in a notebook's threads) are told apart here, as the kernel sees one
process: a record lock is also released when the process closes *any* descriptor of the file, so this
module opens the file once per lock and never reads it while it holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

from evalkit.errors import ConfigError, DiskFullError, no_space
from evalkit.records.outputs import mount_point, sweep

LOCK_FILE = ".evalkit/writer.lock"
STORES = ("frames", "texts")
"""A run's content-addressed folders (`rundir.FrameStore`, `TextStore`), written only by the lock's holder."""

_held: dict[str, float] = {}
"""Run directories (resolved) this process holds, and since when."""
_guard = threading.Lock()


class RunLockedError(ConfigError):
    """Another writer holds the run directory: said in one line naming it, before any work (the CLI's 2)."""

    def __init__(self, out: str | os.PathLike, holder: dict):
        self.out, self.holder = os.fspath(out), dict(holder)
        super().__init__(f"{self.out} is being written by another evalkit run ({describe(holder)}); wait for "
                         "it to end, stop it, or give another --out")  # fmt: skip

    def __reduce__(self) -> tuple:
        return type(self), (self.out, self.holder)


def describe(holder: dict) -> str:
    """`PID 4242 on host, since 2026-12-04 18:30:02 UTC` from a lock's JSON, as much of it as is known."""
    pid = holder.get("pid")
    who = f"PID {pid}" if isinstance(pid, int) else "PID unknown"
    host = holder.get("host")
    if isinstance(host, str) and host and host != socket.gethostname():
        who += f" on {host}"
    started = holder.get("started")
    if isinstance(started, int | float):
        who += ", since " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
    return who


def holder(out: str | os.PathLike) -> dict | None:
    """Who holds the run's lock now (its JSON), or None when nobody does. For messages and tests: it takes
    the lock for an instant to find out, so never call it from the process that holds it."""
    path = Path(out) / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return _read(fd)
        return None
    finally:
        os.close(fd)


def writing(out: str | os.PathLike) -> bool:
    """Whether a writer holds the run now, as far as a reader can tell without touching the lock (taking it
    even for an instant could refuse a writer starting then): its file names a live process of this host.
    A writer releases it by emptying the file; one that died leaves a PID that is gone."""
    try:
        found = json.loads((Path(out) / LOCK_FILE).read_bytes() or b"null")
    except (OSError, ValueError):
        return False
    if not isinstance(found, dict) or found.get("host") != socket.gethostname():
        return False
    pid = found.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _read(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunLock:
    """Held while a run directory is written; a second writer gets RunLockedError naming the holder.

    ::

        with RunLock(out):
            ...  # write run.json, the trace, frames, the summary

    `took_over` is the JSON of a holder that had died without releasing (its process gone), if there was
    one: the caller may say so. Re-entrant it is not: a second `RunLock` on the same run in this process is
    refused like one in another process."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.took_over: dict | None = None
        self._fd: int | None = None
        self._key = ""

    def acquire(self) -> RunLock:
        """Take the lock, or raise RunLockedError naming its holder (DiskFullError when there is no room
        for its file). The new writer then sweeps what writers killed mid-write left in the run (their
        temporary files: `evalkit.records.outputs.sweep`; in the stores only when it took over from a
        holder that died)."""
        try:
            self._acquire()
        except OSError as exc:
            if not no_space(exc):
                raise
            raise DiskFullError(self.out / LOCK_FILE, mount_point(self.out), "nothing was written") from None
        # The stores are written under this lock alone: only a holder that died can have left files there.
        sweep(self.out, skip=() if self.took_over else STORES)
        return self

    def _acquire(self) -> RunLock:
        key = str(self.out.resolve())
        with _guard:
            if key in _held:
                raise RunLockedError(self.out, {"pid": os.getpid(), "started": _held[key]})
            path = self.out / LOCK_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                found = _read(fd)
                os.close(fd)
                raise RunLockedError(self.out, found) from None
            before = _read(fd)
            self.took_over = before if before.get("pid") not in (None, os.getpid()) else None
            now = time.time()
            info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": now}).encode()
            # Written over the old one, then cut to length: a reader never finds the file empty.
            try:
                os.pwrite(fd, info, 0)
                os.ftruncate(fd, len(info))
            except OSError:
                os.close(fd)
                raise
            self._fd, self._key = fd, key
            _held[key] = now
        return self

    def release(self) -> None:
        with _guard:
            if self._fd is None:
                return
            _held.pop(self._key, None)
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)  # left cleanly: the next writer has nobody to take over from
            finally:
                os.close(fd)  # the kernel drops the record lock with it

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
