"""Settings checked where they enter, before any work and before any run directory exists.

Numbers must be finite (a NaN timeout would be saved in run.json and refuse every resume, since NaN ≠ NaN;
an infinite one never fires) and within their range; paths evalkit will write must be writable — tried for
real, by making and removing a scratch directory, since a root shell's `os.access` says yes to `/proc`;
paths it will read must be run directories. Each check raises `ConfigError` with one line naming the
option, or, as an argparse type, `ArgumentTypeError`; the CLI turns both into exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError


def number(
    name: str, value: Any, *, low: float | None = 0.0, strict: bool = True, high: float | None = None
) -> float:
    """`value` as a finite float above `low` (at or above when not `strict`) and at most `high`."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (v <= low if strict else v < low):
        raise ConfigError(f"{name} must be {'>' if strict else '≥'} {low:g}, got {value!r}")
    if high is not None and v > high:
        raise ConfigError(f"{name} must be ≤ {high:g}, got {value!r}")
    return v


def argtype(kind: type = float, *, low: float | None = 0.0, strict: bool = True, high: float | None = None):
    """An argparse `type=` for a finite number in range (ints are whole numbers)."""
    what = "a whole number" if kind is int else "a finite number"
    bounds = [f"{'>' if strict else '≥'} {low:g}"] if low is not None else []
    bounds += [f"≤ {high:g}"] if high is not None else []
    want = f"{what} {' and '.join(bounds)}".strip()

    def parse(text: str) -> Any:
        try:
            v = kind(text)
            number("", v, low=low, strict=strict, high=high)
        except (ValueError, ConfigError):
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        return v

    return parse


def port(text: str) -> int:
    """An argparse `type=` for a TCP port."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < v < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return v


def url(name: str, value: str, schemes: tuple[str, ...] = ("http", "https", "ws", "wss")) -> str:
    """A URL with one of `schemes` and a host."""
    from urllib.parse import urlsplit

    from evalkit.secrets import redact_url

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — a port out of range raises here
    except ValueError as e:
        raise ConfigError(f"{name} {redact_url(value)!r} is not a valid URL ({e})") from None
    if parts.scheme not in schemes or not parts.hostname:
        want = " or ".join(f"{s}://" for s in schemes)
        raise ConfigError(f"{name} {redact_url(value)!r} is not a {want} URL with a host")
    return value


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _why(e: OSError) -> str:
    return e.strerror or os.strerror(e.errno or errno.EIO)


def writable_dir(name: str, path: str | Path, shown: str | Path | None = None) -> Path:
    """A directory evalkit may create (with its parents) and write into; nothing is left behind. `shown`
    is what the user named, when that is a file in `path`."""
    path = Path(path)
    shown = path if shown is None else shown
    if path.exists() and not path.is_dir():
        if shown != path:
            raise ConfigError(f"{name} {shown} cannot be made: {path} is not a directory")
        raise ConfigError(f"{name} {path} exists and is not a directory")
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise ConfigError(f"{name} {shown} cannot be made: {base} is not a directory")
    try:
        probe = tempfile.mkdtemp(prefix=".evalkit-probe-", dir=base)
    except OSError as e:
        raise ConfigError(f"{name} {shown} cannot be written: {_why(e)} ({base})") from None
    shutil.rmtree(probe, ignore_errors=True)
    return path


def writable_file(name: str, path: str | Path) -> Path:
    """A file evalkit may (re)write, whose folder may be created."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{name} {path} is a directory; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{name} {path} cannot be written: permission denied")
    writable_dir(name, path.parent if str(path.parent) else Path("."), shown=path)
    return path


def run_out(name: str, path: str | Path) -> Path:
    """A run directory `evalkit run` may write: new, empty, or a run evalkit wrote (resumed). A run another
    harness wrote is never written into, nor is any other non-empty directory."""
    from evalkit.records import traces

    path = writable_dir(name, path)
    # (a run killed before its run.json was written holds only evalkit's own `.evalkit/`: its writer's lock)
    if path.is_dir() and any(p.name != ".evalkit" for p in path.iterdir()):
        if traces.begun(path):
            return path
        if (path / traces.TRACE).exists():
            raise ConfigError(f"{name} {path} holds a run another harness wrote, which evalkit never writes "
                              "into; give a new directory")  # fmt: skip
        raise ConfigError(f"{name} {path} is a non-empty directory that holds no evalkit run; give a new one")
    return path


def runs(paths: list[str], command: str, episodes: bool = True) -> list[str]:
    """Paths a command reads as runs: each must exist, be a run evalkit wrote or one it imports (or a folder
    of such runs, which stands for each of them, said in one line), and hold a readable episode — a run
    whose every line is unreadable or malformed is refused alike by every command.
    A run with no episode yet (its batch has not finished one) is refused too, unless `episodes` is False
    (the viewer, which watches runs grow)."""
    import sys

    from evalkit.errors import TraceError
    from evalkit.records import importers, index_cache, traces

    for p in paths:
        if not Path(p).exists():
            raise ConfigError(f"{command}: no such run directory: {p}")
    found, notes = traces.expand_runs(paths)
    paths = [str(p) for p in found]
    for p in paths:
        path = Path(p)
        if not (path.is_dir() and traces.is_native(path)):
            if path.is_dir() and traces.begun(path):  # killed before its trace was made
                raise ConfigError(f"{command}: {p} has no episodes yet")
            try:
                importers.detect(path)
            except TraceError:
                raise ConfigError(
                    f"{command}: {p} is not a run (no evalkit trace.jsonl, nor a run evalkit can import, nor "
                    "a folder of such runs)"
                ) from None
            except OSError as e:
                raise ConfigError(f"{command}: cannot read {p}: {_why(e)}") from None
    for note in notes:
        print(f"evalkit: {note}", file=sys.stderr, flush=True)
    for p in paths:
        try:  # read, not cached: a command refused here must leave the run as it was
            df, unreadable = index_cache.read(Path(p), cache="read")
        except (OSError, TraceError) as e:
            raise ConfigError(f"{command}: cannot read {p}: {e}") from None
        malformed = int(df["problem"].is_not_null().sum())
        if df.height > malformed:
            continue
        if unreadable or malformed:
            why = [f"{unreadable} unreadable line(s)"] if unreadable else []
            why += [f"{malformed} malformed record(s)"] if malformed else []
            raise ConfigError(f"{command}: {p} holds no readable episode ({', '.join(why)})")
        if episodes:
            raise ConfigError(f"{command}: {p} has no episodes yet")
    return paths


FILES_PER_EPISODE = 8
"""Files (sockets) an episode holds open in the batch's process, with room: its WebSocket to the env, a kept
connection for pictures on its thread and on a frame taker, its model's connection — and as many again for
the env's ends when the env is served in this process. Measured: 4.8 per episode at 64 at once (the env in
child processes, the tests' model server in this process), 8.8 at 6 (both in this process)."""
MIB_PER_EPISODE = 4
"""Memory an episode adds at the least (the canvas `tools` surface; a screen surface's browser page takes
far more): 4.3 MiB measured between 8 and 64 episodes at once, the env's processes included."""


def most_episodes() -> tuple[int, str]:
    """How many episodes at once this machine can hold, and what bounds it: the files this process may
    open (past them every new connection fails), or the memory available now."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        limit = -1
    bounds = []
    if limit > 0:  # (RLIM_INFINITY is -1)
        try:
            used = len(os.listdir("/proc/self/fd"))
        except OSError:
            used = 64
        bounds.append((max(1, (limit - used - 64) // FILES_PER_EPISODE),
                       f"each keeps ~{FILES_PER_EPISODE} files open and this process may open {limit:,}: "
                       "`ulimit -n` raises that"))  # fmt: skip
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(ln.split()[1]) for ln in f if ln.startswith("MemAvailable:")) // 1024
        why = f"each needs {MIB_PER_EPISODE} MiB or more and {avail:,} MiB is available"
        bounds.append((max(1, avail // MIB_PER_EPISODE), why))
    except (OSError, StopIteration, ValueError):
        pass
    return min(bounds) if bounds else (2**31, "")


def concurrency(n: int, executor: str = "threads") -> None:
    """Episodes run in this process's threads are bounded by what the machine holds (`most_episodes`); on
    Ray, by the cluster."""
    if executor == "threads":
        most, why = most_episodes()
        if n > most:
            raise ConfigError(f"--concurrency {n:,} is more than this machine holds: at most "
                              f"{most:,} episodes at once ({why})")  # fmt: skip


def free_port(name: str, port: int, host: str = "127.0.0.1") -> None:
    """The server about to start can listen on `host:port` (nothing else holds it, the host is ours)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {getattr(e, 'strerror', None) or e}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no owner
        try:
            s.bind(address)
        except OSError as e:
            raise ConfigError(f"{name} {port}: cannot listen on {host}:{port} ({_why(e)})") from None
