"""The one thing own-loop runners swap: the model call, to an OpenAI-compatible endpoint (vLLM, SGLang).

Transient failures (connection, timeout, 429, 5xx) are retried here, at the harness level, and then end
the task as an `EndpointError` (unscored, rerun on resume); what the agent's own loop retries (a reply it
cannot parse) is left to that loop. Failures are classified by exception type and status, never by text.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import httpx

from evalkit.errors import ConfigError, EndpointError, EvalkitError
from evalkit.types import Usage


class RequestRejected(EvalkitError):
    """The endpoint refused this request itself (HTTP 400: e.g. a prompt longer than the context): the
    episode's own doing, not the server failing."""


@dataclass
class Reply:
    text: str
    finish_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0


def api_key() -> str:
    return os.environ.get("OWNLOOP_API_KEY") or "not-needed"


def check_endpoint(base_url: str, model: str, timeout: float = 10.0) -> None:
    """Raise ConfigError (one line, before any work) when the endpoint is unreachable or does not serve
    `model`."""
    url = base_url.rstrip("/") + "/models"
    try:
        r = httpx.get(url, timeout=timeout, headers={"Authorization": f"Bearer {api_key()}"})
    except httpx.HTTPError as e:
        raise ConfigError(f"cannot reach the model endpoint at {base_url} ({type(e).__name__})") from None
    if r.status_code != 200:
        raise ConfigError(f"the model endpoint at {base_url} answered {r.status_code} to GET /models")
    try:
        ids = [str(m.get("id")) for m in r.json().get("data", [])]
    except (ValueError, AttributeError):
        raise ConfigError(
            f"the model endpoint at {base_url} did not answer /models as an OpenAI API"
        ) from None
    if ids and model not in ids:
        raise ConfigError(f"the endpoint at {base_url} serves {', '.join(ids[:5])}, not {model!r}")


class Endpoint:
    """Chat completions against `base_url` for one served model, with the harness's retries."""

    def __init__(
        self, base_url: str, model: str, timeout: float = 300.0, retries: int = 3, wait: float = 5.0
    ):
        # start-up: the OpenAI SDK only for a run that calls a model
        from openai import OpenAI

        self.base_url, self.model, self.retries, self.wait = base_url, model, max(1, retries), wait
        self.client = OpenAI(base_url=base_url, api_key=api_key(), timeout=timeout, max_retries=0)

    def chat(self, messages: list[dict], **kw) -> Reply:
        # start-up (as above)
        import openai

        last: Exception | None = None
        for attempt in range(self.retries):
            t = time.monotonic()
            try:
                r = self.client.chat.completions.create(model=self.model, messages=messages, **kw)
            except openai.BadRequestError as e:
                raise RequestRejected(f"the endpoint rejected the request (400): {_brief(e)}") from e
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
                last = e
            except openai.APIStatusError as e:
                if e.status_code < 500 and e.status_code not in (408, 409, 429):
                    raise EndpointError(
                        f"the endpoint answered {e.status_code}: {_brief(e)}", e.status_code
                    ) from e
                last = e
            else:
                choice = r.choices[0] if r.choices else None
                u = r.usage
                usage = Usage(
                    input=int(getattr(u, "prompt_tokens", 0) or 0),
                    output=int(getattr(u, "completion_tokens", 0) or 0),
                )
                return Reply(
                    text=(choice.message.content or "") if choice else "",
                    finish_reason=(choice.finish_reason or "") if choice else "",
                    usage=usage,
                    seconds=time.monotonic() - t,
                )
            if attempt + 1 < self.retries:
                time.sleep(self.wait)
        status = getattr(last, "status_code", None)
        raise EndpointError(
            f"the model endpoint failed {self.retries} times: {_brief(last)}", status
        ) from last


def _brief(e: BaseException | None) -> str:
    return f"{type(e).__name__}: {str(e)[:200]}" if e is not None else "no error"
