"""What the agent is told: the system instructions per surface and the written brief of a target.

Instructions are versioned (`PROMPT_VERSIONS`) so a trace records exactly which wording a model saw; bump the
version whenever the text changes. Only the `tools` surface exists today; `html` and `gui` add entries here.
"""

from __future__ import annotations

from .model import Doc, Element

PROMPT_VERSIONS = {"tools": "canvas-tools-1"}
NORMALIZED = 1000


def _num(v: float) -> str:
    v = round(v, 1)
    return str(int(v)) if v == int(v) else str(v)


def describe_element(el: Element, sx: float = 1.0, sy: float = 1.0) -> str:
    """One line of the brief: everything needed to rebuild the element exactly, in the agent's coordinates."""
    x, y, w, h = el.x * sx, el.y * sy, el.width * sx, el.height * sy
    if el.kind == "line":
        return (
            f"line from ({_num(x)}, {_num(y)}) to ({_num(x + w)}, {_num(y + h)}) "
            f"[x={_num(x)}, y={_num(y)}, width={_num(w)}, height={_num(h)}], "
            f"stroke {el.stroke}, stroke_width {_num(el.stroke_width)}"
        )
    if el.kind == "text":
        return (
            f'text "{el.text}" with its top-left at x={_num(x)}, y={_num(y)}, '
            f"font_size {_num(el.font_size)}, "
            f"fill {el.fill} (its box is about {_num(w)} x {_num(h)})"
        )
    parts = [
        f"{el.kind} at x={_num(x)}, y={_num(y)}, width={_num(w)}, height={_num(h)}, fill {el.fill or 'none'}"
    ]
    if el.stroke and el.stroke_width > 0:
        parts.append(f"stroke {el.stroke}, stroke_width {_num(el.stroke_width)}")
    else:
        parts.append("no stroke")
    if el.kind == "rect" and el.radius > 0:
        parts.append(f"radius {_num(el.radius)}")
    return ", ".join(parts)


def describe_doc(doc: Doc, coordinates: str = "pixels") -> str:
    """The written brief of a target design, bottom element first."""
    sx, sy = scale_to(doc, coordinates)
    lines = [
        f"Target design: background {doc.background}; {len(doc.elements)} element(s), listed bottom to top "
        "(later ones are drawn over earlier ones):"
    ]
    lines += [f"{i}. {describe_element(el, sx, sy)}" for i, el in enumerate(doc.elements, 1)]
    return "\n".join(lines)


def scale_to(doc: Doc, coordinates: str) -> tuple[float, float]:
    """Factors from canvas pixels to the agent's coordinate space."""
    if coordinates == "normalized":
        return NORMALIZED / doc.width, NORMALIZED / doc.height
    return 1.0, 1.0


OPENING = {
    "reference": "The target is attached. Recreate it with your tools, then call submit.",
    "description": "Recreate the design described in your instructions with your tools, then call submit.",
}
"""The task text of the opening message per mode (the reset metadata's `prompt`); the loop adds its turn
budget."""


def instructions(doc: Doc, surface: str, mode: str, coordinates: str, max_steps: int) -> str:
    """The system prompt for an episode."""
    if surface != "tools":
        raise ValueError(f"no instructions for surface {surface!r}")
    if coordinates == "normalized":
        space = (
            f"Coordinates are normalised: x and y run from 0 to {NORMALIZED} across the canvas on both axes "
            f"(x={NORMALIZED} is the right edge, y={NORMALIZED} the bottom edge), whatever its pixel size. "
            "width and height use the same scale. stroke_width, radius and font_size stay in pixels."
        )
    else:
        space = "Coordinates are pixels, origin at the top-left corner, x to the right and y downwards."
    goal = (
        "The target design is shown in the reference image."
        if mode == "reference"
        else "The target design is described below."
    )
    text = f"""You are recreating a target design on a {doc.width} x {doc.height} pixel canvas.
{goal} Rebuild it as exactly as you can: same elements, positions, sizes, colours, text and stacking order.

{space}
Element kinds:
- rect: a rectangle with top-left (x, y) and size width x height; optional corner radius.
- ellipse: the ellipse inscribed in the box (x, y, width, height).
- line: a segment from (x, y) to (x + width, y + height); width or height may be negative. Coloured by stroke.
- text: one line of text with its top-left at (x, y), drawn in fill at font_size pixels
  (width/height are ignored).
Colours are '#rrggbb' (3-digit hex and CSS names are accepted). fill paints shapes and text; stroke with
stroke_width outlines shapes. Elements are drawn in list order: later elements cover earlier ones.

Tools:
- get_document(): the current document as JSON.
- add_element(kind, x, y, width, height, fill, stroke, stroke_width, radius, text, font_size): add an
  element on top of the others; returns its id.
- update_element(id, ...): change any fields of an element.
- delete_element(id): remove an element.
- set_background(color): set the canvas background (it starts white).
- view_canvas(): an image of the canvas as it is now.
- submit(): finish and be graded. The episode ends after submit.

You have at most {max_steps} tool calls; when they run out the canvas is graded as it stands.
The grade rewards matching elements (kind, position, size, colour, text), the rendered picture, covering every
target element, the stacking order and the background colour."""
    if mode == "description":
        text += "\n\n" + describe_doc(doc, coordinates)
    return text
