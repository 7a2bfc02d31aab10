"""What each model accepts in a request, and what a run learned the API refuses.

A spec's thinking level (`@off`, `@low`, `@medium`, `@high`) becomes different request fields on different
models: adaptive thinking with an effort (`thinking: {type: adaptive}` + `output_config.effort`) on the Claude
models from 4.6 on, budgeted thinking (`thinking: {type: enabled, budget_tokens}`) on Claude 4.5 and earlier,
which answer adaptive thinking with a 400; `reasoning.effort` and `reasoning.summary` on OpenAI's reasoning
models, nothing of the kind on gpt-4.1 or gpt-4o, which answer either with a 400. `TABLE` says, per wire and
model-id pattern (first match wins), what a model takes; a user's file (`EVALKIT_CAPABILITIES`, else
`~/.config/evalkit/capabilities.json`, the same shape:
`{"anthropic": {"claude-x*": {"thinking": "budgeted"}}}`) is read first. A model the table does not know
gets its wire's newest request shape. What a level becomes, given what a model accepts, is each wire's
(`evalkit.providers.thinking`).

Where the API still says no (a 400 naming the feature: the error's `param` for OpenAI, the documented
message of an Anthropic `invalid_request_error`, which carries no other field), the adapter falls back once to
what the model accepts (`learn`): the fallback holds for the rest of the process's episodes of that model, is
kept in each record's `info["fallbacks"]`, said in one line, and a batch keeps it in run.json.

Facts checked against the providers' documentation and SDK types, 2026-12: Anthropic's thinking
troubleshooting page and model pages (adaptive from Opus/Sonnet 4.6; budgeted only through 4.5; `enabled`
refused from 4.7; Opus 5.5 and Fable refuse `disabled` and forced tool use; Sonnet 5.5 turns thinking off
with `between_tools`; effort on Opus 4.5 and the 4.6+ models), OpenAI's reasoning guide and the error
bodies its API returns (`param: reasoning.effort` / `reasoning.summary`, `code: unsupported_parameter` /
`unsupported_value`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from evalkit import secrets
from evalkit.notices import notice
from evalkit.providers.attempts import error_fields
from evalkit.providers.common import user_file

log = logging.getLogger(__name__)

OVERRIDE_VARIABLE = "EVALKIT_CAPABILITIES"


@dataclass(frozen=True)
class Caps:
    """What one model accepts; each wire reads the fields it has."""

    thinking: str = "adaptive"
    """Anthropic: `adaptive` (type adaptive, depth by effort), `budgeted` (type enabled with budget_tokens),
    `none` (no thinking at all)."""
    effort: bool = True
    """The effort field: Anthropic's `output_config.effort`, the Responses `reasoning.effort`, chat
    completions' `reasoning_effort`."""
    off: str = "disabled"
    """How `@off` is asked. Anthropic: `disabled`, `between_tools` (Sonnet 5.5), `omit` (thinking cannot be
    turned off: adaptive at effort low). OpenAI: the lowest effort it takes, `none`, `minimal` or `low`."""
    reasoning: bool = True
    """OpenAI: the model takes a `reasoning` object (a reasoning model) at all."""
    summary: bool = True
    """Responses: the model returns reasoning summaries (`reasoning.summary`)."""
    images: bool = True
    """The model accepts image inputs; for one that does not, images are replaced by a line saying so."""
    forced_tool_choice: bool = True
    """The model takes `tool_choice` any / a named tool (evalkit leaves the choice to the model: recorded for
    whoever sends their own)."""

    def but(self, **changes: Any) -> Caps:
        return dataclasses.replace(self, **changes)


_NO_REASONING = {"reasoning": False, "summary": False, "effort": False}
_BUDGETED = {"thinking": "budgeted", "effort": False}

TABLE: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "anthropic": [
        ("claude-3-7-sonnet*", _BUDGETED),
        ("claude-3-*", {"thinking": "none", "effort": False}),
        ("claude-opus-4-5*", {"thinking": "budgeted"}),  # effort without adaptive thinking
        ("claude-opus-4-6*", {}),
        ("claude-sonnet-4-6*", {}),
        ("claude-opus-4-7*", {}),
        ("claude-opus-4-8*", {}),
        ("claude-*-4-*", _BUDGETED),  # Sonnet and Haiku 4.5, Opus 4 and 4.1, Sonnet 4
        ("claude-*-4", _BUDGETED),
        ("claude-opus-5-5*", {"off": "omit", "forced_tool_choice": False}),
        ("claude-fable-*", {"off": "omit", "forced_tool_choice": False}),
        ("claude-sonnet-5-5*", {"off": "between_tools", "forced_tool_choice": False}),
        ("*", {}),
    ],
    "openai": [
        ("gpt-3.5*", {**_NO_REASONING, "images": False}),
        ("gpt-4o*", _NO_REASONING),
        ("chatgpt-4o*", _NO_REASONING),
        ("gpt-4.1*", _NO_REASONING),
        ("gpt-4-*", _NO_REASONING),
        ("gpt-4", _NO_REASONING),
        ("gpt-5-chat*", _NO_REASONING),
        ("o1-mini*", {**_NO_REASONING, "images": False}),
        ("o1-preview*", {**_NO_REASONING, "images": False}),
        ("o3-mini*", {"off": "low", "images": False}),
        ("o1*", {"off": "low"}),
        ("o3*", {"off": "low"}),
        ("o4-mini*", {"off": "low"}),
        ("codex-mini*", {"off": "low"}),
        ("gpt-5.*", {"off": "none"}),
        ("gpt-5*", {"off": "minimal"}),
        ("*", {"off": "none"}),
    ],
}
"""Per wire (`anthropic`; `openai` for OpenAI's models over the Responses API and over chat completions),
model-id patterns (fnmatch, on the id after any `org/` and before a router's `:provider`) and what differs
from `Caps`.
Servers of the user's own (`hf:`, `vllm:`) are not in it: they get `Caps()` and the 400 fallbacks."""


@lru_cache(maxsize=1)
def _user_rows() -> dict[str, list[tuple[str, dict]]]:
    path = user_file(OVERRIDE_VARIABLE, "capabilities.json")
    if path is None:
        return {}
    fields = {f.name for f in dataclasses.fields(Caps)}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = {
            wire: [(pattern, dict(row)) for pattern, row in table.items()] for wire, table in data.items()
        }
        bad = [p for table in rows.values() for p, row in table if not set(row) <= fields]
        if bad:
            raise ValueError(f"unknown fields in {', '.join(bad[:5])} (fields: {', '.join(sorted(fields))})")
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        # The shipped table still holds, and the 400 fallbacks: a bad file costs the user's rows only.
        warnings.warn(f"capability file {str(path)!r} unusable ({exc}); using evalkit's table",
                      RuntimeWarning, stacklevel=2)  # fmt: skip
        return {}
    return rows


def table_caps(wire: str, model: str) -> Caps:
    """What the table (the user's rows first) says `model` accepts over `wire`."""
    name = model.lower().rpartition("/")[2].partition(":")[0]
    for pattern, row in [*_user_rows().get(wire, []), *TABLE.get(wire, [])]:
        if fnmatch.fnmatchcase(name, pattern.lower()):
            return Caps(**row)
    return Caps()


# ---- what a run learned ------------------------------------------------------------------------------------

_learned: dict[tuple[str, str], dict[str, Any]] = {}
_said: dict[tuple[str, str], list[dict]] = {}
_lock = threading.Lock()


def caps(wire: str, model: str) -> Caps:
    """What `model` accepts: the table, with what this process learned from the API's refusals over it."""
    base = table_caps(wire, model)
    with _lock:
        learned = _learned.get((wire, model))
    return base.but(**learned) if learned else base


def learned(wire: str, model: str) -> list[dict]:
    """The fallbacks this process learned for `model`, each {feature, asked, sent, status, error}."""
    with _lock:
        return [dict(d) for d in _said.get((wire, model), [])]


def learn(wire: str, model: str, change: dict[str, Any], fallback: dict) -> bool:
    """`model` refused a feature (`fallback`: feature, asked, sent, status, error): its requests use `change`
    from now on. Said in one line the first time; False when another episode learned it first."""
    with _lock:
        known = _learned.setdefault((wire, model), {})
        if all(known.get(k) == v for k, v in change.items()):
            return False
        known.update(change)
        _said.setdefault((wire, model), []).append(dict(fallback))
    notice(log, f"{model}: the API refused {fallback['asked']} (HTTP {fallback.get('status')}: "
                f"{fallback.get('error', '')}); its requests use {fallback['sent']} from now on",
           logging.WARNING)  # fmt: skip
    return True


def forget() -> None:
    """Forget what was learned (tests; a long-lived notebook after a provider changed a model)."""
    with _lock:
        _learned.clear()
        _said.clear()
    _user_rows.cache_clear()


def fall_back(
    exc: BaseException,
    wire: str,
    model: str,
    used: Caps,
    change: dict[str, Any] | None,
    words: Callable[[Caps], str],
    info: dict,
    turn: int,
) -> bool:
    """After a 400: when `change` (what the refusal asks for; None when it refused nothing the request
    carried) is given, learn it, keep the fallback in the agent's `info["fallbacks"]` and say True (ask
    again). `used` is what the refused request was built from, `words(caps)` says what a request built from
    `caps` carries."""
    if not change:
        return False
    status = getattr(exc, "status", None)
    message = secrets.scrub(" ".join(str(error_fields(exc.__cause__).get("message") or exc).split()))[:300]
    fallback = {"turn": turn, "feature": ", ".join(sorted(change)), "asked": words(used),
                "sent": words(used.but(**change)), "status": status, "error": message}  # fmt: skip
    learn(wire, model, change, fallback)
    info.setdefault("fallbacks", []).append(fallback)
    return True


def applied(wire: str, model: str, info: dict) -> None:
    """At an agent's start: the fallbacks earlier episodes of this process learned for `model`, in its record
    (turn 0: from the first request on)."""
    earlier = learned(wire, model)
    if earlier:
        info["fallbacks"] = [{**f, "turn": 0} for f in earlier]
