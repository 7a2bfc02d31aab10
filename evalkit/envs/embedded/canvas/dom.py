"""A page read back as a canvas document, so the html surface is graded by the same grader as the others.

`readback.js` measures what Chromium painted (boxes, SVG shapes and lines, runs of text, the background,
bottom to top); `to_doc` decides what each one is, by the rules the html instructions state:

- a box with a visible background or border is a rect, or an ellipse when every corner is rounded by 50% or
  more (a px radius, however large, is a rounded rect); its border is the outline;
- a box at most `THIN` px thick and at least `ELONGATED` times as long, or a rotated box at most
  `ROTATED_THIN` px thick, is a line along its long side; an SVG `<line>` is a line;
- the text directly inside an element is a text element whose top-left is the top of a font-size tall box
  centred on its first line (so `top: Y; line-height: 1` puts it at Y);
- a bottom box that covers the whole canvas is the background, as a designer would mean it.

Translucent colours are blended over the page background, as they show.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from .model import MAX_FONT_SIZE, MAX_STROKE, Doc, Element

THIN = 6.0
ELONGATED = 4.0
ROTATED_THIN = 12.0
MAX_ELEMENTS = 200
MAX_TEXT = 500
COVER = 0.99


@lru_cache(maxsize=1)
def script() -> str:
    """The JavaScript function (no arguments) that measures a page."""
    return (Path(__file__).with_name("readback.js")).read_text()


def _hex(c: list | None, under: tuple[int, int, int]) -> str | None:
    if not c:
        return None
    a = max(0.0, min(1.0, float(c[3]) if len(c) > 3 else 1.0))
    rgb = [round(a * float(v) + (1 - a) * u) for v, u in zip(c[:3], under, strict=True)]
    return "#{:02x}{:02x}{:02x}".format(*(max(0, min(255, v)) for v in rgb))


def _line(x1: float, y1: float, x2: float, y2: float, colour: str | None, width: float) -> Element | None:
    if colour is None or math.hypot(x2 - x1, y2 - y1) < 0.5:
        return None
    sw = max(1.0, min(float(MAX_STROKE), width))
    return Element("", "line", x1, y1, x2 - x1, y2 - y1, fill=None, stroke=colour, stroke_width=sw)


def _box(item: dict, under: tuple[int, int, int]) -> Element | None:
    fill, stroke = _hex(item.get("fill"), under), _hex(item.get("stroke"), under)
    w, h = float(item["w"]), float(item["h"])
    cx, cy = float(item["cx"]), float(item["cy"])
    if w <= 0 or h <= 0:
        return None
    angle = math.radians(float(item.get("angle") or 0.0))
    turned = abs(math.sin(2 * angle)) > 0.03  # neither ~0° nor ~90°
    if abs(math.sin(angle)) > 0.5 and not turned:  # a quarter turn: the box stands the other way
        w, h = h, w
        angle = 0.0
    colour = fill or stroke
    thick, long = min(w, h), max(w, h)
    if turned and thick <= ROTATED_THIN:
        axis = angle if w >= h else angle + math.pi / 2
        dx, dy = math.cos(axis) * long / 2, math.sin(axis) * long / 2
        return _line(cx - dx, cy - dy, cx + dx, cy + dy, colour, thick)
    if turned:  # a fat rotated box is read as the box around it
        c, s = abs(math.cos(angle)), abs(math.sin(angle))
        w, h = w * c + h * s, w * s + h * c
    elif thick <= THIN and long >= ELONGATED * thick:
        if w >= h:
            return _line(cx - w / 2, cy, cx + w / 2, cy, colour, h)
        return _line(cx, cy - h / 2, cx, cy + h / 2, colour, w)
    kind = "ellipse" if item.get("ellipse") else "rect"
    sw = min(float(MAX_STROKE), float(item.get("stroke_width") or 0.0)) if stroke else 0.0
    radius = max(0.0, float(item.get("radius") or 0.0)) if kind == "rect" else 0.0
    return Element("", kind, cx - w / 2, cy - h / 2, w, h, fill=fill, stroke=stroke, stroke_width=sw,
                   radius=radius)  # fmt: skip


def _text(item: dict, under: tuple[int, int, int]) -> Element | None:
    words = str(item.get("text") or "").strip()[:MAX_TEXT]
    colour = _hex(item.get("fill"), under)
    size = float(item.get("size") or 0.0)
    if not words or colour is None or size <= 0:
        return None
    size = max(1.0, min(float(MAX_FONT_SIZE), size))
    top = float(item["y"]) + (float(item["h"]) - size) / 2
    return Element("", "text", float(item["x"]), top, float(item["w"]), size, fill=colour, text=words,
                   font_size=size)  # fmt: skip


def _covers(el: Element, width: int, height: int) -> bool:
    if el.kind != "rect" or el.stroke or el.fill is None:
        return False
    x0, y0 = max(0.0, el.x), max(0.0, el.y)
    x1, y1 = min(float(width), el.x + el.width), min(float(height), el.y + el.height)
    return (x1 - x0) * (y1 - y0) >= COVER * width * height


def to_doc(raw: dict, width: int, height: int) -> Doc:
    """The canvas document a measured page (`script()`'s result) stands for."""
    bg = _hex(raw.get("background"), (255, 255, 255)) or "#ffffff"
    under = tuple(int(bg[i : i + 2], 16) for i in (1, 3, 5))
    elements: list[Element] = []
    for item in raw.get("items") or []:
        kind = item.get("type")
        if kind == "box":
            el = _box(item, under)
        elif kind == "line":
            el = _line(item["x1"], item["y1"], item["x2"], item["y2"], _hex(item.get("stroke"), under),
                       float(item.get("stroke_width") or 1.0))  # fmt: skip
        elif kind == "text":
            el = _text(item, under)
        else:
            el = None
        if el is None:
            continue
        if not elements and _covers(el, width, height):
            bg = el.fill or bg
            under = tuple(int(bg[i : i + 2], 16) for i in (1, 3, 5))  # what translucent boxes show over
            continue
        elements.append(el)
        if len(elements) >= MAX_ELEMENTS:
            break
    for i, el in enumerate(elements, 1):
        el.id = f"e{i}"
        for name in ("x", "y", "width", "height", "stroke_width", "radius", "font_size"):
            setattr(el, name, round(getattr(el, name), 2))
    return Doc(width, height, bg, elements)
