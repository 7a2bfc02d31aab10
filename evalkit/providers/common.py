"""What the wire-API adapters share: keys from `.env`, tool-argument parsing, SDK errors → EndpointError,
and the texts the harness itself says to a model."""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from evalkit.errors import ConfigError, EndpointError
from evalkit.types import Call

T = TypeVar("T")

NOTES_TAIL = 8000
"""Characters of a cut-off turn's reasoning handed back as notes."""

NOTES_NUDGE = (
    "Your previous turn hit the output limit before you called a tool, so it was lost. "
    "Here is the end of your reasoning from that turn, as notes:\n\n<notes>\n{notes}\n</notes>\n\n"
    "Keep your reasoning short this time and call a tool."
)

_loaded: set[Path] = set()


def load_env(env_file: str | os.PathLike | None = None) -> Path | None:
    """Load API keys from `env_file`, or from the nearest `.env` up from the working directory.

    Variables already set in the environment win. Returns the file read, if any.
    """
    from dotenv import find_dotenv, load_dotenv

    if env_file is not None:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"env file {str(path)!r} does not exist")
    else:
        found = find_dotenv(usecwd=True)
        if not found:
            return None
        path = Path(found)
    path = path.resolve()
    if path not in _loaded:
        load_dotenv(path, override=False)
        _loaded.add(path)
    return path


def sdk(name: str, extra: str = "") -> ModuleType:
    """Import a provider SDK, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"the {name!r} package is needed for this provider: pip install {extra or name}"
        ) from exc


def parse_args(raw: Any) -> tuple[dict, str | None]:
    """Tool-call arguments as a dict, or ({}, why not): a model's malformed arguments are data, not errors."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if not isinstance(raw, str):
        return {}, f"tool arguments must be a JSON object, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def make_call(call_id: str, name: str, raw: Any) -> Call:
    args, error = parse_args(raw)
    return Call(id=call_id, name=name, args=args, raw=raw if isinstance(raw, str) else None, error=error)


def wire_args(call: Call) -> str:
    """The arguments to re-send: a broken string would make some servers reject the whole prompt."""
    return call.raw if call.error is None and call.raw is not None else json.dumps(call.args)


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def endpoint_error(exc: BaseException, client_sdk: ModuleType) -> EndpointError | None:
    """The EndpointError an SDK exception stands for, or None when it is not an endpoint failure (a bug)."""
    if isinstance(exc, EndpointError):
        return exc
    if isinstance(exc, client_sdk.APIStatusError):
        # An error event inside a 200 stream carries the stream's status: it says nothing about the failure.
        status = exc.status_code if exc.status_code != 200 else None
        return EndpointError(f"{type(exc).__name__} {exc.status_code}: {_short(exc)}", status)
    if isinstance(exc, client_sdk.APIError):  # connection errors, timeouts, errors inside a stream
        return EndpointError(f"{type(exc).__name__}: {_short(exc)}", None)
    return None


def _short(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "…"


class StreamError(Exception):
    """A stream that broke or ended without a usable response (a failed response event, no final event, a
    connection cut mid-reply): transient."""


def transport_errors(client_sdk: ModuleType) -> tuple[type[BaseException], ...]:
    """What a connection that breaks while a stream is read raises: the OpenAI SDKs wrap it as their
    APIConnectionError (APITimeoutError included), the Anthropic SDK lets the HTTP library's own error out."""
    errors: list[type[BaseException]] = [client_sdk.APIConnectionError]
    # Whichever HTTP library the SDK uses is imported by now; both spell the base class the same way.
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None and isinstance(getattr(module, "TransportError", None), type):
            errors.append(module.TransportError)
    return tuple(errors)


@contextmanager
def reading_stream(client_sdk: ModuleType) -> Iterator[None]:
    """Around the reading of an open stream: a broken connection becomes a StreamError, to be retried.

    The SDK retries connection errors only until the response starts; once a stream is open, a cut is
    ours to retry.
    """
    try:
        yield
    except transport_errors(client_sdk) as exc:
        raise StreamError(f"the connection broke mid-stream: {type(exc).__name__}: {_short(exc)}") from exc


RETRY_DELAY = 1.0
"""First back-off in seconds before re-running a call whose stream broke (doubling, at most 8 s)."""


def retry_in_stream(fn: Callable[[], T], client_sdk: ModuleType, retries: int) -> T:
    """Run one model call, retrying failures the SDK cannot: those after a stream has opened.

    What failed before the response started (429, 5xx, timeouts, connection errors) the SDK has already
    retried, so such an error ends the call. After that the SDK retries nothing: an error event in a 200
    stream (an overloaded server mid-generation) reaches us as a plain APIError or a status error with status
    200, and a connection cut while the stream is read as a StreamError (the adapters read streams inside
    `reading_stream`); both are transient and retried here.
    """
    for attempt in range(retries + 1):
        try:
            return fn()
        except StreamError as exc:
            if attempt >= retries:
                raise EndpointError(f"stream failed: {_short(exc)}", None) from exc
            time.sleep(min(RETRY_DELAY * 2**attempt, 8.0))
        except client_sdk.APIError as exc:
            status = status_of(exc)
            # A connection error that escapes as such came from opening the request, which the SDK retried.
            mid_stream = not isinstance(exc, client_sdk.APIConnectionError) and status in (None, 200)
            if not mid_stream or attempt >= retries:
                raise endpoint_error(exc, client_sdk) from exc
            time.sleep(min(RETRY_DELAY * 2**attempt, 8.0))
    raise AssertionError("unreachable")


def count_unknown_usage(info: dict) -> None:
    """Note in `agent.info` a turn whose usage the endpoint never reported: the episode's cost is then
    unknown (null), since a sum that leaves the turn out would be a guess."""
    info["usage_unknown_turns"] = info.get("usage_unknown_turns", 0) + 1


def notes_text(reasoning: str) -> str:
    return NOTES_NUDGE.format(notes=reasoning[-NOTES_TAIL:].strip() or "(no reasoning was returned)")


def data_url(mime: str, b64: str) -> str:
    return f"data:{mime};base64,{b64}"
