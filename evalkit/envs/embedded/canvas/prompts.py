"""What the agent is told: the system instructions per surface and the written brief of a target.

Instructions are versioned (`PROMPT_VERSIONS`) so a trace records exactly which wording a model saw; bump the
version whenever the text changes. Each surface says how the agent acts and how its work is read: the html
text states the read-back rules of `dom.py`, the gui text the editor's controls and the screen's coordinates.
"""

from __future__ import annotations

from evalkit.browser.computer import describe

from .model import Doc, Element

PROMPT_VERSIONS = {"tools": "canvas-tools-1", "html": "canvas-html-1", "gui": "canvas-gui-1"}
NORMALIZED = 1000
GRADE = (
    "The grade rewards matching elements (kind, position, size, colour, text), the rendered picture, "
    "covering every\ntarget element, the stacking order and the background colour."
)


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
budget. The gui surface says it in its own words (`GUI_OPENING`)."""
GUI_OPENING = {
    "reference": "The first image is the target; the second shows the editor. Recreate the target in the "
    "editor, then call submit.",
    "description": "Recreate the design described in your instructions in the editor, then call submit.",
}
"""On gui the loop adds a screenshot of the editor (after the target, in reference mode), so the text says
which image is which; the loop itself names its screenshot."""


def opening(surface: str, mode: str) -> str:
    """The opening message's task text for an episode (the reset metadata's `prompt`)."""
    return (GUI_OPENING if surface == "gui" else OPENING)[mode]


def instructions(
    doc: Doc, surface: str, mode: str, coordinates: str, max_steps: int, screen: tuple[int, int] = (1280, 800)
) -> str:
    """The system prompt for an episode."""
    goal = (
        "The target design is shown in the reference image."
        if mode == "reference"
        else "The target design is described below."
    )
    if surface == "tools":
        text = _tools(doc, goal, coordinates, max_steps)
    elif surface == "html":
        text = _html(doc, goal, max_steps)
    elif surface == "gui":
        text = _gui(doc, goal, coordinates, max_steps, screen)
    else:
        raise ValueError(f"no instructions for surface {surface!r}")
    if mode == "description":
        # The editor's fields and HTML both take canvas pixels, whatever the screen's coordinates.
        text += "\n\n" + describe_doc(doc, coordinates if surface == "tools" else "pixels")
    return text


def _tools(doc: Doc, goal: str, coordinates: str, max_steps: int) -> str:
    if coordinates == "normalized":
        space = (
            f"Coordinates are normalised: x and y run from 0 to {NORMALIZED} across the canvas on both axes "
            f"(x={NORMALIZED} is the right edge, y={NORMALIZED} the bottom edge), whatever its pixel size. "
            "width and height use the same scale. stroke_width, radius and font_size stay in pixels."
        )
    else:
        space = "Coordinates are pixels, origin at the top-left corner, x to the right and y downwards."
    return f"""You are recreating a target design on a {doc.width} x {doc.height} pixel canvas.
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
{GRADE}"""


def _html(doc: Doc, goal: str, max_steps: int) -> str:
    size = f"{doc.width} x {doc.height}"
    return f"""You are recreating a target design as an HTML page on a {size} pixel canvas.
{goal} Rebuild it as exactly as you can: same elements, positions, sizes, colours, text and stacking order.

Your page is shown in Chromium in a {size} pixel viewport: the viewport is the canvas, origin
at its top-left corner. It starts empty and white, with no margin on <html> or <body>. Send a fragment (it
goes inside <body>) or a whole document. The page is offline: it cannot load anything (inline all CSS, use
no images or web fonts); scripts may run, but the page must finish loading within 5 seconds.

How the page is read back into elements and graded (as on every surface of this task):
- Background: the background colour of <body> (else of <html>, else white). A box at the very bottom that
  covers the whole canvas counts as the background too.
- Boxes: every element with a visible background colour or border is a rect at its border box (e.g.
  position: absolute with left, top, width, height and box-sizing: border-box). Its border is the
  outline (border colour, border width); border-radius in px is the corner radius. A box whose every corner
  is rounded by 50% or more (border-radius: 50%) is an ellipse.
- Lines: an SVG <line> (stroke, stroke-width) in an inline <svg>; or a box at most 6 px thick and at least
  4 times as long (a line through its middle, as thick as the box, in its colour); or a box turned with
  transform: rotate(...) at most 12 px thick (a line along its long side through its centre).
- SVG <rect>, <circle> / <ellipse> and <text> are read as rect, ellipse and text.
- Text: the text directly inside an element is one text element in the element's CSS color and font-size
  (px). Its (x, y) is where its first line starts: x at the first glyph's box, y at the top of a
  font-size tall box centred on the line (so top: 40px with line-height: 1 puts it at y = 40). Keep each
  text on one line.
- Stacking: elements stack in the order the browser paints them (document order, raised by z-index).
- Not read: images, <canvas> drawings, ::before / ::after, gradients, shadows, hidden or fully transparent
  elements, anything outside the viewport; translucent colours count as they show over the background.
  At most 200 elements are read.

Tools:
- set_html(html): replace the page with this HTML; returns the elements it was read back as.
- view_canvas(): a screenshot of the page as Chromium renders it.
- submit(): finish and be graded. The episode ends after submit.

You have at most {max_steps} tool calls; when they run out the page is graded as it stands.
{GRADE}"""


def _gui(doc: Doc, goal: str, coordinates: str, max_steps: int, screen: tuple[int, int]) -> str:
    size = f"{doc.width} x {doc.height}"
    return f"""You are recreating a target design in a drawing editor whose canvas is {size} pixels.
You operate the editor with a mouse and keyboard and see it only through screenshots.
{goal} Rebuild it as exactly as you can: same elements, positions, sizes, colours, text and stacking order.

{describe(coordinates, *screen)} A fresh screenshot comes with your last tool result after every turn in
which you did not take one.

The editor:
- The tool bar picks a tool: Select (V), Rectangle (R), Ellipse (E), Line (L) and Text (T). With a shape
  tool, drag on the canvas from one corner of the shape to the opposite one (a line: from its start to its
  end); with Text, click where the text's top-left corner goes. The new element is selected and the tool
  goes back to Select.
- With Select, click an element to select it, drag it to move it, drag the small square handle at its
  bottom-right corner (a line's end) to resize it; click empty canvas to select nothing.
- The properties panel edits the selected element in canvas pixels, whatever the zoom: X, Y, W, H, Fill,
  Stroke, Stroke width, Radius for a rectangle; X, Y, W, H, Fill, Stroke, Stroke width for an ellipse;
  X, Y, W, H, Stroke, Stroke width for a line (it runs from (X, Y) to (X + W, Y + H)); X, Y, Text,
  Font size, Fill for text (its top-left corner is (X, Y)). With nothing selected it shows the canvas
  Background. Colours are #rrggbb (#rgb and colour names work; Stroke also takes none).
- Keyboard: from the canvas, Tab goes to the first field of the panel and on through the fields in the order
  above; a field's text is selected when it gets the focus, so typing replaces it. Enter applies the value
  and returns to the canvas, Tab applies it and goes to the next field, Escape cancels. Delete removes the
  selected element; Ctrl+Z undoes, Ctrl+Shift+Z redoes; Ctrl+] and Ctrl+[ bring forward and send backward
  (with Shift: to the front, to the back); arrow keys nudge by 1 px (with Shift: 10 px).
- The Layers list shows the elements, top first; click one to select it. Later elements cover earlier
  ones; the arrange buttons (to front, forward, backward, to back) change the order.
- The canvas is scaled to fit the screen; the status bar shows the zoom.

Tools: screenshot(), click(x, y), double_click(x, y), drag(x1, y1, x2, y2), type_text(text),
press_key(keys) (e.g. "Tab", "Enter", "ctrl+z"; several: "Tab, Tab"), scroll(x, y, dx, dy), and submit()
to finish and be graded (the episode ends after submit).

You have at most {max_steps} actions (screenshots are free); when they run out the canvas is graded as it
stands.
{GRADE}"""
