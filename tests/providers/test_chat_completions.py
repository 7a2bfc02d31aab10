"""The chat-completions adapter (openai-chat, hf, vllm) through the real `openai` client."""

from __future__ import annotations

import io
import json
import threading
import warnings

import pytest
from PIL import Image as PILImage

from evalkit.errors import ConfigError, EndpointError, ModelFailure
from evalkit.providers import make_agent
from evalkit.types import AgentOptions, Image, ToolOutcome, ToolSpec
from tests.providers.fakes import Reply

TOOLS = [
    ToolSpec("add_element", "Add a shape.", {"type": "object", "properties": {"kind": {"type": "string"}}})
]
SHOT = Image(b"\x89PNG fake screenshot", "image/png")


def agent(spec="openai-chat:gpt-6-luna", stream=True, **opts):
    opts.setdefault("max_retries", 1)
    a = make_agent(spec, system="Be brief.", tools=TOOLS, options=AgentOptions(**opts))
    a.stream = stream
    return a


@pytest.mark.parametrize("stream", [True, False])
def test_streamed_turn_and_images_after_tool_messages(fake, stream):
    usage = {"input": 20, "output": 40, "cache_read": 64, "reasoning_tokens": 25}
    fake.reset(
        Reply(
            reasoning="Think first.",
            text="Adding two.",
            calls=[("add_element", {"kind": "rect"}), ("add_element", {"kind": "ellipse"})],
            usage=usage,
        ),
        Reply(text="ok"),
    )
    a = agent(stream=stream)
    a.user("Recreate.", [SHOT])
    turn = a.step()
    assert (turn.text, turn.reasoning, turn.stop) == ("Adding two.", "Think first.", "tool_calls")
    assert [(c.id, c.args) for c in turn.calls] == [
        ("call_0_0", {"kind": "rect"}),
        ("call_0_1", {"kind": "ellipse"}),
    ]
    u = turn.usage
    assert (u.input, u.output, u.cache_read, u.reasoning_tokens, u.reasoning_chars) == (20, 40, 64, 25, 12)

    a.results(
        [
            (turn.calls[0], ToolOutcome(text="added", images=[SHOT])),
            (turn.calls[1], ToolOutcome(text="bad kind", is_error=True)),
        ]
    )
    a.user("[1 turn left]")
    a.step()
    first, second = fake.bodies("/v1/chat/completions")
    assert first["max_completion_tokens"] == 16000 and "max_tokens" not in first
    if stream:
        assert first["stream_options"] == {"include_usage": True}
    msgs = second["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert msgs[2]["tool_calls"][1]["function"] == {"name": "add_element", "arguments": '{"kind": "ellipse"}'}
    assert "reasoning_content" not in msgs[2]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_0_0", "content": "added"}
    assert msgs[4]["content"] == "Error: bad kind"
    parts = msgs[5]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    assert parts[1]["image_url"]["url"] == f"data:image/png;base64,{SHOT.b64}"
    assert parts[2]["text"] == "[1 turn left]"


@pytest.mark.parametrize("style", ["reasoning", "tags"])
def test_reasoning_from_other_fields(fake, style):
    fake.reset(Reply(reasoning="hmm, rect", text="Go.", think=style))
    a = agent("vllm:qwen3-vl")
    a.user("go")
    turn = a.step()
    assert (turn.reasoning, turn.text) == ("hmm, rect", "Go.")
    assert fake.bodies()[0]["max_tokens"] == 16000


def test_harness_cap_for_servers_that_ignore_max_tokens(fake):
    fake.reset(Reply(text="la " * 2000))
    a = agent("vllm:chatty", max_tokens=100)
    a.user("go")
    turn = a.step()
    assert turn.stop == "length (harness cap)" and turn.truncated
    assert 500 <= len(turn.text) < 1000


def test_broken_arguments(fake):
    fake.reset(Reply(calls=[("add_element", "{kind: rect}")]), Reply(text="ok"))
    a = agent()
    a.user("go")
    call = a.step().calls[0]
    assert call.error and call.raw == "{kind: rect}"
    a.results([(call, ToolOutcome(text=call.error, is_error=True))])
    a.step()
    assert fake.bodies()[1]["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_hf_falls_back_to_next_provider_after_500(fake):
    """With another provider behind it, a 500 is not retried where it happened: one request, then the next."""
    fake.reset(Reply(status=500), Reply(text="from b"), Reply(text="still b"))
    a = agent("hf:org/model:prov-a|prov-b")
    a.user("go")
    turn = a.step()
    assert turn.text == "from b"
    assert [(x.route, x.status, x.kind) for x in turn.attempts] == [("org/model:prov-a", 500, "server_error")]
    a.user("again")
    assert a.step().text == "still b"
    assert [b["model"] for b in fake.bodies()] == ["org/model:prov-a"] + ["org/model:prov-b"] * 2
    (switch,) = a.info["provider_switches"]
    assert (switch["turn"], switch["from"], switch["to"]) == (1, "org/model:prov-a", "org/model:prov-b")
    assert (switch["why"], switch["status"]) == ("server_error 500", 500)


def test_hf_falls_back_on_429_after_its_retry_after(fake):
    """A rate limit is waited out once (as long as the server asked), then the next provider is tried."""
    fake.reset(Reply(status=429), Reply(status=429), Reply(text="from b"))
    a = agent("hf:org/model:prov-a|prov-b")
    a.user("go")
    turn = a.step()
    assert turn.text == "from b" and fake.waits == [0.005]
    assert [b["model"] for b in fake.bodies()] == ["org/model:prov-a"] * 2 + ["org/model:prov-b"]
    assert [x.kind for x in turn.attempts] == ["rate_limited"] * 2
    assert a.info["provider_switches"][0]["why"] == "rate_limited 429"


def test_last_provider_retries_a_429_with_its_retry_after(fake):
    fake.reset(Reply(status=429), Reply(status=429), Reply(text="ok"))
    a = agent("hf:org/model:prov-a", max_retries=3)
    a.user("go")
    turn = a.step()
    assert turn.text == "ok" and fake.waits == [0.005, 0.005] and len(turn.attempts) == 2


def test_overlong_prompt_drops_later_images_but_never_the_target(fake):
    target, newest = Image(b"\x89PNG target", "image/png"), Image(b"newest", "image/png")
    fake.reset(Reply(calls=[("add_element", {})]), Reply(status=413), Reply(text="ok"))
    a = agent()
    a.user("target", [target])
    turn = a.step()
    a.results([(turn.calls[0], ToolOutcome("drawn", images=[SHOT, SHOT, newest]))])
    assert a.step().text == "ok"
    retry = json.dumps(fake.bodies()[2]["messages"])
    assert target.b64 in retry and newest.b64 in retry and SHOT.b64 not in retry
    assert a.info["rejected_prompt_prunes"] == [
        {"turn": 2, "route": "gpt-6-luna", "status": 413, "code": None, "dropped": 2}
    ]


def test_overlong_prompt_with_only_the_target_is_the_models_context_overflow(fake):
    """Nothing left to drop: the prompt is past what the model takes, the model's outcome (not an endpoint
    error that resume would rerun)."""
    fake.reset(default=Reply(status=413))
    a = agent()
    a.user("target", [SHOT, SHOT])
    with pytest.raises(ModelFailure) as info:
        a.step()
    assert info.value.status == 413 and info.value.kind == "context_overflow" and len(fake.requests) == 1
    assert all(SHOT.b64 in json.dumps(b) for b in fake.bodies())


def test_big_png_reencoded_as_jpeg_for_the_router(fake):
    noise = PILImage.effect_noise((400, 400), 80).convert("RGB")
    big = Image.from_pil(noise)
    assert len(big.data) > 150_000
    fake.reset(Reply(text="ok"))
    a = agent("hf:org/model")
    a.user("look", [big])
    a.step()
    url = fake.bodies()[0]["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert PILImage.open(io.BytesIO(Image.from_b64(url.split(",", 1)[1]).data)).size == (400, 400)


def _probe_server(body):
    """A server on which enable_thinking=false is ignored but reasoning_effort=none works."""
    if body.get("tools", [{}])[0].get("function", {}).get("name") == "record":
        off = body.get("reasoning_effort") == "none"
        return Reply(reasoning="" if off else "thinking about 7", calls=[("record", {"n": 7})])
    return Reply(text="real turn")


def test_off_probe_picks_least_reasoning_once_per_model(fake):
    fake.reset(default=_probe_server)
    agents = [agent("vllm:qwen3@off", stream=False) for _ in range(4)]
    for a in agents:
        a.user("go")
    threads = [threading.Thread(target=a.step) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    probes = [b for b in fake.bodies() if b["tools"][0]["function"]["name"] == "record"]
    assert [p.get("reasoning_effort") for p in probes] == [None, "none"]
    assert probes[0]["chat_template_kwargs"] == {"enable_thinking": False}
    real = [b for b in fake.bodies() if b["tools"][0]["function"]["name"] == "add_element"]
    assert len(real) == 4 and all(b["reasoning_effort"] == "none" for b in real)
    assert all(a.info["thinking_off_method"] == "reasoning_effort=none" for a in agents)


def test_off_probe_warns_when_nothing_turns_thinking_off(fake):
    fake.reset(default=lambda body: Reply(reasoning="always thinking", calls=[("record", {"n": 7})]))
    a = agent("vllm:stubborn@off")
    a.user("go")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a.step()
    assert any("fully off" in str(w.message) for w in caught)
    assert len(fake.requests) == 4
    assert a.info["thinking_off_method"] == "chat_template_kwargs.enable_thinking=false"


def test_vllm_needs_a_base_url(fake, monkeypatch):
    monkeypatch.delenv("VLLM_BASE_URL")
    with pytest.raises(ConfigError):
        agent("vllm:m")


def test_the_request_timeout_bounds_a_trickling_stream_in_all(fake):
    """Each gap (0.1 s) is inside the timeout, the whole stream (≈0.5 s) is not: a read timeout alone, which
    every chunk restarts, would never fire; the request's own time does, and the request is asked again."""
    import time

    fake.reset(Reply(text="slow but steady " * 3, chunk_delay=0.1), Reply(text="quick"))
    a = agent(request_timeout=0.3)
    a.user("go")
    t = time.monotonic()
    turn = a.step()
    assert turn.text == "quick" and [x.kind for x in turn.attempts] == ["timeout"]
    assert 0.3 <= time.monotonic() - t < 1.5 and len(fake.bodies()) == 2
    assert "cut" in turn.attempts[0].error and not turn.usage_known


def test_error_chunk_inside_stream_is_retried(fake):
    fake.reset(Reply(reasoning="r", error_event=True), Reply(text="second"))
    a = agent()
    a.user("go")
    assert a.step().text == "second"


def test_rejected_request_without_images_or_fallback_ends_the_episode(fake):
    fake.reset(default=Reply(status=400))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status == 400 and len(fake.requests) == 1


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_cut_mid_arguments_is_retried(fake, cut):
    """Half the arguments received: not a model's parse error, a broken stream to run again."""
    fake.reset(Reply(calls=[("add_element", {"kind": "rect"})], cut_after=3, cut=cut), Reply(text="whole"))
    a = agent()
    a.user("go")
    turn = a.step()
    assert turn.text == "whole" and turn.stop == "stop" and len(fake.requests) == 2
    assert a.info == {}


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_always_cut_is_an_endpoint_error(fake, cut):
    fake.reset(default=Reply(calls=[("add_element", {"kind": "rect"})], cut_after=3, cut=cut))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status is None and len(fake.requests) == 2


def test_capped_turn_has_unknown_usage(fake):
    fake.reset(Reply(text="la " * 2000, usage={"output": 3000}), Reply(text="short", usage={"output": 3}))
    a = agent("openai-chat:gpt-6-luna", max_tokens=100)
    a.user("go")
    capped = a.step()
    assert capped.stop == "length (harness cap)" and capped.usage.output == 0 and not capped.usage_known
    a.user("again")
    later = a.step()
    assert later.usage.output == 3 and later.usage_known


def test_a_parse_error_reaches_the_model_as_one_error(fake):
    from evalkit.run.episode import run_episode
    from tests.support.pictures import PictureEnv

    fake.reset(Reply(calls=[("look", "{not json")]), Reply(text="sorry"))
    options = AgentOptions(max_retries=1)
    run_episode("openai-chat:gpt-6-luna", lambda: PictureEnv(), max_turns=2, options=options)
    tool = [m for m in fake.bodies()[1]["messages"] if m["role"] == "tool"][0]
    assert tool["content"].startswith("Error: tool arguments are not valid JSON")


@pytest.mark.parametrize("stream", [True, False])
def test_the_request_is_the_body_as_built_with_the_sdks_auth_and_headers(fake, stream):
    """evalkit posts its body through the SDK's client without `create`'s parameter walk: the server gets the
    SDK's auth and headers, and exactly the body the agent built (its `extra_body` merged in, as the SDK
    does)."""
    fake.reset(default=lambda body: Reply(reasoning="always thinking", calls=[("record", {"n": 7})]))
    a = agent("vllm:stubborn@off", stream=stream, temperature=0.3, seed=5)
    a.user("go", [SHOT])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a.step()
    last = fake.requests[-1]
    assert last["headers"]["authorization"] == "Bearer test-token"  # vllm's key (HF_TOKEN here)
    assert "openai/python" in last["headers"]["user-agent"].lower()
    assert last["headers"]["x-stainless-lang"] == "python"
    sent = dict(a._sent, messages=a.messages[:-1])  # (the agent has since added its reply)
    sent.update(sent.pop("extra_body"))
    assert last["body"] == json.loads(json.dumps(sent))
    assert last["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "extra_body" not in last["body"]
    assert (last["body"]["temperature"], last["body"]["seed"], last["body"].get("stream")) == (
        0.3,
        5,
        True if stream else None,
    )
