"""A local model server that speaks the three wire protocols evalkit drives, for the real SDK clients.

One uvicorn server in a thread answers `POST /v1/messages` (Anthropic Messages), `POST /v1/responses`
(OpenAI Responses) and `POST /v1/chat/completions`, as plain JSON or as SSE streams with the event
sequences those APIs send. Replies are scripted in one neutral form (`Reply`) and rendered per API; every
request is recorded. A reply can also be an HTTP error (429 / 500 with `retry-after-ms`), slow, broken
mid-stream, or carry tool arguments that are not JSON.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from evalkit.serving import free_port


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    """(tool name, arguments): a dict is sent as JSON, a string exactly as given (to send broken JSON)."""
    stop: str | None = None
    """Override the stop / finish reason; `max_output_tokens` makes a Responses reply incomplete."""
    usage: dict = field(default_factory=dict)
    """Neutral usage: input (uncached), output, cache_read, cache_write, reasoning_tokens."""
    status: int = 200
    delay: float = 0.0
    """Seconds to wait before answering (a slow server)."""
    chunk_delay: float = 0.0
    error_event: bool = False
    """Fail inside the stream after it started (an overloaded server mid-generation)."""
    signature: str = "sig-A"
    encrypted: str = "enc-A"
    think: str = "reasoning_content"
    """Where a chat reply puts its reasoning: `reasoning_content`, `reasoning` or `tags` (<think>)."""
    signed: bool = True
    """Whether a thinking block gets its signature (a block cut off by the output limit gets none)."""
    cut_after: int | None = None
    """Send only this many stream events, then cut the stream (a connection lost mid-reply)."""
    cut: str = "drop"
    """How a stream is cut: `drop` the connection before the body is complete, or `end` the body cleanly."""
    error: dict = field(default_factory=dict)
    """Fields added to an error reply's `error` object (`param`, `code`), as an API explains a 400."""
    retry_after: float | None = 0.005
    """Seconds an error reply asks to wait (as `retry-after-ms` and `retry-after`); None: no header."""
    recorded: bytes | None = None
    """A recorded stream answered byte for byte (an SSE body as a live API sent it) to a streamed request."""
    body: dict | None = None
    """A recorded JSON reply answered as it is to a plain request."""
    error_body: dict | None = None
    """A recorded error body answered as it is, with `status` (a provider's documented 400)."""


Script = Reply | Callable[[dict], Reply]


def _pieces(text: str, n: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


# ---- Anthropic Messages -----------------------------------------------------------------------------------


def anthropic_usage(u: dict) -> dict:
    return {
        "input_tokens": u.get("input", 10),
        "output_tokens": u.get("output", 5),
        "cache_read_input_tokens": u.get("cache_read", 0),
        "cache_creation_input_tokens": u.get("cache_write", 0),
        "output_tokens_details": {"thinking_tokens": u.get("reasoning_tokens", 0)},
    }


def anthropic_blocks(r: Reply, n: int) -> list[dict]:
    blocks: list[dict] = []
    if r.reasoning:
        blocks.append(
            {"type": "thinking", "thinking": r.reasoning, "signature": r.signature if r.signed else ""}
        )
    if r.text:
        blocks.append({"type": "text", "text": r.text, "citations": None})
    for i, (name, args) in enumerate(r.calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
    return blocks


def anthropic_message(r: Reply, body: dict, n: int) -> dict:
    blocks = anthropic_blocks(r, n)
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": r.stop or ("tool_use" if r.calls else "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(r.usage),
    }


def anthropic_stream(r: Reply, body: dict, n: int) -> Iterator[bytes]:
    msg = anthropic_message(r, body, n)
    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    if r.error_event:
        yield _sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        return
    for i, block in enumerate(msg["content"]):
        kind = block["type"]
        empty = {
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "text": {"type": "text", "text": ""},
        }
        first = empty.get(kind) or {**block, "input": {}}
        yield _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": first})
        if kind == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            if block["signature"]:
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in _pieces(_args_text(block["input"]))
            ]
        for d in deltas:
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    yield _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": msg["usage"]})
    yield _sse("message_stop", {"type": "message_stop"})


# ---- OpenAI Responses -------------------------------------------------------------------------------------


def responses_usage(u: dict) -> dict:
    cached, written = u.get("cache_read", 0), u.get("cache_write", 0)
    total_in = u.get("input", 10) + cached + written
    return {
        "input_tokens": total_in,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": u.get("output", 5),
        "output_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)},
        "total_tokens": total_in + u.get("output", 5),
    }


def responses_output(r: Reply, n: int) -> list[dict]:
    out: list[dict] = []
    if r.reasoning or r.encrypted:
        summary = [{"type": "summary_text", "text": r.reasoning}] if r.reasoning else []
        out.append(
            {"type": "reasoning", "id": f"rs_{n}", "summary": summary, "encrypted_content": r.encrypted}
        )
    if r.text:
        content = [{"type": "output_text", "text": r.text, "annotations": [], "logprobs": []}]
        out.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        )
    for i, (name, args) in enumerate(r.calls):
        out.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": _args_text(args),
                "status": "completed",
            }
        )
    return out


def responses_body(r: Reply, body: dict, n: int, status: str | None = None) -> dict:
    incomplete = r.stop in ("max_output_tokens", "content_filter")
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "model": body.get("model"),
        "status": status or ("incomplete" if incomplete else "completed"),
        "incomplete_details": {"reason": r.stop} if incomplete else None,
        "error": None,
        "output": [] if status else responses_output(r, n),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if status else responses_usage(r.usage),
    }


def responses_stream(r: Reply, body: dict, n: int) -> Iterator[bytes]:
    seq = iter(range(10_000))

    def ev(kind: str, **data: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

    yield ev("response.created", response=responses_body(r, body, n, "in_progress"))
    yield ev("response.in_progress", response=responses_body(r, body, n, "in_progress"))
    if r.error_event:
        failed = {
            **responses_body(r, body, n, "failed"),
            "error": {"code": "server_error", "message": "boom"},
        }
        yield ev("response.failed", response=failed)
        return
    for idx, item in enumerate(responses_output(r, n)):
        kind = item["type"]
        if kind == "reasoning":
            yield ev(
                "response.output_item.added",
                output_index=idx,
                item={**item, "summary": [], "encrypted_content": None},
            )
            for si, part in enumerate(item["summary"]):
                common = {"item_id": item["id"], "output_index": idx, "summary_index": si}
                yield ev(
                    "response.reasoning_summary_part.added",
                    **common,
                    part={"type": "summary_text", "text": ""},
                )
                for p in _pieces(part["text"]):
                    yield ev("response.reasoning_summary_text.delta", **common, delta=p)
                yield ev("response.reasoning_summary_text.done", **common, text=part["text"])
                yield ev("response.reasoning_summary_part.done", **common, part=part)
        elif kind == "message":
            yield ev(
                "response.output_item.added",
                output_index=idx,
                item={**item, "content": [], "status": "in_progress"},
            )
            common = {"item_id": item["id"], "output_index": idx, "content_index": 0}
            yield ev(
                "response.content_part.added",
                **common,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            for p in _pieces(r.text):
                yield ev("response.output_text.delta", **common, delta=p, logprobs=[])
            yield ev("response.output_text.done", **common, text=r.text, logprobs=[])
            yield ev("response.content_part.done", **common, part=item["content"][0])
        else:
            yield ev(
                "response.output_item.added",
                output_index=idx,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for p in _pieces(item["arguments"]):
                yield ev(
                    "response.function_call_arguments.delta", item_id=item["id"], output_index=idx, delta=p
                )
            yield ev(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=idx,
                arguments=item["arguments"],
            )
        yield ev("response.output_item.done", output_index=idx, item=item)
        time.sleep(r.chunk_delay)
    final = responses_body(r, body, n)
    yield ev(
        "response.incomplete" if final["status"] == "incomplete" else "response.completed", response=final
    )


# ---- chat completions -------------------------------------------------------------------------------------


def chat_usage(u: dict) -> dict:
    cached = u.get("cache_read", 0)
    prompt = u.get("input", 10) + cached
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.get("output", 5),
        "total_tokens": prompt + u.get("output", 5),
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)},
    }


def chat_calls(r: Reply, n: int) -> list[dict]:
    return [
        {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": _args_text(args)}}
        for i, (name, args) in enumerate(r.calls)
    ]


def chat_completion(r: Reply, body: dict, n: int) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": r.text or None}
    if r.reasoning and r.think == "tags":
        msg["content"] = f"<think>{r.reasoning}</think>{r.text}"
    elif r.reasoning:
        msg[r.think] = r.reasoning
    if r.calls:
        msg["tool_calls"] = chat_calls(r, n)
    finish = r.stop or ("tool_calls" if r.calls else "stop")
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
        "usage": chat_usage(r.usage),
    }


def chat_stream(r: Reply, body: dict, n: int) -> Iterator[bytes]:
    head = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model"),
    }

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        time.sleep(r.chunk_delay)
        return _sse(None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if r.reasoning and r.think == "tags":
        for p in _pieces(f"<think>{r.reasoning}</think>", 4):
            yield chunk({"content": p})
    else:
        for p in _pieces(r.reasoning):
            yield chunk({r.think: p})
    if r.error_event:
        yield _sse(None, {"error": {"message": "upstream overloaded", "type": "server_error"}})
        return
    for p in _pieces(r.text, max(3, len(r.text) // 50)):
        yield chunk({"content": p})
    for i, call in enumerate(chat_calls(r, n)):
        fn = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        for p in _pieces(fn["arguments"]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
    yield chunk({}, r.stop or ("tool_calls" if r.calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _sse(None, {**head, "choices": [], "usage": chat_usage(r.usage)})
    yield _sse(None, "[DONE]")


# ---- the server -------------------------------------------------------------------------------------------

RENDER = {
    "/v1/messages": (anthropic_message, anthropic_stream),
    "/v1/responses": (responses_body, responses_stream),
    "/v1/chat/completions": (chat_completion, chat_stream),
}


class ConnectionCut(Exception):
    """Raised inside a streamed body: uvicorn drops the connection without finishing the chunked body."""


def _not_a_scripted_cut(record: logging.LogRecord) -> bool:
    return not (record.exc_info and isinstance(record.exc_info[1], ConnectionCut))


def cut_stream(events: Iterator[bytes], after: int, how: str) -> Iterator[bytes]:
    for i, event in enumerate(events):
        if i >= after:
            if how == "drop":
                raise ConnectionCut(f"scripted cut after {after} events")
            return
        yield event


def error_body(path: str, status: int, extra: dict | None = None) -> dict:
    if path == "/v1/messages":
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": f"scripted {status}", **(extra or {})}}
    return {
        "error": {
            "message": f"scripted {status}",
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "param": None,
            "code": None,
            **(extra or {}),
        }
    }


class FakeModelServer:
    """Scripted replies in order (then `default`), every request recorded in `requests`."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[dict] = []
        self.script: list[Script] = []
        self.default: Script | None = None
        self._lock = threading.Lock()
        app = Starlette(routes=[Route(p, self._handle, methods=["POST"]) for p in RENDER])
        self._server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        # uvicorn logs the exception that drops a connection; for a scripted cut that is only noise.
        logging.getLogger("uvicorn.error").addFilter(_not_a_scripted_cut)

    def start(self) -> FakeModelServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake model server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(5)

    def reset(self, *script: Script, default: Script | None = None) -> None:
        with self._lock:
            self.requests.clear()
            self.script = list(script)
            self.default = default

    def bodies(self, path: str | None = None) -> list[dict]:
        return [r["body"] for r in self.requests if path is None or r["path"] == path]

    def _next(self, body: dict) -> Reply:
        with self._lock:
            item = self.script.pop(0) if self.script else self.default
        if item is None:
            return Reply(text="(script exhausted)")
        return item(body) if callable(item) else item

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        path = request.url.path
        with self._lock:
            n = len(self.requests)
            self.requests.append({"path": path, "body": body, "headers": dict(request.headers)})
        reply = self._next(body)
        if reply.delay:
            import anyio

            try:
                await anyio.sleep(reply.delay)
            except anyio.get_cancelled_exc_class():  # stopped with the wait unanswered: a test is over
                return Response(status_code=503)
        if reply.status != 200:
            wait = reply.retry_after
            headers = {"retry-after-ms": f"{wait * 1000:g}", "retry-after": f"{wait:g}"} if wait else {}
            answer = reply.error_body or error_body(path, reply.status, reply.error)
            return JSONResponse(answer, reply.status, headers=headers)
        if body.get("stream") and reply.recorded is not None:
            return StreamingResponse(iter([reply.recorded]), media_type="text/event-stream")
        if not body.get("stream") and reply.body is not None:
            return JSONResponse(reply.body)
        plain, stream = RENDER[path]
        if body.get("stream"):
            events = stream(reply, body, n)
            if reply.cut_after is not None:
                events = cut_stream(events, reply.cut_after, reply.cut)
            return StreamingResponse(events, media_type="text/event-stream")
        return JSONResponse(plain(reply, body, n))


# ---- reading recorded requests ----------------------------------------------------------------------------

IMAGE_TYPES = ("image", "image_url", "input_image")


def conversation(body: dict) -> list:
    """The part of a request a provider caches by prefix: system prompt and history, in wire order."""
    if "messages" in body and "system" in body:  # Anthropic: the system prompt is a top-level field
        return [body["system"], *body["messages"]]
    if "input" in body:
        return [body.get("instructions"), *body["input"]]
    return list(body.get("messages") or [])


def live_images(node: Any) -> list[str]:
    """The data of every image block still in a request (placeholders are text), in reading order."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if x.get("type") in IMAGE_TYPES:
                src = x.get("source") or {}
                url = x.get("image_url")
                found.append(src.get("data") or (url.get("url") if isinstance(url, dict) else url) or "")
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(node)
    return found


def prefix_hits(bodies: list[dict]) -> list[bool]:
    """For each request after the first: whether its first N bytes equal the previous request's, N being the
    previous conversation's length (its closing bracket aside) — whether the cached prefix survived."""
    texts = [json.dumps(conversation(b), separators=(",", ":")) for b in bodies]
    return [cur.startswith(prev[:-1]) for prev, cur in zip(texts, texts[1:], strict=False)]
