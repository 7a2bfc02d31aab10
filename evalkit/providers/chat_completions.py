"""OpenAI-compatible chat completions: `openai-chat` (OpenAI), `hf` (the Hugging Face router), `vllm` (the
user's own vLLM / SGLang server).

Tool messages carry text only, so the images a tool returned follow in one user message after the tool
results. Replies are streamed with usage; servers that ignore `max_tokens` are held to a character cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.errors import EndpointError, ModelFailure
from evalkit.providers import images as imgs
from evalkit.providers import openai_wire
from evalkit.providers.agent import WireAgent
from evalkit.providers.attempts import Policy, StreamError, reading_stream
from evalkit.providers.capabilities import Caps
from evalkit.providers.common import OPENAI, data_url, make_call, sdk, wire_args

# Where requests go is `endpoints`; the names imported "as" themselves are this provider module's face,
# which `evalkit.providers.make_agent` reads here.
from evalkit.providers.endpoints import HF_ROUTER_DEFAULT as HF_ROUTER_DEFAULT
from evalkit.providers.endpoints import endpoint, route_models
from evalkit.providers.endpoints import endpoint_url as endpoint_url
from evalkit.providers.endpoints import required_keys as required_keys
from evalkit.providers.endpoints import required_urls as required_urls
from evalkit.providers.health import error_fields, provider_failure
from evalkit.providers.thinking import EFFORTS, chat_words
from evalkit.providers.thinking_off import OffChoice, probe
from evalkit.types import AgentOptions, Attempt, Call, Image, ToolOutcome, ToolSpec, Turn, Usage

CHAR_CAP_PER_TOKEN = 5
JPEG_OVER = 150_000
HARNESS_CAP = "length (harness cap)"
REJECT_REASONING = ("reasoner", "-r1")
"""Parts of a DeepSeek model name whose API refuses `reasoning_content` in the history."""
REFUSAL = "refusal"


def create(
    model: str, thinking: str | None, *, options: AgentOptions, provider: str = "openai-chat", **kw: Any
) -> ChatAgent:
    """An agent for one episode (`evalkit.providers.make_agent`); `kw` are `WireAgent`'s: system, tools,
    the run's health…"""
    client = OPENAI.client(options, lambda: endpoint(provider))
    return ChatAgent(client, model, thinking, options=options, provider=provider, **kw)


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
    return openai_wire.usage(u, reasoning_chars, "prompt", "completion")


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


class ChatAgent(WireAgent):
    """One episode's conversation over chat completions.

    Behind a router spec with several providers (`org/m:a|b`), the episode starts on the first provider the
    run's `ProviderHealth` does not pass over, and stays on it (its cache is there) until it fails in a way
    that is the provider's; then the next is tried at once. Every switch goes to `info["provider_switches"]`.
    """

    provider = "openai-chat"
    sdk_name = "openai"
    image_type = "image_url"
    joins = ("user",)  # templates that insist on alternating roles reject two user messages in a row
    streamed = {"stream": True, "stream_options": {"include_usage": True}}
    tool_to_wire = staticmethod(tool_to_wire)

    def __init__(self, client: Any, model: str, thinking: str | None, *, provider: str = "openai-chat", **kw):
        super().__init__(
            client, model, thinking, provider=provider, routes=route_models(model, provider), **kw
        )
        # OpenAI's own endpoint wants the newer name; the router and vLLM take the classic one.
        self.limit_key = "max_completion_tokens" if provider == "openai-chat" else "max_tokens"
        self.shrink_over = JPEG_OVER if provider == "hf" else None
        if self.system:
            self.messages.append({"role": "system", "content": self.system})
        self.off: dict[str, OffChoice] = {}
        """The thinking-off switch found for each route probed."""
        self._shrunk_at = 0

    @property
    def wire(self) -> str:  # type: ignore[override]
        """The capability table's wire: OpenAI's own models by their names; a router's or the user's own
        server's models are not in it, and learn from their 400s alone."""
        return "openai" if self.provider == "openai-chat" else "chat"

    def _user_message(self, text: str, images: Sequence[Image]) -> dict:
        parts = [{"type": "text", "text": text}] if text else []
        return {"role": "user", "content": parts + [image_part(i, self.shrink_over) for i in images]}

    def _result_messages(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[dict]:
        return result_messages(pairs, self.shrink_over)

    def params(self) -> dict:
        route = self.route
        p: dict[str, Any] = {
            "model": route,
            "messages": self.messages,
            self.limit_key: self.options.max_tokens,
        }
        if self.thinking in EFFORTS and self._caps.reasoning and self._caps.effort:
            p["reasoning_effort"] = self.thinking
        elif self.thinking == "off" and route in self.off:
            p.update(self.off[route].params)
        if self.options.seed is not None:
            p["seed"] = self.options.seed
        return p | self._declared()

    def _call(self, body: dict) -> dict:
        if not self.stream:
            return self._post(body, stream=False)
        acc = Accumulator()
        cap = CHAR_CAP_PER_TOKEN * self.options.max_tokens
        openai = sdk("openai")
        chunks = self._post(body, stream=True)
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

    def _post(self, sent: dict, stream: bool) -> Any:
        """POST the request as evalkit built it (`openai_wire.post`): the reply as the server's JSON."""
        body = dict(sent)
        body.update(body.pop("extra_body", None) or {})  # as the SDK merges `extra_body` into the JSON
        return openai_wire.post(self.client, "/chat/completions", body, stream)

    def _take(self, reply: dict) -> Turn:
        if self.thinking == "off":
            self.info["thinking_off_method"] = self.off[self.route].method
        turn = turn_from_completion(reply)
        turn.usage_known = turn.usage_known and bool(reply.get("usage"))
        message = assistant_message(turn, sends_reasoning(self.route, self.options.send_reasoning))
        if message:
            self.messages.append(message)
        return turn

    def _refused(self, exc: EndpointError, sent: dict) -> dict | None:
        """A 400 whose `param` names `reasoning_effort`, which the request carried: the route is asked
        without it, now and from now on (a model that is no reasoning model, such as gpt-4.1)."""
        fields = error_fields(exc.__cause__)
        bad = exc.status == 400 and fields.get("param") == "reasoning_effort" and "reasoning_effort" in sent
        return {"effort": False} if bad else None

    def _words(self, caps: Caps) -> str:
        return chat_words(self.thinking, caps)

    def _ready(self, policy: Policy, log: list[Attempt]) -> None:
        """`@off` on a route not probed yet: find the switch that turns its thinking off."""
        if self.thinking != "off" or self.route in self.off:
            return
        choice, spent = probe(
            self.client, self.route, self.limit_key, policy=policy, log=log,
            tool_to_wire=tool_to_wire, turn_from_completion=turn_from_completion,
        )  # fmt: skip
        self.off[self.route] = choice
        self.info.setdefault("thinking_off", {})[self.route] = choice.to_dict()
        if spent != Usage():
            self.info["probe_usage"] = (Usage.from_dict(self.info.get("probe_usage")) + spent).to_dict()

    def _mended(self, exc: EndpointError | ModelFailure) -> bool:
        """A prompt the server refused (413; a 400 that does not name the provider, as servers that cap the
        images per request or the context length send; a prompt past the context window): every later image
        but the newest goes and the request is made once more (once a step); the opening message, with the
        target, stays."""
        overflow = isinstance(exc, ModelFailure) and exc.kind == "context_overflow"
        if self._shrunk_at == self._turn or not (overflow or isinstance(exc, EndpointError)):
            return False
        last, cause = exc.attempts[-1], exc.__cause__
        if last.status not in (400, 413) or provider_failure(last, cause):
            return False
        if len(imgs.droppable(self.messages, self._opening, self.is_image)) <= 1:
            return False
        dropped = self.keep_newest_images(1)
        self._shrunk_at = self._turn
        code = error_fields(cause).get("code")
        self.info.setdefault("rejected_prompt_prunes", []).append(
            {"turn": self._turn, "route": self.route, "status": last.status, "code": code, "dropped": dropped}
        )
        return True
