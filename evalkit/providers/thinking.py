"""What a spec's thinking level becomes on each wire, for a model that accepts `Caps`
(`evalkit.providers.capabilities`), said in words for a line and the record; and which feature a 400
refuses, read from the fields each API documents (the `param` of an OpenAI error; the message of an
Anthropic `invalid_request_error`, which carries nothing else), as the change that asks for what the model
takes instead. The wire adapters build their requests from these and fall back by them.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.providers import capabilities
from evalkit.providers.attempts import error_fields
from evalkit.providers.capabilities import Caps
from evalkit.providers.common import sdk
from evalkit.types import AgentOptions

EFFORTS = ("low", "medium", "high")
BUDGET_SHARE = {"low": 8, "medium": 4, "high": 2}
"""Budgeted thinking (models without adaptive thinking): this share of `max_tokens` per level (1/8, 1/4, 1/2:
2,000, 4,000 and 8,000 tokens at the default 16,000), at least MIN_BUDGET, which the API requires."""
MIN_BUDGET = 1024


# ---- Anthropic Messages ------------------------------------------------------------------------------------


def claude_params(thinking: str | None, caps: Caps = Caps(), max_tokens: int = 16000) -> dict:
    """The request fields of a thinking level on a model that accepts `caps` (see
    `evalkit.providers.capabilities`): adaptive thinking with an effort, or budgeted thinking (a share of
    `max_tokens`) where the model only knows that; `@off` as the model turns thinking off, or at its lowest
    effort where it cannot."""
    effort = {"output_config": {"effort": "low" if thinking == "off" else thinking}} if caps.effort else {}
    if thinking == "off":
        if caps.thinking == "none":
            return {}
        return effort if caps.off == "omit" else {"thinking": {"type": caps.off}}
    if thinking not in EFFORTS or caps.thinking == "none":
        return {}
    if caps.thinking == "budgeted":
        budget = max(MIN_BUDGET, max_tokens // BUDGET_SHARE[thinking])
        if budget >= max_tokens:  # no room to think and still answer: the effort alone, if it takes one
            return effort
        return {"thinking": {"type": "enabled", "budget_tokens": budget}, **effort}
    return {"thinking": {"type": "adaptive", "display": "summarized"}, **effort}


def claude_words(thinking: str | None, caps: Caps, max_tokens: int) -> str:
    """What `claude_params` sends, in words, for a line and the record."""
    p = claude_params(thinking, caps, max_tokens)
    kind = (p.get("thinking") or {}).get("type")
    effort = (p.get("output_config") or {}).get("effort")
    said = {
        "enabled": f"budgeted thinking (budget_tokens {(p.get('thinking') or {}).get('budget_tokens')})",
        "adaptive": "adaptive thinking",
        "disabled": "thinking disabled",
        "between_tools": "thinking between tools only",
        None: "no thinking field",
    }[kind]
    return said + (f" at effort {effort}" if effort else "")


_FIELD = re.compile(r"^(?P<field>[a-z_.]+): ")
_TYPE = re.compile(r'^"thinking\.type\.(?P<type>[a-z_]+)" is not supported')
ADAPTIVE_REFUSED = "adaptive thinking is not supported on this model"


def claude_refused(exc: BaseException | None, sent: dict, caps: Caps) -> dict | None:
    """The change a 400 asks for, when it refuses a feature `sent` carried; else None. An Anthropic error body
    has a type (`invalid_request_error`) and a message only: the documented messages are read, and the field
    path a validation message starts with (`thinking: …`, `output_config.effort: …`)."""
    anthropic = sdk("anthropic")
    if (
        not isinstance(exc, anthropic.BadRequestError)
        or error_fields(exc).get("type") != "invalid_request_error"
    ):
        return None
    message = str(error_fields(exc).get("message") or "")
    kind = (sent.get("thinking") or {}).get("type")
    typed, path = _TYPE.match(message), _FIELD.match(message)
    field = path["field"] if path else ""
    if (
        message.startswith(ADAPTIVE_REFUSED) or (typed and typed["type"] == "adaptive")
    ) and kind == "adaptive":
        return {"thinking": "budgeted"}
    if typed and typed["type"] == kind == "enabled":
        return {"thinking": "adaptive"}
    if typed and typed["type"] == kind and kind in ("disabled", "between_tools"):
        return {"off": "omit"}
    if field.startswith("output_config") and "output_config" in sent:
        return {"effort": False}
    if field.startswith("thinking") and kind is not None and caps.thinking != "none":
        return {"thinking": "none"}
    return None


# ---- OpenAI Responses --------------------------------------------------------------------------------------


def responses_params(thinking: str | None, caps: Caps = Caps()) -> dict | None:
    """The `reasoning` object of a thinking level on a model that accepts `caps`, or None for a model that
    takes none (gpt-4.1, gpt-4o): `@off` is the lowest effort the model takes (`none`, `minimal`, `low`), and
    a summary is asked for where the model gives one (never with effort `none`, which leaves nothing to
    summarise)."""
    if not caps.reasoning:
        return None
    effort = caps.off if thinking == "off" else (thinking if thinking in EFFORTS else None)
    p: dict[str, Any] = {"summary": "auto"} if caps.summary and effort != "none" else {}
    if effort and caps.effort:
        p["effort"] = effort
    return p


LOWER = {"none": "minimal", "minimal": "low"}
"""The next effort up, when a model refuses the lowest one asked for `@off`."""


def responses_refused(exc: BaseException | None, sent: dict, caps: Caps) -> dict | None:
    """The change a 400 asks for, when its `param` names a reasoning field the request carried (never its
    message): a summary refused (a model without them, or an organisation not verified for them), an effort
    value refused (the lowest effort one step up), the reasoning object refused (not a reasoning model)."""
    openai = sdk("openai")
    if not isinstance(exc, openai.BadRequestError):
        return None
    fields = error_fields(exc)
    param, code = fields.get("param"), fields.get("code")
    reasoning = sent.get("reasoning")
    if reasoning is None:
        return None
    if param == "reasoning.summary" and "summary" in reasoning:
        return {"summary": False}
    if param == "reasoning.effort" and "effort" in reasoning:
        if code == "unsupported_value" and reasoning["effort"] in LOWER:
            return {"off": LOWER[reasoning["effort"]]}
        return {"reasoning": False} if code == "unsupported_parameter" else {"effort": False}
    if param == "reasoning":
        return {"reasoning": False}
    return None


def responses_words(thinking: str | None, caps: Caps) -> str:
    """What `responses_params` sends, in words."""
    p = responses_params(thinking, caps)
    if p is None:
        return "no reasoning object"
    said = [f"effort {p['effort']}"] if "effort" in p else []
    said += ["a reasoning summary"] if "summary" in p else []
    return "reasoning " + (" with ".join(said) if said else "with no fields")


# ---- chat completions --------------------------------------------------------------------------------------


def chat_words(thinking: str | None, caps: Caps) -> str:
    """What a request of `thinking` carries for it, in words."""
    if thinking in EFFORTS:
        return f"reasoning_effort {thinking}" if caps.reasoning and caps.effort else "no reasoning_effort"
    return "no reasoning_effort"


# ---- what the table makes of a spec ------------------------------------------------------------------------


def sent_as(provider: str, model: str, thinking: str | None, options: AgentOptions) -> str | None:
    """What the capability table makes of `thinking` on `model` over `provider`'s wire, in words, where that
    is not what the newest request shape sends (`claude-sonnet-4-5@low`: budgeted thinking); None where it
    is, and for servers the table does not know (`hf:`, `vllm:`)."""
    words: dict[str, Any] = {
        "anthropic": ("anthropic", lambda caps: claude_words(thinking, caps, options.max_tokens)),
        "openai": ("openai", lambda caps: responses_words(thinking, caps)),
        "openai-chat": ("openai", lambda caps: chat_words(thinking, caps)),
    }
    if provider not in words or not thinking:
        return None
    wire, said = words[provider]
    table = said(capabilities.table_caps(wire, model))
    return table if table != said(Caps()) else None
