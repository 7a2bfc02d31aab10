"""What the model saw, message by message (the transcript contract shared by the trace and its readers).

`messages(rec, run)` gives the conversation of one episode as `Message`s: the system prompt and opening
message (turn 0), then per turn the assistant's reply and a tool message per call.

This module is the minimal reader the viewer is written against: it rebuilds a best-effort conversation
from the fields every record has (turn text, reasoning, calls and their capped results and images), each
message marked `note="reconstructed"`. Records that carry their transcript are read by the full module
that writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.types import EpisodeRecord

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Message:
    """One message as the model saw it."""

    role: str
    """`system`, `user`, `assistant` or `tool`."""
    turn: int = 0
    """0 for the system prompt and the opening message; n for turn n's reply and its tool results."""
    text: str = ""
    images: list[dict] = field(default_factory=list)
    """`{"path": str | None, "pruned": bool, "mime": str}`: path relative to the run (None when the image was
    never stored); `pruned` when the model no longer saw it at that point."""
    name: str | None = None
    """The tool's name, for a tool result."""
    call_id: str | None = None
    calls: list[dict] = field(default_factory=list)
    """An assistant's tool calls: `{"id", "name", "args"}`."""
    reasoning: str = ""
    stop: str | None = None
    usage: dict = field(default_factory=dict)
    latency_s: float | None = None
    note: str | None = None
    """Why the message is there when the model did not write it and no tool answered it ("nudge", "turn
    note", ...), or "reconstructed" when rebuilt from a record without a transcript."""
    raw: dict | None = None
    """`{"request": path, "response": path}` relative to the run, when the run kept raw bodies."""
    error: bool = False
    """A tool result the environment (or the loop) marked as an error."""


def _image(path: Any) -> dict:
    return {"path": path if isinstance(path, str) else None, "pruned": False, "mime": "image/png"}


def messages(rec: EpisodeRecord | dict, run: str | Path | None = None) -> list[Message]:
    """The conversation of `rec` (an `EpisodeRecord` or its dict); `run` is where its texts and images are."""
    if isinstance(rec, dict):
        rec = EpisodeRecord.from_dict(rec)
    note = "reconstructed"
    out: list[Message] = []
    info = rec.info if isinstance(rec.info, dict) else {}
    system = info.get("instructions") or info.get("system_prompt")
    if isinstance(system, str) and system:
        out.append(Message("system", 0, system, note=note))
    opening = info.get("prompt") or info.get("opening")
    pictures = [_image(p) for p in (rec.target,) if p]
    out.append(Message("user", 0, opening if isinstance(opening, str) else "", pictures, note=note))
    for i, t in enumerate(rec.turns, 1):
        calls = [{"id": c.id, "name": c.name, "args": c.args} for c in t.calls]
        out.append(
            Message(
                "assistant", i, t.text or "", calls=calls, reasoning=t.reasoning or "", stop=t.stop or None,
                usage=t.usage if isinstance(t.usage, dict) else {}, latency_s=t.model_s, note=note,
            )
        )  # fmt: skip
        for c in t.calls:
            images = [_image(p) for p in c.images or []]
            out.append(
                Message(
                    "tool", i, c.result or "", images, name=c.name, call_id=c.id, note=note, error=not c.ok
                )
            )
    return out
