"""The canvas document model: elements, documents, colours and the validation the tools share.

A document is plain JSON so that the environment, the grader, the evalset and a trace all speak the same
shape; `Element` and `Doc` only add validation and normalisation on top of it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace

from PIL import ImageColor

KINDS = ("rect", "ellipse", "line", "text")
DEFAULT_FONT_SIZE = 16
MAX_FONT_SIZE = 400
MAX_STROKE = 200


class DocError(ValueError):
    """An invalid element or document value; its message is meant for the agent."""


def normalize_color(value: object, what: str = "colour") -> str:
    """Return `#rrggbb` for any colour PIL understands (3/6-digit hex, CSS names), else raise DocError."""
    if not isinstance(value, str) or not value.strip():
        raise DocError(f"{what} must be a colour string like '#1f77b4', got {value!r}")
    try:
        rgb = ImageColor.getrgb(value.strip())
    except ValueError:
        raise DocError(
            f"{what} {value!r} is not a colour: use '#rrggbb', '#rgb' or a CSS colour name"
        ) from None
    return "#{:02x}{:02x}{:02x}".format(*rgb[:3])


def hex_to_rgb(value: str) -> tuple[int, int, int]:
    """Parse a normalised `#rrggbb` string."""
    return int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16)


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DocError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _tidy(value: float) -> float | int:
    """Show whole numbers as ints so documents read naturally in JSON."""
    value = round(value, 2)
    return int(value) if value == int(value) else value


@dataclass
class Element:
    """One shape. Coordinates are canvas pixels; for a `line` the segment runs from (x, y) to
    (x + width, y + height), so width and height may be negative. `fill` colours shapes and text;
    `stroke` outlines shapes and colours lines."""

    id: str
    kind: str
    x: float
    y: float
    width: float
    height: float
    fill: str | None = None
    stroke: str | None = None
    stroke_width: float = 0
    radius: float = 0
    text: str = ""
    font_size: float = DEFAULT_FONT_SIZE

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("x", "y", "width", "height", "stroke_width", "radius", "font_size"):
            d[k] = _tidy(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Element:
        return build_element(
            d.get("id", "e1"), d["kind"], **{k: v for k, v in d.items() if k not in ("id", "kind")}
        )


EDITABLE = tuple(f.name for f in fields(Element) if f.name not in ("id",))


def build_element(eid: str, kind: str, **values) -> Element:
    """Validate raw values (as a tool receives them) into an Element with defaults filled in per kind."""
    if kind not in KINDS:
        raise DocError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    unknown = set(values) - set(EDITABLE)
    if unknown:
        raise DocError(f"unknown field(s) {sorted(unknown)}: fields are {', '.join(EDITABLE)}")
    v = {k: val for k, val in values.items() if val is not None}
    el = Element(id=eid, kind=kind, x=0, y=0, width=0, height=0)
    for name in ("x", "y", "width", "height"):
        if name not in v:
            raise DocError(f"{name} is required")
        setattr(el, name, _number(v[name], name))
    if kind != "line" and (el.width < 0 or el.height < 0):
        raise DocError(f"width and height must be >= 0 for a {kind} (only lines may go negative)")
    el.fill = normalize_color(v["fill"], "fill") if "fill" in v else (None if kind == "line" else "#000000")
    el.stroke = (
        normalize_color(v["stroke"], "stroke") if "stroke" in v else ("#000000" if kind == "line" else None)
    )
    sw = _number(v.get("stroke_width", 2 if kind == "line" or el.stroke else 0), "stroke_width")
    if not 0 <= sw <= MAX_STROKE:
        raise DocError(f"stroke_width must be between 0 and {MAX_STROKE}, got {sw}")
    el.stroke_width = sw
    radius = _number(v.get("radius", 0), "radius")
    if radius < 0:
        raise DocError(f"radius must be >= 0, got {radius}")
    el.radius = radius
    text = v.get("text", "")
    if not isinstance(text, str):
        raise DocError(f"text must be a string, got {text!r}")
    if kind == "text" and not text.strip():
        raise DocError("a text element needs non-empty text")
    el.text = text
    fs = _number(v.get("font_size", DEFAULT_FONT_SIZE), "font_size")
    if not 1 <= fs <= MAX_FONT_SIZE:
        raise DocError(f"font_size must be between 1 and {MAX_FONT_SIZE}, got {fs}")
    el.font_size = fs
    return el


def update_element(el: Element, **changes) -> Element:
    """Return a validated copy of `el` with `changes` applied (None means leave as is)."""
    merged = el.to_dict()
    merged.pop("id")
    kind = changes.pop("kind", None) or merged.pop("kind")
    merged.pop("kind", None)
    merged.update({k: v for k, v in changes.items() if v is not None})
    if kind == "text" and not merged.get("text"):
        raise DocError("a text element needs non-empty text")
    return build_element(el.id, kind, **merged)


@dataclass
class Doc:
    """A canvas: size, background and elements in z-order (first is drawn first, i.e. at the bottom)."""

    width: int
    height: int
    background: str = "#ffffff"
    elements: list[Element] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "width": self.width,
            "height": self.height,
            "background": self.background,
            "elements": [e.to_dict() for e in self.elements],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Doc:
        return cls(
            width=int(d["width"]),
            height=int(d["height"]),
            background=normalize_color(d.get("background", "#ffffff"), "background"),
            elements=[Element.from_dict(e) for e in d.get("elements", [])],
        )

    def copy(self) -> Doc:
        return replace(self, elements=[replace(e) for e in self.elements])

    def find(self, eid: str) -> int:
        for i, e in enumerate(self.elements):
            if e.id == eid:
                return i
        known = ", ".join(e.id for e in self.elements) or "none"
        raise DocError(f"no element with id {eid!r} (ids on the canvas: {known})")

    def next_id(self) -> str:
        used = {e.id for e in self.elements}
        n = len(self.elements) + 1
        while f"e{n}" in used:
            n += 1
        return f"e{n}"


def scale_element(el: Element, sx: float, sy: float) -> Element:
    """Map an element's position and size between coordinate spaces (pixels <-> normalised 0–1000).

    Stroke width, corner radius and font size stay in pixels in both spaces: they are not positions."""
    return replace(el, x=el.x * sx, y=el.y * sy, width=el.width * sx, height=el.height * sy)
