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
import socket
import threading
import time
from collections.abc import Iterator
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
    """Shut `stream`'s socket when the request's time is up (a timer thread, cancelled when the stream is
    read or left). A read blocked on the socket then fails at once, and the caller, seeing `fired`, knows
    the failure for the timeout it is."""
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

    timer = threading.Timer(seconds, fire)
    timer.name, timer.daemon = "evalkit-request-clock", True
    timer.start()
    try:
        yield cut
    finally:
        timer.cancel()


def _socket(stream: Any) -> socket.socket | None:
    """The socket under an SDK stream's HTTP response (httpx's `network_stream` extension), if reachable."""
    response = getattr(stream, "response", None)
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    get = getattr(network, "get_extra_info", None)
    sock = get("socket") if callable(get) else None
    return sock if isinstance(sock, socket.socket) else None
