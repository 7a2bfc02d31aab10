"""The image budget over 30-turn episodes, checked in the request bodies a local server received: the target
travels in every request under every budget, after a provider switch and after a rejected prompt, and the
prompt prefix stays put between drops."""

from __future__ import annotations

import json

import pytest

from evalkit.providers import images
from evalkit.run.episode import run_episode
from evalkit.types import AgentOptions
from tests.providers.fakes import Reply, live_images, prefix_hits
from tests.support.pictures import TARGET, PictureEnv

TURNS = 30
APIS = [
    ("anthropic:claude-sonnet-5", "/v1/messages"),
    ("openai:gpt-6-sol", "/v1/responses"),
    ("hf:org/vlm:prov-a", "/v1/chat/completions"),
]
BUDGETS = {
    "none": AgentOptions(max_retries=1),
    "keep-2": AgentOptions(max_retries=1, keep_images=2),
    "keep-0": AgentOptions(max_retries=1, keep_images=0),
    "window-6,2": AgentOptions(max_retries=1, image_window=(6, 2)),
}


def look(body: dict) -> Reply:
    return Reply(calls=[("look", {})])


def episode(spec: str, options: AgentOptions):
    return run_episode(
        spec, lambda: PictureEnv(), "pictures-0", max_turns=TURNS, options=options, frames=False
    )


CASES = [(api, b) for api in APIS for b in ("keep-2", "window-6,2")] + [
    (APIS[0], "none"),
    (APIS[0], "keep-0"),
]


@pytest.mark.parametrize(("api", "budget"), CASES, ids=[f"{a[1].split('/')[-1]}-{b}" for a, b in CASES])
def test_target_in_every_request_and_prefix_stable_between_drops(fake, api, budget):
    spec, path = api
    fake.reset(default=look)
    options = BUDGETS[budget]
    rec = episode(spec, options)
    assert rec.error_class is None and rec.n_turns == TURNS, rec.error
    bodies = fake.bodies(path)
    assert len(bodies) == TURNS
    for body in bodies:
        assert live_images(body)[0].endswith(TARGET.b64), "the target must open every request"
    later = [len(live_images(b)) - 1 for b in bodies]
    hits = prefix_hits(bodies)
    b = images.budget(options.keep_images, options.image_window)
    if b is None:
        assert later == list(range(TURNS)) and all(hits)
        return
    # Between drops the history only grows (the cached prefix survives); a drop takes it back to `keep`.
    assert max(later) == b.most and min(later[b.most + 1 :]) == b.keep
    drops = [n for n in range(1, TURNS) if later[n] < later[n - 1]]
    assert drops == [n for n in range(1, TURNS) if not hits[n - 1]]
    assert all(d2 - d1 == b.most - b.keep + 1 for d1, d2 in zip(drops, drops[1:], strict=False))
    if options.keep_images is not None:
        assert b.most - b.keep + 1 == images.KEEP_BLOCK


def test_target_survives_a_provider_switch_and_a_rejected_prompt(fake):
    """prov-a dies at turn 12; prov-b refuses the prompt once at turn 20 (413): each time the target stays."""
    refused: list[str] = []

    def router(body: dict) -> Reply:
        turn = sum(m["role"] == "assistant" for m in body["messages"]) + 1
        if body["model"].endswith(":prov-a"):
            return Reply(status=500) if turn >= 12 else look(body)
        if turn == 20 and not refused:
            refused.append(json.dumps(body))
            return Reply(status=413)
        return look(body)

    fake.reset(default=router)
    rec = episode("hf:org/vlm:prov-a|prov-b", AgentOptions(max_retries=1, image_window=(8, 3)))
    assert rec.error_class is None and rec.n_turns == TURNS, rec.error
    bodies = fake.bodies()
    assert len(bodies) == TURNS + 2  # the failed request to prov-a and the refused one to prov-b
    assert all(TARGET.b64 in json.dumps(b) for b in bodies)
    assert rec.provider_switches == [
        {
            "turn": 12,
            "from": "org/vlm:prov-a",
            "to": "org/vlm:prov-b",
            "why": "server_error 500",
            "status": 500,
        }
    ]
    (prune,) = rec.info["rejected_prompt_prunes"]
    assert (prune["turn"], prune["route"], prune["status"]) == (20, "org/vlm:prov-b", 413)
    retried = bodies[[json.dumps(b) for b in bodies].index(refused[0]) + 1]
    assert len(live_images(retried)) == 2 and live_images(retried)[0].endswith(TARGET.b64)
    assert rec.turns[11].attempts == 2 and rec.turns[19].attempts == 2
    assert [a["kind"] for a in rec.turns[19].failed_attempts] == [
        "context_overflow"
    ]  # a 413: past the size it takes
