"""One fake model server for the whole providers suite; the SDKs' environment points at it."""

from __future__ import annotations

import pytest

from tests.providers.fakes import FakeModelServer

KEYS = {"ANTHROPIC_API_KEY": "test-key", "OPENAI_API_KEY": "test-key", "HF_TOKEN": "test-token"}


@pytest.fixture(scope="session")
def _server():
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake(_server, monkeypatch):
    """The fake server, emptied, with every provider's base URL and key pointed at it."""
    from evalkit.providers import chat_completions, common

    _server.reset()
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _server.url)
    monkeypatch.setenv("OPENAI_BASE_URL", _server.url + "/v1")
    monkeypatch.setenv("HF_ROUTER_URL", _server.url + "/v1")
    monkeypatch.setenv("VLLM_BASE_URL", _server.url + "/v1")
    monkeypatch.setattr(common, "RETRY_DELAY", 0.01)
    chat_completions._probe_cache.clear()
    yield _server
