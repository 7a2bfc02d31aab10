"""Deterministic canvas tasks: a target design per (split, index), its difficulty and tier, and the evalset.

Seeds come from sha256 of the split and index (never Python's `hash()`, which is salted per process), so a
task id names the same design on every machine.
Regenerate the committed evalset with `python -m evalkit.envs.embedded.canvas.tasks --write-evalset PATH`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from evalkit.envs.embedded import TaskIds
from evalkit.envs.evalsets import evalset_hash

from .model import Doc, Element
from .render import element_box, glyph_box

SPLITS = ("train", "test")
SIZES = ((800, 600), (640, 640), (960, 540))
TIERS = ("easy", "medium", "hard")
# Chosen from the test split's score tertiles (indices 0..299) so its tiers come out roughly balanced.
TIER_THRESHOLDS = (0.25, 0.405)
SMALL_PX = 28
EVALSET_SIZE = 300

PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#264653", "#2a9d8f", "#e9c46a", "#f4a261", "#e76f51", "#222222",
    "#ffffff", "#003f5c", "#ffa600", "#58508d",
)  # fmt: skip
BACKGROUNDS = ("#ffffff", "#f7f3e9", "#eef2f7", "#fdf6e3", "#1e1e2e", "#f0f0f0", "#e8f4ea", "#fff4f4")
WORDS = (
    "Sale", "Welcome", "Launch", "Menu", "Hello", "Open", "News", "Summer", "Agenda", "Team", "Contact",
    "Pricing", "Beta", "Notes", "Today", "Ideas", "Plan", "Report", "Join us", "Free", "Q3 review",
)  # fmt: skip
IDS = TaskIds("canvas")
task_id_for, parse_task_id, seed_for = IDS.id_for, IDS.parse, IDS.seed


@dataclass(frozen=True)
class Task:
    """A target design plus the numbers that describe how hard it is."""

    task_id: str
    split: str
    index: int
    doc: Doc
    difficulty_score: float
    tier: str

    @property
    def n_elements(self) -> int:
        return len(self.doc.elements)


def _colour(rng: random.Random, avoid: str) -> str:
    choice = rng.choice(PALETTE)
    return choice if choice != avoid else rng.choice([c for c in PALETTE if c != avoid])


def _element(rng: random.Random, eid: str, w: int, h: int, bg: str) -> Element:
    kind = rng.choices(("rect", "ellipse", "line", "text"), weights=(0.36, 0.24, 0.15, 0.25))[0]
    small = rng.random() < 0.18
    if kind == "text":
        size = rng.choice((12, 14, 16, 20, 24, 32, 40, 48)) if not small else rng.choice((10, 12))
        text = rng.choice(WORDS)
        left, top, right, bottom = glyph_box(size, text)
        x, y = rng.randint(10, max(10, w - right - 10)), rng.randint(5, max(5, h - bottom - 10))
        return Element(eid, "text", x, y, right, bottom, fill=_colour(rng, bg), text=text, font_size=size)
    lo, hi = (6, SMALL_PX - 2) if small else (30, int(min(w, h) * 0.55))
    ew, eh = rng.randint(lo, hi), rng.randint(lo, hi)
    x, y = rng.randint(0, w - ew), rng.randint(0, h - eh)
    if kind == "line":
        sw = rng.choice((1, 2, 3, 4, 6))
        dx, dy = rng.choice(((ew, 0), (0, eh), (ew, eh), (ew, -eh)))
        y0 = y + eh if dy < 0 else y
        return Element(eid, "line", x, y0, dx, dy, stroke=_colour(rng, bg), stroke_width=sw)
    stroke = _colour(rng, bg) if rng.random() < 0.35 else None
    sw = rng.choice((1, 2, 3, 4)) if stroke else 0
    radius = rng.choice((0, 0, 4, 8, 16)) if kind == "rect" else 0
    return Element(
        eid, kind, x, y, ew, eh, fill=_colour(rng, bg), stroke=stroke, stroke_width=sw, radius=radius
    )


def _overlap_fraction(doc: Doc) -> float:
    """Fraction of element pairs whose boxes intersect: overlap hides parts of shapes, so it is harder."""
    boxes = [element_box(e) for e in doc.elements]
    n = len(boxes)
    if n < 2:
        return 0.0
    hits = sum(
        1
        for i in range(n)
        for j in range(i + 1, n)
        if min(boxes[i][2], boxes[j][2]) > max(boxes[i][0], boxes[j][0])
        and min(boxes[i][3], boxes[j][3]) > max(boxes[i][1], boxes[j][1])
    )
    return hits / (n * (n - 1) / 2)


def difficulty(doc: Doc) -> float:
    """A score in [0, 1]: mostly element count, then overlap, text (exact strings) and small elements."""
    els = doc.elements
    n = len(els)
    if not n:
        return 0.0
    count = (n - 1) / 14
    text = sum(e.kind == "text" for e in els) / n
    small = sum(_is_small(e) for e in els) / n
    score = 0.55 * count + 0.2 * _overlap_fraction(doc) + 0.12 * text + 0.13 * small
    return round(min(1.0, score), 4)


def _is_small(el: Element) -> bool:
    x0, y0, x1, y1 = element_box(el)
    if el.kind == "line":
        return max(x1 - x0, y1 - y0) < SMALL_PX
    return min(x1 - x0, y1 - y0) < SMALL_PX or (el.kind == "text" and el.font_size <= 12)


def tier_for(score: float) -> str:
    return TIERS[sum(score >= t for t in TIER_THRESHOLDS)]


def generate_task(split: str = "test", index: int = 0) -> Task:
    """The task at (split, index): the same design on every run and machine."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"index must be a non-negative integer, got {index!r}")
    rng = random.Random(seed_for(split, index))
    w, h = rng.choice(SIZES)
    bg = rng.choices(BACKGROUNDS, weights=(4, 1, 1, 1, 1, 1, 1, 1))[0]
    n = rng.choices(range(1, 16), weights=(3, 4, 5, 5, 5, 5, 4, 4, 4, 3, 3, 3, 2, 2, 2))[0]
    doc = Doc(w, h, bg, [_element(rng, f"e{i + 1}", w, h, bg) for i in range(n)])
    score = difficulty(doc)
    return Task(task_id_for(split, index), split, index, doc, score, tier_for(score))


def task_from_id(task_id: str) -> Task:
    """Resolve a task id like `canvas-test-0007`; ValueError if it is not one."""
    split, index = parse_task_id(task_id)
    return generate_task(split, index)


def evalset(n: int = EVALSET_SIZE) -> dict:
    """The frozen test evalset: task rows plus the `lite` (20 per tier) and `core30` (10 per tier) subsets."""
    tasks = [generate_task("test", i) for i in range(n)]
    rows = [
        {
            "task_id": t.task_id,
            "split": t.split,
            "index": t.index,
            "tier": t.tier,
            "difficulty_score": t.difficulty_score,
            "n_elements": t.n_elements,
        }
        for t in tasks
    ]
    ranked = {
        tier: sorted((r["task_id"] for r in rows if r["tier"] == tier), key=_subset_rank) for tier in TIERS
    }
    subsets = {
        "lite": sorted(tid for tier in TIERS for tid in ranked[tier][:20]),
        "core30": sorted(tid for tier in TIERS for tid in ranked[tier][:10]),
    }
    return {
        "evalset_id": evalset_hash(rows, subsets),
        "name": f"canvas-test-{n}",
        "env": "canvas",
        "split": "test",
        "tasks": rows,
        "subsets": subsets,
    }


def _subset_rank(task_id: str) -> str:
    """A fixed pseudo-random order, so subsets spread over the whole index range rather than its start."""
    return hashlib.sha256(f"subset:{task_id}".encode()).hexdigest()


def write_evalset(path: str | Path = "data/evalsets/canvas-test-300.json") -> dict:
    """Write the evalset JSON to `path` (creating folders) and return it."""
    data = evalset()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="canvas task tools")
    parser.add_argument("--write-evalset", metavar="PATH", help="write the test evalset JSON to PATH")
    parser.add_argument("--show", metavar="TASK_ID", help="print a task's document")
    args = parser.parse_args(argv)
    if args.write_evalset:
        data = write_evalset(args.write_evalset)
        counts = {t: sum(r["tier"] == t for r in data["tasks"]) for t in TIERS}
        print(
            f"wrote {args.write_evalset}: {len(data['tasks'])} tasks, id {data['evalset_id']}, tiers {counts}"
        )
    if args.show:
        task = task_from_id(args.show)
        print(json.dumps({"tier": task.tier, "score": task.difficulty_score, **task.doc.to_dict()}, indent=1))
    if not (args.write_evalset or args.show):
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
