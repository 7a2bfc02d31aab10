"""Where a turn's computer-use actions landed, drawn on its frame, for the viewer and notebook displays.

A turn's frame is the screen after its actions; a click, double click or scroll is marked with a ring at its
point and a drag with an arrow from its start to its end, numbered in the order they were taken. Arguments
are read in the episode's coordinate system (`normalized`: 0–1000 across the frame) and a call that was
refused, or whose arguments are not numbers, is not drawn.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

POINTS = ("click", "double_click", "scroll", "move", "left_click", "right_click")
DRAGS = ("drag",)
NORMALIZED = 1000
COLOUR = (230, 30, 60)


@dataclass(frozen=True)
class Mark:
    """One action on a frame, in frame pixels: a point, or a drag from `points[0]` to `points[1]`."""

    n: int
    name: str
    points: tuple[tuple[float, float], ...]


def _field(call: Any, name: str, default: Any = None) -> Any:
    """A field of a CallRecord, or of the dict a trace line holds."""
    return call.get(name, default) if isinstance(call, dict) else getattr(call, name, default)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def action_marks(calls: Iterable[Any], coordinates: str | None, size: tuple[int, int]) -> list[Mark]:
    """The marks of a turn's calls (CallRecords or dicts) on a frame of `size` (width, height)."""
    w, h = size
    sx, sy = (w / NORMALIZED, h / NORMALIZED) if coordinates == "normalized" else (1.0, 1.0)
    out: list[Mark] = []
    for call in calls:
        name, args = _field(call, "name"), _field(call, "args")
        if not _field(call, "ok", True) or not isinstance(args, dict):
            continue
        if "start_box" in args:  # UI-TARS's parsed actions: boxes relative to the screen (0–1)
            boxes = [_box_centre(args.get(k)) for k in ("start_box", "end_box") if k in args]
            if boxes and all(boxes) and name in (*POINTS, *DRAGS, "left_double", "right_single"):
                out.append(Mark(len(out) + 1, name, tuple((x * w, y * h) for x, y in boxes)))
            continue
        keys = (("x", "y"),) if name in POINTS else (("x1", "y1"), ("x2", "y2")) if name in DRAGS else ()
        pts = [(_number(args.get(kx)), _number(args.get(ky))) for kx, ky in keys]
        if not keys or any(x is None or y is None for x, y in pts):
            continue
        out.append(Mark(len(out) + 1, name, tuple((x * sx, y * sy) for x, y in pts)))
    return out


def _box_centre(box: Any) -> tuple[float, float] | None:
    """The centre of a relative box "[x1, y1, x2, y2]" (or a point "[x, y]"); None if it is not one."""
    try:
        values = [float(v) for v in str(box).strip("[]() ").split(",")]
    except ValueError:
        return None
    if len(values) not in (2, 4) or not all(0.0 <= v <= 1.0 for v in values):
        return None
    if len(values) == 2:
        return values[0], values[1]
    return (values[0] + values[2]) / 2, (values[1] + values[3]) / 2


def draw_marks(image: bytes, marks: list[Mark]) -> bytes:
    """`image` (PNG or JPEG bytes) with `marks` drawn on it, as PNG."""
    from PIL import Image, ImageDraw, ImageFont

    with Image.open(io.BytesIO(image)) as im:
        canvas = im.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    r = max(6, round(min(canvas.size) / 60))
    font = ImageFont.load_default(size=max(10, r * 2))
    for m in marks:
        (x, y) = m.points[0]
        if len(m.points) == 2:
            x2, y2 = m.points[1]
            draw.line([(x, y), (x2, y2)], fill=COLOUR, width=max(2, r // 3))
            angle = math.atan2(y2 - y, x2 - x)
            head = [(x2, y2)] + [
                (x2 - 2 * r * math.cos(angle + s), y2 - 2 * r * math.sin(angle + s)) for s in (0.45, -0.45)
            ]
            draw.polygon(head, fill=COLOUR)
        draw.ellipse((x - r, y - r, x + r, y + r), outline=(255, 255, 255), width=max(3, r // 2))
        draw.ellipse((x - r, y - r, x + r, y + r), outline=COLOUR, width=max(2, r // 3))
        if m.name == "double_click":
            draw.ellipse((x - r / 2, y - r / 2, x + r / 2, y + r / 2), outline=COLOUR, width=2)
        label = (x + r + 2, y - r - 2)
        draw.text(label, str(m.n), fill=COLOUR, font=font, stroke_width=2, stroke_fill="#ffffff")
    buf = io.BytesIO()
    canvas.save(buf, "PNG")
    return buf.getvalue()


def marked(image: bytes, calls: Iterable[Any], coordinates: str | None) -> bytes | None:
    """`image` with the actions of `calls` drawn on it, or None when there is none to draw."""
    from PIL import Image

    calls = list(calls or [])
    if not any(_field(c, "name") in POINTS + DRAGS for c in calls):
        return None
    with Image.open(io.BytesIO(image)) as im:
        size = im.size
    found = action_marks(calls, coordinates, size)
    return draw_marks(image, found) if found else None
