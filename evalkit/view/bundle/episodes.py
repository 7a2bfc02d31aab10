"""One episode as the bundle's page reads it, in pieces: a head (header fields, where it opens, how many
steps) and parts of PART steps each (the frame with the positions of its actions, text, reasoning, calls, the
plans sent in its turn; the transcript's messages of those turns). A page opening a step loads the head and
that step's part, whatever the episode's length. And the bundle's store of images."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from evalkit.analysis.tables import usd
from evalkit.records import plans, transcripts
from evalkit.records.viewer_marks import image_size, overlay, space_of
from evalkit.types import EpisodeRecord
from evalkit.view import support as vs

PART = 48
"""Steps (and turns of the transcript) per part: a multiple of the page's filmstrip (12 thumbnails) and of
its transcript pages (4 turns), so that the pages of a step lie in its part."""
TEXT_CAP = 100_000
"""Characters of one text field kept in a bundle; a longer one is cut and says how long it was."""
IMAGE_TYPES = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg", ".webp": "webp", ".gif": "gif"}


class Images:
    """The bundle's images: each file inside a run copied once, named by the sha256 of its bytes."""

    def __init__(self, out: Path):
        self.out = out
        self._by_path: dict[str, str | None] = {}
        self._sizes: dict[str, tuple[int, int] | None] = {}

    def put(self, data: bytes, ext: str) -> str:
        digest = hashlib.sha256(data).hexdigest()
        rel = f"img/{digest[:2]}/{digest}.{ext}"
        path = self.out / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return rel

    def add(self, run: str, rel: Any) -> str | None:
        """The bundle path of image `rel` of `run`, or None when it is missing, outside the run, or not an
        image type a page shows."""
        if not isinstance(rel, str):
            return None
        key = f"{run}\x00{rel}"
        if key not in self._by_path:
            path = vs.safe_image(run, rel)
            ext = IMAGE_TYPES.get(path.suffix.lower()) if path is not None else None
            self._by_path[key] = self.put(path.read_bytes(), ext) if path is not None and ext else None
        return self._by_path[key]

    def size(self, rel: str | None) -> tuple[int, int] | None:
        """(width, height) of a picture of the bundle, from its header (once per picture)."""
        if rel is None:
            return None
        if rel not in self._sizes:
            self._sizes[rel] = image_size(self.out / rel)
        return self._sizes[rel]


def cap(text: Any) -> str:
    if not isinstance(text, str):
        text = "" if text is None else vs.as_json(text)
    if len(text) <= TEXT_CAP:
        return text
    return text[:TEXT_CAP] + f"\n… (cut here: {len(text):,} characters in the trace)"


def _calls(run: str, calls: list, images: Images) -> list[dict]:
    return [
        {
            "name": vs.clip(c.name or "?", 200),
            "line": vs.call_line(c.name, c.args, c.result, 160),
            "args": cap(vs.as_json(c.args)),
            "ok": bool(c.ok),
            "parse_error": bool(c.parse_error),
            "result": cap(c.result),
            "images": [i for i in (images.add(run, p) for p in c.images or []) if i],
        }
        for c in calls
    ]


def _plans(rec: EpisodeRecord) -> list[dict]:
    heads = plans.plan_summary(rec)
    out = []
    for i, (p, head) in enumerate(zip(rec.plans, heads, strict=False), 1):
        out.append(
            {
                "n": i,
                "turn": p.turn,
                "tool": vs.clip(p.tool, 80),
                "feasible": head.get("feasible"),
                "objective": head.get("objective"),
                "violations": head.get("violations"),
                "reward": head.get("reward"),
                "answer": vs.clip(head.get("answer"), 2000) if head.get("answer") else None,
                "rows": [{k: vs.clip(v) for k, v in r.items()} for r in plans.plan_rows(p)],
                "bad": [{k: vs.clip(v) for k, v in r.items()} for r in plans.violation_rows(p)],
            }
        )
    return out


def _messages(run: str, rec: EpisodeRecord, images: Images) -> list[dict]:
    try:
        msgs = transcripts.messages(rec, Path(run))
    except (OSError, ValueError, TypeError, KeyError):
        return []
    out = []
    for m in msgs:
        pics = []
        for img in m.images or []:
            img = img if isinstance(img, dict) else {}
            note = vs.pruned_note(img) if img.get("pruned") else None
            pics.append({"src": images.add(run, img.get("path")), "pruned": note})
        calls = [c if isinstance(c, dict) else {} for c in m.calls or []]
        out.append(
            {
                "role": vs.clip(m.role, 20), "turn": m.turn if isinstance(m.turn, int) else 0,
                "text": cap(m.text), "reasoning": cap(m.reasoning), "images": pics,
                "name": vs.clip(m.name, 200) if m.name else None,
                "call_id": vs.clip(m.call_id, 80) if m.call_id else None,
                "calls": [vs.call_line(c.get("name"), c.get("args"), None, 300) for c in calls],
                "stop": vs.clip(m.stop, 60) if m.stop else None,
                "usage": {k: v for k, v in (m.usage or {}).items() if isinstance(v, (int, float))},
                "latency_s": m.latency_s if isinstance(m.latency_s, (int, float)) else None,
                "note": vs.clip(m.note, 120) if m.note else None,
                "error": bool(getattr(m, "error", False)),
            }
        )  # fmt: skip
    return out


def _step(run: str, s: vs.Step, space: str | None, images: Images, plans_of: dict[int, list]) -> dict:
    t = s.turn
    step: dict[str, Any] = {"index": s.index, "caption": s.caption, "end": s.end}
    step["frame"] = images.add(run, s.frame)
    if t is not None and s.marked:  # where its actions landed, drawn by the page over the plain frame
        marks = overlay(t.calls, space, images.size(step["frame"]))
        if marks:
            step["marks"] = marks
    if t is not None:
        step |= {
            "turn": t.turn if isinstance(t.turn, int) else s.index,
            "text": cap(t.text),
            "reasoning": cap(t.reasoning),
            "stop": vs.clip(t.stop, 60),
            "provider": vs.clip(t.provider, 60) if t.provider else None,  # who answered (hf: fallbacks)
            "model_s": t.model_s if isinstance(t.model_s, (int, float)) else None,
            "env_s": t.env_s if isinstance(t.env_s, (int, float)) else None,
            "calls": _calls(run, t.calls, images),
        }
        if plans_of.get(step["turn"]):  # the plans sent in this turn, with the env's verdicts
            step["plans"] = plans_of[step["turn"]]
    return step


def _head(rec: EpisodeRecord, run: str, images: Images) -> dict:
    grade, _ = vs.field_rows(rec.grade)
    usage, _ = vs.field_rows(rec.usage)
    text = {
        k: vs.clip(getattr(rec, k))
        for k in ("key", "model", "env", "surface", "mode", "task_id", "tier", "skin")
    }
    return text | {
        "repeat": rec.repeat if isinstance(rec.repeat, int) else None,
        "reward": rec.reward if isinstance(rec.reward, (int, float)) else None,
        "end_reason": vs.clip(rec.end_reason, 80),
        "error_class": vs.clip(rec.error_class, 80) if rec.error_class else None,
        "error": cap(rec.error) if rec.error else None,
        "cost_usd": rec.cost_usd if isinstance(rec.cost_usd, (int, float)) else None,
        "cost": usd(rec.cost_usd) if isinstance(rec.cost_usd, (int, float)) else None,  # the viewer's words
        "reset": cap(vs.as_json(rec.reset)) if rec.reset else None,  # the arguments the env's reset was sent
        "seconds": rec.seconds if isinstance(rec.seconds, (int, float)) else None,
        "counts": {k: getattr(rec, k) for k in ("n_turns", "tool_calls", "tool_errors", "parse_errors")},
        "grade": grade,
        "usage": usage,
        "ownloop": vs.is_ownloop(rec),
        "target": images.add(run, rec.target),
        "render": images.add(run, rec.render),
        "pictures": vs.has_pictures(rec),
    }


def detail(run: str, d: dict, images: Images) -> tuple[dict, list[dict]]:
    """The episode of record dict `d` of `run`, as the page shows it: its head, and its parts (part k holds
    steps and transcript turns k·PART to (k+1)·PART − 1)."""
    rec = EpisodeRecord.from_dict(d)
    all_steps = vs.steps_of(rec)
    space = space_of(rec)
    msgs = _messages(run, rec, images)
    last_turn = max((m["turn"] for m in msgs), default=0)
    n_parts = max(-(-len(all_steps) // PART), last_turn // PART + 1)
    plans_of: dict[int, list] = {}
    for p in _plans(rec):  # a turn that is not a number (a hostile trace) names no step
        plans_of.setdefault(p["turn"] if isinstance(p["turn"], int) else None, []).append(p)
    parts: list[dict] = [{"part": k, "steps": [], "messages": []} for k in range(n_parts)]
    for pos, s in enumerate(all_steps):  # the page reads step `pos` as item pos % PART of part pos // PART
        parts[pos // PART]["steps"].append(_step(run, s, space, images, plans_of))
    for m in msgs:
        parts[min(max(m["turn"], 0) // PART, n_parts - 1)]["messages"].append(m)
    head = _head(rec, run, images) | {
        "first": vs.first_step(all_steps),
        "n_steps": len(all_steps),
        "ends_on_screen": bool(all_steps) and all_steps[-1].end,
        "part_size": PART,
        "last_turn": last_turn,
        "transcript": bool(msgs),
        "reconstructed": any(m["note"] == transcripts.RECONSTRUCTED for m in msgs),
    }
    return head, parts
