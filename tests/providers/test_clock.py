"""The stream watchdog (`clock.watching`): a stream whose time is up has its socket shut, one dropped in time
is left alone, and every stream of the process is watched from one thread that goes when none is left."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest

from evalkit.providers import clock


def _stream(sock: socket.socket) -> SimpleNamespace:
    """What `watching` reads of an SDK stream: httpx's `network_stream` extension with the socket."""
    network = SimpleNamespace(get_extra_info=lambda key: sock if key == "socket" else None)
    return SimpleNamespace(response=SimpleNamespace(extensions={"network_stream": network}))


def _clock_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "evalkit-request-clock"]


def _gone(deadline_s: float = 5.0) -> bool:
    end = time.monotonic() + deadline_s
    while _clock_threads() and time.monotonic() < end:
        time.sleep(0.02)
    return not _clock_threads()


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_stream_whose_time_is_up_is_cut(pair):
    a, _ = pair
    with clock.request_limit(0.2), clock.watching(_stream(a)) as cut:
        a.settimeout(5.0)
        t = time.monotonic()
        assert a.recv(10) == b""  # the shutdown ends the blocked read at once
        assert 0.1 < time.monotonic() - t < 2.0
    assert cut.fired and cut.seconds is not None


def test_a_stream_read_in_time_is_left_alone(pair):
    a, b = pair
    with clock.request_limit(0.2), clock.watching(_stream(a)) as cut:
        b.sendall(b"x")
        assert a.recv(10) == b"x"
    time.sleep(0.4)
    b.sendall(b"y")
    assert a.recv(10) == b"y" and not cut.fired


def test_one_thread_watches_every_stream_and_goes_when_none_is_left():
    socks = [socket.socketpair() for _ in range(20)]
    try:
        with clock.request_limit(30.0):
            entered = []
            stack = [clock.watching(_stream(a)) for a, _ in socks]
            for w in stack:
                entered.append(w.__enter__())
            # A timer thread per request would be twenty threads here.
            assert len(_clock_threads()) == 1
            for w in stack:
                w.__exit__(None, None, None)
        assert not any(c.fired for c in entered)
        assert _gone(), "the watchdog stays after the last stream was dropped"
        # ... and comes back for the next one, which it still cuts.
        a, _ = socks[0]
        with clock.request_limit(0.1), clock.watching(_stream(a)) as cut:
            a.settimeout(5.0)
            assert a.recv(10) == b""
        assert cut.fired
    finally:
        for a, b in socks:
            a.close()
            b.close()


def test_a_sooner_stream_is_cut_in_its_own_time_behind_a_later_one(pair):
    a, _ = pair
    c, d = socket.socketpair()
    try:
        with clock.request_limit(60.0), clock.watching(_stream(c)) as late:
            with clock.request_limit(0.2), clock.watching(_stream(a)) as soon:
                a.settimeout(5.0)
                t = time.monotonic()
                assert a.recv(10) == b""
                assert time.monotonic() - t < 2.0
            assert soon.fired and not late.fired
    finally:
        c.close()
        d.close()
