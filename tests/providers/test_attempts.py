"""Every request of a model call accounted for: classified by type and status, retried by policy, its
reported usage counted, and the record's cost unknown whenever some request may have been billed unseen."""

from __future__ import annotations

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import make_agent
from evalkit.providers.prices import cost_usd
from evalkit.run.episode import run_episode
from evalkit.serving import free_port
from evalkit.types import AgentOptions, ToolSpec, Usage
from tests.providers.fakes import Reply
from tests.support.pictures import PictureEnv

TOOLS = [ToolSpec("look", "Take a screenshot.")]


def agent(spec, **opts):
    opts.setdefault("max_retries", 2)
    return make_agent(spec, system="s", tools=TOOLS, options=AgentOptions(**opts))


@pytest.mark.parametrize(
    ("spec", "reported"),
    [
        ("anthropic:claude-sonnet-5", (1000, 1)),  # message_start reports input (and 1 output) before the cut
        ("openai:gpt-6-sol", (0, 0)),  # usage only comes with the final event
        ("openai-chat:gpt-6-luna", (0, 0)),  # ... and with the last chunk
    ],
)
def test_a_stream_cut_mid_reply_counts_what_it_reported_and_makes_usage_unknown(fake, spec, reported):
    fake.reset(
        Reply(calls=[("look", {})], usage={"input": 1000, "output": 50}, cut_after=4),
        Reply(calls=[("look", {})], usage={"input": 1000, "output": 50}),
    )
    a = agent(spec)
    a.user("go")
    turn = a.step()
    assert [x.kind for x in turn.attempts] == ["stream_cut"] and not turn.usage_known
    assert (turn.usage.input, turn.usage.output) == (1000 + reported[0], 50 + reported[1])
    assert len(fake.waits) == 1  # one back-off before the retry


def test_an_http_error_bills_nothing_and_leaves_usage_known(fake):
    fake.reset(Reply(status=500), Reply(text="ok", usage={"input": 10, "output": 5}))
    a = agent("openai:gpt-6-sol")
    a.user("go")
    turn = a.step()
    (failed,) = turn.attempts
    assert (failed.kind, failed.status, failed.usage_known, failed.retry_after) == (
        "server_error",
        500,
        True,
        0.005,
    )
    assert turn.usage_known and turn.usage.output == 5 and fake.waits == [0.005]


def test_a_timeout_names_the_url_and_leaves_usage_unknown(fake):
    fake.reset(default=Reply(text="late", delay=1.0))
    a = agent("anthropic:claude-sonnet-5", max_retries=0, request_timeout=0.2)
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    (failed,) = info.value.attempts
    assert failed.kind == "timeout" and not failed.usage_known
    assert f"{fake.url}/v1/messages" in str(info.value)


def test_a_connection_error_names_the_url_and_is_retried(fake, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("VLLM_BASE_URL", url)
    a = agent("vllm:m", max_retries=1)
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert f"could not connect to {url}/chat/completions" in str(info.value)
    assert [x.kind for x in info.value.attempts] == ["no_connection"] * 2
    assert all(x.usage_known for x in info.value.attempts) and len(fake.waits) == 1


# ---- in the record ----------------------------------------------------------------------------------------


def looks(n_cut: int = 0, n_500: int = 0, fail_from: int | None = None):
    """A model that looks every turn, after `n_cut` cut streams and `n_500` server errors at turn 1; every
    request from turn `fail_from` on fails with a 500."""
    state = {"cut": n_cut, "500": n_500}

    def script(body: dict) -> Reply:
        turn = sum(m["role"] == "assistant" for m in body["messages"]) + 1
        if fail_from is not None and turn >= fail_from:
            return Reply(status=500)
        if state["cut"]:
            state["cut"] -= 1
            return Reply(calls=[("look", {})], usage={"input": 1000}, cut_after=4)
        if state["500"]:
            state["500"] -= 1
            return Reply(status=500)
        return Reply(calls=[("look", {})], usage={"input": 1000, "output": 20})

    return script


def episode(max_turns=3, **opts):
    opts.setdefault("max_retries", 2)
    return run_episode(
        "anthropic:claude-sonnet-5", lambda: PictureEnv(), max_turns=max_turns, options=AgentOptions(**opts)
    )


def test_a_turn_retried_after_a_cut_stream_shows_it_and_has_no_cost(fake):
    fake.reset(default=looks(n_cut=1))
    rec = episode()
    assert rec.error_class is None, rec.error
    first = rec.turns[0]
    assert first.attempts == 2 and first.failed_attempts[0]["kind"] == "stream_cut" and not first.usage_known
    assert first.usage["input"] == 2000  # the cut request's reported input counts too
    assert all(t.attempts == 1 and t.usage_known for t in rec.turns[1:])
    assert rec.usage["input"] == 4000 and rec.info["usage_unknown_turns"] == 1
    assert rec.cost_usd is None


def test_a_turn_retried_after_server_errors_keeps_a_cost(fake):
    fake.reset(default=looks(n_500=2))
    rec = episode()
    assert rec.turns[0].attempts == 3 and [a["status"] for a in rec.turns[0].failed_attempts] == [500, 500]
    assert rec.cost_usd == cost_usd(rec.model, Usage(input=3000, output=60)) and rec.cost_usd > 0


def test_a_failed_episode_costs_what_it_spent_or_null_never_zero(fake):
    fake.reset(default=looks(fail_from=2))
    spent = episode(max_retries=1)
    assert spent.error_class == "endpoint_error" and spent.reward is None
    assert spent.info["failed_turn"]["turn"] == 2 and spent.info["failed_turn"]["attempts"] == 2
    assert spent.cost_usd == cost_usd(spent.model, Usage(input=1000, output=20))

    fake.reset(default=lambda body: Reply(calls=[("look", {})], usage={"input": 1000}, cut_after=4))
    unknown = episode(max_retries=1)
    assert unknown.error_class == "endpoint_error" and unknown.cost_usd is None
    assert unknown.usage["input"] == 2000  # what the cut streams did report
