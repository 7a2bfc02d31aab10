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
import contextlib
import json
import zlib
from collections.abc import Iterator
from typing import Any

import httptools

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


class Exchange(asyncio.Protocol):
    """One client connection, HTTP/1.1 with keep-alive, parsed by httptools; each request is answered in a
    task of its own once its body is in. Written on asyncio's bare transport rather than a web framework:
    under Starlette on uvicorn the stand-in took ~1 ms of CPU a request (2 ms an episode) on the cores the
    batch and its env share, where a real model's server would take none of theirs. What a client reads is
    what it read from Starlette's (the same status lines, content types and bodies; a stream in chunked
    encoding, one write per event, as a streaming response writes them)."""

    def __init__(self, delay: float, count: Iterator[int]):
        self.delay, self.count = delay, count
        self.parser = httptools.HttpRequestParser(self)
        self.url, self.body = b"", []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        path, body = self.url.split(b"?", 1)[0], b"".join(self.body)
        method, keep = self.parser.get_method(), self.parser.should_keep_alive()
        self.url, self.body = b"", []
        asyncio.get_running_loop().create_task(self.answer(method, path, body, keep))

    def send(self, status: str, ctype: str, body: bytes, keep: bool) -> None:
        head = f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n"
        self.transport.write((head + ("" if keep else "connection: close\r\n") + "\r\n").encode() + body)
        if not keep:
            self.transport.close()

    async def answer(self, method: bytes, path: bytes, raw: bytes, keep: bool) -> None:
        if path.rstrip(b"/") in (b"", b"/v1"):
            self.send("200 OK", "application/json", b'{"ok":true}', keep)
            return
        if path != b"/v1/chat/completions" or method != b"POST":
            self.send("404 Not Found", "text/plain; charset=utf-8", b"Not Found", keep)
            return
        body = json.loads(raw)
        n = next(self.count)
        await asyncio.sleep(self.delay)
        if self.transport.is_closing():
            return
        if not body.get("stream"):
            data = json.dumps(completion(body, n), separators=(",", ":")).encode()
            self.send("200 OK", "application/json", data, keep)
            return
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
        for c in chunks(body, n):
            self.transport.write(b"%x\r\n%s\r\n" % (len(c), c))
        self.transport.write(b"0\r\n\r\n")
        if not keep:
            self.transport.close()


async def serve(port: int, delay: float) -> None:
    count = iter(range(10**9))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Exchange(delay, count), "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay", type=float, default=0.5)
    a = ap.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(a.port, a.delay))


if __name__ == "__main__":
    main()
