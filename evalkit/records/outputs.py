"""What evalkit writes is whole or not there: a file is written beside its place and renamed over it
(`rundir.atomic_write`, or `writing` for a library that writes the file itself), a folder (a bundle, an ATIF
job) is built in a sibling and swapped in (`building`). A reader, or a process killed at any moment, finds
the old output or the new one, never a mix.

What a killed writer leaves is a temporary sibling, named `.<name>.<pid>-<n>.tmp` (a folder swapped out in
two steps, `.<name>.<pid>-<n>.old`). The next writer sweeps those whose process is gone, or is younger than
the file (its pid reused): `sweep`, at a run's writer's start (`RunLock`) and before each output is built.
A run's content-addressed stores (`frames/`, `texts/`: a million files at 100k episodes, seconds to list) are
written only under its lock, so they are swept when the lock's last holder died holding it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from evalkit.errors import DiskFullError, NotWritableError, no_space

TEMP = re.compile(r"^\..+\.(?P<pid>\d+)-\d+\.(?P<kind>tmp|old)$")
"""The name of a writer's temporary sibling: its process id, and whether it is being built (`tmp`) or is an
old output swapped out (`old`)."""
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
"""The errnos of a place that cannot be written at all: a read-only file system, a folder that is not ours."""

_names = itertools.count()
_RENAME_EXCHANGE = 2


def temp_name(path: Path, kind: str = "tmp") -> Path:
    """A temporary sibling of `path` that no other writer (nor this one, earlier) uses."""
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_names)}.{kind}")


def mount_point(path: str | Path) -> str:
    """The mount point of the file system `path` is (or would be) on, to name it in a message."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def disk_full(path: str | Path, exc: OSError, kept: str) -> DiskFullError:
    return DiskFullError(path, mount_point(path), kept, exc.errno or 0)


def failed(path: Path, exc: BaseException, kept: str) -> BaseException:
    """What an error writing `path` (or a file inside it) is, said of `path` in one line: no room
    (DiskFullError), no right to write there (NotWritableError), else the error itself."""
    if isinstance(exc, DiskFullError):
        return DiskFullError(path, exc.mount, kept, exc.code)
    if not isinstance(exc, OSError):
        return exc
    if no_space(exc):
        return disk_full(path, exc, kept)
    if exc.errno in NOT_WRITABLE:
        return NotWritableError(path, exc.strerror or os.strerror(exc.errno or errno.EIO), kept, exc.errno)
    return exc


@contextlib.contextmanager
def writing(path: str | os.PathLike, what: str = "") -> Iterator[Path]:
    """A temporary path to write `path` through (a library that writes the file itself); renamed over
    `path` when the block ends, removed if it fails. `what` names it in a message."""
    path = Path(path)
    tmp = temp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        name = what or path.name
        kept = f"{name} is as it was" if path.exists() else f"{name} was not written"
        said = failed(path, exc, kept)
        if said is exc:
            raise
        raise said from None


@contextlib.contextmanager
def building(out: str | os.PathLike, what: str) -> Iterator[Path]:
    """A new folder to build `out` in: a sibling, swapped in for `out` when the block ends (the old one goes
    then), removed if it fails. `what` names the output in a message ("the bundle")."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep(out.parent, recursive=False)
    tmp = temp_name(out)
    try:
        tmp.mkdir()
        yield tmp
        swap_in(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        kept = f"{what} at {out} is as it was" if out.exists() else f"no {what} was written"
        said = failed(out, exc, kept)
        if said is exc:
            raise
        raise said from None


def swap_in(new: Path, out: Path) -> None:
    """Put the folder `new` where `out` is. In one step where the kernel can exchange the two names
    (Linux's renameat2), so that `out` is never missing; else `out` is moved aside first, and a kill between
    the two renames leaves it under its `.old` name, which the next `sweep` puts back."""
    if not out.exists():
        os.rename(new, out)
        return
    if _exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)  # (the old output, now under the new one's name)
        return
    old = temp_name(out, "old")
    os.rename(out, old)
    os.rename(new, out)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):  # not glibc, or one older than 2.28
        return False
    at_cwd = -100
    done = renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # a file system that cannot exchange
        return False
    raise OSError(code, os.strerror(code), str(b))


def sweep(directory: str | os.PathLike, recursive: bool = True, skip: tuple[str, ...] = ()) -> int:
    """Remove the temporary siblings in `directory` (and below, with `recursive`, but for its folders named
    in `skip`) that a writer killed mid-write left: those whose process is gone or is younger than they are.
    An old output swapped out is put back where its new one never arrived. Returns how many were dealt with;
    never raises (a folder that cannot be read or written keeps its leftovers)."""
    done = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        found = TEMP.match(entry.name)
        if found is None:
            if recursive and entry.name not in skip and entry.is_dir(follow_symlinks=False):
                done += sweep(entry.path, recursive)
            continue
        try:
            if not _stale(int(found["pid"]), entry.stat(follow_symlinks=False).st_mtime):
                continue
            done += _clear(Path(entry.path), found["kind"])
        except OSError:
            continue
    return done


def _clear(path: Path, kind: str) -> int:
    if kind == "old":
        home = path.with_name(path.name[1:].rsplit(".", 2)[0])
        if not home.exists():
            os.rename(path, home)
            return 1
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    return 1


def _stale(pid: int, mtime: float) -> bool:
    """Whether the writer `pid` that last touched a file at `mtime` is gone: no such process, or one that
    started after the file was written (the pid was reused)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's live process
    started = _started(pid)
    return started is not None and started > mtime + 1.0


def _started(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
