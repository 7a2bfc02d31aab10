"""Prices: genai-prices' data for the provider that served each request (tiers, cache rates), the user's
file over it model by model, unknown never guessed, nothing fetched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import genai_prices
import pytest

from evalkit.providers import prices
from evalkit.types import EpisodeRecord, TurnRecord, Usage

ROOT = Path(__file__).resolve().parents[2]
MILLION = 1_000_000

OLD_TABLE = {
    "claude-fable-5-1": {"input": 10.0, "output": 50.0, "cache_read": 0.25, "cache_write": 12.5},
    "claude-opus-5-5": {"input": 4.0, "output": 20.0, "cache_read": 0.2, "cache_write": 5.0},
    "claude-opus-5": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
    "claude-opus-4-5": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
    "claude-sonnet-5-5": {"input": 2.0, "output": 10.0, "cache_read": 0.2, "cache_write": 2.5},
    "claude-sonnet-5": {"input": 2.0, "output": 10.0, "cache_read": 0.2, "cache_write": 2.5},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
    "gpt-6-sol": {"input": 2.0, "output": 10.0, "cache_read": 0.2, "cache_write": 2.5},
    "gpt-6.1-sol": {"input": 2.0, "output": 10.0, "cache_read": 0.1, "cache_write": 2.5},
    "gpt-6.2-sol": {"input": 2.0, "output": 10.0, "cache_read": 0.1, "cache_write": 2.5},
    "gpt-6-luna": {"input": 0.1, "output": 0.5, "cache_read": 0.01, "cache_write": 0.125},
}
"""The table evalkit shipped before genai-prices (`evalkit/data/prices.json`, checked 2026-11-30)."""
SEED_ROUTES = ("hf:Qwen/Qwen3.8-27B:novita@off", "hf:Qwen/Qwen3.6-35B-A3B:scaleway")
"""The open models the seeds run through the Hugging Face router."""
URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "VLLM_BASE_URL")


@pytest.fixture(autouse=True)
def _no_user_prices(tmp_path, monkeypatch):
    """Whatever the machine's own price file and base URLs say stays out of these tests."""
    monkeypatch.delenv(prices.OVERRIDE_VARIABLE, raising=False)
    for name in URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    prices.price_table.cache_clear()
    yield
    prices.price_table.cache_clear()


def library(model: str, provider: str, **tokens: int) -> float:
    """genai-prices' own answer through its public API, in its terms (input_tokens counts cached ones)."""
    return float(
        genai_prices.calc_price(genai_prices.Usage(**tokens), model, provider_id=provider).total_price
    )


def test_cost_from_genai_prices():
    usage = Usage(input=MILLION, output=100_000, cache_read=2 * MILLION, cache_write=400_000)
    assert prices.cost_usd("anthropic:claude-sonnet-5@low", usage) == pytest.approx(2.0 + 1.0 + 0.4 + 1.0)
    assert prices.cost_usd("openai:gpt-6-sol", Usage(output=MILLION)) == pytest.approx(10.0)
    assert prices.cost_usd("anthropic:claude-sonnet-5-20260630", Usage(input=MILLION)) == pytest.approx(2.0)


def rates(label: str) -> dict[str, float]:
    """USD per million tokens of each kind, as evalkit prices them below every tier."""
    kinds = ("input", "output", "cache_read", "cache_write")
    return {k: prices.cost_usd(label, Usage(**{k: MILLION})) for k in kinds}


def test_genai_prices_agrees_with_the_old_table_but_for_sonnet_5_5s_cache_read():
    """Side by side: ten of the eleven models the old table priced agree on every rate. Claude Sonnet
    5.5's cache read is 0.1 in genai-prices (0.05× input, as on Opus 5.5, per its note citing Anthropic's
    prompt-caching prices) where the old table applied the usual 0.1× (0.2)."""
    differ = {}
    for model, old in OLD_TABLE.items():
        provider = "openai" if model.startswith("gpt") else "anthropic"
        new = rates(f"{provider}:{model}")
        differ |= {(model, k): (v, new[k]) for k, v in old.items() if new[k] != pytest.approx(v)}
    assert differ == {("claude-sonnet-5-5", "cache_read"): (0.2, 0.1)}


def test_the_seeds_router_models():
    """Qwen3.8-27B through the router's Novita is priced as genai-prices prices it there; the router's
    Scaleway is not in genai-prices 0.2.5 at all, so Qwen3.6-35B-A3B through it stays null (a user's file
    prices it), never another provider's price."""
    novita, scaleway = SEED_ROUTES
    usage = Usage(input=MILLION, output=MILLION)
    expected = library("Qwen/Qwen3.8-27B", "huggingface_novita", input_tokens=MILLION, output_tokens=MILLION)
    assert prices.cost_usd(novita, usage) == pytest.approx(expected) and expected > 0
    assert prices.request_cost(novita, usage, answered_by="novita") == pytest.approx(expected)
    assert prices.cost_usd(scaleway, usage) is None


def test_the_same_model_costs_what_its_provider_charges(monkeypatch):
    usage = Usage(input=MILLION)
    direct = prices.cost_usd("anthropic:claude-sonnet-5", usage)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://bedrock-runtime.us-east-1.amazonaws.com")
    bedrock = prices.cost_usd("anthropic:claude-sonnet-5", usage)
    assert bedrock == pytest.approx(library("claude-sonnet-5", "aws", input_tokens=MILLION))
    assert (direct, bedrock) == (pytest.approx(2.0), pytest.approx(2.2))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/v1")  # a proxy: the spec's provider
    assert prices.cost_usd("anthropic:claude-sonnet-5", usage) == pytest.approx(2.0)

    for variable, spec, url, provider in (
        ("OPENAI_BASE_URL", "openai-chat:qwen/qwen3.8-27b", "https://openrouter.ai/api/v1", "openrouter"),
        ("VLLM_BASE_URL", "vllm:Qwen/Qwen3.8-Flash", "https://api.together.xyz/v1", "together"),
        ("VLLM_BASE_URL", "vllm:qwen/qwen3.8-27b", "https://api.groq.com/openai/v1", "groq"),
    ):
        monkeypatch.setenv(variable, url)
        got = prices.cost_usd(spec, Usage(input=MILLION, output=MILLION))
        model = prices.model_id(spec)
        assert got == pytest.approx(library(model, provider, input_tokens=MILLION, output_tokens=MILLION))
        assert got > 0
        monkeypatch.delenv(variable)
    assert prices.provider_id("vllm") is None  # the user's own server


def test_fireworks_and_the_routers_fireworks_are_different_providers(monkeypatch):
    assert prices.provider_id("hf", "fireworks-ai") == "huggingface_fireworks-ai"
    monkeypatch.setenv("VLLM_BASE_URL", "https://api.fireworks.ai/inference/v1")
    assert prices.provider_id("vllm") == "fireworks"


def test_unknown_stays_null():
    usage = Usage(input=10, output=10)
    assert prices.cost_usd("hf:org/unknown:novita|together@off", usage) is None
    assert prices.cost_usd("vllm:my-model", usage) is None
    assert prices.cost_usd("hf:Qwen/Qwen3.8-27B", usage) is None  # the router chose: who billed it?
    assert prices.cost_usd("openai:claude-sonnet-5", usage) is None  # not an OpenAI model
    assert prices.model_id("hf:org/m:novita|together@low") == "org/m"
    assert prices.priced(["openai:gpt-6-sol", "vllm:my-model"]) == {
        "openai:gpt-6-sol": True,
        "vllm:my-model": False,
    }


def test_router_fallbacks_are_priced_only_where_their_providers_agree():
    usage = Usage(input=MILLION)
    novita = prices.request_cost("hf:Qwen/Qwen3.8-27B:novita|nscale", usage, answered_by="novita")
    nscale = prices.request_cost("hf:Qwen/Qwen3.8-27B:novita|nscale", usage, answered_by="nscale")
    assert novita and nscale and novita != nscale
    assert prices.cost_usd("hf:Qwen/Qwen3.8-27B:novita|nscale", usage) is None
    assert prices.cost_usd("hf:Qwen/Qwen3.8-27B:novita|novita", usage) == pytest.approx(novita)


def test_a_long_context_tier_applies_per_request():
    """gpt-6-sol charges its long-context rate above 272K input tokens: a 300K-token request pays it, two
    150K-token requests do not, and a sum (sizes unknown) is priced below the tier."""
    spec = "openai:gpt-6-sol"
    one = prices.request_cost(spec, Usage(input=300_000))
    assert one == pytest.approx(library("gpt-6-sol", "openai", input_tokens=300_000))
    assert one > prices.request_cost(spec, Usage(input=150_000)) * 2
    assert prices.cost_usd(spec, Usage(input=300_000)) == pytest.approx(0.6)
    cached = prices.request_cost(spec, Usage(input=50_000, cache_read=250_000, output=1_000))
    expected = library(
        "gpt-6-sol", "openai", input_tokens=300_000, cache_read_tokens=250_000, output_tokens=1_000
    )
    assert cached == pytest.approx(expected)


def record(model: str, *turns: TurnRecord, **info) -> EpisodeRecord:
    total = sum((Usage.from_dict(t.usage) for t in turns), Usage())
    if "probe_usage" in info:
        total = total + Usage.from_dict(info["probe_usage"])
    return EpisodeRecord(model=model, turns=list(turns), usage=total.to_dict(), info=info,
                         started=datetime.now(UTC).isoformat())  # fmt: skip


def test_an_episode_is_priced_request_by_request():
    spec = "openai:gpt-6-sol"
    small = [TurnRecord(turn=i, usage=Usage(input=150_000, output=100).to_dict()) for i in (1, 2)]
    assert prices.episode_cost(record(spec, *small)) == pytest.approx(2 * (0.3 + 0.001))
    large = TurnRecord(turn=1, usage=Usage(input=300_000, output=200).to_dict())
    assert prices.episode_cost(record(spec, large)) == pytest.approx(
        prices.request_cost(spec, Usage(input=300_000, output=200))
    )
    assert prices.episode_cost(record(spec, large)) > prices.episode_cost(record(spec, *small))


def test_a_router_episode_prices_each_request_at_its_provider():
    """Turn 1 answered by novita; turn 2 by nscale after a failed request to novita that billed some
    tokens; the router's own probe at the spec's providers (they disagree, so an episode with one is
    null)."""
    spec = "hf:Qwen/Qwen3.8-27B:novita|nscale"
    failed = {"route": "Qwen/Qwen3.8-27B:novita", "status": 500, "usage": Usage(input=1000).to_dict()}
    t1 = TurnRecord(turn=1, usage=Usage(input=10_000, output=500).to_dict(), provider="novita")
    t2 = TurnRecord(turn=2, usage=Usage(input=21_000, output=700).to_dict(), provider="nscale",
                    failed_attempts=[failed])  # fmt: skip
    rec = record(spec, t1, t2)

    def at(who: str, usage: Usage) -> float:
        return prices.request_cost(spec, usage, answered_by=who)

    expected = (at("novita", Usage(input=10_000, output=500)) + at("novita", Usage(input=1000))
                + at("nscale", Usage(input=20_000, output=700)))  # fmt: skip
    assert prices.episode_cost(rec) == pytest.approx(expected)
    assert prices.episode_cost(record(spec, t1, probe_usage=Usage(input=50).to_dict())) is None
    t1.provider = "hf"  # the router chose: nobody says who billed it
    assert prices.episode_cost(record(spec, t1)) is None


@pytest.fixture
def mine(tmp_path, monkeypatch):
    path = tmp_path / "mine.json"
    monkeypatch.setenv(prices.OVERRIDE_VARIABLE, str(path))
    return path


@pytest.mark.parametrize(
    "content",
    [
        None,
        "{not json",
        "[1, 2]",
        '{"gpt-6-sol": {"input": "two", "output": 10.0}}',
        '{"gpt-6-sol": {"output": 10.0}}',
    ],
    ids=["missing", "not-json", "not-an-object", "not-a-number", "no-input-price"],
)
def test_an_unusable_user_file_warns_once_and_prices_nothing(mine, content):
    if content is not None:
        mine.write_text(content)
    with pytest.warns(RuntimeWarning, match="price table") as caught:
        for label in ("openai:gpt-6-sol", "anthropic:claude-sonnet-5", "vllm:m"):
            assert prices.cost_usd(label, Usage(input=1_000, output=1_000)) is None
    assert len([w for w in caught if "price table" in str(w.message)]) == 1
    assert prices.price_source()["user_models"] is None


def test_a_users_file_wins_model_by_model(mine):
    mine.write_text(json.dumps({
        "org/vlm": {"input": 0.5, "output": 1.0},
        "gpt-6-sol": {"input": 1, "output": 1},
        "Qwen/Qwen3.6-35B-A3B": {"input": 0.2, "output": 0.8, "cache_read": 0.02},
    }))  # fmt: skip
    million = Usage(input=MILLION, output=MILLION)
    assert prices.cost_usd("hf:org/vlm:prov-a|prov-b@off", million) == pytest.approx(1.5)
    assert prices.cost_usd("openai:gpt-6-sol", million) == pytest.approx(2.0)
    assert prices.request_cost("openai:gpt-6-sol", Usage(input=300_000)) == pytest.approx(0.3)  # no tiers
    assert prices.cost_usd("anthropic:claude-sonnet-5", million) == pytest.approx(12.0)  # genai-prices'
    scaleway = prices.cost_usd(SEED_ROUTES[1], Usage(input=MILLION, cache_read=MILLION))
    assert scaleway == pytest.approx(0.22)
    source = prices.price_source()
    assert source["user_file"] == str(mine) and source["user_models"] == sorted(json.loads(mine.read_text()))
    assert len(source["user_file_sha256"]) == 64


def test_the_config_dir_file_is_read_when_present(tmp_path):
    path = tmp_path / "config" / "evalkit" / "prices.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"my-model": {"input": 3.0, "output": 0}}')
    assert prices.override_path() == path
    assert prices.cost_usd("vllm:my-model", Usage(input=MILLION)) == pytest.approx(3.0)


def test_the_price_source_names_genai_prices_version():
    source = prices.price_source()
    assert source["library"] == "genai-prices" and source["version"] == genai_prices.__version__
    assert source["user_file"] is None and source["user_models"] == []


def test_an_update_installed_process_wide_changes_nothing():
    """genai-prices' updater installs what it fetched as the process's snapshot; evalkit keeps pricing
    from the data of the installed package, whose version is the one run.json records."""
    from genai_prices import data_snapshot

    before = prices.cost_usd("anthropic:claude-sonnet-5", Usage(input=MILLION))
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[], from_auto_update=True))
    try:
        assert prices.cost_usd("anthropic:claude-sonnet-5", Usage(input=MILLION)) == before == 2.0
    finally:
        data_snapshot.set_custom_snapshot(None)


NO_NETWORK = """
import socket, threading, warnings
warnings.simplefilter("error")
def refuse(*a, **k):
    raise OSError("network use")
socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = refuse
from evalkit.providers import prices
from evalkit.types import EpisodeRecord, TurnRecord, Usage
labels = ["anthropic:claude-sonnet-5", "openai:gpt-6-sol", "hf:Qwen/Qwen3.8-27B:novita", "vllm:x"]
costs = [prices.cost_usd(m, Usage(input=1000, output=10)) for m in labels]
costs.append(prices.request_cost("openai:gpt-6-sol", Usage(input=300_000)))
t = TurnRecord(turn=1, usage=Usage(input=10).to_dict())
costs.append(prices.episode_cost(EpisodeRecord(model="anthropic:claude-opus-5", turns=[t], usage=t.usage)))
import json
print(prices.price_source()["version"], threading.active_count(), json.dumps(costs))
"""


def test_nothing_is_fetched(tmp_path):
    """Prices with every way to the network refused and warnings as errors, in a fresh interpreter: all
    priced (but the user's own server), no thread started (genai-prices' updater runs in one)."""
    env = {k: v for k, v in os.environ.items() if k not in (prices.OVERRIDE_VARIABLE, *URL_VARIABLES)}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", NO_NETWORK], env=env, capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    version, threads, costs = out.stdout.split(" ", 2)
    costs = json.loads(costs)
    assert version == genai_prices.__version__ and threads == "1"
    assert all(c and c > 0 for c in costs[:3] + costs[4:]) and costs[3] is None


def test_no_price_table_ships_with_evalkit():
    """The hand-kept table is gone, and no package data names it."""
    assert not (ROOT / "evalkit" / "data" / "prices.json").exists()
    assert "data/*.json" not in (ROOT / "pyproject.toml").read_text()
