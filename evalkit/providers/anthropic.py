"""Anthropic Messages API.

The whole assistant content goes back into the history every turn (thinking blocks with their signatures
included), tool images travel inside `tool_result` blocks, top-level `cache_control` caches the growing
prefix, and replies are streamed because long generations time out otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from evalkit.errors import EndpointError
from evalkit.providers import clock
from evalkit.providers.agent import WireAgent
from evalkit.providers.attempts import StreamError, reading_stream
from evalkit.providers.capabilities import Caps
from evalkit.providers.common import ANTHROPIC, make_call, sdk
from evalkit.providers.thinking import claude_params, claude_refused, claude_words
from evalkit.types import AgentOptions, Attempt, Call, Image, ToolOutcome, ToolSpec, Turn, Usage

WIRE = "anthropic"
MAX_CONTINUATIONS = 4
"""A turn the API paused (`pause_turn`: a server tool's loop ran long) is continued at most this many times
within one `step()`; then it is returned as it stands, stop `pause_turn`."""


required_keys, endpoint_url = ANTHROPIC.required_keys, ANTHROPIC.endpoint_url


def create(model: str, thinking: str | None, *, options: AgentOptions, **kw: Any) -> AnthropicAgent:
    """An agent for one episode (`evalkit.providers.make_agent`); `kw` are `WireAgent`'s: system, tools…"""
    # The SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself.
    return AnthropicAgent(ANTHROPIC.client(options), model, thinking, options=options, **kw)


# ---- to the wire -------------------------------------------------------------------------------------------


def tool_to_wire(tool: ToolSpec) -> dict:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def image_block(image: Image) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime, "data": image.b64}}


def user_blocks(text: str, images: Sequence[Image] = ()) -> list[dict]:
    blocks = [{"type": "text", "text": text}] if text else []
    return blocks + [image_block(i) for i in images]


def result_blocks(pairs: list[tuple[Call, ToolOutcome]]) -> list[dict]:
    """One `tool_result` per call, in order, then the images of error results (which a `tool_result` marked
    `is_error` may not hold), so that every tool result comes before any other user content."""
    results: list[dict] = []
    trailing: list[dict] = []
    for call, out in pairs:
        content: list[dict] = [{"type": "text", "text": out.text}] if out.text else []
        pictures = [image_block(i) for i in out.images]
        if out.is_error and pictures:
            trailing += [{"type": "text", "text": f"Images returned with the error of tool call {call.id}:"}]
            trailing += pictures
        else:
            content += pictures
        block = {"type": "tool_result", "tool_use_id": call.id, "content": content or "(no output)"}
        if out.is_error:
            block["is_error"] = True
        results.append(block)
    return results + trailing


def history_block(block: dict, calls: dict[str, Call]) -> dict | None:
    """A content block of a reply as it must be re-sent, or None for what the API would reject."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]} if block.get("text") else None
    if kind == "thinking":
        # A thinking block cut off by the output limit has no signature and cannot be re-sent.
        if not block.get("signature"):
            return None
        return {"type": "thinking", "thinking": block.get("thinking", ""), "signature": block["signature"]}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block["data"]}
    if kind == "tool_use":
        call = calls[block["id"]]
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": call.args}
    return {k: v for k, v in block.items() if v is not None}


# ---- from the wire -----------------------------------------------------------------------------------------


def accumulate(events: Iterable[dict], msg: dict | None = None) -> dict:
    """Raw stream events → the message they describe, keeping tool inputs as the raw JSON text received.
    Built in `msg` when given, so that a caller still holds what arrived (the usage) if the stream breaks."""
    msg = msg if msg is not None else {}
    msg.update({"content": [], "usage": {}, "stop_reason": None})
    blocks: dict[int, dict] = {}
    # Inputs arrive as pieces of JSON text for every kind of block that has one (`tool_use`, and the
    # server's own `server_tool_use`, whose start carries an empty dict): joined once the block ends.
    inputs: dict[int, list[str]] = {}
    stopped = False
    for ev in events:
        kind = ev.get("type")
        if kind == "message_stop":
            stopped = True
        elif kind == "message_start":
            start = ev["message"]
            msg.update({k: v for k, v in start.items() if k not in ("content", "usage")})
            msg["usage"] = dict(start.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(ev["content_block"])
            if block.get("type") == "tool_use":
                block["input"] = ""
            blocks[ev["index"]] = block
            inputs.pop(ev["index"], None)
            msg["content"].append(block)
        elif kind == "content_block_delta":
            block, delta = blocks[ev["index"]], ev["delta"]
            dkind = delta.get("type")
            if dkind == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dkind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dkind == "signature_delta":
                block["signature"] = delta["signature"]
            elif dkind == "input_json_delta":
                inputs.setdefault(ev["index"], []).append(delta.get("partial_json") or "")
        elif kind == "content_block_stop" and ev.get("index") in blocks:
            _close_input(blocks[ev["index"]], inputs.pop(ev["index"], None))
        elif kind == "message_delta":
            msg["stop_reason"] = ev["delta"].get("stop_reason")
            msg["usage"].update({k: v for k, v in (ev.get("usage") or {}).items() if v is not None})
    for index, pieces in inputs.items():  # blocks whose stop never came (a cut stream)
        _close_input(blocks[index], pieces)
    if not stopped:
        raise StreamError("the stream ended before message_stop", usage_from_wire(msg["usage"]))
    return msg


def _close_input(block: dict, pieces: list[str] | None) -> None:
    """Set a finished block's input from its JSON pieces: a client `tool_use` keeps the raw text (its
    arguments are checked as the model's, `make_call`); any other block is the server's own, re-sent as
    it came, so it gets the parsed object."""
    if pieces is None:
        return
    raw = "".join(pieces)
    if block.get("type") == "tool_use":
        block["input"] = raw
        return
    try:
        block["input"] = json.loads(raw) if raw.strip() else block.get("input") or {}
    except ValueError:
        block["input"] = raw


def usage_from_wire(u: dict, reasoning_chars: int = 0) -> Usage:
    details = u.get("output_tokens_details") or {}
    return Usage(
        input=u.get("input_tokens") or 0,
        output=u.get("output_tokens") or 0,
        cache_read=u.get("cache_read_input_tokens") or 0,
        cache_write=u.get("cache_creation_input_tokens") or 0,
        reasoning_tokens=details.get("thinking_tokens") or 0,
        reasoning_chars=reasoning_chars,
    )


def turn_from_message(msg: dict) -> tuple[Turn, list[dict]]:
    """A reply → the Turn, and the content blocks to keep in the history (none for a refusal: its text is
    not sent again)."""
    content = msg.get("content") or []
    calls = [make_call(b["id"], b["name"], b.get("input")) for b in content if b.get("type") == "tool_use"]
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    reasoning = "\n\n".join(b.get("thinking", "") for b in content if b.get("type") == "thinking")
    stop = msg.get("stop_reason") or ""
    turn = Turn(
        text=text,
        reasoning=reasoning,
        calls=calls,
        stop=stop,
        usage=usage_from_wire(msg.get("usage") or {}, len(reasoning)),
        truncated=stop == "max_tokens",
    )
    if turn.refused:
        return turn, []
    by_id = {c.id: c for c in calls}
    kept = [b for b in (history_block(b, by_id) for b in content) if b is not None]
    return turn, kept


def partial_turn(msg: dict) -> Turn:
    """What had arrived of a reply whose stream was cut (its text and thinking; calls never run)."""
    content = [b for b in msg.get("content") or [] if isinstance(b, dict)]
    return Turn(
        text="".join(b.get("text", "") for b in content if b.get("type") == "text"),
        reasoning="\n\n".join(b.get("thinking", "") for b in content if b.get("type") == "thinking"),
        stop="cut",
        usage=usage_from_wire(msg.get("usage") or {}),
        usage_known=False,
    )


def merge_turns(first: Turn, then: Turn) -> Turn:
    """One turn of a reply the API paused and then continued: texts and calls in order, usage summed, the
    last stop reason."""
    return Turn(
        text=first.text + then.text,
        reasoning="\n\n".join(r for r in (first.reasoning, then.reasoning) if r),
        calls=first.calls + then.calls,
        stop=then.stop,
        usage=first.usage + then.usage,
        truncated=then.truncated,
    )


# ---- the agent ---------------------------------------------------------------------------------------------


class AnthropicAgent(WireAgent):
    """One episode's conversation with a Claude model."""

    wire = WIRE
    provider = "anthropic"
    sdk_name = "anthropic"
    image_type = "image"
    joins = ("user", "assistant")  # the API wants the roles to alternate; a continued reply extends its own
    tool_to_wire = staticmethod(tool_to_wire)

    def _user_message(self, text: str, images: Sequence[Image]) -> dict:
        return {"role": "user", "content": user_blocks(text, images)}

    def _result_messages(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[dict]:
        blocks = result_blocks(pairs)
        return [{"role": "user", "content": blocks}] if blocks else []

    def _result_images(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[Image]:
        # The images of error results trail the results (see result_blocks): the order the blocks hold them.
        inline = [i for _, out in pairs if not out.is_error for i in out.images]
        return inline + [i for _, out in pairs if out.is_error for i in out.images]

    def params(self) -> dict:
        p: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": self.options.max_tokens,
            "messages": self.messages,
            "cache_control": {"type": "ephemeral"},
            **claude_params(self.thinking, self._caps, self.options.max_tokens),
        }
        if self.system:
            p["system"] = self.system
        return p | self._declared()

    def _call(self, body: dict) -> dict:
        if not self.stream:
            return self.client.messages.create(**body, **clock.timeout()).model_dump(mode="json")
        events = self.client.messages.create(**body, **clock.timeout())
        partial: dict = {}
        try:
            with events, reading_stream(sdk("anthropic"), events, lambda: partial_turn(partial)):
                return accumulate((ev.model_dump(mode="json") for ev in events), partial)
        except Exception as exc:
            # message_start reports the input tokens (cache included): billed even if the reply never ends.
            if partial.get("usage") and getattr(exc, "partial_usage", None) is None:
                exc.partial_usage = usage_from_wire(partial["usage"])  # type: ignore[attr-defined]
            raise

    def _take(self, reply: dict) -> Turn:
        turn, content = turn_from_message(reply)
        if content:
            self._append({"role": "assistant", "content": content})
        return turn

    def _ask(self, log: list[Attempt]) -> Turn:
        turn = super()._ask(log)
        for _ in range(MAX_CONTINUATIONS):
            if turn.stop != "pause_turn":
                break
            # The API paused its own server-tool loop: the paused reply went back as the last assistant
            # message, unchanged, and the same request asks the model to go on from it.
            self.info["pause_turn_continuations"] = self.info.get("pause_turn_continuations", 0) + 1
            turn = merge_turns(turn, super()._ask(log))
        return turn

    def _refused(self, exc: EndpointError, sent: dict) -> dict | None:
        """A 400 refusing a feature the request carried (adaptive thinking on a model that only knows
        budgets): asked again with what the model accepts."""
        return claude_refused(exc.__cause__, sent, self._caps)

    def _words(self, caps: Caps) -> str:
        return claude_words(self.thinking, caps, self.options.max_tokens)
