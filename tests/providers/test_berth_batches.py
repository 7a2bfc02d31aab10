"""An API model on the berth env, answered by the local fake server over each wire protocol: a long text
reasoning turn cut off by the output limit comes back as notes, the draft is checked (sent as a JSON string),
the plan submitted; the hf spec falls back from a failing provider route. Streams throughout."""

from __future__ import annotations

import json

import pytest

from evalkit.envs.embedded.berth.reference import frozen_row
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch
from evalkit.types import AgentOptions
from tests.providers.fakes import Reply

TASK = "berth-test-0008"
CUT = {"/v1/messages": "max_tokens", "/v1/responses": "max_output_tokens", "/v1/chat/completions": "length"}
SPECS = [
    ("anthropic:claude-sonnet-5@low", "/v1/messages"),
    ("openai:gpt-6-sol", "/v1/responses"),
    ("openai-chat:gpt-6-luna", "/v1/chat/completions"),
    ("hf:org/llm:prov-a|prov-b", "/v1/chat/completions"),
]


def best() -> list[dict]:
    return [{"vessel": v, "berth": b, "start": s} for v, b, s in frozen_row(TASK)["best_plan"]]


def planner(path: str):
    """Think at length and get cut off; with the notes back, check a draft; with its verdict, submit."""

    def reply(body: dict) -> Reply:
        if body.get("model", "").endswith(":prov-a"):
            return Reply(status=500)
        seen = json.dumps(body)
        if "<notes>" not in seen:
            thought = "V01 arrives first, B2 is closed, so hold V03 at anchorage. " * 150 + "ZEBRA-TAIL"
            return Reply(reasoning=thought, stop=CUT[path], signed=False, usage={"output": 4000})
        if "weighted_waiting" not in seen:
            return Reply(text="Checking.", calls=[("check_plan", {"plan": json.dumps(best())})])
        return Reply(text="Submitting.", calls=[("submit_plan", {"plan": best()})])

    return reply


@pytest.mark.parametrize(("spec", "path"), SPECS)
def test_an_api_model_plans_berths(fake, berth_server, tmp_path, spec, path):
    fake.reset(default=planner(path))
    run = run_batch(
        [spec], berth_server, out=tmp_path / "run", task_ids=[TASK], max_turns=6, progress=False,
        options=AgentOptions(max_retries=1, request_timeout=20, max_tokens=4000),
    )  # fmt: skip
    (rec,) = read_records(tmp_path / "run")
    assert run.errors == 0 and rec.error_class is None, rec.error
    assert rec.end_reason == "submitted" and rec.reward == 1.0 and rec.mode == "text"
    cut = rec.turns[0]
    assert cut.stop == CUT[path] and "ZEBRA-TAIL" in cut.reasoning and not cut.calls
    assert [p.tool for p in rec.plans] == ["check_plan", "submit_plan"] and rec.drafts == 1
    assert rec.plans[0].plan == best() and rec.plans[0].answer["feasible"]
    bodies = fake.bodies(path)
    assert all(b.get("stream") for b in bodies)
    after_cut = [b for b in bodies if "<notes>" in json.dumps(b)]
    assert after_cut and "ZEBRA-TAIL" in json.dumps(after_cut[0])
    assert "berth planner" in json.dumps(bodies[0]) and "Vessels to plan" in json.dumps(bodies[0])
    if spec.startswith("hf:"):
        assert rec.provider_switches and rec.provider_switches[0]["status"] == 500
