"""OpenEnv's WebSocket protocol (`/ws`), spoken directly: one connection is one server-side session.

Messages are `{"type": "reset" | "step" | "state" | "mcp" | "close", "data": ...}`; the server answers
`observation`, `state`, `mcp` or `error` frames. Error frames carry a `code`, so a refusal is classified by
it (`CAPACITY_REACHED` → `EnvCapacityError`; `VALIDATION_ERROR` / `EXECUTION_ERROR` of a step → an
`ActionRefused` the session judges: a typed env's refusal is a tool error for the model, an MCP env's failed
step the environment's error) and never by its message. Owning the wire also keeps OpenEnv's client
package, whose import pulls in its web UI, off the client's start-up path.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from typing import Any

from evalkit.envs import loopback
from evalkit.errors import EnvCapacityError, EnvError, reason
from evalkit.secrets import redact_url

log = logging.getLogger(__name__)

MAX_MESSAGE = 100 * 2**20
"""Largest frame accepted: observations may carry full-size screenshots."""


class ActionRefused(Exception):
    """The server rejected or failed one step (its `VALIDATION_ERROR` / `EXECUTION_ERROR`); the connection
    stays usable, and the session decides whether the model is told or the episode ends as an env error."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class ServerError(EnvError):
    """Any other error frame (e.g. a reset the env refused)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{message} ({code})")
        self.code = code


def ws_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    url = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return url if url.endswith("/ws") else f"{url}/ws"


def _error_text(data: dict) -> str:
    """A validation error's field errors in one readable line, else the frame's message."""
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        parts = []
        for e in errors:
            if isinstance(e, dict):
                loc = ".".join(str(p) for p in e.get("loc") or ())
                parts.append(f"{loc}: {e.get('msg', '')}" if loc else str(e.get("msg", "")))
        if parts:
            return "; ".join(parts)
    return str(data.get("message") or "unknown error")


class Connection:
    """One WebSocket session on an OpenEnv server. Blocking; one request at a time."""

    def __init__(self, base_url: str, *, timeout: float = 120.0, headers: dict | None = None):
        from websockets.sync.client import connect

        self.url = ws_url(base_url)
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        try:
            # Loopback servers must not be sent through a proxy configured for the outside world;
            # compressing frames for them costs both ends CPU for nothing; and pinging one finds nothing a
            # closed socket would not say, at the price of a thread per session (the server's own pings
            # are still answered).
            local = loopback.on_this_machine(self.url)
            self._ws = self._stack.enter_context(
                connect(
                    self.url,
                    open_timeout=min(timeout, 30.0),
                    max_size=MAX_MESSAGE,
                    additional_headers=headers,
                    proxy=None if local else True,
                    compression=None if local else "deflate",
                    ping_interval=None if local else 20,
                )
            )
        except Exception as e:
            where = redact_url(self.url)
            raise EnvError(f"cannot connect to the environment at {where}: {reason(e)}") from e
        self._open = True

    def request(self, kind: str, data: Any = None) -> dict:
        """Send one message and return the data of its answer; error frames raise by their code."""
        from websockets.exceptions import ConnectionClosed

        if not self._open:
            raise EnvError("the environment session is closed")
        message = {"type": kind} if data is None else {"type": kind, "data": data}
        try:
            self._ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a refused session sends its error frame, then closes: read it below
        try:
            frame = json.loads(self._ws.recv(timeout=self.timeout))
        except TimeoutError:
            # A late answer would be read as the answer to the next request: this socket is done.
            self._drop()
            raise EnvError(f"the environment did not answer {kind} within {self.timeout:.0f}s") from None
        except ConnectionClosed as e:
            self._drop()
            raise EnvError(f"the environment closed the connection during {kind} ({e})") from None
        except (ValueError, TypeError) as e:
            raise EnvError(f"the environment sent a frame that is not JSON during {kind}") from e
        if not isinstance(frame, dict):
            raise EnvError(f"the environment sent an unexpected frame during {kind}")
        if frame.get("type") == "error":
            self._raise(kind, frame.get("data") or {})
        data = frame.get("data")
        return data if isinstance(data, dict) else {}

    def _raise(self, kind: str, data: dict) -> None:
        code = str(data.get("code") or "UNKNOWN")
        text = _error_text(data)
        if code == "CAPACITY_REACHED":
            self._drop()
            raise EnvCapacityError(text, data.get("active_sessions"), data.get("max_sessions"))
        if kind == "step" and code in ("VALIDATION_ERROR", "EXECUTION_ERROR"):
            raise ActionRefused(code, text)
        raise ServerError(code, text)

    def reset(self, **kwargs: Any) -> dict:
        return self.request("reset", kwargs)

    def step(self, action: dict) -> dict:
        return self.request("step", action)

    def mcp(self, method: str, params: dict | None = None) -> dict:
        """One MCP JSON-RPC call on this session; a JSON-RPC error raises ServerError with its code."""
        body = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": next(self._ids)}
        answer = self.request("mcp", body)
        if answer.get("error"):
            err = answer["error"] if isinstance(answer["error"], dict) else {"message": answer["error"]}
            raise ServerError(f"jsonrpc {err.get('code')}", str(err.get("message") or "error"))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def _drop(self) -> None:
        self._open = False
        with contextlib.suppress(Exception):
            self._stack.close()

    def close(self) -> None:
        """Say goodbye and wait for the server to hang up: it frees the session before it closes the socket,
        so a one-session server is free again when this returns."""
        from websockets.exceptions import ConnectionClosed

        if not self._open:
            return
        self._open = False
        try:
            self._ws.send(json.dumps({"type": "close"}))
            # An older server answers `close` with a frame instead of hanging up: then we hang up.
            self._ws.recv(timeout=5.0)
        except (ConnectionClosed, TimeoutError, OSError):
            pass
        except Exception as e:  # closing must never mask the outcome of the episode that used the session
            log.debug("closing %s: %s", self.url, e)
        with contextlib.suppress(Exception):
            self._stack.close()
