"""Cost of model usage from a price table (USD per million tokens).

The table ships inside the package (`evalkit/data/prices.json`). A user file adds models or replaces their
prices, model by model: the file named by `EVALKIT_PRICES`, else `~/.config/evalkit/prices.json` (under
`$XDG_CONFIG_HOME` when set) if it exists. A model in neither is priced null, never guessed.

A table that cannot be read (malformed, or an `EVALKIT_PRICES` that names no file) leaves every cost unknown
with one warning: a price is data for the report, never a reason for an episode to fail, and a user who
asked for their own prices must not get the shipped ones in silence.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from functools import lru_cache
from pathlib import Path

from evalkit.providers.common import user_file
from evalkit.types import Usage

PRICES_PATH = Path(__file__).resolve().parents[1] / "data" / "prices.json"
"""The table shipped with evalkit."""
OVERRIDE_VARIABLE = "EVALKIT_PRICES"


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


@lru_cache(maxsize=1)
def price_table() -> dict[str, dict[str, float]] | None:
    """Model id → prices (the shipped table with the user's file over it), or None, warned about once, when
    either cannot be read."""
    table: dict[str, dict[str, float]] = {}
    for path in (PRICES_PATH, override_path()):
        if path is None:
            continue
        try:
            table.update(_read(path))
        except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            warnings.warn(
                f"price table {str(path)!r} unusable ({type(exc).__name__}: {exc}); every cost is null",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
    return table


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
    if table is None:
        return None
    model = model_id(label)
    for key in (model, re.sub(r"-\d{8}$", "", model)):
        if key in table:
            return table[key]
    return None


def cost_usd(model_label: str, usage: Usage) -> float | None:
    """What `usage` cost, or None when the model or the table is unknown: an unknown price is not a guess."""
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
