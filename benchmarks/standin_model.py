"""A stand-in model for throughput benchmarks: an OpenAI-compatible chat-completions server that answers every
request after exactly `--delay` seconds (asyncio, so a hundred requests wait at once) with a canvas tool call:
`add_element` (a shape in a colour of the task's own; on a screen surface, `click`) on every turn but the
last, `submit` on the last; a model named `…-K` (`vllm:standin-4`) takes K turns, any other two. Replies
stream as a real server's do (role, a few text pieces, the call's name, its arguments in pieces, the finish,
the usage chunk), or come whole when the request does not ask for a stream.

Run in its own process, so that its CPU is not the client's:

    python benchmarks/standin_model.py --port 8765 [--delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import zlib

RECT = {"kind": "rect", "x": 40, "y": 30, "width": 200, "height": 120, "fill": "#3366cc"}
TEXT = "Placing the main shape first, then submitting."


def reply(body: dict) -> tuple[str, dict]:
    """(tool, arguments) for this request: shapes (on a screen surface, clicks), then submit on the last
    turn."""
    turns = sum(m.get("role") == "assistant" for m in body.get("messages") or [])
    _, _, k = str(body.get("model") or "").rpartition("-")
    last = int(k) - 1 if k.isdigit() else 1
    if turns >= last:
        return "submit", {}
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if "click" in tools:
        return "click", {"x": 100 + 50 * turns, "y": 100}
    # A real model draws something of its own for each task, so that its frames are new pictures for the
    # env to encode: the shape's colour follows the task (a hash of its opening message).
    opening = next((m for m in body.get("messages") or [] if m.get("role") == "user"), None)
    fill = f"#{zlib.crc32(json.dumps(opening, sort_keys=True).encode()) & 0xFFFFFF:06x}"
    return "add_element", {**RECT, "x": RECT["x"] + 10 * turns, "fill": fill}


def usage() -> dict:
    return {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}


def completion(body: dict, n: int) -> dict:
    name, args = reply(body)
    call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    msg = {"role": "assistant", "content": TEXT, "tool_calls": [call]}
    choice = {"index": 0, "message": msg, "finish_reason": "tool_calls"}
    return {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [choice], "usage": usage()}  # fmt: skip


def chunks(body: dict, n: int) -> list[bytes]:
    name, args = reply(body)
    head = {"id": f"c{n}", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        data = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data)}\n\n".encode()

    text = json.dumps(args)
    third = max(1, len(text) // 3)
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": w + " "}) for w in TEXT.split()[:4]]
    out.append(chunk({"tool_calls": [{"index": 0, "id": f"call_{n}", "type": "function",
                                      "function": {"name": name, "arguments": ""}}]}))  # fmt: skip
    out += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": text[i : i + third]}}]})
        for i in range(0, len(text), third)
    ]
    out.append(chunk({}, "tool_calls"))
    out.append(f"data: {json.dumps({**head, 'choices': [], 'usage': usage()})}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def build_app(delay: float):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    count = iter(range(10**9))

    async def chat(request: Request) -> Response:
        body = await request.json()
        n = next(count)
        await asyncio.sleep(delay)
        if not body.get("stream"):
            return JSONResponse(completion(body, n))

        async def stream():
            for c in chunks(body, n):
                yield c

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def root(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/", root),
                             Route("/v1", root)])  # fmt: skip


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay", type=float, default=0.5)
    a = ap.parse_args()
    logging.getLogger("uvicorn.access").disabled = True
    uvicorn.run(build_app(a.delay), host="127.0.0.1", port=a.port, log_level="warning", backlog=512,
                timeout_keep_alive=30)  # fmt: skip


if __name__ == "__main__":
    main()
