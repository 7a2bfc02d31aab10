"""What real services send that evalkit's own fake never did, answered byte for byte on loopback to the real
SDK clients: the event sequences below follow the live APIs' recorded streams and documented replies
(OpenRouter's error event after a `length` stop, Anthropic's server tools and `pause_turn`, refusals,
DeepSeek's thinking with tool calls)."""

from __future__ import annotations

import json

import pytest

from evalkit.providers import make_agent
from evalkit.types import AgentOptions, ToolOutcome, ToolSpec
from tests.providers.fakes import Reply

TOOLS = [
    ToolSpec("add_element", "Add a shape.", {"type": "object", "properties": {"kind": {"type": "string"}}})
]


def agent(spec, stream=True, **opts):
    opts.setdefault("max_retries", 3)
    a = make_agent(spec, system="Be brief.", tools=TOOLS, options=AgentOptions(**opts))
    a.stream = stream
    return a


def sse(*events) -> bytes:
    """An SSE body: (event name or None, data) pairs, data a JSON value or a raw string; (":", text) is a
    comment line."""
    out = []
    for name, data in events:
        if name == ":":  # an SSE comment (a router's keep-alive), not an event
            out.append(f": {data}\n\n")
            continue
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


# ---- OpenRouter: an error event after `finish_reason: "length"` --------------------------------------------

GEN = {"id": "gen-1764-aB", "provider": "Chutes", "model": "z-ai/glm-4.6", "object": "chat.completion.chunk"}
ROUTER_USAGE = {
    "prompt_tokens": 812,
    "completion_tokens": 64,
    "total_tokens": 876,
    "cost": 0.00071,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 50},
}


def router_cut_stream() -> bytes:
    def chunk(delta, finish=None, **more):
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish}
        return None, {**GEN, "created": 1764700000, "choices": [choice], **more}

    return sse(
        (":", "OPENROUTER PROCESSING"),
        chunk({"role": "assistant", "content": "", "reasoning": "Let me count the "}),
        chunk({"role": "assistant", "content": "", "reasoning": "shapes first"}),
        chunk({"role": "assistant", "content": "I will add"}),
        chunk({"role": "assistant", "content": ""}, "length"),
        chunk(
            {"role": "assistant", "content": ""},
            "error",
            error={"code": 400, "message": "Token limit reached"},
            usage=ROUTER_USAGE,
        ),
        (None, "[DONE]"),
    )


def test_error_after_length_stop_is_a_cut_turn_not_a_retry(fake):
    fake.reset(Reply(recorded=router_cut_stream()))
    a = agent("vllm:z-ai/glm-4.6")
    a.user("Recreate this.")
    turn = a.step()
    assert len(fake.bodies()) == 1, "a reply that had ended was asked for again"
    assert turn.truncated and turn.stop == "length" and turn.attempts == []
    assert turn.text == "I will add" and turn.reasoning == "Let me count the shapes first"
    assert turn.usage_known and (turn.usage.input, turn.usage.output, turn.usage.reasoning_tokens) == (
        812,
        64,
        50,
    )
    assert a.info["errors_after_finish"] == [
        {"turn": 1, "route": "z-ai/glm-4.6", "finish": "length", "code": 400}
    ]
    # The same error event before any finish reason is a reply broken mid-generation: asked again.
    body = sse(
        (
            None,
            {
                **GEN,
                "created": 1,
                "choices": [{"index": 0, "delta": {"content": "I wi"}, "finish_reason": None}],
            },
        ),
        (None, {**GEN, "created": 1, "error": {"code": 502, "message": "Provider returned error"}}),
    )
    fake.reset(Reply(recorded=body), Reply(text="whole"))
    a = agent("vllm:z-ai/glm-4.6")
    a.user("Recreate this.")
    turn = a.step()
    assert turn.text == "whole" and [x.kind for x in turn.attempts] == ["stream_error"]


# ---- Anthropic: server tools and pause_turn ----------------------------------------------------------------


def claude_usage(inp, out, **more):
    return {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, **more}  # fmt: skip


def message_start(msg_id: str, usage: dict) -> dict:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-5", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip


SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
    "content": [
        {
            "type": "web_search_result",
            "title": "Canvas shapes",
            "url": "https://example.org/shapes",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgx",
            "page_age": None,
        }
    ],
}


def paused_stream() -> bytes:
    start = message_start("msg_01A", claude_usage(2679, 3))
    tool = {
        "type": "server_tool_use",
        "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
        "name": "web_search",
        "input": {},
    }
    return sse(
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),  # fmt: skip
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "I'll search for that."},
            },
        ),  # fmt: skip
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": tool}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
        ),  # fmt: skip
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": "canv'},
            },
        ),  # fmt: skip
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'as shapes"}'},
            },
        ),  # fmt: skip
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": SEARCH_RESULT}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "pause_turn", "stop_sequence": None},
                "usage": {"output_tokens": 90, "server_tool_use": {"web_search_requests": 1}},
            },
        ),  # fmt: skip
        ("message_stop", {"type": "message_stop"}),
    )


def paused_message() -> dict:
    return {
        "id": "msg_01A", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
        "content": [
            {"type": "text", "text": "I'll search for that."},
            {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "name": "web_search",
             "input": {"query": "canvas shapes"}},
            SEARCH_RESULT,
        ],
        "stop_reason": "pause_turn", "stop_sequence": None,
        "usage": claude_usage(2679, 90, server_tool_use={"web_search_requests": 1}),
    }  # fmt: skip


@pytest.mark.parametrize("stream", [True, False])
def test_server_tool_blocks_accumulate_and_pause_turn_is_continued(fake, stream):
    fake.reset(
        Reply(recorded=paused_stream(), body=paused_message()),
        Reply(
            text=" Found it.", calls=[("add_element", {"kind": "rect"})], usage={"input": 3000, "output": 20}
        ),
    )
    a = agent("anthropic:claude-sonnet-5", stream=stream)
    a.user("Recreate this.")
    turn = a.step()
    first, second = fake.bodies("/v1/messages")
    assert len(fake.bodies()) == 2
    # The paused reply went back unchanged as the last message, and the model was asked again.
    assert second["messages"][:-1] == first["messages"]
    paused = second["messages"][-1]
    assert paused["role"] == "assistant"
    blocks = {b["type"]: b for b in paused["content"]}
    assert blocks["server_tool_use"]["input"] == {"query": "canvas shapes"}
    assert (
        blocks["web_search_tool_result"]["content"][0]["encrypted_content"]
        == SEARCH_RESULT["content"][0]["encrypted_content"]
    )
    # One turn: both parts' text and calls, the usage of both requests.
    assert turn.text == "I'll search for that. Found it." and turn.stop == "tool_use"
    assert [c.name for c in turn.calls] == ["add_element"]
    assert (turn.usage.input, turn.usage.output) == (2679 + 3000, 90 + 20)
    assert a.info["pause_turn_continuations"] == 1
    # The whole reply is one assistant message of the history; the tool result follows it.
    a.results([(turn.calls[0], ToolOutcome(text="added"))])
    fake.reset(Reply(text="done"))
    a.step()
    third = fake.bodies("/v1/messages")[0]
    roles = [m["role"] for m in third["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert [b["type"] for b in third["messages"][1]["content"]] == [
        "text", "server_tool_use", "web_search_tool_result", "text", "tool_use",
    ]  # fmt: skip


def test_pause_turn_continuations_are_bounded(fake):
    from evalkit.providers import anthropic

    fake.reset(default=Reply(recorded=paused_stream()))
    a = agent("anthropic:claude-sonnet-5")
    a.user("Recreate this.")
    turn = a.step()
    assert len(fake.bodies()) == 1 + anthropic.MAX_CONTINUATIONS
    assert turn.stop == "pause_turn" and turn.usage.input == 2679 * (1 + anthropic.MAX_CONTINUATIONS)
    assert a.info["pause_turn_continuations"] == anthropic.MAX_CONTINUATIONS


# ---- refusals ----------------------------------------------------------------------------------------------


def refusal_stream() -> bytes:
    start = message_start("msg_01R", claude_usage(40, 1))
    return sse(
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),  # fmt: skip
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Here is how to make the"},
            },
        ),  # fmt: skip
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "refusal", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        ),  # fmt: skip
        ("message_stop", {"type": "message_stop"}),
    )


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_refusal_is_a_refused_turn_left_out_of_the_history(fake, stream):
    body = {"id": "msg_01R", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
            "content": [{"type": "text", "text": "Here is how to make the"}], "stop_reason": "refusal",
            "stop_sequence": None, "usage": claude_usage(40, 7)}  # fmt: skip
    fake.reset(Reply(recorded=refusal_stream(), body=body), Reply(text="ok"))
    a = agent("anthropic:claude-sonnet-5", stream=stream)
    a.user("Recreate this.")
    turn = a.step()
    assert turn.refused and turn.stop == "refusal" and turn.text == "Here is how to make the"
    assert turn.usage.output == 7
    a.user("Go on.")
    a.step()
    sent = json.dumps(fake.bodies()[-1]["messages"])
    assert "Here is how to make the" not in sent


@pytest.mark.parametrize("stream", [True, False])
def test_openai_refusal_field_is_a_refused_turn(fake, stream):
    head = {"id": "chatcmpl-R", "object": "chat.completion.chunk", "created": 1, "model": "gpt-6-luna"}

    def chunk(delta, finish=None):
        return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    recorded = sse(
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I'm sorry, I can't "}),
        chunk({"refusal": "help with that."}),
        chunk({}, "stop"),
        (None, {**head, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}}),
        (None, "[DONE]"),
    )
    plain = {"id": "chatcmpl-R", "object": "chat.completion", "created": 1, "model": "gpt-6-luna",
             "choices": [{"index": 0, "finish_reason": "stop", "message": {
                 "role": "assistant", "content": None, "refusal": "I'm sorry, I can't help with that."}}],
             "usage": {"prompt_tokens": 30, "completion_tokens": 9}}  # fmt: skip
    fake.reset(Reply(recorded=recorded, body=plain), Reply(text="ok"))
    a = agent("openai-chat:gpt-6-luna", stream=stream)
    a.user("Recreate this.")
    turn = a.step()
    assert turn.refused and turn.text == "I'm sorry, I can't help with that."
    a.user("Go on.")
    a.step()
    assert [m["role"] for m in fake.bodies()[-1]["messages"]] == ["system", "user"]


@pytest.mark.parametrize("stream", [True, False])
def test_openai_content_filter_finish_is_a_refused_turn(fake, stream):
    """A reply the provider's content filter cut (finish reason `content_filter`) ends the episode as a
    refusal, its stop kept as the API said it, and is not sent back."""
    head = {"id": "chatcmpl-F", "object": "chat.completion.chunk", "created": 1, "model": "gpt-6-luna"}

    def chunk(delta, finish=None):
        return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    recorded = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Sure, the first step is"}),
        chunk({}, "content_filter"),
        (None, {**head, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 6}}),
        (None, "[DONE]"),
    )
    plain = {"id": "chatcmpl-F", "object": "chat.completion", "created": 1, "model": "gpt-6-luna",
             "choices": [{"index": 0, "finish_reason": "content_filter", "message": {
                 "role": "assistant", "content": "Sure, the first step is"}}],
             "usage": {"prompt_tokens": 30, "completion_tokens": 6}}  # fmt: skip
    fake.reset(Reply(recorded=recorded, body=plain), Reply(text="ok"))
    a = agent("openai-chat:gpt-6-luna", stream=stream)
    a.user("Recreate this.")
    turn = a.step()
    assert turn.refused and turn.stop == "content_filter" and turn.text == "Sure, the first step is"
    a.user("Go on.")
    a.step()
    assert [m["role"] for m in fake.bodies()[-1]["messages"]] == ["system", "user"]


@pytest.mark.parametrize("stream", [True, False])
def test_responses_refusal_part_is_a_refused_turn(fake, stream):
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    usage = {
        "input_tokens": 30,
        "output_tokens": 8,
        "total_tokens": 38,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    message = {
        "id": "msg_R",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [refusal],
    }
    response = {
        "id": "resp_R",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-6-luna",
        "output": [message],
        "usage": usage,
    }
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    delta = {
        "type": "response.refusal.delta",
        "sequence_number": 1,
        "item_id": "msg_R",
        "output_index": 0,
        "content_index": 0,
        "delta": refusal["refusal"],
    }
    recorded = sse(
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": started}),
        ("response.refusal.delta", delta),
        ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": response}),
    )  # fmt: skip
    fake.reset(Reply(recorded=recorded, body=response), Reply(text="ok"))
    a = agent("openai:gpt-6-luna", stream=stream)
    a.user("Recreate this.")
    turn = a.step()
    assert turn.refused and turn.text == "I can't help with that."
    a.user("Go on.")
    a.step()
    assert "I can't help with that." not in json.dumps(fake.bodies()[-1])


# ---- DeepSeek: thinking with tool calls --------------------------------------------------------------------


def deepseek_stream(model: str, reasoning: str) -> bytes:
    head = {"id": "5f1c", "object": "chat.completion.chunk", "created": 1, "model": model,
            "system_fingerprint": "fp_ffc7281d48_prod0820_fp8_kvcache"}  # fmt: skip

    def chunk(delta, finish=None):
        return None, {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    call = {"index": 0, "id": "call_00_KgN1", "type": "function",
            "function": {"name": "add_element", "arguments": ""}}  # fmt: skip
    pieces = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    pieces += [chunk({"content": None, "reasoning_content": reasoning})] if reasoning else []
    pieces += [
        chunk({"content": "", "reasoning_content": None}),
        chunk({"tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"kind": "rect"}'}}]}),
        chunk({"content": ""}, "tool_calls"),
        (
            None,
            {
                **head,
                "choices": [],
                "usage": {
                    "prompt_tokens": 300,
                    "completion_tokens": 40,
                    "completion_tokens_details": {"reasoning_tokens": 30},
                },
            },
        ),  # fmt: skip
        (None, "[DONE]"),
    ]
    return sse(*pieces)


def tool_turn_sent(fake, spec, model, reasoning="The user wants a rectangle.", **opts):
    fake.reset(Reply(recorded=deepseek_stream(model, reasoning)), Reply(text="done"))
    a = agent(spec, **opts)
    a.user("Recreate this.")
    turn = a.step()
    a.results([(turn.calls[0], ToolOutcome(text="added"))])
    a.step()
    return [m for m in fake.bodies()[-1]["messages"] if m["role"] == "assistant"][0]


@pytest.mark.parametrize(
    "spec, model",
    [
        ("vllm:deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2"),
        ("openai-chat:deepseek-chat", "deepseek-chat"),
    ],
)
def test_deepseek_thinking_tool_turn_goes_back_with_its_reasoning(fake, spec, model):
    sent = tool_turn_sent(fake, spec, model)
    assert sent["reasoning_content"] == "The user wants a rectangle." and sent["tool_calls"]


def test_empty_reasoning_of_a_tool_turn_is_still_sent(fake):
    sent = tool_turn_sent(fake, "openai-chat:deepseek-v4-flash", "deepseek-v4-flash", reasoning="")
    assert sent["reasoning_content"] == ""


def test_reasoning_content_rule_per_model_and_its_switch(fake):
    assert "reasoning_content" not in tool_turn_sent(
        fake, "openai-chat:deepseek-reasoner", "deepseek-reasoner"
    )
    assert "reasoning_content" not in tool_turn_sent(fake, "openai-chat:gpt-6-luna", "gpt-6-luna")
    off = tool_turn_sent(fake, "openai-chat:deepseek-chat", "deepseek-chat", send_reasoning=False)
    assert "reasoning_content" not in off
    on = tool_turn_sent(fake, "vllm:my-finetune", "my-finetune", send_reasoning=True)
    assert on["reasoning_content"] == "The user wants a rectangle."
