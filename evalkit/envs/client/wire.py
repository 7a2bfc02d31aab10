"""OpenEnv's WebSocket protocol (`/ws`), spoken directly: one connection is one server-side session.

Messages are `{"type": "reset" | "step" | "state" | "mcp" | "close", "data": ...}`; the server answers
`observation`, `state`, `mcp` or `error` frames. Error frames carry a `code`, so a refusal is classified by
it and never by its message: `CAPACITY_REACHED` → `EnvCapacityError`; a step's `VALIDATION_ERROR` (the
action does not fit the env's schema) → `ActionRefused`, which the model is told; a step's
`EXECUTION_ERROR` (the env raised while running it, or returned what the server could not send) →
`EnvStepError`, which the session reads (`OpenEnvSession._step`: an action the env refused while the
session still works, else the environment's failure); any other error frame → `ServerError`. A socket
that cannot be opened is `EnvUnreachableError`; an open one whose answer does not come in time,
`EnvSlowError`.

Owning the wire also keeps OpenEnv's client package, whose import pulls in its web UI, off the client's
start-up path.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import socket
import time
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from evalkit.envs.client import loopback
from evalkit.errors import EnvCapacityError, EnvError, EnvSlowError, EnvStepError, EnvUnreachableError, reason
from evalkit.secrets import redact_url, scrub

log = logging.getLogger(__name__)

MAX_MESSAGE = 512 * 2**20
"""Largest frame accepted: observations may carry full-size screenshots, and an MCP observation's JSON holds
its text about three times (a 50 MB log is a 157 MB frame, which the earlier 100 MiB refused)."""


class ActionRefused(Exception):
    """The server rejected one action (its `VALIDATION_ERROR`: the action does not fit the env's schema);
    the connection stays usable, and the model is told."""

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


class LocalSocket:
    """A WebSocket to a server on this machine, spoken in the calling thread (websockets' sans-I/O protocol
    on a plain socket). websockets' blocking client reads every connection in a thread of its own and hands
    each message over to the caller: with fifty episodes at once that is fifty more threads, and two GIL
    hand-offs per message where one does. A loopback server needs none of what the client adds (a proxy,
    TLS, compression, keep-alive pings: the server's own pings are answered here). The same `send` and
    `recv(timeout)` as websockets' client, with its exceptions."""

    def __init__(self, url: str, *, open_timeout: float, max_size: int, headers: dict | None = None):
        uri = parse_uri(url)
        self._proto = ClientProtocol(uri, max_size=max_size)
        self._send_timeout = open_timeout
        self._sock = socket.create_connection((uri.host, uri.port), timeout=open_timeout)
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request = self._proto.connect()
            for k, v in (headers or {}).items():
                request.headers[k] = v
            self._proto.send_request(request)
            self._flush()
            deadline = time.monotonic() + open_timeout
            while self._proto.handshake_exc is None and self._proto.state is State.CONNECTING:
                if not self._read(deadline):
                    raise ConnectionError("the server closed the connection during the handshake")
            if self._proto.handshake_exc is not None:
                raise self._proto.handshake_exc
        except BaseException:
            self._sock.close()
            raise
        # The handshake's response, then whatever frames came with it.
        self._pending = [e for e in self._proto.events_received() if isinstance(e, Frame)]

    def _flush(self) -> None:
        chunks = self._proto.data_to_send()
        if chunks:
            self._sock.settimeout(self._send_timeout)
            for chunk in chunks:
                self._sock.sendall(chunk)

    def _read(self, deadline: float | None) -> bool:
        """Read what the socket has (waiting until `deadline`), feed it to the protocol and send what the
        protocol answers by itself (a pong, its half of the closing handshake). False at the end of the
        stream."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError
        self._sock.settimeout(left)
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError:
            data = b""  # a reset connection ends like a closed one
        if data:
            self._proto.receive_data(data)
        elif self._proto.state is not State.CLOSED:
            self._proto.receive_eof()
        with contextlib.suppress(OSError):
            self._flush()
        return bool(data)

    def send(self, text: str) -> None:
        if self._proto.state is not State.OPEN:
            raise self._closed()
        self._proto.send_text(text.encode())
        try:
            self._flush()
        except OSError as e:
            raise ConnectionClosed(None, None) from e

    def recv(self, timeout: float | None = None) -> str:
        """The next text (or binary) message; TimeoutError after `timeout` seconds, ConnectionClosed once the
        connection is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        parts: list[bytes] = []
        while True:
            while not self._pending:
                if self._proto.state is State.CLOSED or self._proto.close_rcvd is not None:
                    raise self._closed()
                self._read(deadline)
                self._pending = self._proto.events_received()
            frame = self._pending.pop(0)
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                parts.append(frame.data)
                if frame.fin:
                    return b"".join(parts).decode()

    def _closed(self) -> ConnectionClosed:
        p = self._proto
        return ConnectionClosed(p.close_rcvd, p.close_sent, p.close_rcvd_then_sent)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._proto.state is State.OPEN:
                self._proto.send_close()
                self._flush()
        self._sock.close()


class Connection:
    """One WebSocket session on an OpenEnv server. Blocking; one request at a time."""

    def __init__(self, base_url: str, *, timeout: float = 120.0, headers: dict | None = None):
        # start-up: websockets' client loads with the first session (a Python session's batch never needs it)
        from websockets.sync.client import connect

        self.url = ws_url(base_url)
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        try:
            # A server on this machine must not be sent through a proxy configured for the outside world;
            # compressing frames for it costs both ends CPU for nothing; and pinging it finds nothing a
            # closed socket would not say (its own pings are still answered). Over plain ws:// it needs
            # nothing else websockets' client adds either (`LocalSocket`).
            local = loopback.on_this_machine(self.url)
            if local and self.url.startswith("ws://"):
                self._ws = LocalSocket(self.url, open_timeout=min(timeout, 30.0), max_size=MAX_MESSAGE,
                                       headers=headers)  # fmt: skip
                self._stack.callback(self._ws.close)
            else:
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
            # Nothing listening (or a silent host) is said apart from a server that answered as something
            # else, which `openenv.not_openenv` names from the handshake's failure.
            kind = EnvUnreachableError if isinstance(e, OSError) else EnvError
            raise kind(f"cannot connect to the environment at {where}: {reason(e)}") from e
        self._open = True

    def request(self, kind: str, data: Any = None) -> dict:
        """Send one message and return the data of its answer; error frames raise by their code."""
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
            raise EnvSlowError(
                f"the environment accepted the session but did not answer {kind} within {self.timeout:g}s",
                kind,
                self.timeout,
            ) from None
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
        if kind == "step" and code == "VALIDATION_ERROR":
            raise ActionRefused(code, text)
        if kind == "step" and code == "EXECUTION_ERROR":
            raise EnvStepError(f"the environment failed to run the step: {scrub(text)}", code)
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
