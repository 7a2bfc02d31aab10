"""`@off` on OpenAI-compatible servers: which request switch turns a model's thinking off, per provider.

Servers disagree on the switch (a chat-template flag, `reasoning_effort: none`, or only `low`), and behind a
router each provider may differ, so it is probed once per (server, route) on a tiny tool-call request: the
method that leaves the least reasoning wins. A method the provider rejects (a 4xx about the request) is
skipped; a provider that fails (transport errors, or a 4xx naming the provider) is not probed further — the
EndpointError goes to the caller, which falls back — and nothing is cached for it, so it is probed again once
it recovers.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import EndpointError
from evalkit.providers import clock
from evalkit.providers.attempts import Policy, request
from evalkit.providers.common import sdk
from evalkit.providers.health import provider_failure
from evalkit.types import Attempt, ToolSpec, Usage

NO_THINKING_TEMPLATE = {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
OFF_METHODS: list[tuple[str, dict]] = [
    ("chat_template_kwargs.enable_thinking=false", NO_THINKING_TEMPLATE),
    ("reasoning_effort=none", {"reasoning_effort": "none"}),
    ("reasoning_effort=low", {"reasoning_effort": "low"}),
]
PROBE_TOOL = ToolSpec(
    "record", "Record a number.", {"type": "object", "properties": {"n": {"type": "integer"}}}
)
PROBE_PROMPT = "Call the record tool with n=7."


@dataclass
class OffChoice:
    """What the probe of one route found."""

    method: str | None
    """The switch used, or None when the provider rejected every one (thinking stays on)."""
    params: dict = field(default_factory=dict)
    reasoning: int | None = 0
    """Reasoning (characters plus tokens) the chosen switch still left on the probe: 0 when fully off, None
    when no switch was accepted."""

    def to_dict(self) -> dict:
        return {"method": self.method, "reasoning": self.reasoning}


_cache: dict[tuple[str, str], OffChoice] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_guard = threading.Lock()


def clear_cache() -> None:
    with _guard:
        _cache.clear()


def probe(
    client: Any,
    route: str,
    limit_key: str,
    *,
    policy: Policy,
    log: list[Attempt],
    tool_to_wire: Callable[[ToolSpec], dict],
    turn_from_completion: Callable[[dict], Any],
) -> tuple[OffChoice, Usage]:
    """The switch for `route` (cached per server and route) and the usage the probe itself spent (zero when
    cached). Failed probe requests go to `log`; a failing provider raises EndpointError. The chat wire's
    converters come from its caller, so this module and `chat_completions` don't import each other."""
    openai = sdk("openai")
    key = (str(client.base_url), route)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key in _cache:
            return _cache[key], Usage()
        spent = Usage()
        tried: list[tuple[int, str, dict]] = []
        for name, kwargs in OFF_METHODS:

            def ask(kwargs: dict = kwargs) -> dict:
                return client.chat.completions.create(
                    model=route,
                    messages=[{"role": "user", "content": PROBE_PROMPT}],
                    tools=[tool_to_wire(PROBE_TOOL)],
                    **{limit_key: 512},
                    **kwargs,
                    **clock.timeout(),
                ).model_dump(mode="json")

            try:
                resp = request(ask, openai, route=route, url=str(client.base_url), policy=policy, log=log)
            except EndpointError as exc:
                if provider_failure(exc.attempts[-1], exc.__cause__):
                    raise
                continue  # this switch is refused; another may not be
            usage = turn_from_completion(resp).usage
            spent = spent + usage
            tried.append((usage.reasoning_chars + usage.reasoning_tokens, name, kwargs))
            if tried[-1][0] == 0:
                break
        if not tried:
            choice = OffChoice(None, {}, None)
            warnings.warn(
                f"{route}: the server refused every way to turn thinking off; thinking stays on",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            amount, name, kwargs = min(tried, key=lambda t: t[0])
            choice = OffChoice(name, kwargs, amount)
            if amount:
                warnings.warn(
                    f"{route}: no switch turns thinking fully off; using {name}", RuntimeWarning, stacklevel=3
                )
        _cache[key] = choice
        return choice, spent
