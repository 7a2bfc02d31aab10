"""Env instances handed from a finished WebSocket session to the next one.

OpenEnv's server builds one env instance per session, and an `MCPEnvironment` builds its FastMCP server —
every tool's schema — in its constructor: tens of milliseconds of CPU, per episode, on the server's event
loop. An embedded env built by `recycling(cls)` keeps the instances its sessions closed and gives them to
the next sessions; the env's `close` calls `recycle()` instead of tearing itself down.

The factory is a class, flagged `REQUIRES_SINGLE_THREAD_EXECUTOR`, so that OpenEnv makes and closes every
session's env on one thread it keeps. Given a plain function it starts a thread per session for the two
calls, and the sessions a batch opens at once each waited on a new thread beside the server's loop. 25
sessions at once from 25 threads (connect, reset on a new task, tools, close), 12 bursts alternating with
the per-session threads: 84 ms each on average against 94, the last done after 158 ms against 195. An env's
`close` must then not wait long (the canvas closes its browser page without waiting).
"""

from __future__ import annotations

import threading
from typing import Any


def recycling(cls: type, keep: int = 256) -> type:
    """A factory for `create_app`: a class whose call returns a closed instance of `cls` when it has one,
    else a new one (never an instance of its own). Each instance gets a `recycle()` that puts it back (at
    most `keep` are kept)."""
    free: list[Any] = []
    lock = threading.Lock()

    def make() -> Any:
        with lock:
            if free:
                return free.pop()
        return make_recyclable(cls())

    def make_recyclable(env: Any) -> Any:
        def recycle() -> bool:
            """Put the instance back; False when it was not kept (`keep` reached), so the caller tears
            it down instead."""
            with lock:
                if len(free) >= keep:
                    return False
                if all(e is not env for e in free):
                    free.append(env)
                return True

        env.recycle = recycle
        return env

    class Factory:
        REQUIRES_SINGLE_THREAD_EXECUTOR = True
        SUPPORTS_CONCURRENT_SESSIONS = getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)

        def __new__(klass) -> Any:
            return make()

        @staticmethod
        def stock(n: int) -> None:
            """Make instances until `n` are kept, off the server's loop and its env thread (a server's
            thread beside its first sessions): a batch's first sessions, all at once, would otherwise each
            wait for one to be built, and the first of all for what every later one reuses."""
            for _ in range(min(n, keep)):
                with lock:
                    if len(free) >= n:
                        return
                if not make_recyclable(cls()).recycle():  # each kept as it is made: it may be taken at once
                    return

    Factory.__name__ = cls.__name__
    Factory.__qualname__ = cls.__qualname__
    return Factory
