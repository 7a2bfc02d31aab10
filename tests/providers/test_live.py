"""One real episode per provider against the embedded canvas env. Needs keys; run with `pytest -m live`."""

from __future__ import annotations

import os

import pytest

from evalkit.providers import chat_completions
from evalkit.providers.common import load_env
from evalkit.run.episode import run_episode
from evalkit.types import AgentOptions

pytestmark = pytest.mark.live

LIVE = [
    ("anthropic:claude-sonnet-5@low", "ANTHROPIC_API_KEY"),
    ("openai:gpt-6-sol@low", "OPENAI_API_KEY"),
    ("hf:{EVALKIT_LIVE_HF_MODEL}", "HF_TOKEN"),
    ("vllm:{EVALKIT_LIVE_VLLM_MODEL}", "VLLM_BASE_URL"),
]


@pytest.mark.parametrize(("spec", "key"), LIVE)
def test_one_real_episode(spec, key, request, tmp_path):
    load_env()
    if not os.environ.get(key):
        pytest.skip(f"{key} is not set")
    if "{" in spec:
        name = spec[spec.index("{") + 1 : -1]
        if not os.environ.get(name):
            pytest.skip(f"set {name} to the model to try")
        spec = spec.format(**os.environ)
    if spec.startswith("hf:") and not (os.environ.get("HF_ROUTER_URL") or chat_completions.HF_ROUTER_DEFAULT):
        pytest.skip("set HF_ROUTER_URL")
    rec = run_episode(
        spec,
        request.getfixturevalue("canvas_server"),
        {"split": "test", "index": 0},
        out=tmp_path / "run",
        max_turns=4,
        options=AgentOptions(max_tokens=4000, max_retries=2, request_timeout=120),
    )
    assert rec.error_class is None, rec.error
    assert rec.n_turns >= 1 and rec.usage["input"] + rec.usage["cache_read"] > 0
