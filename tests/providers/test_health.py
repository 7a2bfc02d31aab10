"""Provider health over a run: fall back on any failure that is the provider's, remember it across the
episodes of a batch with a cool-down, and probe the thinking-off switch per provider."""

from __future__ import annotations

import warnings

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import make_agent
from evalkit.providers.health import ProviderHealth, provider_failure
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch
from evalkit.types import AgentOptions, Attempt, ToolSpec
from tests.providers.fakes import Reply
from tests.providers.test_batches import RECT, _tool_names, _turns_so_far

TOOLS = [ToolSpec("add_element", "Add a shape.", {"type": "object", "properties": {}})]
A, B = "org/m:prov-a", "org/m:prov-b"
SPEC = "hf:org/m:prov-a|prov-b"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def agent(spec=SPEC, health=None, stream=True, **opts):
    opts.setdefault("max_retries", 2)
    a = make_agent(spec, system="s", tools=TOOLS, options=AgentOptions(**opts), health=health)
    a.stream = stream
    return a


def models(fake) -> list[str]:
    return [b["model"] for b in fake.bodies()]


# ---- the record of failures -------------------------------------------------------------------------------


def test_cool_down_then_one_trial_then_doubling():
    clock = Clock()
    h = ProviderHealth(cooldown=60, clock=clock)
    routes = ["a", "b", "c"]
    assert h.choose(routes) == "a"
    h.failed("a", "server_error 500")
    assert h.choose(routes) == "b" and "server_error 500" in h.note("a")
    clock.t += 59
    assert h.choose(routes) == "b"
    clock.t += 2
    assert h.choose(routes) == "a"  # the cool-down is over: one caller tries it...
    assert h.choose(routes) == "b"  # ...while the others keep away
    h.failed("a", "timeout")  # the trial failed: twice as long now
    clock.t += 119
    assert h.choose(routes) == "b"
    clock.t += 2
    assert h.choose(routes) == "a"
    h.succeeded("a")
    assert h.choose(routes) == "a" and h.note("a") is None and h.snapshot() == {}


def test_every_route_down_tries_the_one_that_recovers_first_and_a_long_wait_is_honoured():
    clock = Clock()
    h = ProviderHealth(cooldown=60, clock=clock)
    h.failed("a", "rate_limited 429", wait=600)
    clock.t += 10
    h.failed("b", "timeout")
    assert h.choose(["a", "b"]) == "b"  # b recovers at +70, a only at +600
    assert h.choose(["a", "b"], exclude=["b"]) == "a"
    assert h.choose(["a", "b"], exclude=["a", "b"]) is None
    assert h.snapshot()["a"]["seconds_left"] == 590


class _Rejection(Exception):
    def __init__(self, body):
        self.body = body


@pytest.mark.parametrize(
    ("status", "body", "providers_fault"),
    [
        (None, None, True),  # timeouts, lost connections, cut streams
        (500, None, True),
        (503, None, True),
        (429, None, True),
        (408, None, True),
        (409, None, True),
        (402, None, True),
        (403, None, True),
        (404, None, True),
        (400, {"error": {"param": "model", "code": "model_not_supported"}}, True),
        (400, {"code": "model_not_found"}, True),
        (422, {"error": {"param": "model"}}, True),
        (400, {"error": {"param": "messages", "code": "context_length_exceeded"}}, False),
        (400, {"error": {"message": "the model is not supported by this provider"}}, False),  # text: not read
        (400, None, False),
        (401, None, False),
    ],
)
def test_whose_fault_by_status_and_error_fields(status, body, providers_fault):
    attempt = Attempt(route=A, status=status)
    assert provider_failure(attempt, _Rejection(body)) is providers_fault


# ---- falling back -----------------------------------------------------------------------------------------


def dead_a(failure: Reply):
    def script(body: dict) -> Reply:
        return failure if body["model"] == A else Reply(text="from b", usage={"output": 7})

    return script


FAILURES = {
    "500": Reply(status=500),
    "503": Reply(status=503),
    "429-long-wait": Reply(status=429, retry_after=3600),
    "timeout": Reply(text="late", delay=1.0),
    "stream-cut": Reply(calls=[("add_element", {"kind": "rect"})], cut_after=3),
    "error-event": Reply(reasoning="r", error_event=True),
    "404": Reply(status=404),
    "400-names-the-model": Reply(status=400, error={"param": "model", "code": "model_not_supported"}),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_falls_back_at_once_on_a_providers_failure(fake, failure):
    fake.reset(default=dead_a(FAILURES[failure]))
    a = agent(request_timeout=0.3)
    a.user("go")
    turn = a.step()
    assert turn.text == "from b" and models(fake) == [A, B]
    assert fake.waits == []  # no back-off spent on a provider with another behind it
    (switch,) = a.info["provider_switches"]
    assert (switch["from"], switch["to"], switch["turn"]) == (A, B, 1)
    assert switch["why"].split()[0] == turn.attempts[0].kind and turn.attempts[0].route == A
    assert turn.usage.output == 7


@pytest.mark.parametrize("status", [400, 401])
def test_a_request_no_provider_would_take_ends_the_call(fake, status):
    fake.reset(default=dead_a(Reply(status=status)))
    a = agent()
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert info.value.status == status and models(fake) == [A]
    assert "provider_switches" not in a.info


def test_last_provider_left_keeps_its_retries(fake):
    fake.reset(default=lambda body: Reply(status=500))
    a = agent(max_retries=2)
    a.user("go")
    with pytest.raises(EndpointError) as info:
        a.step()
    assert models(fake) == [A, B, B, B] and len(info.value.attempts) == 4
    assert "after 4 requests" in str(info.value)


def test_a_recovered_provider_is_tried_again_after_its_cool_down(fake):
    """Agents sharing one health, as the episodes of a batch do; time moves by the clock, not by sleeping."""
    clock = Clock()
    health = ProviderHealth(cooldown=300, clock=clock)
    alive = {A: False}
    fake.reset(
        default=lambda body: (
            Reply(text=body["model"]) if alive.get(body["model"], True) else Reply(status=500)
        )
    )

    def episode():
        a = agent(health=health)
        a.user("go")
        return a, a.step()

    first, turn = episode()
    assert turn.text == B and first.info["provider_switches"][0]["status"] == 500
    second, turn = episode()
    assert turn.text == B and second.info["provider_switches"][0]["why"].startswith("cooling down")
    alive[A] = True
    clock.t += 301
    third, turn = episode()
    assert turn.text == A and "provider_switches" not in third.info
    assert models(fake) == [A, B, B, A]


# ---- over a batch -----------------------------------------------------------------------------------------


def canvas_on_b(body: dict) -> Reply:
    """prov-a is dead; prov-b adds a rectangle, then submits."""
    if body["model"].endswith(":prov-a"):
        return Reply(status=500)
    if _turns_so_far(body) == 0:
        return Reply(calls=[("add_element", RECT)])
    return Reply(calls=[("submit", {})])


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_dead_first_provider_costs_one_request_per_batch(fake, canvas_server, tmp_path, concurrency):
    fake.reset(default=canvas_on_b)
    run = run_batch(
        ["hf:org/vlm:prov-a|prov-b"], canvas_server, out=tmp_path / "run", tasks=6, max_turns=3,
        concurrency=concurrency, progress=False, options=AgentOptions(max_retries=2),
    )  # fmt: skip
    assert run.ran == 6 and run.errors == 0
    dead = [b for b in fake.bodies() if b["model"].endswith(":prov-a")]
    # Only the episodes already waiting on prov-a when it first failed met it; the rest passed it over.
    assert 1 <= len(dead) <= concurrency
    recs = list(read_records(tmp_path / "run"))
    met = [r for r in recs if r.provider_switches[0]["status"] == 500]
    passed = [r for r in recs if r.provider_switches[0]["why"].startswith("cooling down")]
    assert len(met) == len(dead) and len(met) + len(passed) == 6
    assert all(r.turns[0].attempts == (2 if r in met else 1) for r in recs)


# ---- thinking off, per provider ---------------------------------------------------------------------------


def _is_probe(body: dict) -> bool:
    return _tool_names(body) == ["record"]


def effort_none_works(body: dict) -> Reply:
    """A provider that ignores the chat-template flag but honours reasoning_effort=none."""
    if _is_probe(body):
        off = body.get("reasoning_effort") == "none"
        return Reply(reasoning="" if off else "thinking about 7", calls=[("record", {"n": 7})])
    return Reply(text="real turn", reasoning="" if body.get("reasoning_effort") == "none" else "oops")


def template_works(body: dict) -> Reply:
    off = (body.get("chat_template_kwargs") or {}).get("enable_thinking") is False
    if _is_probe(body):
        return Reply(reasoning="" if off else "thinking", calls=[("record", {"n": 7})])
    return Reply(text="real turn", reasoning="" if off else "oops")


def test_probe_skips_a_dead_provider_and_switches_the_good_one_off(fake):
    fake.reset(default=lambda body: Reply(status=500) if body["model"] == A else effort_none_works(body))
    a = agent(SPEC + "@off", stream=False)
    a.user("go")
    turn = a.step()
    assert turn.text == "real turn" and turn.reasoning == ""
    assert models(fake).count(A) == 1 and fake.waits == []
    probes = [b for b in fake.bodies() if _is_probe(b) and b["model"] == B]
    assert [p.get("reasoning_effort") for p in probes] == [None, "none"]
    assert a.info["thinking_off"] == {B: {"method": "reasoning_effort=none", "reasoning": 0}}
    assert a.info["thinking_off_method"] == "reasoning_effort=none"
    assert a.info["provider_switches"][0]["why"] == "server_error 500"
    assert a.info["probe_usage"]["output"] == 10  # two probe replies of 5 tokens each


def test_each_provider_gets_its_own_switch(fake):
    """prov-a takes the template flag; it dies at turn 2, and prov-b (effort only) is probed then."""

    def script(body: dict) -> Reply:
        if body["model"] == A:
            turns = sum(m["role"] == "assistant" for m in body["messages"])
            return Reply(status=503) if turns >= 1 and not _is_probe(body) else template_works(body)
        return effort_none_works(body)

    fake.reset(default=script)
    a = agent(SPEC + "@off")
    a.user("go")
    assert a.step().reasoning == ""
    a.user("again")
    assert a.step().reasoning == ""
    real = [b for b in fake.bodies() if not _is_probe(b)]
    assert real[0]["chat_template_kwargs"] == {"enable_thinking": False} and "reasoning_effort" not in real[0]
    assert real[-1]["model"] == B and real[-1]["reasoning_effort"] == "none"
    assert "chat_template_kwargs" not in real[-1]
    assert a.info["thinking_off"] == {
        A: {"method": "chat_template_kwargs.enable_thinking=false", "reasoning": 0},
        B: {"method": "reasoning_effort=none", "reasoning": 0},
    }
    assert a.info["thinking_off_method"] == "reasoning_effort=none"


def test_a_provider_refusing_every_switch_is_recorded_not_only_warned(fake):
    fake.reset(default=lambda body: Reply(status=400) if _is_probe(body) else Reply(text="thinking on"))
    a = agent("vllm:stubborn@off")
    a.user("go")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert a.step().text == "thinking on"
    assert any("refused every way" in str(w.message) for w in caught)
    assert a.info["thinking_off"] == {"stubborn": {"method": None, "reasoning": None}}
    assert a.info["thinking_off_method"] is None
