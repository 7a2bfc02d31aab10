"""Requests to an OpenAI endpoint (chat completions, responses) through the SDK's client, with the body as
evalkit built it and the reply as the server's JSON; and the usage object both APIs report.

The client keeps what makes the SDK the SDK on the wire: its auth, headers, timeout, error types and event
stream. Two things of `create` are left out:
- its walk of the body against the SDK's parameter types. For the plain dicts evalkit sends it changes
  nothing (no field of these parameters is renamed or reformatted), and its cost grows with the
  conversation: with 12 tools and an image, 3.7 ms of CPU per chat call at the start and 30 ms at 83
  messages; 17 ms per responses call at the start and 149 ms at 164 input items;
- its parsing of every reply and event into a model, which the adapters dumped back to dicts.
A streamed reply is also read to the end of its body, so that its connection goes back to the pool
(`DrainingStream`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any, TypeVar

from evalkit.providers import clock
from evalkit.providers.attempts import StreamError
from evalkit.providers.common import sdk
from evalkit.types import Usage


def post(client: Any, path: str, body: dict, stream: bool) -> Any:
    """POST `body` to `path` as `create` does; the reply's JSON object (a StreamError when it is not one), or
    (`stream`) its events as dicts."""
    openai = sdk("openai")
    reply = client.post(
        path,
        body=body,
        cast_to=object,
        options={"security": {"bearer_auth": True}, **clock.timeout()},
        stream=stream,
        stream_cls=draining_stream(openai)[object],
    )
    if not stream and not isinstance(reply, dict):
        raise StreamError(f"the reply is not a JSON object: {str(reply)[:200]!r}")
    return reply


def usage(u: dict | None, reasoning_chars: int, prompt: str, completion: str) -> Usage:
    """A usage object of OpenAI's: chat completions name its counts `prompt` and `completion`, the Responses
    API `input` and `output` (`<name>_tokens`, `<name>_tokens_details`). Cached and cache-written tokens are
    part of its prompt count, apart in a Usage."""
    u = u or {}
    details = u.get(f"{prompt}_tokens_details") or {}
    cached, written = details.get("cached_tokens") or 0, details.get("cache_write_tokens") or 0
    return Usage(
        input=max(0, (u.get(f"{prompt}_tokens") or 0) - cached - written),
        output=u.get(f"{completion}_tokens") or 0,
        cache_read=cached,
        cache_write=written,
        reasoning_tokens=(u.get(f"{completion}_tokens_details") or {}).get("reasoning_tokens") or 0,
        reasoning_chars=reasoning_chars,
    )


@functools.cache
def draining_stream(openai: ModuleType) -> Any:
    """The SDK's event stream, reading the body to its end once `[DONE]` comes. The SDK's sync stream stops
    reading there and closes the response with the end of its body unread, so the connection cannot go back
    to the pool: every streamed call opened a new connection (a TLS handshake, on a remote API). Its async
    stream drains the body for the same reason."""
    T = TypeVar("T")

    class DrainingStream(openai.Stream[T]):
        error_event: dict | None = None
        """The whole event an error inside the stream came in. The SDK raises an APIError carrying only
        its `error` object, but a router may put the reply's usage beside it (OpenRouter does, after a
        `length` stop), and what was billed must not be lost with it."""

        def _iter_events(self) -> Iterator[Any]:
            events = super()._iter_events()
            for sse in events:
                data = str(getattr(sse, "data", ""))
                if data.startswith("[DONE]"):
                    for _ in events:  # the rest of the body (its end): then the connection is reusable
                        pass
                elif '"error"' in data:  # cheap test first: most events are never parsed twice
                    self.error_event = _error_event(data)
                yield sse

    return DrainingStream


def _error_event(data: str) -> dict | None:
    """The event `data` holds when it is a JSON object with an `error` member (as the SDK tests it)."""
    try:
        event = json.loads(data)
    except ValueError:
        return None
    return event if isinstance(event, dict) and event.get("error") else None
