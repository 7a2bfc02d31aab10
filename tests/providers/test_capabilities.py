"""Requests every model accepts: what the capability table decides per model, and the one-time fallback when
the API still refuses a feature — the providers' documented 400 bodies answered byte for byte by the local
server to the real SDK clients."""

from __future__ import annotations

import json

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import capabilities, make_agent
from evalkit.providers.capabilities import table_caps
from evalkit.providers.thinking import claude_params as thinking_params
from evalkit.providers.thinking import responses_params as reasoning_params
from evalkit.types import AgentOptions, Image, ToolSpec
from tests.providers.fakes import Reply

TOOLS = [ToolSpec("submit", "Finish.", {"type": "object", "properties": {}})]
PNG = Image(b"\x89PNG fake", "image/png")


def agent(spec, **opts):
    return make_agent(spec, system="Be brief.", tools=TOOLS, options=AgentOptions(max_retries=1, **opts))


def claude_400(message: str) -> dict:
    """An Anthropic error body: a type and a message, nothing else to read."""
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message},
            "request_id": "req_011CVQe1dLrGNMJyE1ghG1av"}  # fmt: skip


ADAPTIVE_REFUSED = claude_400("adaptive thinking is not supported on this model")
ENABLED_REFUSED = claude_400(
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
DISABLED_REFUSED = claude_400(
    '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)


def openai_400(message: str, param: str, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


SUMMARY_REFUSED = openai_400(
    "Unsupported parameter: 'reasoning.summary' is not supported with this model.",
    "reasoning.summary",
    "unsupported_parameter",
)
UNVERIFIED = openai_400(
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify Organization.",
    "reasoning.summary",
    "unsupported_value",
)
EFFORT_REFUSED = openai_400(
    "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
    "reasoning.effort",
    "unsupported_parameter",
)
CHAT_EFFORT_REFUSED = openai_400(
    "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
    "reasoning_effort",
    "unsupported_parameter",
)


# ---- the table ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "thinking", "effort", "off"),
    [
        ("claude-3-7-sonnet-20250219", "budgeted", False, "disabled"),
        ("claude-sonnet-4-0", "budgeted", False, "disabled"),
        ("claude-sonnet-4-5-20250929", "budgeted", False, "disabled"),
        ("claude-haiku-4-5-20251001", "budgeted", False, "disabled"),
        ("claude-opus-4-5", "budgeted", True, "disabled"),
        ("claude-sonnet-4-6", "adaptive", True, "disabled"),
        ("claude-opus-4-8", "adaptive", True, "disabled"),
        ("claude-sonnet-5", "adaptive", True, "disabled"),
        ("claude-sonnet-5-5", "adaptive", True, "between_tools"),
        ("claude-opus-5-5", "adaptive", True, "omit"),
        ("claude-fable-5-1", "adaptive", True, "omit"),
        ("claude-3-5-haiku-20241022", "none", False, "disabled"),
        ("claude-from-next-year", "adaptive", True, "disabled"),  # unknown: the newest request shape
    ],
)
def test_claude_rows(model, thinking, effort, off):
    c = table_caps("anthropic", model)
    assert (c.thinking, c.effort, c.off) == (thinking, effort, off)


def test_claude_requests_per_row():
    budgeted, adaptive = (
        table_caps("anthropic", "claude-sonnet-4-5"),
        table_caps("anthropic", "claude-sonnet-5"),
    )
    assert thinking_params("low", budgeted, 16000) == {"thinking": {"type": "enabled", "budget_tokens": 2000}}
    assert thinking_params("high", budgeted, 16000)["thinking"]["budget_tokens"] == 8000
    assert (
        thinking_params("low", budgeted, 1024) == {}
    )  # no room to think below max_tokens: no thinking field
    assert thinking_params("medium", adaptive) == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "medium"},
    }
    assert thinking_params("off", table_caps("anthropic", "claude-opus-5-5")) == {
        "output_config": {"effort": "low"}
    }
    assert thinking_params("off", table_caps("anthropic", "claude-sonnet-5-5")) == {
        "thinking": {"type": "between_tools"}
    }
    assert thinking_params("low", table_caps("anthropic", "claude-opus-4-5"))["output_config"] == {
        "effort": "low"
    }


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-4.1", None),
        ("gpt-4o-mini", None),
        ("o3-mini", {"summary": "auto", "effort": "low"}),
        ("gpt-5", {"summary": "auto", "effort": "minimal"}),
        ("gpt-5.1", {"effort": "none"}),
        ("gpt-6-sol", {"effort": "none"}),
    ],
)
def test_openai_rows_for_off(model, reasoning):
    assert reasoning_params("off", table_caps("openai", model)) == reasoning


def test_a_users_file_comes_first(tmp_path, monkeypatch):
    mine = tmp_path / "caps.json"
    mine.write_text(json.dumps({"anthropic": {"claude-sonnet-5*": {"thinking": "budgeted"}}}))
    monkeypatch.setenv(capabilities.OVERRIDE_VARIABLE, str(mine))
    capabilities.forget()
    try:
        assert table_caps("anthropic", "claude-sonnet-5").thinking == "budgeted"
        assert table_caps("anthropic", "claude-opus-5").thinking == "adaptive"
        mine.write_text(json.dumps({"anthropic": {"claude-*": {"thinks": "yes"}}}))
        capabilities.forget()
        with pytest.warns(RuntimeWarning, match="unknown fields"):
            assert table_caps("anthropic", "claude-sonnet-5").thinking == "adaptive"
    finally:
        monkeypatch.delenv(capabilities.OVERRIDE_VARIABLE)
        capabilities.forget()


# ---- the 400 fallbacks -------------------------------------------------------------------------------------


def test_a_claude_refusing_adaptive_thinking_is_run_with_budgeted_thinking_once(fake, caplog):
    """A model the table does not know, which answers adaptive thinking with the documented 400: asked again
    with a budget, the fallback kept in the record, said once, and a later episode starts from it."""
    fake.reset(Reply(status=400, error_body=ADAPTIVE_REFUSED), Reply(text="a"), Reply(text="b"))
    first = agent("anthropic:claude-haiku-6@low")
    first.user("go")
    assert first.step().text == "a"
    thinking = [b.get("thinking") for b in fake.bodies()]
    assert thinking == [
        {"type": "adaptive", "display": "summarized"},
        {"type": "enabled", "budget_tokens": 2000},
    ]
    assert "output_config" in fake.bodies()[0] and "output_config" in fake.bodies()[1]
    (fallback,) = first.info["fallbacks"]
    assert fallback["asked"] == "adaptive thinking at effort low" and fallback["status"] == 400
    assert fallback["sent"] == "budgeted thinking (budget_tokens 2000) at effort low"
    assert "adaptive thinking is not supported" in fallback["error"]
    said = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(said) == 1 and "claude-haiku-6" in said[0] and "budget_tokens 2000" in said[0]

    later = agent("anthropic:claude-haiku-6@high")
    later.user("go")
    later.step()
    assert fake.bodies()[-1]["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert len(fake.bodies()) == 3  # no second 400
    assert [f["turn"] for f in later.info["fallbacks"]] == [0]
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1


def test_the_refused_request_is_accounted_for_in_the_turn(fake):
    fake.reset(Reply(status=400, error_body=ADAPTIVE_REFUSED), Reply(text="a"))
    a = agent("anthropic:claude-haiku-6@medium")
    a.user("go")
    turn = a.step()
    assert [(x.status, x.kind) for x in turn.attempts] == [(400, "rejected")]


@pytest.mark.parametrize(
    ("spec", "body", "then"),
    [
        ("anthropic:claude-opus-6@low", ENABLED_REFUSED, {"type": "adaptive", "display": "summarized"}),
        ("anthropic:claude-opus-6@off", DISABLED_REFUSED, None),
    ],
)
def test_claude_refusing_budgets_or_thinking_off(fake, spec, body, then):
    """A user's row claiming budgets (or an @off the model cannot honour): the model's own 400 puts it
    right."""
    if "enabled" in json.dumps(body):
        capabilities.learn(
            "anthropic", "claude-opus-6", {"thinking": "budgeted"}, {"asked": "-", "sent": "-"}
        )
    fake.reset(Reply(status=400, error_body=body), Reply(text="a"))
    a = agent(spec)
    a.user("go")
    a.step()
    first, second = fake.bodies()
    assert second.get("thinking") == then
    if then is None:  # thinking cannot be turned off: the lowest effort instead
        assert first["thinking"] == {"type": "disabled"} and second["output_config"] == {"effort": "low"}


def test_an_unrelated_claude_400_is_an_endpoint_error(fake):
    fake.reset(default=Reply(status=400, error_body=claude_400("messages: roles must alternate")))
    a = agent("anthropic:claude-haiku-6@low")
    a.user("go")
    with pytest.raises(EndpointError):
        a.step()
    assert len(fake.requests) == 1 and "fallbacks" not in a.info


@pytest.mark.parametrize("body", [SUMMARY_REFUSED, UNVERIFIED])
def test_responses_summary_refused_is_dropped(fake, body):
    fake.reset(Reply(status=400, error_body=body), Reply(text="a"))
    a = agent("openai:gpt-6-sol@high")
    a.user("go")
    assert a.step().text == "a"
    first, second = fake.bodies()
    assert first["reasoning"] == {"summary": "auto", "effort": "high"} and second["reasoning"] == {
        "effort": "high"
    }
    assert a.info["fallbacks"][0]["feature"] == "summary"


def test_gpt_4_1_gets_no_reasoning_object_from_the_table(fake):
    fake.reset(Reply(text="a"))
    a = agent("openai:gpt-4.1")
    a.user("go")
    a.step()
    body = fake.bodies()[0]
    assert "reasoning" not in body and "include" not in body and "fallbacks" not in a.info


def test_responses_reasoning_refused_by_an_unknown_model(fake):
    fake.reset(Reply(status=400, error_body=EFFORT_REFUSED), Reply(text="a"))
    a = agent("openai:my-fine-tune@low")
    a.user("go")
    a.step()
    assert "reasoning" not in fake.bodies()[1] and a.info["fallbacks"][0]["sent"] == "no reasoning object"


def test_chat_reasoning_effort_refused(fake):
    fake.reset(Reply(status=400, error_body=CHAT_EFFORT_REFUSED), Reply(text="a"), Reply(text="b"))
    a = agent("vllm:my-model@medium")
    a.user("go")
    a.step()
    a.user("again")
    a.step()
    efforts = [b.get("reasoning_effort") for b in fake.bodies()]
    assert efforts == ["medium", None, None]
    assert a.info["fallbacks"][0]["sent"] == "no reasoning_effort"


def test_a_model_without_image_input_gets_a_line_instead(fake):
    fake.reset(default=Reply(text="a"))
    a = agent("openai:o3-mini")
    a.user("Recreate this.", [PNG])
    a.step()
    a.results([])
    content = fake.bodies()[0]["input"][0]["content"]
    assert [p["type"] for p in content] == ["input_text"]
    assert "1 image(s) not shown" in content[0]["text"] and a.info["images_withheld"] == 1
    b = agent("openai:gpt-6-sol")
    b.user("Recreate this.", [PNG])
    b.step()
    assert [p["type"] for p in fake.bodies()[-1]["input"][0]["content"]] == ["input_text", "input_image"]
