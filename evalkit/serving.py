"""An ASGI app on a loopback port: a free port, waiting until it answers `/health`, and uvicorn serving it in
a thread. The embedded envs (`evalkit.envs.embedded.server`), the stand-in model
(`evalkit.providers.standin`), the own-loop agents' fake endpoint and the viewer's launcher share it; it knows
none of them."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import httpx

from evalkit.errors import EnvError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_healthy(base_url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.05)
    raise EnvError(f"{base_url} did not become healthy within {timeout:.0f}s ({last})")


def _handlers() -> list[logging.Handler]:
    """The handlers a server thread's records can reach: uvicorn's own, the root's, and Python's last
    resort (a filter on a logger would miss the records its children propagate)."""
    found: list[logging.Handler] = []
    for name in ("uvicorn", "uvicorn.error", ""):
        found += [h for h in logging.getLogger(name).handlers if h not in found]
    if logging.lastResort is not None and logging.lastResort not in found:
        found.append(logging.lastResort)
    return found


class _NotFrom(logging.Filter):
    """Drops the records logged by one thread (a stopping server's)."""

    def __init__(self, thread: str):
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != self.thread


class ThreadedServer:
    """An ASGI app served by uvicorn in a background thread on a loopback port, healthy (`/health`) before
    the constructor returns; stop with `stop()` or use as a context manager."""

    def __init__(self, app: Any, port: int | None = None, host: str = "127.0.0.1", name: str = "app",
                 **uvicorn_kw: Any):  # fmt: skip
        # start-up: uvicorn with the first server
        import uvicorn

        self.host = host
        self.port = port or free_port(host)
        self.base_url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", **uvicorn_kw)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"evalkit-{name}", daemon=True)
        self._thread.start()
        try:
            wait_healthy(self.base_url)
        except EnvError:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving. Sessions still open fail in the server as it closes them (an app answering a call
        whose client is gone), and whoever stops it is stopping too (a batch cut short by a full disk): what
        the server's own thread logs meanwhile is not shown, one traceback per session on their terminal."""
        quiet = _NotFrom(self._thread.name)
        handlers = _handlers()
        for handler in handlers:
            handler.addFilter(quiet)
        try:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        finally:
            for handler in handlers:
                handler.removeFilter(quiet)

    def __enter__(self) -> ThreadedServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
