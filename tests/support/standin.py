"""A stand-in model for end-to-end env tests: the local chat-completions server of the provider tests,
reached by the real OpenAI SDK as `vllm:standin`, answering with a policy — a function of the request it was
sent — and keeping every request, so a test reads exactly what the loop put on the wire."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tests.providers.fakes import FakeModelServer, Reply

MODEL = "vllm:standin"
PATH = "/v1/chat/completions"


class StandIn:
    def __init__(self) -> None:
        self.server = FakeModelServer().start()

    def play(self, policy: Callable[[dict], Reply]) -> None:
        """Answer every request with `policy(request body)`; forget earlier requests."""
        self.server.reset(default=policy)

    @property
    def bodies(self) -> list[dict]:
        return self.server.bodies(PATH)

    def stop(self) -> None:
        self.server.stop()


def turns_taken(body: dict) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def texts(message: dict) -> str:
    """The text of a message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def images(message: dict) -> int:
    content = message.get("content")
    return sum(1 for p in content if p.get("type") == "image_url") if isinstance(content, list) else 0


def user_texts(body: dict) -> list[str]:
    return [texts(m) for m in body["messages"] if m["role"] == "user"]


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def calls_and_results(body: dict) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, result text) of every call so far, in order."""
    args = {}
    out = []
    for m in body["messages"]:
        for c in m.get("tool_calls") or []:
            args[c["id"]] = (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
        if m["role"] == "tool":
            name, a = args.get(m["tool_call_id"], ("?", {}))
            out.append((name, a, texts(m)))
    return out


def bisect_guess(body: dict) -> Reply:
    """A policy for the `guess` env: halve the range its hints leave; the first turn also sends one guess
    out of range (the env refuses it)."""
    lo, hi = 1, 100
    for name, args, result in calls_and_results(body):
        if name == "step" and "hint: higher" in result:
            lo = max(lo, args["guess"] + 1)
        elif name == "step" and "hint: lower" in result:
            hi = min(hi, args["guess"] - 1)
    guess = ("step", {"guess": (lo + hi) // 2, "note": f"between {lo} and {hi}"})
    return Reply(calls=[("step", {"guess": 500}), guess] if turns_taken(body) == 0 else [guess])


def _last(pattern: str, texts_: list[str]) -> re.Match | None:
    for text in reversed(texts_):
        m = re.search(pattern, text, re.M)
        if m:
            return m
    return None


def walk_out(body: dict) -> Reply:
    """A policy for the `walk` env that can only read its way out: the layout, its exit and where it stands
    are taken from what it was sent (the opening, then each step's result), and the first move of a
    shortest path goes out. Told no exit, it says so in text instead of moving."""
    seen = [texts(m) for m in body["messages"] if m["role"] in ("user", "tool")]
    exit_, at = _last(r"^exit_cell: \[(\d+), (\d+)\]", seen), _last(r"^position: \[(\d+), (\d+)\]", seen)
    grid = _last(r"^layout:\n((?:[\d ]+\n?)+)", seen)
    if not (exit_ and at and grid):
        return Reply(text="I cannot tell where the exit is.")
    walls = [[int(c) for c in row.split()] for row in grid.group(1).strip().splitlines()]
    start, goal = (int(at[1]), int(at[2])), (int(exit_[1]), int(exit_[2]))
    moves = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    first: dict[tuple[int, int], str | None] = {start: None}
    queue = [start]
    while queue:
        r, c = queue.pop(0)
        if (r, c) == goal:
            return Reply(calls=[("step", {"move": first[(r, c)]})])
        for name, (dr, dc) in moves.items():
            nxt = (r + dr, c + dc)
            if 0 <= nxt[0] < len(walls) and 0 <= nxt[1] < len(walls[0]) and not walls[nxt[0]][nxt[1]]:
                if nxt not in first:
                    first[nxt] = first[(r, c)] or name
                    queue.append(nxt)
    return Reply(text="There is no way out.")
