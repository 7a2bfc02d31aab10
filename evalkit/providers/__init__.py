"""Model specs → agents.

A spec is `provider:model[@thinking]`: `anthropic:claude-sonnet-5@low`, `openai:gpt-6-sol`,
`hf:Qwen/Qwen3-VL-8B-Instruct:novita|together`, `vllm:my-model@off`, `baseline:tracer`,
`replay:runs/demo#3f2a…`. Each provider module exposes

    create(model, thinking, *, system, tools, options, provider[, health]) -> Agent
    required_keys(model, provider) -> list[list[str]]   # API keys: one name of each inner list must be set
    required_urls(model, provider) -> list[str]         # optional: endpoint variables that must be set
    endpoint_url(model, provider) -> (url, variable)    # optional: where requests go, for `check_endpoints`
    validate(model) -> None                   # optional: ConfigError for a model it cannot run

and is imported only when a spec names it, so a missing SDK never breaks the offline agents. The three wire
modules' agents share one base (`evalkit.providers.agent.WireAgent`) and keep only their wire. `standin` is
a local server speaking the Anthropic wire with the tracer's moves, for runs through a real SDK with no key.

May import: `records` (`replay:` reads a recorded episode) and the modules at evalkit's top. A model never
sees the environment: nothing here imports `envs` or `run`.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

from evalkit.errors import ConfigError, MissingKeyError, UnknownProviderError
from evalkit.providers import thinking
from evalkit.providers.health import ProviderHealth
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


def _absent(spec: Spec, label: str) -> tuple[list[str], list[str]]:
    """(API keys, endpoint URL variables) that `spec` needs and the environment lacks."""
    mod = provider_module(spec)
    keys = [
        f"{' or '.join(alternatives)} (for {label})"
        for alternatives in getattr(mod, "required_keys", lambda m, p=None: [])(spec.model, spec.provider)
        if not any(os.environ.get(k) for k in alternatives)
    ]
    urls = [
        f"{name} (for {label})"
        for name in getattr(mod, "required_urls", lambda m, p=None: [])(spec.model, spec.provider)
        if not os.environ.get(name)
    ]
    return keys, urls


def _raise_absent(keys: list[str], urls: list[str]) -> None:
    said = [f"missing API key {'; '.join(keys)}"] if keys else []
    said += [f"missing endpoint URL {'; '.join(urls)}"] if urls else []
    if said:
        raise MissingKeyError("; ".join(said) + " — set it in the environment or .env")


_OPTIONAL_KEYS = {"vllm": ["VLLM_API_KEY", "HF_TOKEN"]}
"""Keys a provider sends when they are set, though it runs without them."""
AUTH_STATUSES = (401, 403)
"""What an endpoint answers a key it refuses (after a router's fallbacks, a 403 is the key's too)."""


def key_variables(spec: str) -> list[str]:
    """The variables that hold the API key a spec's requests carry, for a message about a refused key."""
    try:
        s = parse_spec(spec)
        mod = provider_module(s)
        required = getattr(mod, "required_keys", lambda m, p=None: [])(s.model, s.provider)
    except ConfigError:  # an agent built by a factory of the user's: no spec to read
        return []
    return [k for alternatives in required for k in alternatives] or _OPTIONAL_KEYS.get(s.provider, [])


def check_keys(specs: list[str]) -> None:
    """Before any work starts: ConfigError for a spec its provider cannot run, MissingKeyError naming every
    absent API key and endpoint URL variable."""
    keys: list[str] = []
    urls: list[str] = []
    for s in specs:
        spec = parse_spec(s)
        mod = provider_module(spec)
        if hasattr(mod, "validate"):
            mod.validate(spec.model)
        k, u = _absent(spec, s)
        keys, urls = keys + k, urls + u
    _raise_absent(keys, urls)


def check_endpoints(specs: list[str], timeout: float = 10.0) -> None:
    """Before any work starts: every model endpoint answers HTTP at all (any status will do: no key is sent
    and no tokens are spent). ConfigError naming the URL and the variable that sets it when nothing does."""
    import httpx  # here: it is a tenth of a second of `import evalkit.run`, which imports this package

    seen: set[str] = set()
    for s in specs:
        spec = parse_spec(s)
        where = getattr(provider_module(spec), "endpoint_url", None)
        if where is None:
            continue
        url, variable = where(spec.model, spec.provider)
        if url in seen:
            continue
        seen.add(url)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{variable}={url!r} (for {s}) is not an http:// or https:// URL")
        try:
            httpx.get(url, timeout=timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise ConfigError(
                f"cannot reach the model endpoint {url} (set by {variable}, for {s}): {type(e).__name__}: {e}"
            ) from None


def sent_as(specs: list[str], options: AgentOptions) -> dict[str, str]:
    """Per spec, what its thinking level is sent as where evalkit's capability table makes it something else
    than the spec says on its face (`claude-sonnet-4-5@low`: budgeted thinking), for a line before the run and
    run.json (`evalkit.providers.thinking`)."""
    said = {}
    for s in specs:
        try:
            spec = parse_spec(s)
        except ConfigError:
            continue
        words = thinking.sent_as(spec.provider, spec.model, spec.thinking, options)
        if words:
            said[s] = words
    return said


ROUTED = ("hf", "vllm", "openai-chat")
"""Providers whose agents take the run's `ProviderHealth` (a router spec may name several providers)."""


def make_agent(
    spec: str,
    *,
    system: str,
    tools: list[ToolSpec],
    options: AgentOptions | None = None,
    health: ProviderHealth | None = None,
) -> Agent:
    """A fresh agent for one episode; `health` is the run's record of failing providers, if it has one. A
    missing key is a MissingKeyError naming it (never the SDK's own TypeError)."""
    s = parse_spec(spec)
    _raise_absent(*_absent(s, spec))
    extra = {"health": health} if health is not None and s.provider in ROUTED else {}
    agent = provider_module(s).create(
        s.model,
        s.thinking,
        system=system,
        tools=tools,
        options=options or AgentOptions(),
        provider=s.provider,
        **extra,
    )
    agent.model = str(s)
    return agent
