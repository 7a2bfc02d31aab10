"""A tiny batch per provider against the embedded canvas env, the model answered by the local fake server."""

from __future__ import annotations

import json

import pytest

from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch
from evalkit.types import AgentOptions
from tests.providers.fakes import Reply

RECT = {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40, "fill": "#ff0000"}


def _turns_so_far(body: dict) -> int:
    if "messages" in body:
        return sum(m["role"] == "assistant" for m in body["messages"])
    return sum(i.get("type") == "function_call" for i in body["input"])


def _tool_names(body: dict) -> list[str]:
    return [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools", [])]


def canvas_player(body: dict) -> Reply:
    """Add one rectangle, then submit; fail the first hf route; answer the @off probe."""
    if body.get("model", "").endswith(":prov-a"):
        return Reply(status=500)
    if _tool_names(body) == ["record"]:
        return Reply(calls=[("record", {"n": 7})])
    if _turns_so_far(body) == 0:
        return Reply(
            reasoning="Start with the red box.",
            text="Adding.",
            calls=[("add_element", RECT)],
            usage={"input": 900, "output": 60, "reasoning_tokens": 20},
        )
    return Reply(
        text="Submitting.", calls=[("submit", {})], usage={"input": 100, "cache_read": 900, "output": 20}
    )


SPECS = [
    ("anthropic:claude-sonnet-5@low", "/v1/messages", True),
    ("openai:gpt-6-sol", "/v1/responses", True),
    ("openai-chat:gpt-6-luna", "/v1/chat/completions", True),
    ("hf:org/vlm:prov-a|prov-b", "/v1/chat/completions", False),
    ("vllm:qwen3-vl@off", "/v1/chat/completions", False),
]


@pytest.mark.parametrize(("spec", "path", "priced"), SPECS)
def test_batch_against_canvas(fake, canvas_server, tmp_path, spec, path, priced):
    fake.reset(default=canvas_player)
    run = run_batch(
        [spec], canvas_server, out=tmp_path / "run", tasks=2, max_turns=3, concurrency=2, progress=False,
        options=AgentOptions(max_retries=1, request_timeout=20),
    )  # fmt: skip
    assert run.ran == 2 and run.errors == 0
    recs = list(read_records(tmp_path / "run"))
    assert len(recs) == 2
    for rec in recs:
        assert rec.model == spec and rec.error_class is None, rec.error
        assert rec.end_reason == "submitted" and rec.reward is not None
        assert rec.n_turns == 2 and rec.tool_calls == 2 and rec.parse_errors == 0
        # The thinking-off probe is billed to the episode that ran it (once per server and provider).
        probe = rec.info.get("probe_usage", {}).get("output", 0)
        assert rec.usage["output"] == 80 + probe and rec.usage["cache_read"] == 900
        assert (rec.cost_usd is not None) is priced
        assert rec.turns[0].calls[0].name == "add_element" and rec.turns[1].calls[0].name == "submit"
        answered_by = "prov-b" if spec.startswith("hf:") else spec.split(":")[0]
        assert [t.provider for t in rec.turns] == [answered_by] * 2 and all(t.route for t in rec.turns)
    bodies = [b for b in fake.bodies(path) if _tool_names(b) != ["record"]]
    assert all("add_element" in _tool_names(b) and "submit" in _tool_names(b) for b in bodies)
    # Reference mode: the target image travels in the opening message.
    image_types = ('"type": "image"', '"type": "input_image"', '"type": "image_url"')
    assert all(any(t in json.dumps(b) for t in image_types) for b in bodies)
    if spec.startswith("hf:"):
        # Each episode either met prov-a's 500 itself or started on prov-b because an earlier one had.
        for r in recs:
            (switch,) = r.provider_switches
            assert (switch["from"], switch["to"]) == ("org/vlm:prov-a", "org/vlm:prov-b")
            assert switch["status"] == 500 or switch["why"].startswith("cooling down"), switch
    if spec.endswith("@off"):
        assert all(r.info.get("thinking_off_method") for r in recs)
        assert sum(r.info.get("probe_usage", {}).get("output", 0) for r in recs) == 5


def test_batch_records_endpoint_errors_unscored(fake, canvas_server, tmp_path):
    fake.reset(default=Reply(status=500))
    opts = AgentOptions(max_retries=1)
    out = tmp_path / "run"
    run = run_batch(
        ["anthropic:claude-sonnet-5"],
        canvas_server,
        out=out,
        tasks=2,
        max_turns=3,
        progress=False,
        options=opts,
    )
    recs = list(read_records(tmp_path / "run"))
    assert run.errors == 2
    assert all(r.error_class == "endpoint_error" and r.reward is None for r in recs)


@pytest.mark.parametrize("spec", [s for s, _, priced in SPECS if priced])
def test_batch_records_streams_cut_mid_reply_as_endpoint_errors(fake, canvas_server, tmp_path, spec):
    fake.reset(default=Reply(calls=[("add_element", RECT)], cut_after=3))
    run = run_batch(
        [spec], canvas_server, out=tmp_path / "run", tasks=1, max_turns=3, progress=False,
        options=AgentOptions(max_retries=1),
    )  # fmt: skip
    recs = list(read_records(tmp_path / "run"))
    assert run.errors == 1 and len(recs) == 1
    assert recs[0].error_class == "endpoint_error" and recs[0].reward is None, recs[0].error


def test_batch_with_a_capped_turn_has_no_cost(fake, canvas_server, tmp_path):
    """The usage of a turn cut at the harness cap never arrives: the episode's cost is unknown, not low."""

    def chatty_then_submit(body: dict) -> Reply:
        if _turns_so_far(body) == 0:
            return Reply(text="la " * 2000, usage={"output": 3000})
        return Reply(calls=[("submit", {})], usage={"output": 20})

    fake.reset(default=chatty_then_submit)
    run_batch(
        ["openai-chat:gpt-6-luna"], canvas_server, out=tmp_path / "run", tasks=1, max_turns=3,
        progress=False, options=AgentOptions(max_retries=1, max_tokens=100),
    )  # fmt: skip
    (rec,) = read_records(tmp_path / "run")
    assert rec.error_class is None and rec.turns[0].stop == "length (harness cap)", rec.error
    assert rec.info.get("usage_unknown_turns") == 1 and rec.cost_usd is None


def test_turns_name_the_provider_and_route_that_answered_each(fake, canvas_server, tmp_path):
    """`hf:org/m:a|b`: prov-a answers the first turn and fails the second, prov-b answers it; `turns()` says
    so per turn, without rebuilding it from the switches and failed attempts."""
    from evalkit.analysis import turns

    def player(body: dict) -> Reply:
        if body.get("model", "").endswith(":prov-a") and _turns_so_far(body) >= 1:
            return Reply(status=500)
        if _turns_so_far(body) == 0:
            return Reply(text="Adding.", calls=[("add_element", RECT)])
        return Reply(text="Submitting.", calls=[("submit", {})])

    fake.reset(default=player)
    run_batch(["hf:org/vlm:prov-a|prov-b"], canvas_server, out=tmp_path, tasks=1, max_turns=3, concurrency=1,
              progress=False, options=AgentOptions(max_retries=1, request_timeout=20))  # fmt: skip
    t = turns([tmp_path]).sort("turn")
    assert t["provider"].to_list() == ["prov-a", "prov-b"]
    assert t["route"].to_list() == ["org/vlm:prov-a", "org/vlm:prov-b"]
    [rec] = read_records(tmp_path)
    assert rec.turns[1].failed_attempts[0]["route"] == "org/vlm:prov-a" and rec.turns[1].provider == "prov-b"
