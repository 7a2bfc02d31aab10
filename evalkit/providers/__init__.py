"""Model specs → agents.

A spec is `provider:model[@thinking]`: `anthropic:claude-sonnet-5@low`, `openai:gpt-6-sol`,
`hf:Qwen/Qwen3-VL-8B-Instruct:novita|together`, `vllm:my-model@off`, `baseline:tracer`,
`replay:runs/demo#3f2a…`. Each provider module exposes

    create(model, thinking, *, system, tools, options, provider) -> Agent
    required_keys(model, provider) -> list[list[str]]   # any one name of each inner list must be set
    validate(model) -> None                   # optional: ConfigError for a model it cannot run

and is imported only when a spec names it, so a missing SDK never breaks the offline agents.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

from evalkit.errors import ConfigError, MissingKeyError, UnknownProviderError
from evalkit.types import Agent, AgentOptions, ToolSpec

PROVIDERS = {
    "anthropic": "evalkit.providers.anthropic",
    "openai": "evalkit.providers.openai_responses",
    "openai-chat": "evalkit.providers.chat_completions",
    "hf": "evalkit.providers.chat_completions",
    "vllm": "evalkit.providers.chat_completions",
    "baseline": "evalkit.providers.baseline",
    "replay": "evalkit.providers.replay",
}
THINKING = ("off", "low", "default", "medium", "high")
DEFAULT_MODELS = {"anthropic": "claude-sonnet-5", "openai": "gpt-6-sol"}


@dataclass(frozen=True)
class Spec:
    provider: str
    model: str
    thinking: str | None = None

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" + (f"@{self.thinking}" if self.thinking else "")


def parse_spec(spec: str) -> Spec:
    """Split `provider:model[@thinking]`, raising ConfigError on anything malformed."""
    spec = spec.strip()
    provider, sep, rest = spec.partition(":")
    if provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise UnknownProviderError(f"unknown provider {provider!r} in model spec {spec!r} (known: {known})")
    if provider == "replay":
        if not rest or "#" not in rest:
            raise ConfigError(f"replay spec must be replay:<run dir>#<episode key>, got {spec!r}")
        return Spec(provider, rest)
    thinking = None
    if "@" in rest:
        rest, _, thinking = rest.rpartition("@")
        if thinking not in THINKING:
            raise ConfigError(
                f"unknown thinking level {thinking!r} in {spec!r} (use one of {', '.join(THINKING)})"
            )
    model = rest or DEFAULT_MODELS.get(provider, "")
    if not sep and provider not in DEFAULT_MODELS or not model:
        raise ConfigError(f"model spec {spec!r} names no model (write {provider}:<model>)")
    return Spec(provider, model, thinking)


def provider_module(spec: Spec) -> ModuleType:
    return importlib.import_module(PROVIDERS[spec.provider])


def check_keys(specs: list[str]) -> None:
    """Before any work starts: ConfigError for a spec its provider cannot run, MissingKeyError naming every
    absent key."""
    missing: list[str] = []
    for s in specs:
        spec = parse_spec(s)
        mod = provider_module(spec)
        if hasattr(mod, "validate"):
            mod.validate(spec.model)
        for alternatives in getattr(mod, "required_keys", lambda m, p=None: [])(spec.model, spec.provider):
            if not any(os.environ.get(k) for k in alternatives):
                missing.append(f"{' or '.join(alternatives)} (for {s})")
    if missing:
        raise MissingKeyError(
            "missing API key: " + "; ".join(missing) + " — set it in the environment or .env"
        )


def make_agent(
    spec: str, *, system: str, tools: list[ToolSpec], options: AgentOptions | None = None
) -> Agent:
    """A fresh agent for one episode."""
    s = parse_spec(spec)
    agent = provider_module(s).create(
        s.model,
        s.thinking,
        system=system,
        tools=tools,
        options=options or AgentOptions(),
        provider=s.provider,
    )
    agent.model = str(s)
    return agent
