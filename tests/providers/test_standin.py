"""The stand-in model over the real Anthropic SDK: the tracer's moves with reasoning, usage and a cost, and
its scripted mistakes (a tool error, a parse error, an endpoint that stays down)."""

from __future__ import annotations

from evalkit.providers.standin import SPEC
from evalkit.records.transcripts import messages
from evalkit.run.episode import run_episode
from evalkit.types import AgentOptions


def test_the_stand_in_plays_and_errs_like_a_model(priced_standin, canvas_server, tmp_path):
    opts = AgentOptions(max_retries=1)
    recs = [run_episode(SPEC, canvas_server, t, mode="description", out=tmp_path, max_turns=6, options=opts)
            for t in ("canvas-test-0001", "canvas-test-0002", "canvas-test-0005")]  # fmt: skip
    tool_error, parse_error, down = recs
    assert tool_error.tool_errors == 1 and tool_error.reward == 1.0 and tool_error.end_reason == "submitted"
    assert parse_error.parse_errors == 1 and parse_error.reward == 1.0
    assert down.error_class == "endpoint_error" and down.reward is None and down.n_turns == 1
    for rec in recs:
        assert rec.model == SPEC and rec.cost_usd and rec.cost_usd > 0
        assert rec.usage["reasoning_tokens"] > 0 and rec.turns[0].reasoning.startswith("Turn 1.")
    later = parse_error.turns[-1].usage
    assert later["cache_read"] > 0  # the second request's prefix was the first one's
    said = [m for m in messages(tool_error, tmp_path) if m.role == "tool" and m.error]
    assert said and "e99" in said[0].text
