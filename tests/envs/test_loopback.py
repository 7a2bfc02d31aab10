"""Reads from a server on this machine on a kept connection per thread (`evalkit.envs.client.loopback`): the
same pictures and document as httpx reads, a connection the server closed while idle opened again, a dead
thread's connection closed, nonsense from the server an absent picture rather than an error, and every way
an HTTP/1.1 body may end (a length, chunks, the server closing) read whole."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest

from evalkit.envs.client import loopback
from evalkit.envs.client.openenv import OpenEnvSession
from evalkit.envs.client.wire import LocalSocket
from evalkit.serving import ThreadedServer


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8000", True),
    ("http://localhost:8000/x", True),
    ("http://[::1]:8000", True),
    ("https://127.0.0.1:8000", False),
    ("http://10.0.0.7:8000", False),
    ("http://envs.example:8000", False),
])  # fmt: skip
def test_only_plain_http_on_this_machine_is_read_here(url, local):
    assert loopback.is_loopback(url) is local


@pytest.mark.parametrize(("url", "local"), [
    ("ws://127.0.0.1:8000/ws", True),
    ("wss://localhost:8000/ws", True),
    ("ws://[::1]:8000/ws", True),
    ("ws://localhost.envs.example:8000/ws", False),  # not this machine, though the URL holds 'localhost'
    ("ws://envs.example:8000/ws?next=ws://127.0.0.1", False),
])  # fmt: skip
def test_a_websocket_on_this_machine_is_told_by_its_host(url, local):
    """Where a WebSocket goes without a proxy, compression or pings (`evalkit.envs.client.wire`)."""
    assert loopback.on_this_machine(url) is local


def test_pictures_and_document_are_the_ones_httpx_reads(canvas_server, monkeypatch):
    def read(local: bool):
        monkeypatch.setattr(loopback, "is_loopback", lambda url: local)
        with OpenEnvSession(canvas_server.base_url) as s:
            assert (s._http is None) is local
            assert isinstance(s._conn._ws, LocalSocket)  # no reader or ping thread per session here
            s.reset(index=5, mode="description", episode_id="same")
            s.call(
                "add_element",
                {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40, "fill": "#aa0000"},
            )
            return s.render(), s.document(), s._get("/no-such-route")

    (png, doc, missing), (png2, doc2, missing2) = read(True), read(False)
    assert png.data == png2.data and png.mime == png2.mime == "image/png"
    assert doc == doc2 and len(doc["elements"]) == 1
    assert missing is None and missing2 is None


def small_app(seen: list):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        seen.append((scope["client"], scope["path"]))
        body = b"ok" if scope["path"] != "/health" else b""
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": body})

    return app


def test_a_connection_is_kept_per_thread_and_opened_again_once_the_server_closed_it():
    seen: list = []
    with ThreadedServer(small_app(seen), timeout_keep_alive=1) as server:
        url = f"{server.base_url}/a"
        assert loopback.get(url, 5.0) == (200, "text/plain", b"ok")
        assert loopback.get(url, 5.0)[2] == b"ok"
        theirs = []
        worker = threading.Thread(target=lambda: theirs.append(loopback.get(url, 5.0)))
        worker.start()
        worker.join()
        time.sleep(1.5)  # the server closes the idle connections
        assert loopback.get(url, 5.0)[2] == b"ok"
        mine = [client for client, path in seen if path == "/a"]
        assert mine[0] == mine[1] != mine[2]  # kept, then the other thread's own
        assert mine[3] not in mine[:3]  # opened again after the server closed it
        assert loopback.get(url, 6.0)[2] == b"ok"  # another setting: another connection, made
        kept = {k[1:] for k in loopback._conns if k[0] == f"127.0.0.1:{server.port}"}
        me = threading.get_ident()
        assert kept == {(5.0, me), (6.0, me)}  # the dead worker's went when this one was made


def test_a_thread_that_outlives_its_servers_does_not_keep_their_sockets():
    """A thread that takes frames for batch after batch opens a connection to each batch's env server: when
    it opens one to a new server, its connections to servers that have stopped are closed, and those to a
    server still up are kept."""
    seen: list = []
    with ThreadedServer(small_app(seen)) as up:
        assert loopback.get(f"{up.base_url}/a", 5.0)[2] == b"ok"
        stopped = []
        for _ in range(3):
            with ThreadedServer(small_app(seen)) as server:
                assert loopback.get(f"{server.base_url}/a", 5.0)[2] == b"ok"
                stopped.append(loopback._conns[(f"127.0.0.1:{server.port}", 5.0, threading.get_ident())])
        # each was closed as the next server's connection was made; the last one's has not been yet
        assert [c.sock is None for c in stopped] == [True, True, False]
        with ThreadedServer(small_app(seen)) as new:
            assert loopback.get(f"{new.base_url}/a", 5.0)[2] == b"ok"
            ours = {up.port, new.port, *(int(c.netloc.rpartition(":")[2]) for c in stopped)}
            mine = {k[0] for k in loopback._conns if k[-1] == threading.get_ident()}
            assert {n for n in mine if int(n.rpartition(":")[2]) in ours} == {
                f"127.0.0.1:{up.port}",
                f"127.0.0.1:{new.port}",
            }
            assert all(c.sock is None for c in stopped)  # closed, not only forgotten
            assert loopback.get(f"{up.base_url}/b", 5.0)[2] == b"ok"
    clients = [client for client, path in seen if path in ("/a", "/b")]
    assert clients[0] == clients[-1]  # the live server's connection was kept throughout


def test_nonsense_from_the_server_is_no_picture():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(3):
            try:
                conn, _ = listener.accept()
            except OSError:  # the test is over
                return
            conn.recv(65536)
            conn.sendall(b"this is not HTTP\r\n\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(Exception) as raised:
            loopback.get(f"http://127.0.0.1:{port}/x", 5.0)
        assert not isinstance(raised.value, AssertionError)
        session = OpenEnvSession.__new__(OpenEnvSession)
        session.http_base, session.metadata, session._missing = (
            f"http://127.0.0.1:{port}",
            {"episode_id": "e"},
            set(),
        )
        session._http, session._timeout, session._headers = None, 5.0, None
        assert session.render() is None
    finally:
        listener.close()


def scripted_server(replies: list[bytes]) -> tuple[socket.socket, list]:
    """A server that answers its requests, in order, with `replies` (raw bytes), on each connection until a
    reply says it closes (or is HTTP/1.0), or the replies run out. Records (connection number, request
    head) per request."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list = []

    def serve() -> None:
        left = list(replies)
        n = 0
        while left:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            n += 1
            with conn:
                while left:
                    head = conn.recv(65536)
                    if not head:
                        break
                    seen.append((n, head.split(b"\r\n\r\n")[0]))
                    reply = left.pop(0)
                    conn.sendall(reply)
                    if b"connection: close" in reply.lower() or reply.startswith(b"HTTP/1.0"):
                        break

    threading.Thread(target=serve, daemon=True).start()
    return listener, seen


def test_every_way_a_body_ends_is_read_whole_and_the_connection_kept_when_it_may_be():
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: image/png\r\n"
    listener, seen = scripted_server([
        ok + b"content-length: 5\r\n\r\nhello",
        ok + b"transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        ok + b"content-length: 2\r\nconnection: close\r\n\r\nhi",
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end",  # ends where the server closes
        ok + b"content-length: 10\r\n\r\nhalf",  # and then the server closes
    ])  # fmt: skip
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/api/episodes/e/render.png?x=1"
    try:
        assert loopback.get(url, 5.0, {"Authorization": "Bearer t"}) == (200, "image/png", b"hello")
        assert loopback.get(url, 5.0) == (200, "image/png", b"abcde")
        assert loopback.get(url, 5.0) == (200, "image/png", b"hi")
        assert loopback.get(url, 5.0) == (404, "", b"")
        assert loopback.get(url, 5.0) == (200, "text/plain", b"until the end")
        with pytest.raises(http.client.HTTPException):
            loopback.get(url, 5.0)
        with pytest.raises(ValueError, match="invalid header"):
            loopback.get(url, 5.0, {"X-A": "b\r\nX-Injected: 1"})
    finally:
        listener.close()
    assert [n for n, _ in seen] == [1, 1, 1, 2, 2, 3]  # kept until the server said close, or closed
    first = seen[0][1].split(b"\r\n")
    assert first[0] == b"GET /api/episodes/e/render.png?x=1 HTTP/1.1"
    assert b"Authorization: Bearer t" in first and b"Authorization: Bearer t" not in seen[1][1]
