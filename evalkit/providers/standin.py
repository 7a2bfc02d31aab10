"""A stand-in model: a local server that speaks the Anthropic Messages API (plain JSON and SSE streams) and
answers with the offline tracer's moves, so that a run through the real SDK and the real provider code —
reasoning, tokens, cost, the mistakes models make — can be recorded with no key and no network.

It is never presented as a model: its label is `anthropic:evalkit-standin@low`, and `make sample-run`
records it beside the offline baselines so that the viewer, the report and the notebooks have a model's
run to show. The server is stateless: each request's conversation is replayed through a fresh
`baseline:tracer` (its moves are a function of what it was shown), and the reply is the tracer's next turn,
with reasoning that says what it is about to do and usage counted from the request.

It is less careful than the tracer (it submits where the tracer would check its render against the
reference and correct it), and like a model, it gets things wrong, by the order in which it first sees a
conversation (`QUIRKS`): broken JSON arguments on a first turn (a parse error), an update of an element
that does not exist (a tool error), and an endpoint that fails for good from a conversation's second turn
(an unscored episode).

    python -m evalkit.providers.standin -- \
        evalkit run --env canvas --models anthropic:evalkit-standin@low --out runs/s
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from evalkit.providers.baseline.tracer import TracerAgent
from evalkit.serving import ThreadedServer
from evalkit.types import Call, Image, ToolOutcome, ToolSpec

MODEL = "evalkit-standin"
SPEC = f"anthropic:{MODEL}@low"
PRICE = {"input": 2.0, "output": 10.0, "cache_read": 0.2, "cache_write": 2.5}
"""USD per million tokens the stand-in is billed at (a mid-range model's), so that costs have numbers."""
QUIRKS = {"parse_error": (4, 1), "tool_error": (3, 0), "endpoint_down": (5, 2)}
"""quirk → (every, at): the conversations whose first-sight index i has i % every == at."""
IMAGE_TOKENS = 800
LOOK = "checking the render against the reference"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def _images_of(blocks: list) -> list:
    out = []
    for b in blocks or []:
        src = b.get("source") or {} if isinstance(b, dict) and b.get("type") == "image" else None
        if src and src.get("type") == "base64":
            out.append(Image(base64.b64decode(src["data"]), src.get("media_type") or "image/png"))
    return out


def _tokens(node: Any) -> int:
    """Tokens a request part would count: about four characters a token, a fixed count per image."""
    if isinstance(node, dict):
        if node.get("type") == "image":
            return IMAGE_TOKENS
        return sum(_tokens(v) for v in node.values())
    if isinstance(node, list):
        return sum(_tokens(v) for v in node)
    return len(node) // 4 + 1 if isinstance(node, str) else 1


class Brain:
    """The tracer's next turn for a conversation, found by replaying the conversation through it."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def index(self, body: dict) -> int:
        first = body["messages"][0]
        key = hashlib.sha256(json.dumps([body.get("system"), first], sort_keys=True).encode()).hexdigest()
        with self._lock:
            return self._seen.setdefault(key, len(self._seen))

    @staticmethod
    def quirk(name: str, index: int) -> bool:
        every, at = QUIRKS[name]
        return index % every == at

    def reply(self, body: dict) -> dict | None:
        """The assistant message (content blocks, stop reason, usage), or None when the endpoint is down."""
        index, msgs = self.index(body), body["messages"]
        turn = sum(m["role"] == "assistant" for m in msgs) + 1
        if self.quirk("endpoint_down", index) and turn >= 2:
            return None
        tools = [
            ToolSpec(t["name"], t.get("description", ""), t.get("input_schema") or {})
            for t in body.get("tools") or []
        ]
        agent = TracerAgent(_text_of(body.get("system") or ""), tools)
        agent.user(_text_of(msgs[0]["content"]), _images_of(msgs[0]["content"]))
        for k, m in enumerate(msgs[1:], start=1):
            if m["role"] != "assistant":
                continue
            step = agent.step()
            answers = {b.get("tool_use_id"): b for b in (msgs[k + 1]["content"] if k + 1 < len(msgs) else [])
                       if isinstance(b, dict) and b.get("type") == "tool_result"}  # fmt: skip
            pairs = []
            for j, c in enumerate(step.calls):
                b = answers.get(_call_id(index, k // 2 + 1, j), {})
                content = b.get("content") if isinstance(b.get("content"), list) else []
                pairs.append(
                    (c, ToolOutcome(_text_of(content), _images_of(content), bool(b.get("is_error"))))
                )
            agent.results(pairs)
        step = agent.step()
        text, names = step.text, {t.name for t in tools}
        if text.startswith(LOOK) and "submit" in names:
            # Less careful than the tracer: it submits where the tracer would check its render and correct it.
            text, step.calls = "that should match the reference; submitting", [Call("s", "submit", {})]
        calls = [(_call_id(index, turn, j), c.name, c.args) for j, c in enumerate(step.calls)]
        # The mistakes get ids of their own: the replay above answers the tracer's calls by their place.
        if turn == 1 and self.quirk("parse_error", index) and "add_element" in names:
            broken = '{"kind": "rect", "x": 12, "y": 40, "width": '
            calls.append((_call_id(index, turn, 99), "add_element", broken))
        if turn == 2 and self.quirk("tool_error", index) and "update_element" in names:
            calls.insert(0, (_call_id(index, turn, 98), "update_element", {"id": "e99", "fill": "#336699"}))
        return self._message(index, turn, text, calls, body)

    def _message(self, index: int, turn: int, text: str, calls: list, body: dict) -> dict:
        counts = Counter(name for _, name, _ in calls)
        plan = ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in counts.items()) or "no tool"
        thinking = (
            f"Turn {turn}. {text[:1].upper() + text[1:]}. "
            f"Comparing what I have been shown with the task, the next step is: {plan}. "
            "Keep the elements in the order the reference stacks them."
        )
        blocks: list[dict] = [
            {"type": "thinking", "thinking": thinking, "signature": f"standin-{index}-{turn}"},
            {"type": "text", "text": text[:1].upper() + text[1:] + "."},
        ]
        for call_id, name, args in calls:
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
        history = [body.get("system"), body.get("tools"), body["messages"][:-1]]
        cached = _tokens(history) if turn > 1 else 0
        fresh = _tokens(body["messages"][-1])
        out = sum(_tokens(b.get("thinking") or b.get("text") or json.dumps(b.get("input"))) for b in blocks)
        usage = {
            "input_tokens": 12,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": fresh if turn > 1 else _tokens(history) + fresh,
            "output_tokens": out + 40,
            "output_tokens_details": {"thinking_tokens": _tokens(thinking) + 40},
        }
        stop = "tool_use" if calls else "end_turn"
        return {"id": f"msg_standin_{index}_{turn}", "type": "message", "role": "assistant", "model": MODEL,
                "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}  # fmt: skip


def _call_id(index: int, turn: int, j: int) -> str:
    return f"toolu_{index:03d}_{turn:03d}_{j:02d}"


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream(msg: dict) -> list[bytes]:
    """The SSE events the Messages API sends for `msg`."""
    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, b in enumerate(msg["content"]):
        empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "text": {"type": "text", "text": ""}}.get(b["type"]) or {**b, "input": {}}  # fmt: skip
        out.append(
            _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty})
        )
        if b["type"] == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": b["thinking"]},
                      {"type": "signature_delta", "signature": b["signature"]}]  # fmt: skip
        elif b["type"] == "text":
            deltas = [{"type": "text_delta", "text": b["text"]}]
        else:
            raw = b["input"] if isinstance(b["input"], str) else json.dumps(b["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw}]
        out += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    out.append(_sse("message_delta", {"type": "message_delta", "delta": delta, "usage": msg["usage"]}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def app() -> Any:
    brain = Brain()

    async def messages(request: Request) -> Response:
        body = await request.json()
        msg = await anyio.to_thread.run_sync(brain.reply, body)
        if msg is None:
            error = {"type": "error", "error": {"type": "api_error", "message": "the stand-in is down"}}
            return JSONResponse(error, 503, headers={"retry-after-ms": "20"})
        await anyio.sleep(0.02 + msg["usage"]["output_tokens"] / 20000)  # a model takes its time
        if body.get("stream"):
            return StreamingResponse(iter(stream(msg)), media_type="text/event-stream")
        return JSONResponse(msg)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"]), Route("/health", health)])


class StandIn:
    """The stand-in served on a free loopback port; `environ()` points the Anthropic SDK and the price
    table at it."""

    def __init__(self) -> None:
        self.server = ThreadedServer(app(), name="standin")
        self.url = self.server.base_url
        fd, prices = tempfile.mkstemp(prefix="evalkit-standin-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({MODEL: PRICE}, f)
        self.prices = Path(prices)

    def environ(self) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "standin",
            "EVALKIT_PRICES": str(self.prices),
        }

    def stop(self) -> None:
        self.server.stop()
        self.prices.unlink(missing_ok=True)

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m evalkit.providers.standin -- COMMAND…`: run COMMAND with the stand-in serving; its exit
    status is COMMAND's. A command that cannot be started is one line and exit status 2."""
    parser = argparse.ArgumentParser(
        prog="python -m evalkit.providers.standin",
        usage="%(prog)s [-h] -- COMMAND [ARGS…]",
        description=f"Run COMMAND with the stand-in model ({SPEC}) served on a local port; its environment "
        "gets ANTHROPIC_BASE_URL and a key for it.",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="e.g. evalkit run --env canvas --models "
                        f"{SPEC} --out runs/s")  # fmt: skip
    command = parser.parse_args(sys.argv[1:] if argv is None else argv).command
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.print_usage(sys.stderr)
        return 2
    if shutil.which(command[0]) is None:
        print(f"evalkit: error: no command {command[0]!r} to run", file=sys.stderr)
        return 2
    with StandIn() as s:
        print(f"evalkit stand-in model ({SPEC}) on {s.url}", file=sys.stderr, flush=True)
        return subprocess.call(command, env={**os.environ, **s.environ()})


if __name__ == "__main__":
    sys.exit(main())
