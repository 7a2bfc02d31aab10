"""Env instances handed from a finished WebSocket session to the next one.

OpenEnv's server builds one env instance per session, and an `MCPEnvironment` builds its FastMCP server —
every tool's schema — in its constructor: tens of milliseconds of CPU, per episode, on the server's event
loop. An embedded env built by `recycling(cls)` keeps the instances its sessions closed and gives them to
the next sessions; the env's `close` calls `recycle()` instead of tearing itself down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def recycling(cls: type, keep: int = 256) -> Callable[[], Any]:
    """A factory for `create_app` that returns a closed instance of `cls` when it has one, else a new one.
    Each instance gets a `recycle()` that puts it back (at most `keep` are kept)."""
    free: list[Any] = []
    lock = threading.Lock()

    def make() -> Any:
        with lock:
            if free:
                return free.pop()
        env = cls()

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

    make.__name__ = cls.__name__
    make.__qualname__ = cls.__qualname__
    return make
