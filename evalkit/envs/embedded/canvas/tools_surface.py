"""The `tools` surface: structured MCP editing tools on the document (the env's own `view_canvas` and
`submit` are shared with the other surfaces, in `env.py`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from . import model
from .episode import Episode
from .model import DocError, build_element, normalize_color, scale_element
from .prompts import scale_to

Kind = Annotated[Literal["rect", "ellipse", "line", "text"], Field(description="Element kind.")]
X = Annotated[float, Field(description="Left edge (a line's start x), in the episode's coordinate space.")]
Y = Annotated[float, Field(description="Top edge (a line's start y), in the episode's coordinate space.")]
W = Annotated[float, Field(description="Width (a line's x extent, may be negative), same space as x.")]
H = Annotated[float, Field(description="Height (a line's y extent, may be negative), same space as y.")]
OptNum = Annotated[
    float | None, Field(description="A number in the episode's coordinate space; omit to keep.")
]
Colour = Annotated[str | None, Field(description="Colour as '#rrggbb', '#rgb' or a CSS name.")]
Pixels = Annotated[float | None, Field(description="In pixels in every coordinate space.")]


def element_view(ep: Episode, el: model.Element) -> dict:
    """An element in the episode's coordinate space."""
    sx, sy = scale_to(ep.doc, ep.coordinates)
    return scale_element(el, sx, sy).to_dict()


def document_view(ep: Episode) -> dict:
    """The document in the episode's coordinate space (what get_document returns)."""
    doc = ep.snapshot()
    out = doc.to_dict()
    out["elements"] = [element_view(ep, el) for el in doc.elements]
    return out


def _to_pixels(ep: Episode, values: dict) -> dict:
    sx, sy = scale_to(ep.doc, ep.coordinates)
    out = dict(values)
    for key, s in (("x", sx), ("y", sy), ("width", sx), ("height", sy)):
        if isinstance(out.get(key), (int, float)):
            out[key] = out[key] / s
    return out


def register(mcp: Any, current: Callable[[], Episode], fail: Callable[[str], Exception]) -> None:
    """Add the editing tools to the FastMCP server `mcp`; `current()` is the live episode. In this order
    (the order the model is shown them): get_document, add_element, update_element, delete_element,
    set_background."""
    _reading_and_adding(mcp, current, fail)
    _changing(mcp, current, fail)


def _reading_and_adding(mcp: Any, current: Callable[[], Episode], fail: Callable[[str], Exception]) -> None:
    @mcp.tool
    def get_document() -> str:
        """Return the current document as JSON: width, height, background and elements (bottom to top)."""
        return json.dumps(document_view(current()))

    @mcp.tool
    def add_element(
        kind: Kind,
        x: X,
        y: Y,
        width: W,
        height: H,
        fill: Colour = None,
        stroke: Colour = None,
        stroke_width: Pixels = None,
        radius: Pixels = None,
        text: Annotated[str | None, Field(description="The text of a text element.")] = None,
        font_size: Pixels = None,
    ) -> str:
        """Add an element on top of the others and return its id as JSON, e.g. {"id": "e3"}.

        A line runs from (x, y) to (x + width, y + height); width/height may be negative only for lines.
        fill colours shapes and text (default black); stroke with stroke_width outlines shapes or colours
        a line."""
        ep = current()
        values = dict(fill=fill, stroke=stroke, stroke_width=stroke_width, radius=radius, text=text,
                      font_size=font_size, x=x, y=y, width=width, height=height)  # fmt: skip
        with ep.lock:
            try:
                el = build_element(ep.doc.next_id(), kind, **_to_pixels(ep, values))
            except DocError as e:
                raise fail(str(e)) from None
            ep.doc.elements.append(el)
        return json.dumps({"id": el.id})


def _changing(mcp: Any, current: Callable[[], Episode], fail: Callable[[str], Exception]) -> None:
    @mcp.tool
    def update_element(
        id: Annotated[str, Field(description="The element id, e.g. 'e2'.")],
        kind: Kind | None = None,
        x: OptNum = None,
        y: OptNum = None,
        width: OptNum = None,
        height: OptNum = None,
        fill: Colour = None,
        stroke: Colour = None,
        stroke_width: Pixels = None,
        radius: Pixels = None,
        text: Annotated[str | None, Field(description="New text for a text element.")] = None,
        font_size: Pixels = None,
    ) -> str:
        """Change the given fields of an element (omitted fields stay as they are) and return it as JSON."""
        ep = current()
        changes = dict(kind=kind, x=x, y=y, width=width, height=height, fill=fill, stroke=stroke,
                       stroke_width=stroke_width, radius=radius, text=text, font_size=font_size)  # fmt: skip
        with ep.lock:
            try:
                i = ep.doc.find(id)
                ep.doc.elements[i] = model.update_element(ep.doc.elements[i], **_to_pixels(ep, changes))
            except DocError as e:
                raise fail(str(e)) from None
            el = ep.doc.elements[i]
        return json.dumps(element_view(ep, el))

    @mcp.tool
    def delete_element(id: Annotated[str, Field(description="The element id, e.g. 'e2'.")]) -> str:
        """Remove an element from the canvas."""
        ep = current()
        with ep.lock:
            try:
                del ep.doc.elements[ep.doc.find(id)]
            except DocError as e:
                raise fail(str(e)) from None
        return json.dumps({"deleted": id})

    @mcp.tool
    def set_background(
        color: Annotated[str, Field(description="'#rrggbb', '#rgb' or a CSS colour name.")],
    ) -> str:
        """Set the canvas background colour."""
        ep = current()
        try:
            colour = normalize_color(color, "color")
        except DocError as e:
            raise fail(str(e)) from None
        with ep.lock:
            ep.doc.background = colour
        return json.dumps({"background": colour})
