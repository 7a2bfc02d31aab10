"""How long a model request may take, and the cut when its time is up.

Two limits hold a request. Its own (`AgentOptions.request_timeout`) bounds it in all, however slowly its
reply trickles: the SDKs' timeout bounds each read, which every byte of a stream restarts, so an endpoint
that sends a delta every fifth of a second is never timed out by it. And the episode's deadline
(`--episode-timeout`), which the episode sets around its model call (`until`): a request in flight when it
passes is cut, and the call ends there (`evalkit.errors.DeadlineReached`).

The SDK is given the time left as its timeout, which bounds the wait for the reply's headers (a silent
endpoint); once a stream is open, a timer shuts its socket when the time is up (`watching`), which ends a
read blocked on it at once, wherever the stream stands.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from evalkit.types import AgentOptions

BASE_S = 60.0
TOKENS_PER_S = 20.0
"""A request's default time in all: BASE_S for the prompt (a long one with images takes tens of seconds to
its first token), and a second per TOKENS_PER_S output tokens allowed, a slow model's pace (a large model
behind a busy router, a long reasoning reply): 860 s at the default 16,000 `max_tokens`."""


def request_seconds(options: AgentOptions) -> float:
    """What one request of an agent with `options` may take in all: its `request_timeout`, else sized for
    its `max_tokens` (BASE_S + max_tokens / TOKENS_PER_S)."""
    if options.request_timeout is not None:
        return float(options.request_timeout)
    return BASE_S + options.max_tokens / TOKENS_PER_S


_until: ContextVar[float | None] = ContextVar("evalkit_until", default=None)
_limit: ContextVar[Limit | None] = ContextVar("evalkit_request_limit", default=None)


@contextlib.contextmanager
def until(deadline: float | None) -> Iterator[None]:
    """The model calls made inside end by `deadline` (`time.monotonic()` time; None: no deadline)."""
    token = _until.set(deadline)
    try:
        yield
    finally:
        _until.reset(token)


def deadline_left() -> float | None:
    """Seconds to the deadline of the model call being made (negative once passed), or None."""
    deadline = _until.get()
    return None if deadline is None else deadline - time.monotonic()


def passed() -> bool:
    left = deadline_left()
    return left is not None and left <= 0


def bounded(wait: float) -> float:
    """A wait before the next request, cut to the deadline."""
    left = deadline_left()
    return wait if left is None else max(0.0, min(wait, left))


@dataclass
class Limit:
    """One request's time: it ends at `ends` (`time.monotonic()`), by the request's own cap or, when that
    comes first, the episode's deadline (`deadline`)."""

    ends: float | None
    deadline: bool = False

    def left(self) -> float | None:
        return None if self.ends is None else max(0.001, self.ends - time.monotonic())


@contextlib.contextmanager
def request_limit(cap: float | None) -> Iterator[Limit]:
    """The limit of a request starting now: `cap` seconds, or less where the deadline comes first."""
    now = time.monotonic()
    ends = now + cap if cap is not None else None
    deadline = _until.get()
    by_deadline = deadline is not None and (ends is None or deadline < ends)
    limit = Limit(deadline if by_deadline else ends, by_deadline)
    token = _limit.set(limit)
    try:
        yield limit
    finally:
        _limit.reset(token)


def timeout() -> dict[str, float]:
    """The SDK's `timeout=` for the request being made, the seconds it has left, as keyword arguments: none
    where it has no limit (an explicit None would tell the SDK to wait for ever, not to use the client's)."""
    limit = _limit.get()
    left = None if limit is None else limit.left()
    return {} if left is None else {"timeout": left}


class Cut:
    """A stream's watchdog: `fired` once it shut the stream's socket because the request's time was up."""

    def __init__(self) -> None:
        self.fired = False
        self.seconds: float | None = None


@contextlib.contextmanager
def watching(stream: Any) -> Iterator[Cut]:
    """Shut `stream`'s socket when the request's time is up (on the process's watchdog thread, the watch
    dropped when the stream is read or left). A read blocked on the socket then fails at once, and the
    caller, seeing `fired`, knows the failure for the timeout it is."""
    cut = Cut()
    limit = _limit.get()
    seconds = limit.left() if limit is not None else None
    sock = _socket(stream)
    if seconds is None or sock is None:
        yield cut
        return
    cut.seconds = seconds

    def fire() -> None:
        cut.fired = True
        with contextlib.suppress(OSError):  # closed already: the stream ended as the time did
            sock.shutdown(socket.SHUT_RDWR)

    watch = _watchdog.add(seconds, fire)
    try:
        yield cut
    finally:
        _watchdog.drop(watch)


class _Watch:
    __slots__ = ("fire", "live")

    def __init__(self, fire: Callable[[], None]):
        self.fire, self.live = fire, True


class Watchdog:
    """One thread that runs every watched stream's cut when its time comes. A timer thread per request (a
    thread started, and woken to be cancelled, for every model call) cost the batch's process ~15% of its
    CPU at 50 episodes at once. A dropped watch is only marked, not woken for: its entry leaves the queue when
    its time comes, or when dropped ones are most of the queue. The thread goes LINGER_S after the last
    watch is dropped (a batch leaves no thread behind) and comes back with the next."""

    LINGER_S = 1.0

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._live = 0
        self._thread: threading.Thread | None = None

    def add(self, seconds: float, fire: Callable[[], None]) -> _Watch:
        """Run `fire()` in `seconds` unless the watch is dropped first."""
        watch = _Watch(fire)
        with self._cond:
            heapq.heappush(self._queue, (time.monotonic() + seconds, next(self._order), watch))
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="evalkit-request-clock", daemon=True)
                self._thread.start()
            elif self._queue[0][2] is watch:  # sooner than the thread is waiting for
                self._cond.notify()
        return watch

    def drop(self, watch: _Watch) -> None:
        with self._cond:
            if not watch.live:
                return
            watch.live = False
            self._live -= 1
            if not self._live:
                self._cond.notify()  # the last: the thread clears the queue and lingers
            elif len(self._queue) > 64 and self._live < len(self._queue) // 4:
                self._queue = [e for e in self._queue if e[2].live]
                heapq.heapify(self._queue)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._queue and not self._queue[0][2].live:
                    heapq.heappop(self._queue)
                if not self._queue:
                    if not self._cond.wait(self.LINGER_S) and not self._queue:
                        self._thread = None
                        return
                    continue
                left = self._queue[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                watch = heapq.heappop(self._queue)[2]
                watch.live = False
                self._live -= 1
                self._cond.release()
                try:
                    watch.fire()
                finally:
                    self._cond.acquire()


_watchdog = Watchdog()


def _after_fork() -> None:
    # A child has no watchdog thread of its parent's (nor, maybe, a usable lock): it starts its own.
    global _watchdog
    _watchdog = Watchdog()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _socket(stream: Any) -> socket.socket | None:
    """The socket under an SDK stream's HTTP response (httpx's `network_stream` extension), if reachable."""
    response = getattr(stream, "response", None)
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    get = getattr(network, "get_extra_info", None)
    sock = get("socket") if callable(get) else None
    return sock if isinstance(sock, socket.socket) else None
