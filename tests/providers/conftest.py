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
    from evalkit.providers import attempts, capabilities, thinking_off

    _server.reset()
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _server.url)
    monkeypatch.setenv("OPENAI_BASE_URL", _server.url + "/v1")
    monkeypatch.setenv("HF_ROUTER_URL", _server.url + "/v1")
    monkeypatch.setenv("VLLM_BASE_URL", _server.url + "/v1")
    # Waits between retries are recorded, not slept: what a test checks is how long evalkit would wait.
    _server.waits = []
    monkeypatch.setattr(attempts, "sleep", _server.waits.append)
    thinking_off.clear_cache()
    capabilities.forget()  # what one test's server refused is not the next test's model
    yield _server
    capabilities.forget()
