"""OpenAI-compatible chat completions: `openai-chat` (OpenAI), `hf` (the Hugging Face router), `vllm` (the
user's own vLLM / SGLang server).

Tool messages carry text only, so the images a tool returned follow in one user message after the tool
results. Replies are streamed with usage; servers that ignore `max_tokens` are held to a character cap.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from evalkit.errors import ConfigError, EndpointError, ModelFailure
from evalkit.providers import capabilities, clock, openai_wire
from evalkit.providers import images as imgs
from evalkit.providers.attempts import (
    FALLBACK,
    StreamError,
    persist,
    reading_stream,
    request,
    settle,
)
from evalkit.providers.common import (
    Recorded,
    data_url,
    exchange,
    load_env,
    make_call,
    notes_text,
    sdk,
    shared_client,
    wire_args,
)
from evalkit.providers.health import ProviderHealth, Routes, error_fields, provider_failure
from evalkit.providers.thinking import chat_words
from evalkit.providers.thinking_off import OffChoice, probe
from evalkit.types import AgentOptions, Attempt, Call, Image, ToolOutcome, ToolSpec, Turn, Usage

HF_ROUTER_DEFAULT: str | None = None
"""The router's base URL when `HF_ROUTER_URL` is not set (left for the project to fill in)."""
CHAR_CAP_PER_TOKEN = 5
JPEG_OVER = 150_000
HARNESS_CAP = "length (harness cap)"
EFFORTS = ("low", "medium", "high")
REJECT_REASONING = ("reasoner", "-r1")
"""Parts of a DeepSeek model name whose API refuses `reasoning_content` in the history."""
REFUSAL = "refusal"


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
    openai = sdk("openai")
    return str(openai.OpenAI(api_key="-").base_url), "OPENAI_BASE_URL"


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


def create(
    model: str,
    thinking: str | None,
    *,
    system: str,
    tools: list[ToolSpec],
    options: AgentOptions,
    provider: str = "openai-chat",
    health: ProviderHealth | None = None,
) -> ChatAgent:
    openai = sdk("openai")
    load_env()
    # Retries are made by evalkit.providers.attempts, where each request is seen and accounted for.
    client = shared_client(
        openai,
        "OpenAI",
        "OPENAI_",
        max_retries=0,
        timeout=clock.request_seconds(options),
        **endpoint(provider),
    )
    return ChatAgent(
        client, model, thinking, system=system, tools=tools, options=options, provider=provider, health=health
    )


# ---- to the wire -------------------------------------------------------------------------------------------


def tool_to_wire(tool: ToolSpec) -> dict:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def image_part(image: Image, shrink_over: int | None = None) -> dict:
    if shrink_over:
        image = imgs.shrink(image, shrink_over)
    return {"type": "image_url", "image_url": {"url": data_url(image.mime, image.b64)}}


def result_messages(pairs: list[tuple[Call, ToolOutcome]], shrink_over: int | None = None) -> list[dict]:
    """Tool messages (text only), then one user message with the images the tools returned."""
    out = [
        {
            "role": "tool",
            "tool_call_id": c.id,
            "content": ("Error: " if o.is_error else "") + o.text or "(no output)",
        }
        for c, o in pairs
    ]
    parts: list[dict] = []
    for call, outcome in pairs:
        if outcome.images:
            parts.append({"type": "text", "text": f"Image(s) returned by {call.name} (call {call.id}):"})
            parts += [image_part(i, shrink_over) for i in outcome.images]
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def sends_reasoning(model: str, option: bool | None = None) -> bool:
    """Whether an assistant turn with tool calls goes back with its `reasoning_content`. DeepSeek's thinking
    mode requires it on every such turn of the history (a 400 otherwise, even when it was empty), while
    deepseek-reasoner (R1) rejects the field in any input message, and other servers have no use for it.
    `option` (`AgentOptions.send_reasoning`) overrides the rule, for a server the rule does not know."""
    if option is not None:
        return option
    name = model.lower().rpartition("/")[2].partition(":")[0]
    return "deepseek" in name and not any(tag in name for tag in REJECT_REASONING)


def assistant_message(turn: Turn, with_reasoning: bool = False) -> dict | None:
    """The assistant message a turn leaves in the history, or None for none: an empty reply, or a refusal,
    whose text is not sent again (the episode ends on it)."""
    if turn.refused or (not turn.text and not turn.calls):
        return None
    msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": wire_args(c)}}
            for c in turn.calls
        ]
        if with_reasoning:
            msg["reasoning_content"] = turn.reasoning
    return msg


# ---- from the wire -----------------------------------------------------------------------------------------


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, visible text) of content that opens with `<think>…</think>`, or whose template already
    opened the tag in the prompt so only `…</think>` arrives."""
    head = text.lstrip()
    if head.startswith("<think>"):
        inner, closed, rest = head[len("<think>") :].partition("</think>")
        return inner.strip(), rest.lstrip() if closed else ""
    if "</think>" in text and "<think>" not in text:
        inner, _, rest = text.partition("</think>")
        return inner.strip(), rest.lstrip()
    return "", text


def usage_from_wire(u: dict | None, reasoning_chars: int = 0) -> Usage:
    u = u or {}
    prompt = u.get("prompt_tokens_details") or {}
    completion = u.get("completion_tokens_details") or {}
    cached, written = prompt.get("cached_tokens") or 0, prompt.get("cache_write_tokens") or 0
    return Usage(
        input=max(0, (u.get("prompt_tokens") or 0) - cached - written),
        output=u.get("completion_tokens") or 0,
        cache_read=cached,
        cache_write=written,
        reasoning_tokens=completion.get("reasoning_tokens") or 0,
        reasoning_chars=reasoning_chars,
    )


class Accumulator:
    """Assembles a streamed reply (content, reasoning, tool-call deltas, usage) chunk by chunk. Pieces are
    kept in lists and joined once: appending to a string per chunk is quadratic in the reply's length."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict] = {}
        self.chars = 0
        self.finish: str | None = None
        self.usage: dict | None = None
        self.capped = False

    def _take(self, into: list[str], piece: str) -> None:
        if piece:
            into.append(piece)
            self.chars += len(piece)

    def add(self, chunk: dict) -> None:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            self._take(self.content, delta.get("content") or "")
            # Some servers send the same text as both fields; one of them is enough.
            self._take(self.reasoning, delta.get("reasoning_content") or delta.get("reasoning") or "")
            self._take(self.refusal, delta.get("refusal") or "")
            for i, tc in enumerate(delta.get("tool_calls") or []):
                index = tc.get("index") if tc.get("index") is not None else i
                entry = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
                fn = tc.get("function") or {}
                entry["id"] = entry["id"] or tc.get("id")
                entry["name"] = entry["name"] or fn.get("name") or ""
                self._take(entry["arguments"], fn.get("arguments") or "")
            self.finish = choice.get("finish_reason") or self.finish

    def partial(self) -> Turn:
        """What had arrived of a reply whose stream was cut (its text and reasoning; calls never run)."""
        return Turn(
            text="".join(self.content), reasoning="".join(self.reasoning), stop="cut", usage_known=False
        )

    def message(self) -> dict:
        """The reply as a plain completion; a stream that ended without a finish reason was cut off (unless
        the harness cut it), and half a reply must not pass for a whole one."""
        if self.finish is None and not self.capped:
            raise StreamError("the stream ended without a finish reason")
        calls = [
            {"id": c["id"], "function": {"name": c["name"], "arguments": "".join(c["arguments"])}}
            for _, c in sorted(self.calls.items())
        ]
        msg = {
            "content": "".join(self.content),
            "reasoning_content": "".join(self.reasoning),
            "tool_calls": calls,
            "refusal": "".join(self.refusal) or None,
        }
        finish = HARNESS_CAP if self.capped else self.finish
        return {"choices": [{"message": msg, "finish_reason": finish}], "usage": self.usage}


def turn_from_completion(resp: dict) -> Turn:
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    think, text = split_think(msg.get("content") or "")
    reasoning = "\n\n".join(r for r in (reasoning, think) if r)
    calls = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        calls.append(make_call(tc.get("id") or f"call_{i}", fn.get("name") or "", fn.get("arguments")))
    stop = choice.get("finish_reason") or ""
    if isinstance(msg.get("refusal"), str) and msg["refusal"]:
        # OpenAI says a model declined in the message's `refusal` field, its finish reason a plain `stop`.
        text, stop = "\n\n".join(t for t in (text, msg["refusal"]) if t), REFUSAL
    return Turn(
        text=text,
        reasoning=reasoning,
        calls=calls,
        stop=stop,
        usage=usage_from_wire(resp.get("usage"), len(reasoning)),
        truncated=stop in ("length", HARNESS_CAP),
    )


# ---- the agent ---------------------------------------------------------------------------------------------


def _is_image(part: dict) -> bool:
    return part.get("type") == "image_url"


def _placeholder() -> dict:
    return {"type": "text", "text": imgs.PLACEHOLDER}


class ChatAgent(Recorded):
    """One episode's conversation over chat completions.

    Behind a router spec with several providers (`org/m:a|b`), the episode starts on the first provider the
    run's `ProviderHealth` does not pass over, and stays on it (its cache is there) until it fails in a way
    that is the provider's; then the next is tried at once. Every switch goes to `info["provider_switches"]`.
    """

    stream = True

    def __init__(
        self,
        client: Any,
        model: str,
        thinking: str | None,
        *,
        system: str,
        tools: list[ToolSpec],
        options: AgentOptions,
        provider: str = "openai-chat",
        health: ProviderHealth | None = None,
    ):
        self.client = client
        self.provider = provider
        self.info: dict = {}
        self.routes = Routes(
            route_models(model, provider),
            health if health is not None else ProviderHealth(),
            lambda switch: self.info.setdefault("provider_switches", []).append(switch),
        )
        self.model = f"{provider}:{model}" + (f"@{thinking}" if thinking else "")
        self.wire = "openai" if provider == "openai-chat" else "chat"
        """The capability table's wire: OpenAI's own models by their names; a router's or the user's own
        server's models are not in it, and learn from their 400s alone."""
        self.thinking = thinking
        self.tools = [tool_to_wire(t) for t in tools]
        self.options = options
        # OpenAI's own endpoint wants the newer name; the router and vLLM take the classic one.
        self.limit_key = "max_completion_tokens" if provider == "openai-chat" else "max_tokens"
        self.shrink_over = JPEG_OVER if provider == "hf" else None
        self.messages: list[dict] = [{"role": "system", "content": system}] if system else []
        self.off: dict[str, OffChoice] = {}
        """The thinking-off switch found for each route probed."""
        self._opening: int | None = None
        self._turn = 0
        Recorded.__init__(self, capabilities.caps(self.wire, model).images)

    def user(self, text: str, images: Sequence[Image] = ()) -> None:
        text, images = self.withhold(text, images)
        parts = ([{"type": "text", "text": text}] if text else []) + [
            image_part(i, self.shrink_over) for i in images
        ]
        self.ledger.add(parts, images, _is_image)
        last = self.messages[-1] if self.messages else None
        # Templates that insist on alternating roles reject two user messages in a row.
        if last and last["role"] == "user" and isinstance(last["content"], list):
            last["content"] += parts
        else:
            self.messages.append({"role": "user", "content": parts})
        if self._opening is None:
            self._opening = len(self.messages) - 1

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        pairs = self.withhold_results(pairs)
        msgs = result_messages(pairs, self.shrink_over)
        self.ledger.add(msgs, [i for _, o in pairs for i in o.images], _is_image)
        self.messages += msgs

    def notes(self, text: str) -> None:
        self.user(notes_text(text))

    def prune_images(self, keep: int, window: int | None = None) -> None:
        imgs.prune(self.messages, keep, window, is_image=_is_image, placeholder=_placeholder,
                   opening=self._opening, ledger=self.ledger)  # fmt: skip

    @property
    def route(self) -> str:
        """The provider route in use (the first, before the first step chose one)."""
        return self.routes.current or self.routes.routes[0]

    @property
    def answered_by(self) -> str:
        """The provider of the route in use: behind the router (`org/m:a`), `a`; else the spec's provider."""
        route = self.route
        return route.rpartition(":")[2] if self.provider == "hf" and ":" in route else self.provider

    def params(self) -> dict:
        route = self.route
        p: dict[str, Any] = {
            "model": route,
            "messages": self.messages,
            self.limit_key: self.options.max_tokens,
        }
        if self.tools:
            p["tools"] = self.tools
        caps = capabilities.caps(self.wire, route)
        if self.thinking in EFFORTS and caps.reasoning and caps.effort:
            p["reasoning_effort"] = self.thinking
        elif self.thinking == "off" and route in self.off:
            p.update(self.off[route].params)
        if self.options.temperature is not None:
            p["temperature"] = self.options.temperature
        if self.options.seed is not None:
            p["seed"] = self.options.seed
        return p

    def _call(self) -> dict:
        params = self.params()
        streamed = {"stream": True, "stream_options": {"include_usage": True}}
        self._sent = {**streamed, **params} if self.stream else params
        if not self.stream:
            return self._post(params, stream=False)
        acc = Accumulator()
        cap = CHAR_CAP_PER_TOKEN * self.options.max_tokens
        openai = sdk("openai")
        chunks = self._post({**streamed, **params}, stream=True)
        try:
            with chunks, reading_stream(openai, chunks, acc.partial):
                for chunk in chunks:
                    acc.add(chunk if isinstance(chunk, dict) else {})
                    if acc.chars > cap:
                        # Leaving closes the stream before its usage chunk: the turn's usage is unknown.
                        acc.capped = True
                        break
        except openai.APIError as exc:
            if isinstance(exc, openai.APIStatusError) or acc.finish is None:
                raise
            self._error_after_finish(acc, exc, getattr(chunks, "error_event", None) or {})
        return acc.message()

    def _error_after_finish(self, acc: Accumulator, exc: Any, event: dict) -> None:
        """An error event after the reply's finish reason (OpenRouter sends one after a `length` stop, with
        the usage beside it): the generation had ended, so the reply stands as it came, cut or whole, with
        what it was billed; asking again would pay for the same cut reply. The error is kept in `info`."""
        if isinstance(event.get("usage"), dict):
            acc.usage = event["usage"]
        body = exc.body if isinstance(exc.body, dict) else {}
        self.info.setdefault("errors_after_finish", []).append(
            {"turn": self._turn, "route": self.route, "finish": acc.finish, "code": body.get("code")}
        )

    def _post(self, params: dict, stream: bool) -> Any:
        """POST the request as evalkit built it (`openai_wire.post`): the reply as the server's JSON."""
        body = dict(params)
        body.update(body.pop("extra_body", None) or {})  # as the SDK merges `extra_body` into the JSON
        return openai_wire.post(self.client, "/chat/completions", body, stream)

    def step(self) -> Turn:
        openai = sdk("openai")
        self._turn += 1
        log: list[Attempt] = []
        shrunk = False
        self.routes.begin(self._turn)
        if self._turn == 1:
            capabilities.applied(self.wire, self.route, self.info)
        while True:
            # With another provider behind this one, a failure moves on at once instead of retrying here.
            policy = FALLBACK if self.routes.fallback_left else persist(self.options.max_retries)
            try:
                if self.thinking == "off" and self.route not in self.off:
                    self._probe(policy, log)
                url = str(self.client.base_url)
                resp = request(self._call, openai, route=self.route, url=url, policy=policy, log=log,
                               timeout=clock.request_seconds(self.options))  # fmt: skip
                self.routes.succeeded()
                break
            except (EndpointError, ModelFailure) as exc:
                last, cause = exc.attempts[-1], exc.__cause__
                if isinstance(exc, EndpointError) and self._fell_back(exc):
                    continue
                # A prompt past the context (or the server's limit of images) may fit without its old images.
                overflow = isinstance(exc, ModelFailure) and exc.kind == "context_overflow"
                if (
                    not shrunk
                    and (overflow or isinstance(exc, EndpointError))
                    and self._shrink_rejected(last, cause)
                ):
                    shrunk = True
                    continue
                if isinstance(exc, ModelFailure) or not provider_failure(last, cause):
                    raise
                if not self.routes.failed(last, self._turn):
                    raise
        if self.thinking == "off":
            self.info["thinking_off_method"] = self.off[self.route].method
        if self.keep_raw:
            self.last_raw = exchange(self._sent, resp, _is_image, self.ledger.frame)
        turn = settle(turn_from_completion(resp), log, self.route, self.answered_by)
        turn.usage_known = turn.usage_known and bool(resp.get("usage"))
        msg = assistant_message(turn, sends_reasoning(self.route, self.options.send_reasoning))
        if msg:
            self.messages.append(msg)
        return turn

    def _fell_back(self, exc: EndpointError) -> bool:
        """A 400 whose `param` names `reasoning_effort`, which the request carried: the route is asked
        without it, now and from now on (a model that is no reasoning model, such as gpt-4.1)."""
        sent = self._sent or {}
        fields = error_fields(exc.__cause__)
        bad = exc.status == 400 and fields.get("param") == "reasoning_effort" and "reasoning_effort" in sent
        used = capabilities.caps(self.wire, self.route)
        words = functools.partial(chat_words, self.thinking)
        return capabilities.fall_back(exc, self.wire, self.route, used, {"effort": False} if bad else None,
                                      words, self.info, self._turn)  # fmt: skip

    def _probe(self, policy: Any, log: list[Attempt]) -> None:
        choice, spent = probe(
            self.client,
            self.route,
            self.limit_key,
            policy=policy,
            log=log,
            tool_to_wire=tool_to_wire,
            turn_from_completion=turn_from_completion,
        )
        self.off[self.route] = choice
        self.info.setdefault("thinking_off", {})[self.route] = choice.to_dict()
        if spent != Usage():
            self.info["probe_usage"] = (Usage.from_dict(self.info.get("probe_usage")) + spent).to_dict()

    def _shrink_rejected(self, last: Attempt, cause: BaseException | None) -> bool:
        """A prompt the server refused (413; or a 400 that does not name the provider, as servers that cap
        the images per request or the context length send): every later image but the newest goes and the
        request is made once more; the opening message, with the target, stays. True if it dropped any."""
        if last.status not in (400, 413) or provider_failure(last, cause):
            return False
        if len(imgs.droppable(self.messages, self._opening, _is_image)) <= 1:
            return False
        dropped = imgs.keep_newest(self.messages, 1, is_image=_is_image, placeholder=_placeholder,
                                   opening=self._opening, ledger=self.ledger)  # fmt: skip
        code = error_fields(cause).get("code")
        self.info.setdefault("rejected_prompt_prunes", []).append(
            {"turn": self._turn, "route": self.route, "status": last.status, "code": code, "dropped": dropped}
        )
        return True
