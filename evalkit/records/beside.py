"""Part of a CPU-bound job in a forked copy of this process while this one does the rest.

Decoding a trace holds the GIL, so one process uses one CPU however many threads it has. A fork shares
what the parent has already read (copy-on-write: a 700 MB trace is not copied) and imports nothing, so the
second CPU starts at once. Only the child's result crosses back, msgpack-encoded through a pipe.

The child runs only the given function, which must not need a lock another thread of the parent may hold
(no logging, no imports, no Polars: its threads are not in the child), then leaves with `os._exit`, so no
atexit handler, `finally` of the parent's frames or inherited buffer runs twice. Whatever goes wrong on
its side (an exception, a signal, no fork here, a reply cut short) gives None, and the caller does the work
itself: the answer is the same, only slower.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

log = logging.getLogger(__name__)


def spare_cpu() -> bool:
    """Whether this process may run on a second CPU, and can fork (Linux: elsewhere a fork beside threads
    is unsafe or absent)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except OSError:
        return False


@contextmanager
def beside(fn: Callable[[], Any]) -> Iterator[Callable[[], Any]]:
    """Run `fn` in a forked child while the `with` block runs here; the yielded callable waits for the
    child and gives what `fn` returned (as msgpack gives it back: tuples become lists), or None when the
    child could not give it. Leaving the block early stops the child."""
    try:
        r, w = os.pipe()
    except OSError as e:
        log.debug("no pipe for a helper process (%s)", e)
        yield lambda: None
        return
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns of fork beside threads: the child uses none
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as e:
        os.close(r)
        os.close(w)
        log.debug("no helper process (%s)", e)
        yield lambda: None
        return
    if pid == 0:  # pragma: no cover - the child; its outcome is what the parent reads
        _child(fn, r, w)
    os.close(w)
    reaped = False

    def result() -> Any:
        nonlocal reaped
        chunks = []
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
        reaped = True
        try:
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): a whole reply still decodes
            code = 0
        if code != 0:
            log.debug("helper process ended with %s", code)
            return None
        try:
            return msgspec.msgpack.decode(b"".join(chunks))
        except msgspec.DecodeError:
            return None

    try:
        yield result
    finally:
        os.close(r)  # a child still writing gets EPIPE and exits
        if not reaped:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _child(fn: Callable[[], Any], r: int, w: int) -> None:  # pragma: no cover - runs in the child
    code = 1
    try:
        # The parent's handlers (a batch's graceful stop) are not the child's: a signal just ends it.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        os.close(r)
        gc.disable()  # it lives for one call, and its exit frees what it made: the collector only costs
        view = memoryview(msgspec.msgpack.encode(fn()))
        while view:
            view = view[os.write(w, view) :]
        code = 0
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's frames
        pass
    finally:
        os._exit(code)
