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
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TypeVar

from evalkit import secrets
from evalkit.errors import DeadlineReached, EndpointError, ModelFailure
from evalkit.providers import clock
from evalkit.types import Attempt, Turn, Usage

T = TypeVar("T")

RETRY_DELAY = 0.5
"""First back-off in seconds (doubling, at most MAX_DELAY), as the SDKs' own."""
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
"""A server that asks for a longer wait than this is not waited for: the call fails (or falls back)."""
RATE_WAIT = 20.0
"""On a provider with a fallback, a 429 asking for at most this many seconds is waited for, once."""

MODEL_KINDS = ("context_overflow", "malformed_call")
"""Attempt kinds that are the model's failure (`model_failure`): raised as ModelFailure, never retried."""

Policy = Callable[[Attempt, int], "float | None"]
"""(the failed attempt, retries so far) → seconds to wait before the next request, or None to give up."""

sleep = time.sleep
"""How waits are made; tests swap it for one that only records."""


class StreamError(Exception):
    """A stream that broke or ended without a usable response (a failed response event, no final event, a
    connection cut mid-reply): transient, unless its `body` (the error object an error event carried) says
    it is the model's own failure (`model_failure`).

    `partial_usage` is what the stream reported before it broke; adapters set the same attribute on the SDK's
    own exceptions when a stream they were reading fails."""

    def __init__(self, message: str, usage: Usage | None = None, body: dict | None = None, timed_out=False):
        super().__init__(message)
        self.partial_usage = usage
        self.body = body
        self.timed_out = timed_out
        """The request's time ran out while its stream was read (`evalkit.providers.clock`): a timeout."""


def error_fields(exc: BaseException | None) -> dict:
    """The `error` object of an API error body (what the SDK kept of it), or {}."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        return {}
    error = body.get("error", body)
    return error if isinstance(error, dict) else {}


CONTEXT_CODES = ("context_length_exceeded",)
"""The `code` of an error that says the prompt is past the model's context window (OpenAI's chat completions
and Responses, and the routers that pass the provider's code on)."""
MALFORMED_CODES = ("tool_use_failed",)
"""The `code` of an error that says the model wrote a tool call the server could not parse (Groq, which
answers it instead of the reply, with the model's text in `failed_generation`)."""
CONTEXT_MESSAGES = re.compile(
    r"prompt is too long: \d+ tokens > \d+ maximum"
    r"|input length and `max_tokens` exceed context limit: \d+ \+ \d+ > \d+"
    r"|This (?:model|endpoint)'s maximum context length is \d+ tokens"
)
"""Where the error body has no code for it, the documented form of the message, numbers and all: an Anthropic
`invalid_request_error` (type and message are all it carries), a vLLM or OpenRouter 400 (a message and the
status). Matched at the message's start, never searched for words."""


def model_failure(exc: BaseException) -> str | None:
    """`context_overflow` or `malformed_call` when the API's error says the model failed (see
    `evalkit.errors.ModelFailure`), by status and the error body's `code`, else its documented message
    form; None for any other failure."""
    fields = error_fields(exc)
    code = fields.get("code")
    status = getattr(exc, "status_code", None)
    if code in MALFORMED_CODES:
        return "malformed_call"
    if code in CONTEXT_CODES or status == 413:  # 413: the request is past the size the API takes at all
        return "context_overflow"
    message = fields.get("message")
    if status in (400, None) and isinstance(message, str) and CONTEXT_MESSAGES.match(message):
        return "context_overflow"
    return None


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
def reading_stream(
    client_sdk: ModuleType, stream: Any = None, partial: Callable[[], Turn] | None = None
) -> Iterator[None]:
    """Around the reading of an open `stream`: a broken connection becomes a StreamError, to be retried; the
    stream is cut when the request's time is up (`clock.watching`), a timeout however far it got; and what
    had arrived of the reply (`partial()`) goes with whatever ends the reading early (`partial_turn`)."""
    with clock.watching(stream) as cut:
        try:
            try:
                yield
            except transport_errors(client_sdk) as exc:
                if cut.fired:
                    raise _timed_out(cut) from exc
                raise StreamError(
                    f"the connection broke mid-stream: {type(exc).__name__}: {_short(exc)}"
                ) from exc
            except StreamError as exc:  # (the stream ended early because it was cut)
                if cut.fired and not exc.timed_out:
                    raise _timed_out(cut) from exc
                raise
            if cut.fired:  # the cut stream ended as if whole: it was not
                raise _timed_out(cut)
        except Exception as exc:
            if partial is not None and getattr(exc, "partial_turn", None) is None:
                exc.partial_turn = partial()  # type: ignore[attr-defined]
            raise


def _timed_out(cut: clock.Cut) -> StreamError:
    return StreamError(f"no whole reply within {cut.seconds:.0f}s: the stream was cut", timed_out=True)


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

    failed = model_failure(exc) if isinstance(exc, StreamError | client_sdk.APIError) else None
    if failed is not None:
        status = getattr(exc, "status_code", None)
        error = f"{type(exc).__name__} {status or ''} from {where}: {_short(exc)}"
        return attempt(failed, error, status, known=status is not None)  # an error status bills nothing
    if isinstance(exc, StreamError) and exc.timed_out:
        return attempt("timeout", f"{_short(exc)} ({where})")
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
    fn: Callable[[], T],
    client_sdk: ModuleType,
    *,
    route: str,
    url: str,
    policy: Policy,
    log: list[Attempt],
    timeout: float | None = None,
) -> T:
    """Run one model call until it answers or `policy` gives up; every failed request is appended to `log`.
    Giving up raises EndpointError carrying the whole log (of this call and any before it in `log`). Each
    request may take `timeout` seconds in all (`clock.request_limit`; `fn` gives the SDK `clock.timeout()`
    and reads its stream in `reading_stream`); none is made, or waited for, past the deadline of the call
    (`clock.until`), which ends it with DeadlineReached."""
    n = 0
    while True:
        if clock.passed():
            raise DeadlineReached(f"the episode's deadline passed before request {n + 1}", log)
        t = time.monotonic()
        try:
            with clock.request_limit(timeout):
                return fn()
        except Exception as exc:
            a = classify(exc, client_sdk, route, url, time.monotonic() - t)
            if a is None:
                raise
            log.append(a)
            if a.kind in MODEL_KINDS:  # the model's doing: asking again cannot help
                raise _failed(a, exc, log) from exc
            if clock.passed():  # cut by the deadline, or it failed as the deadline passed
                raise DeadlineReached(describe(log), log, getattr(exc, "partial_turn", None)) from exc
            wait = policy(a, n)
            if wait is None:
                raise EndpointError(describe(log), a.status, log) from exc
            sleep(clock.bounded(wait))
            n += 1


def _failed(a: Attempt, exc: BaseException, log: list[Attempt]) -> ModelFailure:
    fields = error_fields(exc)
    generation, code, detail = fields.get("failed_generation"), fields.get("code"), fields.get("message")
    return ModelFailure(describe(log), a.kind, a.status, log,
                        generation if isinstance(generation, str) else None,
                        code if isinstance(code, str) else None,
                        secrets.scrub(detail)[:500] if isinstance(detail, str) else "")  # fmt: skip


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
