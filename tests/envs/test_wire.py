"""A WebSocket to a server on this machine, spoken in the calling thread
(`evalkit.envs.client.wire.LocalSocket`), against websockets' own server in a thread: messages of any size and
in fragments, the server's pings answered, its close, a silent server, a refused handshake and the headers
sent, each as `Connection` reports it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from websockets.http11 import Response
from websockets.sync.client import ClientConnection
from websockets.sync.server import ServerConnection, serve

from evalkit.envs.client import wire
from evalkit.envs.client.wire import Connection, LocalSocket, ServerError
from evalkit.errors import EnvError
from evalkit.serving import free_port

freed = threading.Event()


def handler(ws: ServerConnection) -> None:
    """Answers `{"type": t, "data": d}` as the test asks by `t`."""
    for raw in ws:
        msg = json.loads(raw)
        kind, data = msg["type"], msg.get("data")
        if kind == "echo":
            ws.send(json.dumps({"type": "echo", "data": data}))
        elif kind == "pieces":  # one message in fragments
            text = json.dumps({"type": "echo", "data": data})
            ws.send([text[i : i + 7] for i in range(0, len(text), 7)])
        elif kind == "ping":  # answered only once the client has ponged
            ok = ws.ping().wait(timeout=5)
            ws.send(json.dumps({"type": "echo", "data": {"ponged": ok}}))
        elif kind == "headers":
            ws.send(json.dumps({"type": "echo", "data": {"token": ws.request.headers.get("X-Env-Token")}}))
        elif kind == "hang-up":
            ws.close()
            return
        elif kind == "silence":
            continue
        elif kind == "refuse":
            ws.send(json.dumps({"type": "error", "data": {"code": "BAD", "message": "no such thing"}}))
        elif kind == "close":  # as OpenEnv does: the session is freed, then the socket closed
            time.sleep(0.2)
            freed.set()
            return


def refuse(connection: ServerConnection, request) -> Response | None:
    if request.path.startswith("/forbidden"):
        return connection.respond(403, "not here\n")
    return None


@contextmanager
def ws_server() -> Iterator[str]:
    with serve(handler, "127.0.0.1", 0, process_request=refuse, compression=None, max_size=None) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(5)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with ws_server() as u:
        yield u


def client_threads() -> list[ClientConnection]:
    """The connections of websockets' blocking client that a thread is reading."""
    readers = [getattr(getattr(t, "_target", None), "__self__", None) for t in threading.enumerate()]
    return [r for r in readers if isinstance(r, ClientConnection)]


@pytest.mark.parametrize("here", [True, False])
def test_a_server_on_this_machine_is_spoken_to_in_the_calling_thread(url, here, monkeypatch):
    """The same exchanges on this machine's socket and on websockets' client (a server elsewhere)."""
    monkeypatch.setattr(wire.loopback, "on_this_machine", lambda u: here)
    conn = Connection(url, timeout=5)
    try:
        assert isinstance(conn._ws, LocalSocket) is here
        assert (not client_threads()) is here  # no reader thread per session
        assert conn.request("echo", {"n": 1}) == {"n": 1}
        big = "x" * (3 * 2**20)  # more than one read of the socket
        assert conn.request("echo", {"big": big}) == {"big": big}
        assert conn.request("pieces", {"s": "fragmented " * 50}) == {"s": "fragmented " * 50}
        assert conn.request("ping") == {"ponged": True}
        assert conn.request("echo", {"n": 2}) == {"n": 2}  # nothing left over from the ping
        with pytest.raises(ServerError, match="no such thing"):
            conn.request("refuse")
        assert conn.request("echo", {"n": 3}) == {"n": 3}  # an error frame leaves the session usable
    finally:
        conn.close()


def test_headers_reach_the_server(url):
    conn = Connection(url, timeout=5, headers={"X-Env-Token": "t0k"})
    try:
        assert conn.request("headers") == {"token": "t0k"}
    finally:
        conn.close()


def test_a_silent_server_times_out_and_the_session_is_done(url):
    conn = Connection(url, timeout=0.3)
    with pytest.raises(EnvError, match="did not answer silence within"):
        conn.request("silence")
    with pytest.raises(EnvError, match="is closed"):  # a late answer must not be read as the next one's
        conn.request("echo", {})


def test_a_server_that_hangs_up_is_reported(url):
    conn = Connection(url, timeout=5)
    with pytest.raises(EnvError, match="closed the connection during hang-up"):
        conn.request("hang-up")
    conn.close()  # closing a closed session is quiet


def test_close_returns_once_the_server_has_freed_the_session(url):
    conn = Connection(url, timeout=5)
    assert conn.request("echo", {}) == {}
    freed.clear()
    conn.close()
    assert freed.is_set()


def test_a_refused_handshake_and_a_closed_port_are_one_line_errors(url):
    with pytest.raises(
        EnvError, match=r"cannot connect to the environment at ws://127.0.0.1:\d+/forbidden/ws: .*403"
    ):
        Connection(f"{url}/forbidden", timeout=5)

    with pytest.raises(EnvError, match="cannot connect to the environment"):
        Connection(f"http://127.0.0.1:{free_port()}", timeout=5)


def test_a_server_that_closes_during_the_handshake_is_an_error():
    srv = socket.create_server(("127.0.0.1", 0))

    def accept_and_close() -> None:
        s, _ = srv.accept()
        s.recv(4096)
        s.close()

    t = threading.Thread(target=accept_and_close, daemon=True)
    t.start()
    try:
        with pytest.raises(EnvError, match="cannot connect"):
            Connection(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=5)
    finally:
        t.join(5)
        srv.close()
