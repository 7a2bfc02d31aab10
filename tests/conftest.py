"""Session-wide fixtures: one embedded canvas server shared by every test that needs a live env, the small
foreign-style OpenEnv servers, and the stand-in model that drives them over the real chat-completions wire."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.server import serve

    with serve("canvas") as env:
        yield env


# Small foreign-style OpenEnv servers (tests/support/foreign_envs.py): one each per session, on first use.


@pytest.fixture(scope="session")
def sketch_server():
    from tests.support.foreign_envs import Served, sketch_app

    with Served(sketch_app()) as s:
        yield s


@pytest.fixture(scope="session")
def quiz_server():
    from tests.support.foreign_envs import Served, quiz_app

    with Served(quiz_app()) as s:
        yield s


@pytest.fixture(scope="session")
def guess_server():
    from tests.support.foreign_envs import Served, guess_app

    with Served(guess_app()) as s:
        yield s


@pytest.fixture(scope="session")
def _standin_server():
    from tests.support.standin import StandIn

    s = StandIn()
    yield s
    s.stop()


@pytest.fixture
def standin(_standin_server, monkeypatch):
    """The stand-in model (`vllm:standin`, no thinking switch, so no probe), its requests forgotten, the vllm
    provider pointed at it."""
    monkeypatch.setenv("VLLM_BASE_URL", _standin_server.server.url + "/v1")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    _standin_server.server.reset()
    return _standin_server
