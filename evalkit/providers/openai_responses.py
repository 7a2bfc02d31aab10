"""OpenAI Responses API.

Stateless: `store=False` with `reasoning.encrypted_content` included, and every output item carried back in
the input, so the history stays ours (old images can be pruned) while the model keeps its reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.errors import EndpointError
from evalkit.providers import openai_wire
from evalkit.providers.agent import WireAgent
from evalkit.providers.attempts import StreamError, reading_stream
from evalkit.providers.capabilities import Caps
from evalkit.providers.common import OPENAI, data_url, make_call, sdk, wire_args
from evalkit.providers.thinking import responses_params, responses_refused, responses_words
from evalkit.types import AgentOptions, Call, Image, ToolOutcome, ToolSpec, Turn, Usage

WIRE = "openai"


required_keys, endpoint_url = OPENAI.required_keys, OPENAI.endpoint_url


def create(model: str, thinking: str | None, *, options: AgentOptions, **kw: Any) -> ResponsesAgent:
    """An agent for one episode (`evalkit.providers.make_agent`); `kw` are `WireAgent`'s: system, tools…"""
    # The SDK reads OPENAI_API_KEY and OPENAI_BASE_URL itself.
    return ResponsesAgent(OPENAI.client(options), model, thinking, options=options, **kw)


# ---- to the wire -------------------------------------------------------------------------------------------


def tool_to_wire(tool: ToolSpec) -> dict:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def image_part(image: Image) -> dict:
    return {"type": "input_image", "image_url": data_url(image.mime, image.b64), "detail": "auto"}


def user_item(text: str, images: Sequence[Image] = ()) -> dict:
    parts = [{"type": "input_text", "text": text}] if text else []
    return {"role": "user", "content": parts + [image_part(i) for i in images]}


def result_item(call: Call, out: ToolOutcome) -> dict:
    text = ("Error: " if out.is_error else "") + out.text
    if not out.images:
        return {"type": "function_call_output", "call_id": call.id, "output": text or "(no output)"}
    parts = ([{"type": "input_text", "text": text}] if text else []) + [image_part(i) for i in out.images]
    return {"type": "function_call_output", "call_id": call.id, "output": parts}


# ---- from the wire -----------------------------------------------------------------------------------------


def usage_from_wire(u: dict | None, reasoning_chars: int = 0) -> Usage:
    return openai_wire.usage(u, reasoning_chars, "input", "output")


def turn_from_response(resp: dict) -> tuple[Turn, list[dict]]:
    """A response → the Turn, and the output items to carry back in the next input (none for a refusal)."""
    output = resp.get("output") or []
    text, reasoning, calls = [], [], []
    refused = False
    for item in output:
        kind = item.get("type")
        if kind == "message":
            text += [p.get("text") or p.get("refusal") or "" for p in item.get("content") or []]
            refused = refused or any(p.get("type") == "refusal" for p in item.get("content") or [])
        elif kind == "reasoning":
            reasoning += [s.get("text", "") for s in item.get("summary") or []]
            reasoning += [c.get("text", "") for c in item.get("content") or []]
        elif kind == "function_call":
            calls.append(make_call(item["call_id"], item["name"], item.get("arguments")))
    status = resp.get("status") or ""
    reason = (resp.get("incomplete_details") or {}).get("reason")
    stop = (reason or status) if status == "incomplete" else ("tool_calls" if calls else status)
    stop = "refusal" if refused else stop
    reasoning_text = "\n\n".join(r for r in reasoning if r)
    turn = Turn(
        text="".join(text),
        reasoning=reasoning_text,
        calls=calls,
        stop=stop,
        usage=usage_from_wire(resp.get("usage"), len(reasoning_text)),
        truncated=reason == "max_output_tokens",
    )
    if turn.refused:  # the refused reply is not sent again: the episode ends on it
        return turn, []
    by_id = {c.id: c for c in calls}
    carried = []
    for item in output:
        if item.get("type") == "function_call":
            item = {**item, "arguments": wire_args(by_id[item["call_id"]])}
        carried.append(item)
    return turn, carried


class Seen:
    """What a response stream delivered of its text and reasoning summary, event by event: what had arrived
    of a reply cut before its end."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []

    def add(self, kind: str, ev: dict) -> None:
        delta = ev.get("delta")
        if not isinstance(delta, str):
            return
        if kind == "response.output_text.delta":
            self.text.append(delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self.reasoning.append(delta)

    def turn(self) -> Turn:
        return Turn(text="".join(self.text), reasoning="".join(self.reasoning), stop="cut", usage_known=False)


def final_response(events: Any, seen: Seen | None = None) -> dict:
    """Read a response stream (events as the server's JSON) to its end: the final response object, whether
    completed or incomplete. The events after it are read too (the end of the body), so that the connection
    goes back to the pool rather than being closed with the body unread (a new connection, and a TLS
    handshake, per call)."""
    final = None
    for ev in events:
        ev = ev if isinstance(ev, dict) else {}
        kind = ev.get("type", "")
        if final is not None:
            continue
        if seen is not None and kind.endswith(".delta"):
            seen.add(kind, ev)
        elif kind in ("response.completed", "response.incomplete"):
            final = without_nulls(ev.get("response") or {})
        elif kind == "response.failed":
            error = (ev.get("response") or {}).get("error")
            error = error if isinstance(error, dict) else {}
            raise StreamError(f"response failed: {error.get('code')} {error.get('message')}", body=error)
        elif kind == "error":  # its code tells a prompt past the context window from a server's trouble
            raise StreamError(f"stream error {ev.get('code')}: {ev.get('message')}", body=ev)
    if final is None:
        raise StreamError("the stream ended before the response completed")
    return final


def without_nulls(value: Any) -> Any:
    """The server's JSON without its null fields, as the SDK's model of it dumped them (`exclude_none`):
    output items go back as input items, where a field sent as null can be refused."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


# ---- the agent ---------------------------------------------------------------------------------------------


class ResponsesAgent(WireAgent):
    """One episode's conversation with a model behind the Responses API."""

    wire = WIRE
    provider = "openai"
    sdk_name = "openai"
    image_type = "input_image"
    text_type = "input_text"
    tool_to_wire = staticmethod(tool_to_wire)

    @property
    def items(self) -> list[dict]:
        """The input items: this API's name for the history."""
        return self.messages

    def _user_message(self, text: str, images: Sequence[Image]) -> dict:
        return user_item(text, images)

    def _result_messages(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[dict]:
        return [result_item(c, o) for c, o in pairs]

    def params(self) -> dict:
        p: dict[str, Any] = {
            "model": self.model_id,
            "input": self.messages,
            "store": False,
            "max_output_tokens": self.options.max_tokens,
        }
        reasoning = responses_params(self.thinking, self._caps)
        if reasoning is not None:  # a model without reasoning refuses the object and what it includes
            p["include"] = ["reasoning.encrypted_content"]
            p["reasoning"] = reasoning
        if self.system:
            p["instructions"] = self.system
        return p | self._declared()

    def _call(self, body: dict) -> dict:
        if not self.stream:
            return without_nulls(openai_wire.post(self.client, "/responses", body, stream=False))
        events = openai_wire.post(self.client, "/responses", body, stream=True)
        seen = Seen()
        with events, reading_stream(sdk("openai"), events, seen.turn):
            return final_response(events, seen)

    def _take(self, reply: dict) -> Turn:
        turn, carried = turn_from_response(reply)
        self.messages += carried
        turn.usage_known = turn.usage_known and bool(reply.get("usage"))
        return turn

    def _refused(self, exc: EndpointError, sent: dict) -> dict | None:
        """A refused reasoning field is asked again without it; any other refusal (an oversized image) is
        not ours to mend."""
        return responses_refused(exc.__cause__, sent, self._caps)

    def _words(self, caps: Caps) -> str:
        return responses_words(self.thinking, caps)
