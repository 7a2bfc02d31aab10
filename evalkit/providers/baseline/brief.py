"""Read the canvas env's written brief (description mode) back into add_element arguments.

The brief is prose with one numbered line per element, bottom first, e.g.
`2. ellipse at x=520, y=48.3, width=381.2, height=296.7, fill #e377c2, no stroke`. Positions are already in
the episode's coordinate space, so they pass through unchanged. Lines that do not parse are skipped.
"""

from __future__ import annotations

import re

from . import CanvasInfo

_BG = re.compile(r"background\s+(#[0-9a-fA-F]{3,6})\b")
_ITEM = re.compile(r"^\s*\d+\.\s+(rect|ellipse|line|text)\b(.*)$", re.M)
_NUM = r"(-?\d+(?:\.\d+)?)"
_FIELDS = {name: re.compile(rf"\b{name}\s*=\s*{_NUM}") for name in ("x", "y", "width", "height")}
_PAINT = {name: re.compile(rf"\b{name}\s+(#[0-9a-fA-F]{{3,6}}|none)\b") for name in ("fill", "stroke")}
_SCALARS = {name: re.compile(rf"\b{name}\s+{_NUM}") for name in ("stroke_width", "radius", "font_size")}
_TEXT = re.compile(r'^\s*"(.*)"\s+with\b')


def _number(text: str) -> float | int:
    v = float(text)
    return int(v) if v == int(v) else v


def parse_element(kind: str, rest: str) -> dict | None:
    args: dict = {"kind": kind}
    for name, rx in _FIELDS.items():
        m = rx.search(rest)
        if m:
            args[name] = _number(m.group(1))
    if kind == "text":
        m = _TEXT.match(rest)
        if not m:
            return None
        args["text"] = m.group(1)
        args.setdefault("width", 0)
        args.setdefault("height", 0)
    for name, rx in _PAINT.items():
        m = rx.search(rest)
        if m and m.group(1) != "none":
            args[name] = m.group(1)
    for name, rx in _SCALARS.items():
        m = rx.search(rest)
        if m:
            args[name] = _number(m.group(1))
    if not all(k in args for k in ("x", "y", "width", "height")):
        return None
    return args


def parse_brief(system: str, canvas: CanvasInfo | None = None) -> tuple[str | None, list[dict]]:
    """(background colour, add_element argument dicts bottom to top) from the instructions' brief."""
    start = system.find("Target design")
    body = system[start:] if start >= 0 else system
    bg = _BG.search(body)
    elements = []
    for m in _ITEM.finditer(body):
        el = parse_element(m.group(1), m.group(2))
        if el:
            elements.append(el)
    return (bg.group(1) if bg else None), elements
