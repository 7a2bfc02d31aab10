"""One model call as a series of requests, each one accounted for.

The SDK clients are built with `max_retries=0`, so every request is made here: each failed one is classified
by exception type and HTTP status, kept as an `Attempt` (with what usage the API reported before it failed),
and retried or not by a policy:

- `persist(retries)`, for the last provider a call can use: what is transient (408, 409, 429, 5xx, timeouts,
  lost connections, cut streams) is retried with exponential back-off, or after the server's `retry-after`.
- `FALLBACK`, for a provider with another behind it: only a 429 with a short `retry-after` is retried, once;
  anything else ends the call at once, so that a dead provider costs one request before the next is tried.

What a failed request cost: an error status bills nothing; a connection that was never made bills nothing;
a timeout, a lost connection or a cut stream may have been billed for what the server generated, so its usage
is unknown unless the API reported it, and the turn's cost with it.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TypeVar

from evalkit import secrets
from evalkit.errors import EndpointError
from evalkit.types import Attempt, Turn, Usage

T = TypeVar("T")

RETRY_DELAY = 0.5
"""First back-off in seconds (doubling, at most MAX_DELAY), as the SDKs' own."""
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
"""A server that asks for a longer wait than this is not waited for: the call fails (or falls back)."""
RATE_WAIT = 20.0
"""On a provider with a fallback, a 429 asking for at most this many seconds is waited for, once."""

Policy = Callable[[Attempt, int], "float | None"]
"""(the failed attempt, retries so far) → seconds to wait before the next request, or None to give up."""

sleep = time.sleep
"""How waits are made; tests swap it for one that only records."""


class StreamError(Exception):
    """A stream that broke or ended without a usable response (a failed response event, no final event, a
    connection cut mid-reply): transient.

    `partial_usage` is what the stream reported before it broke; adapters set the same attribute on the SDK's
    own exceptions when a stream they were reading fails."""

    def __init__(self, message: str, usage: Usage | None = None):
        super().__init__(message)
        self.partial_usage = usage


def transport_errors(client_sdk: ModuleType) -> tuple[type[BaseException], ...]:
    """What a connection that breaks while a stream is read raises: the OpenAI SDKs wrap it as their
    APIConnectionError, the Anthropic SDK lets the HTTP library's own error out."""
    errors: list[type[BaseException]] = [client_sdk.APIConnectionError]
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None and isinstance(getattr(module, "TransportError", None), type):
            errors.append(module.TransportError)
    return tuple(errors)


def _never_sent(exc: BaseException | None) -> bool:
    """Whether a connection error happened before the request reached a server (nothing can be billed)."""
    names = ("ConnectError", "ConnectTimeout")
    for module in (sys.modules.get("httpx2"), sys.modules.get("httpx")):
        kinds = tuple(t for t in (getattr(module, n, None) for n in names) if isinstance(t, type))
        if kinds and isinstance(exc, kinds):
            return True
    return False


@contextmanager
def reading_stream(client_sdk: ModuleType) -> Iterator[None]:
    """Around the reading of an open stream: a broken connection becomes a StreamError, to be retried."""
    try:
        yield
    except transport_errors(client_sdk) as exc:
        raise StreamError(f"the connection broke mid-stream: {type(exc).__name__}: {_short(exc)}") from exc


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "…"


def _url(exc: BaseException, fallback: str) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    return str(url) if url else fallback


def retry_after(exc: BaseException) -> float | None:
    """The wait a 429 or 503 asks for, from `retry-after-ms` or `retry-after` (seconds), if any."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        try:
            seconds = float(value) / scale if value is not None else None
        except ValueError:
            continue  # an HTTP date: rare enough to treat as no advice
        if seconds is not None and seconds >= 0:
            return seconds
    return None


def classify(
    exc: BaseException, client_sdk: ModuleType, route: str, url: str, seconds: float
) -> Attempt | None:
    """The Attempt a failed request stands for, or None when `exc` is no endpoint failure (a bug)."""
    partial = getattr(exc, "partial_usage", None)
    reported = partial if isinstance(partial, Usage) else Usage()
    where = _url(exc, url)

    def attempt(kind: str, error: str, status: int | None = None, known: bool = False, wait=None) -> Attempt:
        # An error body may echo the request's key or a token: the record keeps the error without it.
        return Attempt(route, status, kind, secrets.scrub(error), reported, known, wait, round(seconds, 3))

    if isinstance(exc, StreamError):
        return attempt("stream_cut", f"{_short(exc)} ({where})")
    if isinstance(exc, client_sdk.APIStatusError) and exc.status_code != 200:
        status = exc.status_code
        kind = "rate_limited" if status == 429 else "server_error" if status >= 500 else "rejected"
        error = f"{type(exc).__name__} {status} from {where}: {_short(exc)}"
        return attempt(kind, error, status, known=True, wait=retry_after(exc))
    if isinstance(exc, client_sdk.APITimeoutError):
        known = _never_sent(exc.__cause__)
        return attempt("timeout", f"no answer from {where} within the request timeout", known=known)
    if isinstance(exc, client_sdk.APIConnectionError):
        cause = exc.__cause__
        why = f"{type(cause).__name__}: {_short(cause)}" if cause is not None else _short(exc)
        if _never_sent(cause):
            return attempt("no_connection", f"could not connect to {where} ({why})", known=True)
        return attempt("connection_lost", f"the connection to {where} broke ({why})")
    if isinstance(exc, client_sdk.APIError):  # an error event inside a 200 stream: mid-generation
        return attempt("stream_error", f"error inside the stream from {where}: {_short(exc)}")
    return None


def transient(a: Attempt) -> bool:
    if a.status is None:
        return True
    return a.status in (408, 409, 429) or a.status >= 500


def persist(retries: int) -> Policy:
    """Retry what is transient up to `retries` times: the server's wait if it gave one, else back-off."""

    def policy(a: Attempt, n: int) -> float | None:
        if n >= retries or not transient(a):
            return None
        if a.retry_after is not None:
            return a.retry_after if a.retry_after <= MAX_RETRY_AFTER else None
        return min(RETRY_DELAY * 2**n, MAX_DELAY) * (1 - 0.25 * random.random())

    return policy


def _fallback(a: Attempt, n: int) -> float | None:
    if n == 0 and a.status == 429:
        wait = a.retry_after if a.retry_after is not None else RETRY_DELAY
        return wait if wait <= RATE_WAIT else None
    return None


FALLBACK: Policy = _fallback


def describe(log: list[Attempt]) -> str:
    last = log[-1]
    more = f" (after {len(log)} requests)" if len(log) > 1 else ""
    return f"{last.kind}: {last.error}{more}"


def request(
    fn: Callable[[], T], client_sdk: ModuleType, *, route: str, url: str, policy: Policy, log: list[Attempt]
) -> T:
    """Run one model call until it answers or `policy` gives up; every failed request is appended to `log`.
    Giving up raises EndpointError carrying the whole log (of this call and any before it in `log`)."""
    n = 0
    while True:
        t = time.monotonic()
        try:
            return fn()
        except Exception as exc:
            a = classify(exc, client_sdk, route, url, time.monotonic() - t)
            if a is None:
                raise
            log.append(a)
            wait = policy(a, n)
            if wait is None:
                raise EndpointError(describe(log), a.status, log) from exc
            sleep(wait)
            n += 1


def log_usage(log: list[Attempt]) -> tuple[Usage, bool]:
    """(usage reported, whether that is all they may have cost) over failed requests."""
    total, known = Usage(), True
    for a in log:
        total, known = total + a.usage, known and a.usage_known
    return total, known


def settle(turn: Turn, log: list[Attempt], route: str = "", provider: str = "") -> Turn:
    """Fold the failed requests of a call into its turn: their reported usage is added, and a request that
    may have been billed without saying so makes the turn's usage unknown. `route` and `provider` say who
    answered."""
    usage, known = log_usage(log)
    turn.route, turn.provider = route, provider
    turn.attempts = list(log)
    turn.usage = turn.usage + usage
    turn.usage_known = turn.usage_known and known
    return turn
