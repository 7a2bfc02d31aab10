"""Where computer-use actions landed, drawn on the screen they were taken on, for the viewer, the bundle and
notebook displays.

The viewer and the bundle draw the marks in the browser, as an SVG layer over the plain frame, from their
positions as data (`overlay`): decoding a screenshot, drawing on it and encoding it again took tens of
milliseconds a step. A notebook's display draws them into the picture (`marked`, `draw_marks`), and the
pages draw them as it does.

A turn's frame is the screen after its actions; an action was taken on the screen before them: the frame of
the turn before (the episode's first frame for turn 1). Own-loop runs agree: `screens/step_NN.png` is what
step N saw, and turn N's frame is `step_{N+1}`. So turn N's actions are drawn on the frame of step N − 1
(`acted_on`), never on the one after.

A click, double click, hover or scroll is marked with a ring at its point and a drag with an arrow from its
start to its end, numbered in the order they were taken. A call that was refused, or whose position is not a
number, is not drawn. Positions are read as each agent writes them (`space_of` names the space):

    evalkit's computer tools   x, y / x1, y1, x2, y2 in screenshot pixels, or 0–1000 (`normalized`)
    UI-TARS                    start_box / end_box "[x1, y1, x2, y2]" as fractions of the screen
    Fara-7B                    coordinate [x, y] in the pixels of the screenshot as its processor resized
                               it (`fara-resized-pixels`)
    MolmoWeb                   x, y in percent of the screenshot (`percent`)
    OpenCUA                    the pyautogui code it ran, already projected to screen pixels
"""

from __future__ import annotations

import ast
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POINTS = ("click", "double_click", "scroll", "move", "left_click", "right_click")
DRAGS = ("drag",)
NORMALIZED = 1000
COLOUR = (230, 30, 60)
POINTERS = frozenset(
    {
        *POINTS, "middle_click", "triple_click", "mouse_move", "hover",  # evalkit's tools, Fara, MolmoWeb
        "left_single", "left_double", "right_single",  # UI-TARS
        # pyautogui's, as OpenCUA's code calls them
        "doubleClick", "rightClick", "middleClick", "tripleClick", "moveTo", "mouseDown", "mouseUp",
    }
)  # fmt: skip
"""Action names that act at a point on the screen."""
DRAGGERS = frozenset({*DRAGS, "select", "left_click_drag", "dragTo"})
"""Action names that act from one point to another."""
AGENT_SPACES = {"fara7b": "fara-resized-pixels", "molmoweb": "percent"}
"""The coordinate space of an imported own-loop episode (which records none), by the agent that wrote it."""
SCREEN_SURFACES = ("gui",)
CODE_LIMIT = 10_000
"""Characters of executed code read for a position (a longer one in a hostile trace is not parsed)."""


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


# ------------------------------------------------------------------------------------------ which screen


def space_of(rec: Any) -> str | None:
    """The coordinate space of an episode's actions: its own `coordinates`, else (an imported own-loop run)
    the space of the agent that wrote it."""
    if getattr(rec, "coordinates", None):
        return rec.coordinates
    info = getattr(rec, "info", None)
    return AGENT_SPACES.get(str(info.get("agent"))) if isinstance(info, dict) else None


def acts_on_screens(rec: Any) -> bool:
    """Whether the episode's agent acts on screenshots (a GUI surface, an own-loop run, or any action with
    a position on the screen): its steps are then shown as the screen each action was taken on."""
    if getattr(rec, "surface", None) in SCREEN_SURFACES or getattr(rec, "mode", None) == "ownloop":
        return True
    # A turn read lazily (`evalkit.view.lazy`) knows it without its calls being decoded.
    return any(
        t.acts_on_screen if isinstance(getattr(t, "acts_on_screen", None), bool) else has_marks(t.calls)
        for t in getattr(rec, "turns", None) or []
    )


def acted_on(rec: Any, n: int) -> str | None:
    """The frame turn `n` (1-based position in `rec.turns`) acted on: the frame of the step before it, or
    None when that screen was not kept (no other screen stands in for it: the marks would lie)."""
    if n <= 1:
        return getattr(rec, "frame0", None)
    turns = getattr(rec, "turns", None) or []
    return turns[n - 2].frame if n - 2 < len(turns) else None


# ------------------------------------------------------------------------------------------ positions


def _box_centre(box: Any) -> tuple[float, float] | None:
    """The centre of a relative box "[x1, y1, x2, y2]" (or a point "[x, y]"); None if it is not one."""
    values = box if isinstance(box, (list, tuple)) else str(box).strip("[]() ").split(",")
    try:
        values = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    if len(values) not in (2, 4) or not all(0.0 <= v <= 1.0 for v in values):
        return None
    if len(values) == 2:
        return values[0], values[1]
    return (values[0] + values[2]) / 2, (values[1] + values[3]) / 2


def _code_action(code: Any) -> tuple[str, list[tuple[float, float]]] | None:
    """(function, points) of the first pyautogui call with a position in `code` (OpenCUA's executed code)."""
    if not isinstance(code, str) or "pyautogui." not in code or len(code) > CODE_LIMIT:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        pos = [a for a in node.args if not isinstance(a, ast.Starred)]
        if name in ("scroll", "vscroll", "hscroll"):
            pos = pos[1:]  # scroll(clicks, x, y)
        try:
            x, y = (
                (ast.literal_eval(kw["x"]), ast.literal_eval(kw["y"]))
                if "x" in kw and "y" in kw
                else ((ast.literal_eval(pos[0]), ast.literal_eval(pos[1])) if len(pos) >= 2 else (None, None))
            )
        except (ValueError, TypeError, SyntaxError):
            continue
        if isinstance(x, (tuple, list)) and len(x) == 2:
            x, y = x
        if _number(x) is not None and _number(y) is not None:
            kind = "scroll" if name in ("scroll", "vscroll", "hscroll") else name
            return kind, [(float(x), float(y))]
    return None


def _qwen_size(width: int, height: int) -> tuple[float, float]:
    """The size a Qwen2.5-VL processor (min 3136, max 12845056 pixels, 28-pixel patches) resizes a screenshot
    to: the space Fara-7B's coordinates are in."""
    factor, lo, hi = 28, 3136, 12845056
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > hi:
        beta = math.sqrt(height * width / hi)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < lo:
        beta = math.sqrt(lo / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return float(w), float(h)


def _scale(space: str | None, size: tuple[int, int]) -> tuple[float, float]:
    w, h = size
    if space == "normalized":
        return w / NORMALIZED, h / NORMALIZED
    if space == "percent":
        return w / 100, h / 100
    if space == "fara-resized-pixels":
        rw, rh = _qwen_size(w, h)
        return w / rw, h / rh
    return 1.0, 1.0


def _position(call: Any) -> tuple[str, list[tuple[float, float]], bool] | None:
    """(name, points, relative) of one call that acts on the screen; relative points are fractions of it."""
    name, args = str(_field(call, "name") or ""), _field(call, "args")
    if not isinstance(args, dict):
        return None
    short = name.rpartition(".")[2]  # `pyautogui.click` as an import names it
    if "start_box" in args:  # UI-TARS's parsed actions
        if short not in POINTERS | DRAGGERS:
            return None
        boxes = [_box_centre(args.get(k)) for k in ("start_box", "end_box") if k in args]
        return (short, boxes, True) if boxes and all(boxes) else None
    if "code" in args:
        found = _code_action(args["code"])
        return (found[0], found[1], False) if found else None
    if isinstance(args.get("coordinate"), (list, tuple)):  # Fara-7B: any action given a point acts there
        c = args["coordinate"]
        pt = (_number(c[0]), _number(c[1])) if len(c) == 2 else (None, None)
        return (args.get("action") or short, [pt], False) if None not in pt else None
    if short in DRAGGERS and all(k in args for k in ("x1", "y1", "x2", "y2")):
        pts = [(_number(args["x1"]), _number(args["y1"])), (_number(args["x2"]), _number(args["y2"]))]
    elif short in POINTERS or short in DRAGGERS:
        pts = [(_number(args.get("x")), _number(args.get("y")))]
    else:
        return None
    return (short, pts, False) if all(None not in p for p in pts) else None


def has_marks(calls: Iterable[Any]) -> bool:
    """Whether any call of `calls` acts at a position on the screen (a cheap test: no image is read)."""
    return any(_field(c, "ok", True) and _position(c) for c in calls or [])


def action_marks(calls: Iterable[Any], coordinates: str | None, size: tuple[int, int]) -> list[Mark]:
    """The marks of a turn's calls (CallRecords or dicts) on a screen of `size` (width, height), their
    positions read in `coordinates` (`space_of`)."""
    sx, sy = _scale(coordinates, size)
    out: list[Mark] = []
    for call in calls:
        if not _field(call, "ok", True):
            continue
        found = _position(call)
        if found is None:
            continue
        name, pts, relative = found
        fx, fy = (size[0], size[1]) if relative else (sx, sy)
        out.append(Mark(len(out) + 1, name, tuple((x * fx, y * fy) for x, y in pts)))
    return out


# ------------------------------------------------------------------------------------------ drawing


def radius(size: tuple[int, int]) -> int:
    """The radius of a mark's ring on a screen of `size`: seen at any scale the screen is shown at."""
    return max(6, round(min(size) / 60))


def image_size(image: bytes | str | Path) -> tuple[int, int] | None:
    """(width, height) of an image (bytes or a path), read from its header: nothing is decoded. None when it
    is not an image PIL can read."""
    # start-up: Pillow only to read or draw a picture
    from PIL import Image

    try:
        with Image.open(io.BytesIO(image) if isinstance(image, bytes) else image) as im:
            return im.size
    except Exception:  # a corrupt or foreign file is shown without marks
        return None


def overlay(calls: Iterable[Any], coordinates: str | None, size: tuple[int, int] | None) -> dict | None:
    """The marks of a turn's calls over a screen of `size`, as data for a page to draw over the plain picture
    (the viewer's and the bundle's scripts): `{"w", "h", "r", "marks": [{"n", "points", "double"}]}`,
    positions in screen pixels; None when none lands on it. Only numbers: nothing of the trace's text."""
    if size is None or not has_marks(calls):
        return None
    found = action_marks(list(calls or []), coordinates, size)
    if not found:
        return None
    marks = [
        {
            "n": m.n,
            "points": [[round(x, 1), round(y, 1)] for x, y in m.points],
            "double": "double" in m.name.lower(),
        }
        for m in found
    ]
    return {"w": size[0], "h": size[1], "r": radius(size), "marks": marks}


def draw_marks(image: bytes, marks: list[Mark]) -> bytes:
    """`image` (PNG or JPEG bytes) with `marks` drawn on it, as PNG."""
    # start-up (as above)
    from PIL import Image, ImageDraw, ImageFont

    with Image.open(io.BytesIO(image)) as im:
        canvas = im.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    r = radius(canvas.size)
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
        if "double" in m.name.lower():
            draw.ellipse((x - r / 2, y - r / 2, x + r / 2, y + r / 2), outline=COLOUR, width=2)
        label = (x + r + 2, y - r - 2)
        draw.text(label, str(m.n), fill=COLOUR, font=font, stroke_width=2, stroke_fill="#ffffff")
    buf = io.BytesIO()
    canvas.save(buf, "PNG")
    return buf.getvalue()


def marked(image: bytes, calls: Iterable[Any], coordinates: str | None) -> bytes | None:
    """`image` (the screen the calls were made on: `acted_on`) with the actions of `calls` drawn on it, or
    None when there is none to draw."""
    # start-up (as above)
    from PIL import Image

    calls = list(calls or [])
    if not has_marks(calls):
        return None
    with Image.open(io.BytesIO(image)) as im:
        size = im.size
    found = action_marks(calls, coordinates, size)
    return draw_marks(image, found) if found else None
