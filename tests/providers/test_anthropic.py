"""The Anthropic adapter through the real `anthropic` client against the local Messages server."""

from __future__ import annotations

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import make_agent
from evalkit.types import AgentOptions, Call, Image, ToolOutcome, ToolSpec
from tests.providers.fakes import Reply

TOOLS = [
    ToolSpec("add_element", "Add a shape.", {"type": "object", "properties": {"kind": {"type": "string"}}})
]
PNG = Image(b"\x89PNG fake target", "image/png")
SHOT = Image(b"\x89PNG fake screenshot", "image/png")


def agent(spec="anthropic:claude-sonnet-5", stream=True, **opts):
    a = make_agent(
        spec, system="Build the picture.", tools=TOOLS, options=AgentOptions(max_retries=2, **opts)
    )
    a.stream = stream
    return a


def blocks(body, role="user", index=-1):
    return [m for m in body["messages"] if m["role"] == role][index]["content"]


@pytest.mark.parametrize("stream", [True, False])
def test_turn_parsed_and_history_resent(fake, stream):
    usage = {"input": 40, "output": 30, "cache_read": 100, "cache_write": 20, "reasoning_tokens": 12}
    fake.reset(
        Reply(
            reasoning="I should add a rectangle.",
            text="Adding.",
            calls=[("add_element", {"kind": "rect"})],
            usage=usage,
        ),
        Reply(text="done"),
    )
    a = agent(stream=stream)
    a.user("Recreate this.", [PNG])
    turn = a.step()
    assert turn.text == "Adding." and turn.reasoning == "I should add a rectangle."
    assert turn.stop == "tool_use" and not turn.truncated
    assert [(c.name, c.args, c.error) for c in turn.calls] == [("add_element", {"kind": "rect"}, None)]
    u = turn.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.reasoning_tokens) == (40, 30, 100, 20, 12)
    assert u.reasoning_chars == len("I should add a rectangle.")

    a.results([(turn.calls[0], ToolOutcome(text="added #1\n[2 turns left]", images=[SHOT]))])
    a.step()
    first, second = fake.bodies("/v1/messages")
    assert first.get("stream", False) is stream
    assert first["cache_control"] == {"type": "ephemeral"} and second["cache_control"] == {
        "type": "ephemeral"
    }
    assert first["system"] == "Build the picture."
    assert first["tools"][0]["input_schema"]["properties"] == {"kind": {"type": "string"}}
    assert [b["type"] for b in blocks(first)] == ["text", "image"]
    assistant = blocks(second, "assistant")
    assert assistant[0] == {"type": "thinking", "thinking": "I should add a rectangle.", "signature": "sig-A"}
    assert assistant[1] == {"type": "text", "text": "Adding."}
    assert assistant[2]["type"] == "tool_use" and assistant[2]["input"] == {"kind": "rect"}
    result = blocks(second)[0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == turn.calls[0].id
    assert [b["type"] for b in result["content"]] == ["text", "image"]
    assert result["content"][1]["source"]["data"] == SHOT.b64


def test_error_results_images_follow_all_tool_results(fake):
    fake.reset(
        Reply(calls=[("add_element", {"kind": "x"}), ("add_element", {"kind": "rect"})]), Reply(text="ok")
    )
    a = agent()
    a.user("go")
    turn = a.step()
    a.results(
        [
            (turn.calls[0], ToolOutcome(text="unknown kind", images=[SHOT], is_error=True)),
            (turn.calls[1], ToolOutcome(text="added", images=[SHOT])),
        ]
    )
    a.user("2 turns left")
    a.step()
    content = blocks(fake.bodies()[1])
    kinds = [b["type"] for b in content]
    assert kinds[:2] == ["tool_result", "tool_result"]
    assert content[0]["is_error"] is True and [b["type"] for b in content[0]["content"]] == ["text"]
    assert [b["type"] for b in content[1]["content"]] == ["text", "image"]
    assert kinds[2:] == ["text", "image", "text"] and content[-1]["text"] == "2 turns left"


def test_broken_arguments_become_a_call_error(fake):
    fake.reset(Reply(calls=[("add_element", '{"kind": "rect",')]), Reply(text="ok"))
    a = agent()
    a.user("go")
    turn = a.step()
    call = turn.calls[0]
    assert call.error and "JSON" in call.error and call.raw == '{"kind": "rect",' and call.args == {}
    a.results([(call, ToolOutcome(text=call.error, is_error=True))])
    a.step()
    assert blocks(fake.bodies()[1], "assistant")[0]["input"] == {}


@pytest.mark.parametrize(
    ("suffix", "thinking", "effort"),
    [
        ("@off", {"type": "disabled"}, None),
        ("@low", {"type": "adaptive", "display": "summarized"}, "low"),
        ("", None, None),
    ],
)
def test_thinking_levels(fake, suffix, thinking, effort):
    fake.reset(Reply(text="hi"))
    a = agent("anthropic:claude-sonnet-5" + suffix)
    a.user("go")
    a.step()
    body = fake.bodies()[0]
    assert body.get("thinking") == thinking
    assert (body.get("output_config") or {}).get("effort") == effort


def test_retries_429_and_500_then_succeeds(fake):
    fake.reset(Reply(status=429), Reply(status=500), Reply(text="fine"))
    a = agent()
    a.user("go")
    assert a.step().text == "fine"
    assert len(fake.requests) == 3


def test_endpoint_error_after_retries(fake):
    fake.reset(default=Reply(status=500))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status == 500 and len(fake.requests) == 3


def test_error_inside_the_stream_is_retried(fake):
    fake.reset(Reply(text="x", error_event=True), Reply(text="second try"))
    a = agent()
    a.user("go")
    assert a.step().text == "second try"


def test_slow_server_times_out_as_endpoint_error(fake):
    fake.reset(default=Reply(text="late", delay=1.0))
    a = make_agent(
        "anthropic:claude-sonnet-5",
        system="",
        tools=[],
        options=AgentOptions(max_retries=0, request_timeout=0.2),
    )
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status is None


def test_output_limit_hands_reasoning_back_as_notes(fake):
    fake.reset(Reply(reasoning="long plan " * 2000, stop="max_tokens", signed=False), Reply(text="ok"))
    a = agent()
    a.user("go")
    turn = a.step()
    assert turn.truncated and turn.stop == "max_tokens" and not turn.calls
    a.notes(turn.reasoning)
    a.step()
    second = fake.bodies()[1]
    # The unsigned thinking block cannot be re-sent; the notes join the user turn instead.
    assert [m["role"] for m in second["messages"]] == ["user"]
    note = blocks(second)[-1]["text"]
    assert "long plan" in note and "call a tool" in note and len(note) < 8600


def _live_images(body):
    def walk(x):
        if isinstance(x, dict):
            return (x.get("type") == "image") + sum(walk(v) for v in x.values())
        return sum(walk(v) for v in x) if isinstance(x, list) else 0

    return walk(body["messages"][1:]), walk(body["messages"][0])


def test_prune_window_keeps_opening_image(fake):
    fake.reset(default=Reply(calls=[("add_element", {"kind": "rect"})]))
    a = agent()
    a.user("target", [PNG])
    for _ in range(6):
        a.prune_images(2, window=3)
        turn = a.step()
        a.results([(turn.calls[0], ToolOutcome(text="ok", images=[SHOT]))])
    # Images build up to MAX=3, then drop to the newest KEEP=2; the target in the opening message stays.
    assert [_live_images(b) for b in fake.bodies()] == [(0, 1), (1, 1), (2, 1), (3, 1), (2, 1), (3, 1)]


def test_keep_images_prunes_in_blocks_and_keeps_the_target(fake):
    fake.reset(default=Reply(calls=[("add_element", {"kind": "rect"})]))
    a = agent()
    a.user("target", [PNG])
    for _ in range(10):
        a.prune_images(1)
        turn = a.step()
        a.results([(turn.calls[0], ToolOutcome(text="ok", images=[SHOT]))])
    counts = [sum(_live_images(b)) for b in fake.bodies()]
    # The target, then later images build up to 1 + KEEP_BLOCK - 1 = 4 and drop back to 1, four at a time.
    assert counts == [1, 2, 3, 4, 5, 2, 3, 4, 5, 2]
    assert all(blocks(b, index=0)[1]["source"]["data"] == PNG.b64 for b in fake.bodies())


def test_stray_call_is_passed_through(fake):
    # Calls the loop never executed still get a result (the loop always answers every call).
    fake.reset(Reply(calls=[("nope", {})]), Reply(text="ok"))
    a = agent()
    a.user("go")
    t = a.step()
    a.results([(Call(t.calls[0].id, "nope", {}), ToolOutcome(text="unknown tool", is_error=True))])
    a.step()
    assert blocks(fake.bodies()[1])[0]["content"] == [{"type": "text", "text": "unknown tool"}]


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_cut_mid_reply_is_retried(fake, cut):
    """A connection lost mid-reply (`drop`: the SDK lets the HTTP library's error out) is retried."""
    fake.reset(Reply(calls=[("add_element", {"kind": "rect"})], cut_after=4, cut=cut), Reply(text="whole"))
    a = agent()
    a.user("go")
    turn = a.step()
    assert turn.text == "whole" and turn.stop == "end_turn" and len(fake.requests) == 2


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_always_cut_is_an_endpoint_error(fake, cut):
    fake.reset(default=Reply(calls=[("add_element", {"kind": "rect"})], cut_after=4, cut=cut))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status is None and len(fake.requests) == 3
