"""What the three wire agents share (`evalkit.providers.agent.WireAgent`), through the real SDK clients
against the local fake server; and the SDKs imported only when a request is made."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evalkit.errors import EndpointError
from evalkit.providers import make_agent
from evalkit.types import AgentOptions, ToolSpec
from tests.providers.fakes import Reply
from tests.providers.test_capabilities import ADAPTIVE_REFUSED, CHAT_EFFORT_REFUSED

TOOLS = [ToolSpec("submit", "Finish.", {"type": "object", "properties": {}})]
WIRES = ["anthropic:claude-sonnet-5", "openai:gpt-6-sol", "openai-chat:gpt-6-luna", "hf:org/m:a|b"]


def agent(spec: str):
    return make_agent(spec, system="Be brief.", tools=TOOLS, options=AgentOptions(max_retries=1))


def history(body: dict) -> list[dict]:
    return body.get("messages") or body.get("input") or []


@pytest.mark.parametrize("spec", WIRES)
def test_an_empty_user_turn_sends_no_empty_message_on_any_wire(fake, spec):
    """Every API refuses a message with no content: an empty user turn (a debugger's inject) adds none, and
    the next user turn is the opening."""
    fake.reset(default=Reply(text="ok"))
    a = agent(spec)
    a.user("")
    a.user("Go.")
    a.step()
    users = [m for m in history(fake.bodies()[-1]) if m.get("role") == "user"]
    assert [[p.get("text") for p in m["content"]] for m in users] == [["Go."]]


def test_a_fallback_learned_after_an_agent_was_made_is_in_its_record(fake):
    """An episode's agent is made before a concurrent one learns that the model refuses adaptive thinking:
    its first request is built from what was learned, and its record says so (turn 0), as for an agent made
    after."""
    fake.reset(Reply(status=400, error_body=ADAPTIVE_REFUSED), Reply(text="a"), Reply(text="b"))
    waiting, first = agent("anthropic:claude-haiku-6@low"), agent("anthropic:claude-haiku-6@low")
    first.user("go")
    first.step()
    waiting.user("go")
    waiting.step()
    assert fake.bodies()[-1]["thinking"]["type"] == "enabled"
    assert [(f["turn"], f["feature"]) for f in waiting.info["fallbacks"]] == [(0, "thinking")]


def test_a_refusal_of_what_the_fallback_already_dropped_is_not_asked_again(fake):
    """`@off` on a server whose probe took `reasoning_effort: none` but whose real requests refuse it: the
    fallback to no effort leaves the probe's switch in the request, so the next request is refused alike.
    The call ends there (the server's 400 is the request's), instead of asking again without end."""
    real: list[dict] = []

    def server(body: dict) -> Reply:
        if body["tools"][0]["function"]["name"] == "record":  # the @off probe: effort none works
            off = body.get("reasoning_effort") == "none"
            return Reply(reasoning="" if off else "thinking about 7", calls=[("record", {"n": 7})])
        real.append(body)
        return Reply(status=400, error_body=CHAT_EFFORT_REFUSED) if len(real) <= 8 else Reply(text="a")

    fake.reset(default=server)
    a = agent("vllm:qwen3@off")
    a.user("go")
    with pytest.raises(EndpointError):
        a.step()
    assert len(real) == 2 and [f["feature"] for f in a.info["fallbacks"]] == ["effort"]


def test_the_sdks_are_imported_only_when_a_request_is_made():
    """The wire modules import their SDK through `common.sdk` when an agent is made, and the package keeps
    httpx and Pillow for where they are needed: importing them (as `evalkit.run` does) costs none of these."""
    code = (
        "import sys\n"
        "import evalkit.providers, evalkit.providers.agent, evalkit.providers.anthropic\n"
        "import evalkit.providers.openai_responses, evalkit.providers.chat_completions\n"
        "print(sorted(m for m in ('anthropic', 'openai', 'httpx', 'PIL') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
