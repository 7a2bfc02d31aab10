"""Shared helpers: keys from .env, argument parsing, the image budget."""

from __future__ import annotations

import os
import threading

import pytest

from evalkit.errors import ConfigError, MissingKeyError
from evalkit.providers import check_keys, common, images
from evalkit.types import Image


@pytest.mark.parametrize(
    ("raw", "args", "bad"),
    [
        ('{"a": 1}', {"a": 1}, False),
        ({"a": 1}, {"a": 1}, False),
        ("", {}, False),
        (None, {}, False),
        ('{"a": 1', {}, True),
        ("[1]", {}, True),
        ('"text"', {}, True),
    ],
)
def test_parse_args(raw, args, bad):
    got, error = common.parse_args(raw)
    assert got == args and bool(error) is bad


def test_make_call_keeps_raw_text():
    call = common.make_call("c1", "f", "nope")
    assert call.raw == "nope" and call.error and call.args == {}
    assert common.wire_args(call) == "{}"
    assert common.wire_args(common.make_call("c2", "f", '{"x":2}')) == '{"x":2}'


def test_load_env_finds_nearest_file_and_never_overrides(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("EVALKIT_T_A=from-file\nEVALKIT_T_B=from-file\n")
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("EVALKIT_T_A", "already-set")
    monkeypatch.delenv("EVALKIT_T_B", raising=False)
    monkeypatch.setattr(common, "_loaded", set())
    try:
        assert common.load_env() == (tmp_path / ".env").resolve()
        assert os.environ["EVALKIT_T_A"] == "already-set" and os.environ["EVALKIT_T_B"] == "from-file"
    finally:
        os.environ.pop("EVALKIT_T_B", None)


def test_load_env_explicit_file_missing_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        common.load_env(tmp_path / "absent.env")


def test_missing_keys_are_named(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for k in ("ANTHROPIC_API_KEY", "HF_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(MissingKeyError) as info:
        check_keys(["anthropic:claude-sonnet-5", "hf:org/m:a|b"])
    assert "ANTHROPIC_API_KEY" in str(info.value) and "HF_TOKEN" in str(info.value)


@pytest.mark.parametrize(
    ("live", "keep", "window", "drop"),
    [
        (3, 4, None, 0),
        (7, 4, None, 0),
        (8, 4, None, 4),
        (4, 1, None, 0),
        (5, 1, None, 4),
        (3, 0, None, 0),
        (4, 0, None, 4),
        (3, 2, 3, 0),
        (4, 2, 3, 2),
    ],
)
def test_to_drop(live, keep, window, drop):
    assert images.to_drop(live, keep, window) == drop


@pytest.mark.parametrize(
    ("keep", "window", "says"),
    [
        (4, (8, 4), "give only one"),
        (None, (4, 4), "0 ≤ KEEP < MAX"),
        (None, (3, 5), "0 ≤ KEEP < MAX"),
        (None, (0, 0), "0 ≤ KEEP < MAX"),
        (-1, None, "≥ 0"),
        (None, (8,), "MAX,KEEP"),
    ],
)
def test_impossible_budgets_are_config_errors(keep, window, says):
    with pytest.raises(ConfigError, match=says):
        images.check_budget(keep, window)


def test_budgets():
    assert images.budget(None, None) is None
    assert images.budget(2, None) == images.Budget(most=2 + images.KEEP_BLOCK - 1, keep=2)
    assert images.budget(None, (6, 2)) == images.Budget(most=6, keep=2)


def test_shrink_only_big_pngs():
    small = Image(b"tiny", "image/png")
    assert images.shrink(small) is small
    from PIL import Image as PILImage

    big = Image.from_pil(PILImage.effect_noise((300, 300), 90).convert("RGBA"))
    shrunk = images.shrink(big, limit=10_000)
    assert shrunk.mime == "image/jpeg" and len(shrunk.data) < len(big.data)


def test_sdk_clients_are_shared_per_configuration(monkeypatch):
    import openai

    from evalkit.providers import make_agent

    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    a = make_agent("vllm:m", system="s", tools=[])
    b = make_agent("vllm:other", system="s", tools=[])
    assert a.client is b.client  # one client (one connection pool, no TLS context) for a thread's episodes
    assert a.client._client._transport._pool._ssl_context.verify_mode.name == "CERT_NONE"
    # A plain-http server of the user's: a client per thread (a pool of its own); an ended thread's is closed.
    theirs: list = []
    t = threading.Thread(target=lambda: theirs.append(make_agent("vllm:m", system="s", tools=[]).client))
    t.start()
    t.join()
    assert theirs[0] is not a.client and not theirs[0].is_closed()
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:10/v1")
    c = make_agent("vllm:m", system="s", tools=[])
    assert theirs[0].is_closed() and not a.client.is_closed()
    assert c.client is not a.client and str(c.client.base_url).startswith("http://127.0.0.1:10")
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    d = common.shared_client(openai, "OpenAI", "OPENAI_")
    others: list = []
    t = threading.Thread(target=lambda: others.append(common.shared_client(openai, "OpenAI", "OPENAI_")))
    t.start()
    t.join()
    assert others == [d]  # an API over TLS: one client (one CA store) for every thread
    monkeypatch.setenv("OPENAI_API_KEY", "k2")  # the SDK reads it itself: another key, another client
    e = common.shared_client(openai, "OpenAI", "OPENAI_")
    assert d is not e and e.api_key == "k2"


@pytest.mark.parametrize(
    "spec,stream",
    [("openai-chat:gpt-6-luna", True), ("openai-chat:gpt-6-luna", False), ("openai:gpt-6-luna", True),
     ("anthropic:claude-x", True)],
)  # fmt: skip
def test_calls_keep_one_connection(fake, spec, stream):
    """Each reply is read to the end of its body, so its connection goes back to the SDK client's pool. The
    OpenAI SDK's sync stream stops at `[DONE]` with the end unread, and the responses adapter stopped at the
    final event: every such call opened a new connection (on a remote API, a TLS handshake)."""
    from evalkit.providers import make_agent
    from evalkit.types import AgentOptions, ToolSpec
    from tests.providers.fakes import Reply

    fake.reset(default=Reply(text="ok"))
    tools = [ToolSpec("add_element", "Add.", {"type": "object", "properties": {}})]
    a = make_agent(spec, system="Be brief.", tools=tools, options=AgentOptions(max_retries=1))
    a.stream = stream
    pool = a.client._client._transport._pool
    seen = set()
    for _ in range(4):
        a.user("go")
        a.step()
        seen |= {id(c) for c in pool.connections}
    assert len(seen) == 1 and len(pool.connections) == 1
