"""The tracer on the canvas env's `gui` surface: it operates the editor as a model would.

Everything it needs comes from the screenshots and the instructions, never from the page itself: the canvas
is found in the first screenshot (the largest blank rectangle with the canvas's proportions, which also gives
the zoom), the tool keys and the order of the properties fields are read from the instructions, and the
screen's coordinate system too. Each element is then drawn with its tool (a drag, or a click for text) and
its exact values are typed into the properties panel, field by field with Tab; the background is typed into
the panel shown when nothing is selected.
"""

from __future__ import annotations

import re

import numpy as np
from scipy import ndimage

from . import CanvasInfo, Plan, canvas_info

NEEDED = {"screenshot", "click", "drag", "type_text", "press_key"}
TOOL_NAMES = {"Rectangle": "rect", "Ellipse": "ellipse", "Line": "line", "Text": "text"}
TOOL_KEYS = {"rect": "r", "ellipse": "e", "line": "l", "text": "t"}
FIELD_KEYS = {
    "X": "x", "Y": "y", "W": "width", "H": "height", "Fill": "fill", "Stroke": "stroke",
    "Stroke width": "stroke_width", "Radius": "radius", "Text": "text", "Font size": "font_size",
}  # fmt: skip
FIELDS = {
    "rect": ["x", "y", "width", "height", "fill", "stroke", "stroke_width", "radius"],
    "ellipse": ["x", "y", "width", "height", "fill", "stroke", "stroke_width"],
    "line": ["x", "y", "width", "height", "stroke", "stroke_width"],
    "text": ["x", "y", "text", "font_size", "fill"],
}
KIND_WORDS = {"rectangle": "rect", "ellipse": "ellipse", "line": "line", "text": "text"}
_TOOL = re.compile(r"\b(Rectangle|Ellipse|Line|Text) \((\w)\)")
_FIELD_LIST = re.compile(
    r"((?:[A-Z][a-z]*(?: [a-z]+)?, )+[A-Z][a-z]*(?: [a-z]+)?) for (?:an? )?(rectangle|ellipse|line|text)\b"
)


def usable(tool_names: set[str], system: str) -> bool:
    """Computer-use tools on a screen that shows a canvas to draw on (not any web page)."""
    return NEEDED <= tool_names and "canvas" in system.lower()


def read_controls(system: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(tool key per kind, properties fields per kind in tab order) as the instructions state them."""
    text = " ".join(system.split())
    keys = dict(TOOL_KEYS)
    for name, key in _TOOL.findall(text):
        keys[TOOL_NAMES[name]] = key.lower()
    fields = {k: list(v) for k, v in FIELDS.items()}
    for names, kind in _FIELD_LIST.findall(text):
        order = [FIELD_KEYS.get(n.strip()) for n in names.split(",")]
        if all(order):
            fields[KIND_WORDS[kind]] = order
    return keys, fields


def find_canvas(screen: np.ndarray, width: int, height: int) -> tuple[float, float, float] | None:
    """(left, top, scale) of a blank canvas of `width` x `height` on a screenshot: the largest solid white
    rectangle with its proportions."""
    white = (screen >= 250).all(-1)
    lab, n = ndimage.label(white)
    best = None
    for i, sl in enumerate(ndimage.find_objects(lab), 1):
        if sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if w < 50 or h < 50 or abs(w / h - width / height) > 0.02 * width / height:
            continue
        if (lab[sl] == i).mean() < 0.98:
            continue
        if best is None or w * h > best[0]:
            best = (w * h, sl[1].start, sl[0].start, w / width)
    return best[1:] if best else None


def _value(el: dict, field: str) -> str:
    """What to type into a field for an element (add_element arguments, canvas pixels)."""
    v = el.get(field)
    if field == "fill":
        return v or "#000000"
    if field == "stroke":
        return v or "none"
    if field == "text":
        return str(v or "Text")
    if not v:
        v = {"font_size": 16, "stroke_width": 2 if el["kind"] == "line" else 0}.get(field, 0)
    v = round(float(v), 2)
    return str(int(v)) if v == int(v) else str(v)


def play(agent) -> Plan:
    info = canvas_info(agent.system)
    canvas = CanvasInfo(info.width, info.height, normalized=False)
    shot = np.asarray(agent.images[-1].to_pil().convert("RGB")) if agent.images else None
    found = find_canvas(shot, canvas.width, canvas.height) if shot is not None else None
    finish = [("submit", {})] if "submit" in agent.tool_names else []
    if found is None:
        yield "I cannot find the editor's canvas on the screen", finish
        return
    left, top, scale = found
    sh, sw = shot.shape[:2]

    def at(x: float, y: float) -> dict:
        """A canvas point as the screen coordinates the instructions asked for."""
        px = min(max(left + x * scale, 0), sw - 1)
        py = min(max(top + y * scale, 0), sh - 1)
        if info.normalized:
            return {"x": round(px * 1000 / sw, 2), "y": round(py * 1000 / sh, 2)}
        return {"x": round(px, 1), "y": round(py, 1)}

    keys, fields = read_controls(agent.system)
    target = agent.images[0] if len(agent.images) > 1 else None
    bg, elements = agent.design(canvas, target)
    if bg and bg.lower() != "#ffffff":
        yield (
            f"setting the background to {bg}",
            [("click", at(2, 2)), ("press_key", {"keys": "Tab"}), ("type_text", {"text": bg}),
             ("press_key", {"keys": "Enter"})],
        )  # fmt: skip
    for n, el in enumerate(elements, 1):
        kind = el["kind"]
        x, y, w, h = el["x"], el["y"], el.get("width", 0), el.get("height", 0)
        calls: list[tuple[str, dict]] = [("press_key", {"keys": keys[kind]})]
        if kind == "text":
            calls.append(("click", at(x, y)))
        else:
            a, b = at(x, y), at(x + w, y + h)
            calls.append(("drag", {"x1": a["x"], "y1": a["y"], "x2": b["x"], "y2": b["y"]}))
        for field in fields[kind]:
            calls += [("press_key", {"keys": "Tab"}), ("type_text", {"text": _value(el, field)})]
        calls.append(("press_key", {"keys": "Enter"}))
        yield f"drawing element {n}/{len(elements)}: a {kind}, then typing its properties", calls
    if finish:
        yield "submitting", finish
