"""Cost of model usage, from genai-prices (its price snapshot ships inside the package) with a user's file
over it, model by model.

Prices are provider-aware: the same model costs what the provider that served it charges. A spec maps onto
genai-prices' providers as follows (`provider_id`): behind the Hugging Face router (`hf:org/m:novita`) the
provider that answered the request (`huggingface_novita`; a request the router placed itself has no known
provider, so no price); for the other wires the SDK's base URL variable (ANTHROPIC_BASE_URL, OPENAI_BASE_URL,
VLLM_BASE_URL) when genai-prices knows the service it names (Bedrock, OpenRouter, Together, Groq,
Fireworks, …), else the spec's own provider (`anthropic`, `openai`: a proxy in front of it) and, for `vllm:`
(the user's own server), none. Long-context tiers and the cache's read and write rates are applied as
genai-prices models them, per request (`request_cost`, `episode_cost`).

The user's file adds models or replaces their prices: the file named by `EVALKIT_PRICES`, else
`~/.config/evalkit/prices.json` (under `$XDG_CONFIG_HOME` when set) if it exists; USD per million tokens
{"model id": {"input", "output", "cache_read", "cache_write"}}, a missing cache rate charged as input. A
model in neither is priced null, never guessed.

A user file that cannot be read (malformed, or an `EVALKIT_PRICES` that names no file) leaves every cost
unknown with one warning: a price is data for the report, never a reason for an episode to fail, and a user
who asked for their own prices must not get genai-prices' in silence.

Nothing here reaches the network: evalkit prices from its own snapshot of the data bundled with the
installed genai-prices (`genai_prices.data`), never from the snapshot genai-prices' background updater
(`UpdatePrices`, which fetches) may install process-wide, so the version `price_source` records is the one
every cost of the run was computed with.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import astuple
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.providers.common import user_file
from evalkit.types import EpisodeRecord, TurnRecord, Usage

OVERRIDE_VARIABLE = "EVALKIT_PRICES"
LIBRARY = "genai-prices"
BASE_URL_VARIABLES = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "openai-chat": "OPENAI_BASE_URL",
    "vllm": "VLLM_BASE_URL",
}
"""Where each wire's requests go, when the user points them elsewhere."""
OWN_PROVIDER = {"anthropic": "anthropic", "openai": "openai", "openai-chat": "openai"}
"""genai-prices' provider of a spec whose base URL is the SDK's default or one genai-prices does not know."""
ROUTER_PREFIX = "huggingface_"
"""genai-prices' id of a provider behind the Hugging Face router: `huggingface_novita`."""


def override_path() -> Path | None:
    """The user's price file: `EVALKIT_PRICES` (which must exist), else the config-dir file if present."""
    return user_file(OVERRIDE_VARIABLE, "prices.json")


def _valid_entry(value: object) -> bool:
    """Non-negative numbers, input and output at least: a missing rate would be priced as free."""
    return (
        isinstance(value, dict)
        and {"input", "output"} <= value.keys()
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in value.values()
        )
    )


def _read(path: Path) -> dict[str, dict[str, float]]:
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    if not isinstance(table, dict):
        raise ValueError("the top level is not an object")
    entries = {k: v for k, v in table.items() if not k.startswith("_")}
    bad = sorted(k for k, v in entries.items() if not _valid_entry(v))
    if bad:
        raise ValueError(f"entries without valid input and output prices: {', '.join(bad[:5])}")
    return entries


_TRAVELLED: list[dict[str, dict[str, float]] | None] = []
"""The user's prices as the batch's driver read them, in a process that prices its episodes elsewhere (a Ray
runner on another machine, where the user's file is not): `use_table`."""


def use_table(table: dict[str, dict[str, float]] | None) -> None:
    """Price this process's episodes with `table` (`price_table()` where the batch was started), not with
    whatever price file this machine has."""
    _TRAVELLED[:] = [table]
    price_table.cache_clear()


@lru_cache(maxsize=1)
def price_table() -> dict[str, dict[str, float]] | None:
    """The user's prices (model id → rates; empty without a file), or None, warned about once, when their
    file cannot be read."""
    if _TRAVELLED:
        return _TRAVELLED[0]
    path = override_path()
    if path is None:
        return {}
    try:
        return _read(path)
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(
            f"price table {str(path)!r} unusable ({type(exc).__name__}: {exc}); every cost is null",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


@lru_cache(maxsize=1)
def _snapshot() -> Any:
    """genai-prices' bundled data, in a snapshot of evalkit's own (see the module's docstring)."""
    # start-up: the price library and its data load with the first price asked
    from genai_prices import data, data_snapshot

    return data_snapshot.DataSnapshot(providers=data.providers, from_auto_update=False)


def price_source() -> dict:
    """What a run's costs were computed with, for run.json: genai-prices' version (its data is the
    package's), and the user's file with its digest and models (null models: unusable, every cost null)."""
    # start-up: importlib.metadata costs ~30 modules, for run.json's line alone
    from importlib.metadata import version

    path = override_path()
    digest = None
    if path is not None and path.is_file():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    table = price_table()
    return {
        "library": LIBRARY,
        "version": version(LIBRARY),
        "user_file": str(path) if path is not None else None,
        "user_file_sha256": digest,
        "user_models": sorted(table) if table is not None else None,
    }


def _split(label: str) -> tuple[str, str, list[str]]:
    """`hf:org/m:novita|together@low` → ("hf", "org/m", ["novita", "together"]); other specs name no
    router providers."""
    provider, sep, rest = label.partition(":")
    if not sep:
        return "", label.split("@", 1)[0], []
    model = rest.split("@", 1)[0]
    if provider == "hf" and ":" in model:
        model, _, routes = model.rpartition(":")
        return provider, model, [r for r in routes.split("|") if r]
    return provider, model, []


def model_id(label: str) -> str:
    """`anthropic:claude-sonnet-5@low` → `claude-sonnet-5`; `hf:org/m:novita|together` → `org/m`."""
    return _split(label)[1]


def provider_id(spec_provider: str, answered_by: str = "") -> str | None:
    """genai-prices' provider for a request of a `spec_provider:` spec answered by `answered_by` (behind
    the router, the provider named in the route), or None where no one can say who billed it."""
    if spec_provider == "hf":
        return ROUTER_PREFIX + answered_by if answered_by and answered_by != "hf" else None
    url = os.environ.get(BASE_URL_VARIABLES.get(spec_provider, ""), "")
    if url:
        try:
            return _snapshot().find_provider(None, None, url).id
        except LookupError:
            pass  # a proxy or the user's own server: the spec's provider, if it has one
    return OWN_PROVIDER.get(spec_provider)


def _user_prices(model: str) -> dict[str, float] | None:
    table = price_table() or {}
    for key in (model, re.sub(r"-\d{8}$", "", model)):
        if key in table:
            return table[key]
    return None


def _user_cost(p: dict[str, float], usage: Usage) -> Decimal:
    total = (
        usage.input * p["input"]
        + usage.output * p["output"]
        + usage.cache_read * p.get("cache_read", p["input"])
        + usage.cache_write * p.get("cache_write", p["input"])
    )
    return Decimal(repr(total)) / 1_000_000


def _library_usage(usage: Usage) -> Any:
    """evalkit's usage in genai-prices' terms: its `input_tokens` counts the cached and cache-written
    tokens too (evalkit's `input` does not), and its output, like evalkit's, includes reasoning."""
    # start-up (as `_snapshot`)
    from genai_prices.types import Usage as LibraryUsage

    return LibraryUsage(
        input_tokens=usage.input + usage.cache_read + usage.cache_write,
        output_tokens=usage.output,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
    )


def _flat(price: Any) -> Any:
    """The rates of a request below every long-context tier (`TieredPrices.base`)."""
    # start-up (as `_snapshot`)
    from genai_prices.types import ModelPrice, TieredPrices

    rates = {k: v.base if isinstance(v, TieredPrices) else v for k, v in vars(price).items()}
    return ModelPrice(**rates)


def _library_cost(model: str, provider: str, usage: Usage, when: datetime, tiers: bool) -> Decimal | None:
    try:
        found, info = _snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    if tiers:
        return info.calc_price(_library_usage(usage), found, genai_request_timestamp=when).total_price
    return _flat(info.get_prices(when)).calc_price(_library_usage(usage))["total_price"]


def _cost(
    label: str, usage: Usage, answered_by: str | None, when: datetime | None, tiers: bool
) -> Decimal | None:
    """One price for `usage` of `label`: the user's entry, else genai-prices' for who answered (None: the
    spec's own provider, or for a router spec every provider it names, which must agree)."""
    if price_table() is None:
        return None
    spec_provider, model, routes = _split(label)
    mine = _user_prices(model)
    if mine is not None:
        return _user_cost(mine, usage)
    when = when or datetime.now(UTC)
    who = [answered_by] if answered_by is not None else routes or [""]
    costs = set()
    for name in who:
        pid = provider_id(spec_provider, name)
        cost = _library_cost(model, pid, usage, when, tiers) if pid else None
        if cost is None:
            return None
        costs.add(cost)
    return costs.pop() if len(costs) == 1 else None


def _usd(cost: Decimal | None) -> float | None:
    return None if cost is None else round(float(cost), 8)


def request_cost(
    model_label: str, usage: Usage, answered_by: str | None = None, when: datetime | None = None
) -> float | None:
    """What one request cost, at the long-context tier its input reached; `answered_by` the provider that
    served it behind a router (`Turn.provider`), `when` its time (prices change; default now). None when
    the model or its provider has no price: an unknown price is not a guess."""
    return _usd(_cost(model_label, usage, answered_by, when, tiers=True))


def cost_usd(model_label: str, usage: Usage) -> float | None:
    """What `usage` summed over an episode's requests cost, or None when the model or the user's table is
    unknown. The sizes of the requests are not in a sum, so no long-context tier is applied (the rates of
    requests below the first; `episode_cost` prices each request at its own tier), and behind a router
    spec naming several providers a price only where they all charge the same."""
    return _usd(_cost(model_label, usage, None, None, tiers=False))


def _requests(rec: EpisodeRecord) -> list[tuple[str | None, Usage]]:
    """(who answered, usage) of every request an episode record accounts for: each turn's failed requests
    (at the provider of their route), the request that answered (its usage less theirs), a failed last
    turn's requests; a router's thinking-off probe is a sum over its routes (None: the spec's providers)."""
    spec_provider = rec.model.partition(":")[0]
    out = [r for t in rec.turns for r in _turn_requests(spec_provider, t)]
    last = (rec.info or {}).get("failed_turn") or {}
    for a in last.get("failed_attempts") or []:
        out.append((_who(spec_provider, a.get("route") or ""), Usage.from_dict(a.get("usage"))))
    if (rec.info or {}).get("probe_usage"):
        out.append((None, Usage.from_dict(rec.info["probe_usage"])))
    return out


def _who(spec_provider: str, route: str) -> str | None:
    return route.rpartition(":")[2] if spec_provider == "hf" and ":" in route else None


def _turn_requests(spec_provider: str, t: TurnRecord) -> list[tuple[str | None, Usage]]:
    """(who answered, usage) of one turn's requests: its failed ones, then the one that answered (the
    turn's usage less theirs)."""
    failed = [(_who(spec_provider, a.get("route") or ""), Usage.from_dict(a.get("usage")))
              for a in t.failed_attempts]  # fmt: skip
    spent = sum((u for _, u in failed), Usage())
    pairs = zip(astuple(Usage.from_dict(t.usage)), astuple(spent), strict=True)
    answered = t.provider if spec_provider == "hf" else None
    return [*failed, (answered, Usage(*(max(0, x - y) for x, y in pairs)))]


def turn_cost(model_label: str, turn: TurnRecord, started: str | None = None) -> float | None:
    """What one recorded turn's requests cost, each at its provider and tier (as `episode_cost` prices
    them; `started` the episode's start), or None when one has no price or the turn's usage is unknown: an
    episode's cost so far, turn by turn, for its cost limit."""
    if not turn.usage_known:
        return None
    spec_provider, when = model_label.partition(":")[0], _started(started)
    costs = [_cost(model_label, u, who, when, tiers=True)
             for who, u in _turn_requests(spec_provider, turn) if u != Usage()]  # fmt: skip
    if any(c is None for c in costs):
        return None
    return _usd(sum(costs, Decimal(0)))


def episode_cost(rec: EpisodeRecord) -> float | None:
    """What an episode cost, each request priced at its provider and its long-context tier at the time the
    episode started. None when a request has no price; where the record's requests do not add up to its
    usage (a record of another shape), the usage summed as `cost_usd` prices it."""
    requests = _requests(rec)
    total = sum((u for _, u in requests), Usage())
    recorded = Usage.from_dict(rec.usage)
    tokens = ("input", "output", "cache_read", "cache_write")
    if any(getattr(total, k) != getattr(recorded, k) for k in tokens):
        return cost_usd(rec.model, recorded)
    when = _started(rec.started)
    costs = [_cost(rec.model, u, who, when, tiers=True) for who, u in requests if u != Usage()]
    if not costs:  # no tokens at all: free where the model has a price, unknown where it has none
        costs = [_cost(rec.model, Usage(), None, when, tiers=False)]
    if any(c is None for c in costs):
        return None
    return _usd(sum(costs, Decimal(0)))


def _started(started: str | None) -> datetime | None:
    try:
        when = datetime.fromisoformat(started) if started else None
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def priced(labels: Iterable[str]) -> dict[str, bool]:
    """For each model spec, whether a request of it would be priced (before a run: say what will be
    null)."""
    return {label: cost_usd(label, Usage(input=1, output=1)) is not None for label in labels}
