"""An episode's pictures: frames taken while the model thinks, renders asked for once per state, and the run
directory's frame store they are saved to.

`frame_takers()` is held by every running episode (and by a batch across its episodes): the threads that
take frames in the background stop when the last one lets go, so a notebook that runs batch after batch
holds no thread or socket between them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from evalkit.envs.client import loopback
from evalkit.records.rundir import FrameStore
from evalkit.types import EnvSession, Image, ToolOutcome

_pool: ThreadPoolExecutor | None = None
_users = 0
_lock = threading.Lock()


def _taker() -> ThreadPoolExecutor:
    """The threads that take episodes' frames while their models think, one process's."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="evalkit-frames")
        return _pool


@contextlib.contextmanager
def frame_takers() -> Iterator[None]:
    global _pool, _users
    with _lock:
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            pool = _pool if not _users else None
            if pool is not None:
                _pool = None
        if pool is not None:
            pool.shutdown(wait=True)  # idle: each episode waited for its own frames before it ended
            loopback.release()


class Camera:
    """One episode's pictures of its session. Env time (what the episode's `env_seconds` counts) is added
    through `clock(seconds)`."""

    def __init__(self, session: EnvSession, store: FrameStore | None, clock: Callable[[float], None]):
        self.session, self.store, self.clock = session, store, clock
        self.calls_made = 0
        """Tool calls sent to the env so far (the model's and the loop's): a render is asked for once per
        state."""
        self._rendered: tuple[int, Image | None] | None = None
        self._pending: Future | None = None

    @property
    def background(self) -> bool:
        """A session that says its pictures may be read from another thread (`background_reads`, as an
        OpenEnv session's HTTP reads may) is read in the background; others in series."""
        return bool(getattr(self.session, "background_reads", False))

    def timed(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        t = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            self.clock(time.monotonic() - t)

    def call(self, name: str, args: dict) -> ToolOutcome:
        """A tool call on the session: the frame being taken is waited for first (nothing moves the env's
        state under it), the call is env time, and the next render is asked for anew."""
        self.settle()
        self.calls_made += 1
        return self.timed(self.session.call, name, args)

    def picture(self, what: str, timed: bool = True) -> Image | None:
        """The session's `render()` or `target()`, if it has one."""
        fn = getattr(self.session, what, None)
        if not callable(fn):
            return None
        return self.timed(fn) if timed else fn()

    def render(self, timed: bool = True) -> Image | None:
        """The env's picture of its state; with no tool call since the last one, that one again (the final
        render after the last turn's frame is the same picture, and would cost the env an encode)."""
        if self._rendered is None or self._rendered[0] != self.calls_made:
            self._rendered = (self.calls_made, self.picture("render", timed))
        return self._rendered[1]

    def frame(self, shot: Image | None, images: Sequence[Image] = (), timed: bool = True) -> Image | None:
        """The picture of the env after a turn (the one rule for frames, the debugger's included): the loop's
        screenshot of it, else the env's render, else the last image the env returned in it."""
        return shot or self.render(timed) or (images[-1] if images else None)

    def later(self, take: Callable[[bool], None]) -> None:
        """Take a frame (`take(timed)`: a picture from the env, saved) in the background, while the model
        thinks about its next turn: in series, its round trip and the env's encode lengthened every turn.
        Nothing moves the env's state meanwhile: `settle` waits for it before the next tool call, the final
        render and the end of the episode."""
        if not self.background:
            take(True)
            return
        self.settle()
        self._pending = _taker().submit(take, False)

    def submit(self, fn: Callable[[], Any]) -> Future | None:
        """Env work to do in the background beside a frame (the final document), when reads may overlap."""
        return _taker().submit(fn) if self.background else None

    def settle(self) -> None:
        """Wait for the frame `later` is taking (what it raised is raised here)."""
        pending, self._pending = self._pending, None
        self.wait(pending)

    def wait(self, pending: Future | None) -> Any:
        """The result of env work done in the background; the wait for it is env time."""
        if pending is None:
            return None
        t = time.monotonic()
        try:
            return pending.result()
        finally:
            self.clock(time.monotonic() - t)

    def save(self, image: Image | None) -> str | None:
        return self.store.put(image) if self.store is not None and image is not None else None

    def save_all(self, images: list[Image]) -> list[str]:
        return [p for p in map(self.save, images) if p]
