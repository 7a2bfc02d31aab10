"""Reads from a server on this machine on a kept connection per thread (`evalkit.envs.loopback`): the same
pictures and document as httpx reads, a connection the server closed while idle opened again, a dead
thread's connection closed, nonsense from the server an absent picture rather than an error."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from evalkit.envs import loopback
from evalkit.envs.openenv import OpenEnvSession
from evalkit.envs.server import ThreadedServer
from evalkit.envs.wire import LocalSocket


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
    """Where a WebSocket goes without a proxy, compression or pings (`evalkit.envs.wire`)."""
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


def test_nonsense_from_the_server_is_no_picture():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(3):
            conn, _ = listener.accept()
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
