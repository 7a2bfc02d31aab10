"""Where the requests of a chat-completions spec go, and what they need: `openai-chat` talks to OpenAI's own
API (the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY), `hf` to the Hugging Face router (HF_ROUTER_URL,
HF_TOKEN; a spec `org/m:a|b` names the providers behind it to try in turn), `vllm` to the user's own vLLM or
SGLang server (VLLM_BASE_URL; a key if it wants one). `evalkit.providers.chat_completions` offers these as its
provider module's `required_keys`, `required_urls` and `endpoint_url`.
"""

from __future__ import annotations

import os

from evalkit.errors import ConfigError
from evalkit.providers.common import OPENAI, load_env

HF_ROUTER_DEFAULT: str | None = None
"""The router's base URL when `HF_ROUTER_URL` is not set (left for the project to fill in)."""


def required_keys(model: str, provider: str | None = None) -> list[list[str]]:
    load_env()
    return {"hf": [["HF_TOKEN"]], "vllm": []}.get(provider or "", [["OPENAI_API_KEY"]])


def required_urls(model: str, provider: str | None = None) -> list[str]:
    """The endpoint variables a spec needs: the router's and the user's own server have no default."""
    load_env()
    if provider == "hf" and not HF_ROUTER_DEFAULT:
        return ["HF_ROUTER_URL"]
    return ["VLLM_BASE_URL"] if provider == "vllm" else []


def endpoint_url(model: str, provider: str | None = None) -> tuple[str, str]:
    """(the base URL requests go to, where it was set), for the reachability check before a run."""
    load_env()
    if provider == "hf":
        return os.environ.get("HF_ROUTER_URL") or HF_ROUTER_DEFAULT or "", "HF_ROUTER_URL"
    if provider == "vllm":
        return os.environ.get("VLLM_BASE_URL", ""), "VLLM_BASE_URL"
    return OPENAI.endpoint_url(model, provider)


def endpoint(provider: str) -> dict:
    """Client arguments; openai-chat needs none (the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY)."""
    if provider == "hf":
        url = os.environ.get("HF_ROUTER_URL") or HF_ROUTER_DEFAULT
        if not url:
            raise ConfigError("set HF_ROUTER_URL to the Hugging Face router's OpenAI-compatible base URL")
        return {"base_url": url, "api_key": os.environ.get("HF_TOKEN")}
    if provider == "vllm":
        url = os.environ.get("VLLM_BASE_URL")
        if not url:
            raise ConfigError("set VLLM_BASE_URL to your server's OpenAI-compatible base URL (…/v1)")
        # A local server may need no key, but the SDK insists on one.
        return {
            "base_url": url,
            "api_key": os.environ.get("VLLM_API_KEY") or os.environ.get("HF_TOKEN") or "none",
        }
    return {}


def route_models(model: str, provider: str) -> list[str]:
    """`org/m:a|b` on the hf router → [`org/m:a`, `org/m:b`], tried in turn."""
    if provider != "hf" or "|" not in model:
        return [model]
    base, _, routes = model.rpartition(":")
    return [f"{base}:{r}" for r in routes.split("|") if r]
