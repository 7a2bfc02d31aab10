"""Cost of model usage from the price table in `data/prices.json` (USD per million tokens)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from evalkit.types import Usage

PRICES_PATH = Path(__file__).resolve().parents[2] / "data" / "prices.json"


@lru_cache(maxsize=1)
def price_table() -> dict[str, dict[str, float]]:
    with open(PRICES_PATH, encoding="utf-8") as f:
        table = json.load(f)
    return {k: v for k, v in table.items() if not k.startswith("_") and isinstance(v, dict)}


def model_id(label: str) -> str:
    """`anthropic:claude-sonnet-5@low` → `claude-sonnet-5`; `hf:org/m:novita|together` → `org/m`."""
    provider, sep, rest = label.partition(":")
    model = rest if sep else provider
    model = model.split("@", 1)[0]
    if provider == "hf" and ":" in model:
        model = model.split(":", 1)[0]
    return model


def prices_for(label: str) -> dict[str, float] | None:
    table = price_table()
    model = model_id(label)
    for key in (model, re.sub(r"-\d{8}$", "", model)):
        if key in table:
            return table[key]
    return None


def cost_usd(model_label: str, usage: Usage) -> float | None:
    """What `usage` cost, or None when the model is not in the table: an unknown price is not a guess."""
    p = prices_for(model_label)
    if p is None:
        return None
    total = (
        usage.input * p.get("input", 0.0)
        + usage.output * p.get("output", 0.0)
        + usage.cache_read * p.get("cache_read", p.get("input", 0.0))
        + usage.cache_write * p.get("cache_write", p.get("input", 0.0))
    )
    return round(total / 1e6, 8)
