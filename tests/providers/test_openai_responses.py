"""The Responses adapter through the real `openai` client against the local Responses server."""

from __future__ import annotations

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import make_agent
from evalkit.types import AgentOptions, Image, ToolOutcome, ToolSpec
from tests.providers.fakes import Reply

TOOLS = [ToolSpec("submit", "Finish.", {"type": "object", "properties": {}})]
SHOT = Image(b"\x89PNG fake screenshot", "image/png")


def agent(spec="openai:gpt-6-sol", stream=True, **opts):
    a = make_agent(spec, system="Be brief.", tools=TOOLS, options=AgentOptions(max_retries=2, **opts))
    a.stream = stream
    return a


@pytest.mark.parametrize("stream", [True, False])
def test_stateless_history_carries_encrypted_reasoning(fake, stream):
    usage = {"input": 30, "output": 50, "cache_read": 200, "cache_write": 10, "reasoning_tokens": 40}
    fake.reset(
        Reply(
            reasoning="Plan: submit.",
            text="Submitting.",
            calls=[("submit", {})],
            usage=usage,
            encrypted="enc-1",
        ),
        Reply(text="bye", encrypted="enc-2"),
    )
    a = agent(stream=stream)
    a.user("Do it.", [SHOT])
    turn = a.step()
    assert (turn.text, turn.reasoning, turn.stop, turn.truncated) == (
        "Submitting.",
        "Plan: submit.",
        "tool_calls",
        False,
    )
    assert [(c.id, c.name, c.args) for c in turn.calls] == [("call_0_0", "submit", {})]
    u = turn.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.reasoning_tokens) == (30, 50, 200, 10, 40)
    assert u.reasoning_chars == len("Plan: submit.")

    a.results([(turn.calls[0], ToolOutcome(text="graded", images=[SHOT]))])
    second_turn = a.step()
    assert second_turn.stop == "completed" and second_turn.text == "bye"
    first, second = fake.bodies("/v1/responses")
    for body in (first, second):
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["instructions"] == "Be brief."
        assert body["reasoning"] == {"summary": "auto"}
    assert first["tools"] == [
        {
            "type": "function",
            "name": "submit",
            "description": "Finish.",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    assert first["input"][0]["content"][1]["type"] == "input_image"
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "reasoning", "message", "function_call", "function_call_output"]
    reasoning = second["input"][1]
    assert reasoning["encrypted_content"] == "enc-1" and reasoning["id"] == "rs_0"
    output = second["input"][4]
    assert output["call_id"] == "call_0_0"
    assert [p["type"] for p in output["output"]] == ["input_text", "input_image"]
    assert output["output"][1]["image_url"] == f"data:image/png;base64,{SHOT.b64}"


EFFORT_REFUSED = {"param": "reasoning.effort", "code": "unsupported_value"}


def test_effort_none_rejected_steps_up_to_what_the_model_takes(fake):
    """`none` refused, then `minimal` refused: `low`, learned once for the model's later requests and
    episodes."""
    refused = Reply(status=400, error=EFFORT_REFUSED)
    fake.reset(refused, refused, Reply(text="a"), Reply(text="b"), Reply(text="c"))
    a = agent("openai:gpt-6.2-sol@off")
    a.user("go")
    assert a.step().text == "a"
    a.user("again")
    a.step()
    efforts = [b["reasoning"].get("effort") for b in fake.bodies()]
    assert efforts == ["none", "minimal", "low", "low"]
    assert [(f["turn"], f["asked"], f["sent"]) for f in a.info["fallbacks"]] == [
        (1, "reasoning effort none", "reasoning effort minimal with a reasoning summary"),
        (
            1,
            "reasoning effort minimal with a reasoning summary",
            "reasoning effort low with a reasoning summary",
        ),
    ]
    later = agent("openai:gpt-6.2-sol@off")  # a later episode starts from what was learned
    later.user("go")
    later.step()
    assert fake.bodies()[-1]["reasoning"]["effort"] == "low"
    assert [f["turn"] for f in later.info["fallbacks"]] == [0, 0]


def test_effort_levels(fake):
    fake.reset(default=Reply(text="a"))
    for level in ("low", "medium", "high"):
        a = agent(f"openai:gpt-6-sol@{level}")
        a.user("go")
        a.step()
    assert [b["reasoning"] for b in fake.bodies()] == [
        {"summary": "auto", "effort": e} for e in ("low", "medium", "high")
    ]


def test_incomplete_response_records_its_reason(fake):
    fake.reset(Reply(reasoning="thinking " * 100, stop="max_output_tokens"))
    a = agent(max_tokens=64)
    a.user("go")
    turn = a.step()
    assert turn.stop == "max_output_tokens" and turn.truncated
    assert fake.bodies()[0]["max_output_tokens"] == 64


def test_broken_arguments(fake):
    fake.reset(Reply(calls=[("submit", "[1, 2]")]), Reply(text="ok"))
    a = agent()
    a.user("go")
    call = a.step().calls[0]
    assert call.error and "object" in call.error and call.raw == "[1, 2]"
    a.results([(call, ToolOutcome(text=call.error, is_error=True))])
    a.step()
    second = fake.bodies()[1]["input"]
    assert second[2]["arguments"] == "{}"
    assert second[3]["output"].startswith("Error: ")


def test_failed_response_in_stream_is_retried(fake):
    fake.reset(Reply(text="x", error_event=True), Reply(text="fine"))
    a = agent()
    a.user("go")
    assert a.step().text == "fine" and len(fake.requests) == 2


def test_rate_limit_then_success_and_endpoint_error(fake):
    fake.reset(Reply(status=429), Reply(text="ok"))
    a = agent()
    a.user("go")
    assert a.step().text == "ok"
    fake.reset(default=Reply(status=503))
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status == 503 and len(fake.requests) == 3


def test_prune_replaces_old_images_in_outputs(fake):
    fake.reset(default=Reply(calls=[("submit", {})]))
    a = agent()
    a.user("start")
    for _ in range(3):
        turn = a.step()
        a.results([(turn.calls[0], ToolOutcome(text="shot", images=[SHOT]))])
    a.prune_images(1, 2)
    a.step()
    outputs = [i for i in fake.bodies()[-1]["input"] if i.get("type") == "function_call_output"]
    kinds = [[p["type"] for p in o["output"]] for o in outputs]
    assert kinds == [["input_text", "input_text"]] * 2 + [["input_text", "input_image"]]


def test_other_400_is_an_endpoint_error_not_an_effort_fallback(fake):
    """Told apart by the error's `param`, not its message (which here even mentions the effort)."""
    other = {
        "param": "input[0].content[1].image_url",
        "code": "image_too_large",
        "message": "Image too large for reasoning effort none",
    }
    fake.reset(default=Reply(status=400, error=other))
    a = agent("openai:gpt-6.2-sol@off")
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status == 400 and len(fake.requests) == 1
    assert a.info == {} and fake.bodies()[0]["reasoning"] == {"effort": "none"}


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_cut_mid_reply_is_retried(fake, cut):
    """A connection lost mid-reply reaches us as the SDK's APIConnectionError, which it does not retry."""
    fake.reset(Reply(calls=[("submit", {"why": "done"})], cut_after=4, cut=cut), Reply(text="whole"))
    a = agent()
    a.user("go")
    turn = a.step()
    assert turn.text == "whole" and turn.stop == "completed" and len(fake.requests) == 2


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_stream_always_cut_is_an_endpoint_error(fake, cut):
    fake.reset(default=Reply(calls=[("submit", {"why": "done"})], cut_after=4, cut=cut))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status is None and len(fake.requests) == 3


def test_stepper_shows_the_responses_history(fake):
    from evalkit.run.stepper import EpisodeStepper
    from tests.support.pictures import PictureEnv

    fake.reset(default=Reply(calls=[("look", {})]))
    st = EpisodeStepper("openai:gpt-6-sol", lambda: PictureEnv(), options=AgentOptions(max_retries=1))
    st.reset()
    assert isinstance(st.messages, list) and st.messages[0]["role"] == "user"
    st.step()
    assert [i.get("type") for i in st.messages[1:]] == ["reasoning", "function_call", "function_call_output"]
    assert st.request()["input"] is st.messages


@pytest.mark.parametrize("stream", [True, False])
def test_the_request_is_the_body_as_built_with_the_sdks_auth_and_headers(fake, stream, monkeypatch):
    """evalkit posts its body through the SDK's client without `create`'s walk of it (tens of milliseconds a
    call on a long conversation): the server gets the SDK's auth and headers and exactly the body built, and
    the output items go back without the nulls the SDK's models left out."""
    import json

    from tests.providers import fakes

    real = fakes.responses_output
    monkeypatch.setattr(fakes, "responses_output", lambda r, n: [{**i, "status": None} for i in real(r, n)])

    fake.reset(
        Reply(reasoning="Plan.", text="Submitting.", calls=[("submit", {})], encrypted="e"), Reply(text="ok")
    )
    a = agent(stream=stream, temperature=0.2)
    a.user("Do it.", [SHOT])
    turn = a.step()
    a.results([(turn.calls[0], ToolOutcome(text="graded"))])
    built = json.loads(json.dumps(a.params()))
    a.step()
    last = fake.requests[-1]
    assert last["headers"]["authorization"] == "Bearer test-key"
    assert last["headers"]["x-stainless-lang"] == "python"
    assert "openai/python" in last["headers"]["user-agent"].lower()
    assert last["body"] == ({"stream": True, **built} if stream else built)
    assert last["body"].get("stream") is (True if stream else None) and last["body"]["temperature"] == 0.2

    def nulls(node) -> int:
        if isinstance(node, dict):
            return sum(v is None or nulls(v) for v in node.values())
        return sum(map(nulls, node)) if isinstance(node, list) else 0

    assert nulls(last["body"]["input"]) == 0
