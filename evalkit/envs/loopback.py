"""GETs from a plain-http server on this machine (an env's pictures and document, read at every step) on the
standard library's `http.client`: one keep-alive connection per server and thread.

httpx, which evalkit uses for every other request, carries machinery that a read from this machine never
needs: a connection pool searched under its lock, with an event and a lock made per request; cookies; the
auth and redirect flows. A single read costs ~0.4 ms of the client's CPU with httpx against ~0.15 ms here;
with fifty episodes at once on two cores (four reads per episode, a 10 ms model), the harness's CPU per
episode went from 27.3 and 24.0 ms to 24.1 and 19.2 ms (alternating runs). A server elsewhere may need a
proxy, TLS or a redirect followed: it is read with httpx (`is_loopback` says which).
"""

from __future__ import annotations

import atexit
import http.client
import threading
from urllib.parse import urlsplit

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

_conns: dict[tuple, http.client.HTTPConnection] = {}
_lock = threading.Lock()


def on_this_machine(url: str) -> bool:
    """A URL of any scheme whose host is this machine (by its host name, not a substring of the URL)."""
    return urlsplit(url).hostname in LOOPBACK


def is_loopback(url: str) -> bool:
    """A plain-http URL on this machine: read here rather than with httpx."""
    return urlsplit(url).scheme == "http" and on_this_machine(url)


def _connection(netloc: str, timeout: float) -> http.client.HTTPConnection:
    """This thread's connection to `netloc`. A dead thread's connections are closed when another is made."""
    key = (netloc, timeout, threading.get_ident())
    with _lock:
        conn = _conns.get(key)
        if conn is None:
            alive = {t.ident for t in threading.enumerate()}
            for gone in [k for k in _conns if k[-1] not in alive]:
                _conns.pop(gone).close()
            conn = _conns[key] = http.client.HTTPConnection(netloc, timeout=timeout)
    return conn


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
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.getheader("content-type") or "", r.read()
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
