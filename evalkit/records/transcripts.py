"""What the model saw: how a record keeps the conversation, and `messages()`, the one reader of it.

A record's `transcript` holds only what the rest of the record does not already say. The model's own side of
each turn (text, reasoning, calls, stop reason, usage, latency) is the turn record; what went to the model
is kept here, as the loop handed it to the agent:

```
{"version": 1,
 "system": "texts/ab/ab12….txt",         # the system prompt (shared texts are stored once per run)
 "tools":  "texts/cd/cd34….json",        # the tools as declared to the model (a list of them, inline,
                                         # in a run another harness wrote)
 "opening": {"text_ref": "texts/…", "images": [IMAGE, …]},
             # "before": [{"role", "text", "note"}]: what came before the opening that was no model call:
             # a greeting the harness wrote for the model (τ²-bench's), a simulated user's own tool calls
 "after": {"3": [ENTRY, …]},             # what the loop sent after turn 3, in order
 "raw": "raw/<key>-<id>"}                # with --save-raw: <raw>/003.request.json, 003.response.json
```

- ENTRY is a tool result, `{"call": i}` (the i-th call of that turn: its result text, unless `text_ref`
  holds a text longer than the record's cap), with `note` (text the loop appended: the turns left),
  `images` and `shot` (its last image is a screenshot the loop added); or a user message, `{"role": "user",
  "note": "nudge" | "notes from a cut turn", "text" or "text_ref", "images", "shot"}`.
- IMAGE is `{"path": run-relative path or null (never stored), "mime": …}`, with `"pruned": n` when an image
  budget took it out of the conversation: the request of turn n and every later one no longer carried it.

Texts shorter than INLINE are kept in the record; longer ones go to the run's text store
(`rundir.TextStore`), content-addressed, so a system prompt a thousand episodes share is one file. A record
written before transcripts existed (or by another harness) still reads: `messages()` rebuilds what it can
from the turns, each message marked `note="reconstructed"`.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.records import rundir
from evalkit.types import RESULT_CAP, SCRIPTED, EpisodeRecord, Image, ToolSpec

VERSION = 1
INLINE = 240
"""Texts up to this many characters stay in the record; longer ones are stored once and referenced."""
RECONSTRUCTED = "reconstructed"


@dataclass
class Message:
    """One message of a conversation as the model saw it."""

    role: str
    """`system`, `user`, `assistant` or `tool`."""
    turn: int
    """0 for the system prompt and the opening message; n for the model's turn n and what answered it."""
    text: str = ""
    images: list[dict] = field(default_factory=list)
    """`{"path": run-relative or None, "pruned": bool, "mime": str}`; `pruned_at` (a turn) when pruned."""
    name: str | None = None
    """The tool's name, for a tool result."""
    call_id: str | None = None
    calls: list[dict] = field(default_factory=list)
    """The assistant's tool calls: `{"id", "name", "args"}`."""
    reasoning: str = ""
    stop: str = ""
    usage: dict = field(default_factory=dict)
    latency_s: float | None = None
    note: str | None = None
    """What the loop added or why the message is there: `turn note`, `nudge`, `notes from a cut turn`,
    `screenshot added by the loop` (joined with `; `), or `reconstructed`."""
    raw: dict | None = None
    """With --save-raw: `{"request": path, "response": path}`, run-relative."""
    error: bool = False
    """A tool result the environment (or the loop, for arguments that did not parse) marked as an error."""


# ---------------------------------------------------------------------------------------------- writing


class Recorder:
    """Collects what the loop hands an agent during one episode; `to_dict()` is the record's transcript."""

    def __init__(
        self, run_dir: str | Path | None, frames: bool = True, key: str = "", save_raw: bool = False
    ):
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.texts = rundir.TextStore(run_dir) if run_dir is not None else None
        self.frames = rundir.FrameStore(run_dir) if run_dir is not None else None
        self.keep_images = frames or save_raw
        self.data: dict[str, Any] = {"version": VERSION}
        self.after: dict[str, list[dict]] = {}
        self._images: list[tuple[str, dict]] = []
        """(identity, image entry) of every image handed over after the opening, oldest first."""
        self._aliases: dict[str, str] = {}
        self.save_raw = save_raw and run_dir is not None
        self.raw_dir = f"raw/{key}-{secrets.token_hex(4)}" if self.save_raw else None
        self._raw_written = False

    # -- texts and images

    def _text(self, entry: dict, text: str, always_ref: bool = False) -> dict:
        if self.texts is not None and (always_ref or len(text) > INLINE):
            entry["text_ref"] = self.texts.put(text)
        else:
            entry["text"] = text
        return entry

    def alias(self, image: Image, path: str | None) -> None:
        """Show `image` (the target) by a picture the record already keeps, rather than store it again."""
        if path:
            self._aliases[image.frame_rel] = path

    def _image(self, image: Image) -> dict:
        rel = self._aliases.get(image.frame_rel)
        if self.frames is not None and (self.save_raw or (rel is None and self.keep_images)):
            # A raw request names its images by their place in the frame store: they must be there.
            stored = self.frames.put(image)
            rel = rel or stored
        return {"path": rel, "mime": image.mime}

    def _later(self, images: list[Image]) -> list[dict]:
        entries = [self._image(i) for i in images]
        self._images += [(i.frame_rel, e) for i, e in zip(images, entries, strict=True)]
        return entries

    # -- what the loop hands over

    def begin(self, system: str, tools: list[ToolSpec], text: str, images: list[Image]) -> None:
        if system and self.texts is not None:
            self.data["system"] = self.texts.put(system)
        elif system:
            self.data["system_text"] = system
        if tools and self.texts is not None:
            wire = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
            self.data["tools"] = self.texts.put(_tools_text(json.dumps(wire, ensure_ascii=False)), "json")
        self.data["opening"] = self._text({"images": [self._image(i) for i in images]}, text, True)

    def results(self, turn: int, pairs: list, note: str, shot: bool) -> None:
        """The tool results of `turn` as sent: `pairs` of (call, outcome as sent, text the loop appended)."""
        out = self.after.setdefault(str(turn), [])
        for i, (_call, outcome) in enumerate(pairs):
            entry: dict[str, Any] = {"call": i}
            text = outcome.text
            last = i == len(pairs) - 1
            if last and note and text.endswith(note):
                text = text[: len(text) - len(note)]
                entry["note"] = note
            if len(text) > RESULT_CAP:
                entry["text_ref"] = self.texts.put(text) if self.texts is not None else None
            if outcome.images:
                entry["images"] = self._later(list(outcome.images))
            if last and shot:
                entry["shot"] = True
            out.append(entry)

    def user(self, turn: int, text: str, images: list[Image], note: str, shot: bool = False) -> None:
        entry = self._text({"role": "user", "note": note}, text)
        if images:
            entry["images"] = self._later(list(images))
        if shot:
            entry["shot"] = True
        self.after.setdefault(str(turn), []).append(entry)

    def pruned(self, turn: int, identities: list[str]) -> None:
        """Images an agent's budget dropped before the request of `turn` (oldest first, by `frame_rel`)."""
        for ident in identities:
            for known, entry in self._images:
                if known == ident and "pruned" not in entry:
                    entry["pruned"] = turn
                    break

    def raw(self, turn: int, exchange: dict | None) -> None:
        """Write the request and response bodies of `turn` (images already replaced by frame references)."""
        if not self.save_raw or not exchange or self.run_dir is None:
            return
        for part in ("request", "response"):
            body = json.dumps(exchange.get(part), ensure_ascii=False, indent=1, default=str)
            rundir.atomic_write(self.run_dir / self.raw_dir / f"{turn:03d}.{part}.json", body + "\n")
        self._raw_written = True

    def to_dict(self) -> dict:
        out = dict(self.data)
        if self.after:
            out["after"] = self.after
        if self._raw_written:
            out["raw"] = self.raw_dir
        return out


@lru_cache(maxsize=64)
def _tools_text(compact: str) -> str:
    """The tool list as stored (indented), from its compact JSON: every episode of a batch sends the same
    list, and indenting is the pure-Python encoder: 0.39 ms for the canvas tools, 0.08 ms compact and
    cached."""
    return json.dumps(json.loads(compact), ensure_ascii=False, indent=1)


# ---------------------------------------------------------------------------------------------- reading


@lru_cache(maxsize=512)
def _stored(run: str, rel: str) -> str | None:
    return rundir.read_text(run, rel)


def _resolve(run: Path, entry: dict, fallback: str = "") -> str:
    if isinstance(entry.get("text"), str):
        return entry["text"]
    ref = entry.get("text_ref")
    if isinstance(ref, str):
        text = _stored(str(run), ref)
        if text is not None:
            return text
        return f"(text not found in the run: {ref})"
    return fallback


def _images(entries: Any) -> list[dict]:
    out = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict):
            pruned = e.get("pruned")
            img = {"path": e.get("path"), "pruned": pruned is not None, "mime": e.get("mime") or "image/png"}
            if pruned is not None:
                img["pruned_at"] = pruned
            out.append(img)
    return out


def _frame(path: str | None) -> dict:
    ext = (path or "").rsplit(".", 1)[-1].lower()
    mime = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp"}.get(ext, "image/png")
    return {"path": path, "pruned": False, "mime": mime}


def _assistant(t: Any, raw_dir: str | None) -> Message:
    raw = None
    if raw_dir:
        raw = {
            "request": f"{raw_dir}/{t.turn:03d}.request.json",
            "response": f"{raw_dir}/{t.turn:03d}.response.json",
        }
    return Message(
        role="assistant",
        turn=t.turn,
        text=t.text or "",
        calls=[{"id": c.id, "name": c.name, "args": c.args} for c in t.calls],
        reasoning=t.reasoning or "",
        stop=t.stop or "",
        usage=dict(t.usage or {}),
        latency_s=t.model_s,
        raw=raw,
    )


class Conversation(list):
    """The messages of one episode (a list of `Message`), with the run they came from: in a notebook it
    shows as the conversation (roles, tool calls, thumbnails), through the HTML formatter `import evalkit`
    registers for this type by name (`evalkit.analysis.display.conversation_html`): records never import
    analysis."""

    def __init__(self, msgs: list[Message] = (), run: str | Path | None = None):
        super().__init__(msgs)
        self.run = str(run) if run is not None else None


def messages(rec: EpisodeRecord | dict, run: str | Path) -> Conversation:
    """The conversation of one episode (see `_messages`), which a notebook shows as a conversation."""
    return Conversation(_messages(rec, run), run)


def _messages(rec: EpisodeRecord | dict, run: str | Path) -> list[Message]:
    """The conversation of one episode, in order, as the model saw it: the system prompt, the opening
    message, then for each turn the model's message and what the loop sent back (tool results with the
    notes it appended, nudges, notes from a cut turn). Texts are read from `run`'s text store."""
    if isinstance(rec, dict):
        rec = EpisodeRecord.from_dict(rec)
    tx = getattr(rec, "transcript", None)
    if not isinstance(tx, dict) or tx.get("version") != VERSION:
        return reconstructed(rec)
    run = Path(run)
    out: list[Message] = []
    if tx.get("system") or tx.get("system_text"):
        text = tx.get("system_text") or _stored(str(run), tx["system"]) or f"(text not found: {tx['system']})"
        out.append(Message("system", 0, text))
    opening = tx.get("opening") or {}
    for entry in opening.get("before") or []:
        if isinstance(entry, dict) and entry.get("role") in ("assistant", "user"):
            note = entry.get("note") or (SCRIPTED if entry["role"] == "assistant" else None)
            out.append(Message(entry["role"], 0, _resolve(run, entry), note=note))
    out.append(Message("user", 0, _resolve(run, opening), _images(opening.get("images"))))
    after = tx.get("after") if isinstance(tx.get("after"), dict) else {}
    raw_dir = tx.get("raw") if isinstance(tx.get("raw"), str) else None
    for t in rec.turns:
        out.append(_assistant(t, raw_dir))
        for entry in after.get(str(t.turn)) or []:
            if not isinstance(entry, dict):
                continue
            notes = [entry["note"]] if entry.get("role") == "user" and entry.get("note") else []
            if entry.get("shot"):
                notes.append("screenshot added by the loop")
            if entry.get("role") == "user":
                m = Message("user", t.turn, _resolve(run, entry), _images(entry.get("images")))
            else:
                i = entry.get("call")
                call = t.calls[i] if isinstance(i, int) and 0 <= i < len(t.calls) else None
                text = _resolve(run, entry, call.result if call else "")
                if entry.get("note"):
                    text += entry["note"]
                    notes.insert(0, "turn note")
                m = Message(
                    "tool", t.turn, text, _images(entry.get("images")), error=bool(call and not call.ok)
                )
                if call is not None:
                    m.name, m.call_id = call.name, call.id
            m.note = "; ".join(notes) or None
            out.append(m)
    return out


def reconstructed(rec: EpisodeRecord) -> list[Message]:
    """A best-effort conversation of a record without a transcript: the opening (the prompt an importer
    kept, with the target), then each turn and its calls' results as the record kept them (capped)."""
    prompt = (rec.info or {}).get("prompt") if isinstance(rec.info, dict) else None
    opening = prompt if isinstance(prompt, str) and prompt else "(the opening message was not recorded)"
    images = [_frame(rec.target)] if rec.target else []
    out = [Message("user", 0, opening, images, note=RECONSTRUCTED)]
    for t in rec.turns:
        m = _assistant(t, None)
        m.note = RECONSTRUCTED
        out.append(m)
        for c in t.calls:
            out.append(
                Message("tool", t.turn, c.result or "", [_frame(p) for p in c.images or []], name=c.name,
                        call_id=c.id, note=RECONSTRUCTED, error=not c.ok)
            )  # fmt: skip
    return out


def tools(rec: EpisodeRecord | dict, run: str | Path) -> list[dict]:
    """The tools as they were declared to the model (`name`, `description`, `parameters`), or [] when the
    record does not say."""
    tx = rec.get("transcript") if isinstance(rec, dict) else getattr(rec, "transcript", None)
    ref = tx.get("tools") if isinstance(tx, dict) else None
    if isinstance(ref, list):  # a run another harness wrote keeps them inline (it has no text store)
        return [t for t in ref if isinstance(t, dict)]
    text = _stored(str(Path(run)), ref) if isinstance(ref, str) else None
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def as_dicts(msgs: list[Message]) -> list[dict]:
    return [dataclasses.asdict(m) for m in msgs]
