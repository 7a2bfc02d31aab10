"""GETs from a plain-http server on this machine (an env's pictures and document, read at every step) on a
kept socket per server and thread, the response parsed by httptools (llhttp, the parser uvicorn serves with).

httpx, which evalkit uses for every other request, carries machinery that a read from this machine never
needs: a connection pool searched under its lock, with an event and a lock made per request; cookies; the
auth and redirect flows. A single read costs ~0.4 ms of the client's CPU with httpx; the standard library's
`http.client` took ~0.17 ms, most of it in parsing the headers with the `email` package and in a buffered
file made per response; this reader ~0.06 ms (a canvas frame, alternating loops of 500). A server elsewhere
may need a proxy, TLS or a redirect followed: it is read with httpx (`is_loopback` says which).
"""

from __future__ import annotations

import atexit
import http.client
import socket
import threading
from urllib.parse import urlsplit

import httptools

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def on_this_machine(url: str) -> bool:
    """A URL of any scheme whose host is this machine (by its host name, not a substring of the URL)."""
    return urlsplit(url).hostname in LOOPBACK


def is_loopback(url: str) -> bool:
    """A plain-http URL on this machine: read here rather than with httpx."""
    return urlsplit(url).scheme == "http" and on_this_machine(url)


class _Response:
    """httptools' callbacks for one response: its content type and body."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.ctype = ""
        self.body: list[bytes] = []
        self.headers_done = self.complete = self.keep_alive = False
        self.delimited = False
        """The body's end is given (a length or chunks), rather than by the server closing."""

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self.ctype = value.decode("latin-1")
        elif name in (b"content-length", b"transfer-encoding"):
            self.delimited = True

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()  # (asked once the message is complete, it is reset)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _Connection:
    """One kept connection to a server; `get` one path at a time."""

    def __init__(self, netloc: str, timeout: float):
        parts = urlsplit(f"//{netloc}")
        self.netloc, self.address, self.timeout = netloc, (parts.hostname, parts.port or 80), timeout
        self.sock: socket.socket | None = None

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def hung_up(self) -> bool:
        """The server has closed this idle connection (it stopped, or its keep-alive ran out): its end is
        there to read. Asked only by the thread that uses it, between its requests."""
        if self.sock is None:
            return True
        try:
            self.sock.settimeout(0)
            try:
                return not self.sock.recv(1, socket.MSG_PEEK)
            finally:
                self.sock.settimeout(self.timeout)
        except BlockingIOError:
            return False  # nothing to read: still open
        except OSError:
            return True

    def get(self, path: str, headers: dict) -> tuple[int, str, bytes]:
        """Raises ConnectionError when the server closed the connection before answering (a kept one it
        closed while idle), another OSError when it cannot be reached, HTTPException for nonsense."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = [f"GET {path} HTTP/1.1", f"Host: {self.netloc}", "Accept-Encoding: identity"]
        for name, value in headers.items():
            if any(c in f"{name}{value}" for c in "\r\n\0"):
                raise ValueError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        r = _Response()
        while not r.complete:
            data = self.sock.recv(65536)
            if not data:
                if not r.headers_done and not r.body:
                    raise ConnectionError("the server closed the connection")
                if r.headers_done and not r.delimited:
                    break  # a body that ends where the server closes
                raise http.client.IncompleteRead(b"".join(r.body))
            try:
                r.parser.feed_data(data)
            except httptools.HttpParserError as e:
                raise http.client.HTTPException(f"not an HTTP response: {e}") from None
        if not (r.complete and r.keep_alive):
            self.close()
        return r.parser.get_status_code(), r.ctype, b"".join(r.body)


_conns: dict[tuple, _Connection] = {}
_lock = threading.Lock()


def _connection(netloc: str, timeout: float) -> _Connection:
    """This thread's connection to `netloc`. When another is made, what `release` closes is closed."""
    me = threading.get_ident()
    key = (netloc, timeout, me)
    with _lock:
        conn = _conns.get(key)
        if conn is None:
            _release(me)
            conn = _conns[key] = _Connection(netloc, timeout)
    return conn


def release() -> None:
    """Close the connections of threads that have ended, and the calling thread's own to servers that have
    hung up: what a batch's threads kept to its env server, once they and the server are gone (a socket
    kept after its server stopped stays in CLOSE_WAIT, a file held, for the life of the process)."""
    with _lock:
        _release(threading.get_ident())


def _release(me: int) -> None:
    alive = {t.ident for t in threading.enumerate()}
    for k in [k for k in _conns if k[-1] not in alive or (k[-1] == me and _conns[k].hung_up())]:
        _conns.pop(k).close()


def get(url: str, timeout: float, headers: dict | None = None) -> tuple[int, str, bytes]:
    """GET `url` (`is_loopback`): its status, content type and body. Raises OSError or
    http.client.HTTPException when the server cannot be reached or answers nonsense. A kept connection that
    the server has closed since its last use (uvicorn closes an idle one after 5 s) is opened again once."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn = _connection(parts.netloc, timeout)
    for retry in (False, True):
        kept = conn.sock is not None
        try:
            return conn.get(path, headers or {})
        except ConnectionError:
            conn.close()
            if retry or not kept:
                raise
        except BaseException:
            conn.close()  # half a response must not be read as the next one's start
            raise
    raise AssertionError("unreachable")


@atexit.register
def close_all() -> None:
    """Close every thread's connections (at exit, where one left open is reported as an unclosed socket)."""
    with _lock:
        conns = list(_conns.values())
        _conns.clear()
    for conn in conns:
        conn.close()
