"""Computer use over a `BrowserSession`: the screen actions a model takes, in its coordinate system.

`Screen` turns a model's `click(x, y)` (screenshot pixels, or a 0–1000 grid for open VLMs) into input on the
page, lets the page settle, and refuses out-of-range or malformed arguments with a message meant for the
model. `add_computer_tools` registers the standard tool set on a FastMCP server, so every env that shows a
page to a model (the canvas `gui` surface, the `webapp` env) offers the same tools with the same wording.
"""

# No `from __future__ import annotations` here: FastMCP reads the tool functions' annotations at registration,
# and string annotations would name types that only exist inside `add_computer_tools`.
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from .chromium import BrowserSession
from .keys import KeyNameError

COORDINATES = ("pixels", "normalized")
NORMALIZED = 1000
MAX_TEXT = 5000
MAX_SCROLL = 10_000
SCREENSHOT_TOOL = "screenshot"
"""The tool a loop calls after a turn in which the model took no screenshot (declared in reset metadata as
`screenshot_tool`)."""


class ActionError(ValueError):
    """An action the model asked for that cannot be done as asked; its message is meant for the model."""


def coordinates_for(spec: str, choice: str | None = "auto") -> str:
    """The coordinate system for a model: open VLMs (`hf:`, `vllm:`) point on a 0–1000 grid, Claude and GPT
    in screenshot pixels. An explicit choice wins."""
    if choice and choice != "auto":
        if choice not in COORDINATES:
            raise ValueError(f"unknown coordinates {choice!r}: use auto, {', '.join(COORDINATES)}")
        return choice
    return "normalized" if spec.startswith(("hf:", "vllm:")) else "pixels"


def describe(coordinates: str, width: int, height: int) -> str:
    """One paragraph for instructions: how the model's x and y are read."""
    if coordinates == "normalized":
        return (
            f"Screen coordinates are normalised: x and y run from 0 to {NORMALIZED} across the screenshot "
            f"on both axes (x={NORMALIZED} is the right edge, y={NORMALIZED} the bottom edge), whatever "
            f"its pixel size ({width} x {height})."
        )
    return (
        f"Screen coordinates are screenshot pixels: the screenshot is {width} x {height}, origin at the "
        "top-left corner, x to the right and y downwards."
    )


@dataclass
class Screen:
    """A session seen through a coordinate system."""

    session: BrowserSession
    coordinates: str = "pixels"
    settle_s: float = 2.0
    image_format: str = "png"
    jpeg_quality: int = 85

    def __post_init__(self) -> None:
        if self.coordinates not in COORDINATES:
            raise ValueError(f"unknown coordinates {self.coordinates!r}: use one of {', '.join(COORDINATES)}")

    @property
    def size(self) -> tuple[int, int]:
        return self.session.viewport

    def to_page(self, x: Any, y: Any) -> tuple[float, float]:
        """The model's (x, y) → viewport pixels; ActionError when it is not a point on the screen."""
        for name, v in (("x", x), ("y", y)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ActionError(f"{name} must be a number, got {v!r}")
        w, h = self.size
        if self.coordinates == "normalized":
            if not (0 <= x <= NORMALIZED and 0 <= y <= NORMALIZED):
                raise ActionError(f"({x}, {y}) is off the screen: normalised x and y run 0 to {NORMALIZED}")
            return min(x * w / NORMALIZED, w - 1), min(y * h / NORMALIZED, h - 1)
        if not (0 <= x < w and 0 <= y < h):
            raise ActionError(f"({x}, {y}) is off the screen: x runs from 0 to {w - 1}, y from 0 to {h - 1}")
        return float(x), float(y)

    def to_model(self, px: float, py: float) -> tuple[float, float]:
        """Viewport pixels → the model's coordinates (for drawing where an action landed, and for tests)."""
        if self.coordinates == "normalized":
            w, h = self.size
            return px * NORMALIZED / w, py * NORMALIZED / h
        return px, py

    async def screenshot(self) -> bytes:
        return await self.session.screenshot(self.image_format, self.jpeg_quality)

    @property
    def mime(self) -> str:
        return "image/jpeg" if self.image_format in ("jpg", "jpeg") else "image/png"

    async def click(self, x: Any, y: Any, button: str = "left", clicks: int = 1) -> str:
        if button not in ("left", "right", "middle"):
            raise ActionError(f"button must be left, right or middle, got {button!r}")
        px, py = self.to_page(x, y)
        await self.session.click(px, py, button=button, clicks=clicks)
        await self.session.settle(self.settle_s)
        what = {1: "clicked", 2: "double-clicked", 3: "triple-clicked"}.get(clicks, f"clicked {clicks}x")
        side = "" if button == "left" else f" with the {button} button"
        return f"{what} at ({_num(x)}, {_num(y)}){side}"

    async def drag(self, x1: Any, y1: Any, x2: Any, y2: Any) -> str:
        a, b = self.to_page(x1, y1), self.to_page(x2, y2)
        await self.session.drag(*a, *b)
        await self.session.settle(self.settle_s)
        return f"dragged from ({_num(x1)}, {_num(y1)}) to ({_num(x2)}, {_num(y2)})"

    async def move(self, x: Any, y: Any) -> str:
        px, py = self.to_page(x, y)
        await self.session.move(px, py)
        await self.session.settle(self.settle_s)
        return f"moved the pointer to ({_num(x)}, {_num(y)})"

    async def type_text(self, text: Any) -> str:
        if not isinstance(text, str):
            raise ActionError(f"text must be a string, got {type(text).__name__}")
        if len(text) > MAX_TEXT:
            raise ActionError(f"text is {len(text)} characters; type at most {MAX_TEXT} at once")
        await self.session.type_text(text)
        await self.session.settle(self.settle_s)
        return f"typed {len(text)} character(s)"

    async def press_key(self, keys: Any) -> str:
        if not isinstance(keys, str):
            raise ActionError(f"keys must be a string such as 'ctrl+z' or 'Delete', got {keys!r}")
        try:
            await self.session.press(keys)
        except KeyNameError as e:
            raise ActionError(str(e)) from None
        await self.session.settle(self.settle_s)
        return f"pressed {keys}"

    async def scroll(self, x: Any, y: Any, dx: Any = 0, dy: Any = 0) -> str:
        px, py = self.to_page(x, y)
        for name, v in (("dx", dx), ("dy", dy)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ActionError(f"{name} must be a number of pixels, got {v!r}")
            if abs(v) > MAX_SCROLL:
                raise ActionError(f"{name} is {v}; scroll at most {MAX_SCROLL} pixels at once")
        await self.session.scroll(px, py, dx, dy)
        await self.session.settle(self.settle_s)
        return f"scrolled by ({_num(dx)}, {_num(dy)}) at ({_num(x)}, {_num(y)})"


def _num(v: Any) -> str:
    return str(int(v)) if isinstance(v, (int, float)) and float(v).is_integer() else f"{v:g}"


def add_computer_tools(
    mcp: Any,
    screen: Callable[[], Screen],
    fail: Callable[[str], Exception],
    after: Callable[[], Any] | None = None,
) -> None:
    """Register screenshot / click / double_click / drag / type_text / press_key / scroll on FastMCP server
    `mcp`. `screen()` gives the calling session's Screen (raising `fail(...)` when there is none);
    `fail(message)` makes the tool error the model reads; `after()` (optional, may be async) runs after every
    action, e.g. to count steps. (Start-up: the MCP types below load only where tools are registered.)"""
    from fastmcp.utilities.types import Image as MCPImage
    from pydantic import Field

    Coord = Annotated[float, Field(description="In the coordinate system your instructions give.")]

    async def act(coro: Any) -> str:
        try:
            text = await coro
        except ActionError as e:
            raise fail(str(e)) from None
        if after is not None:
            res = after()
            if hasattr(res, "__await__"):
                await res
        return text

    @mcp.tool(name=SCREENSHOT_TOOL)
    async def screenshot() -> MCPImage:
        """Take a screenshot of the screen as it is now."""
        s = screen()
        return MCPImage(data=await s.screenshot(), format="jpeg" if s.mime == "image/jpeg" else "png")

    @mcp.tool
    async def click(
        x: Coord,
        y: Coord,
        button: Annotated[str, Field(description="left (default), right or middle.")] = "left",
    ) -> str:
        """Click at (x, y)."""
        s = screen()
        return await act(s.click(x, y, button=button))

    @mcp.tool
    async def double_click(x: Coord, y: Coord) -> str:
        """Double-click at (x, y)."""
        s = screen()
        return await act(s.click(x, y, clicks=2))

    @mcp.tool
    async def drag(x1: Coord, y1: Coord, x2: Coord, y2: Coord) -> str:
        """Press the left button at (x1, y1), move to (x2, y2) and release."""
        s = screen()
        return await act(s.drag(x1, y1, x2, y2))

    _keyboard_and_wheel_tools(mcp, screen, act, Coord)


def _keyboard_and_wheel_tools(mcp: Any, screen: Callable[[], Screen], act: Callable, Coord: Any) -> None:
    """type_text / press_key / scroll, registered after the pointer's tools (the order tools/list gives)."""
    from pydantic import Field

    @mcp.tool
    async def type_text(text: Annotated[str, Field(description="The text to type.")]) -> str:
        """Type text at the keyboard focus, as if on a keyboard."""
        s = screen()
        return await act(s.type_text(text))

    @mcp.tool
    async def press_key(
        keys: Annotated[
            str,
            Field(description="A key or combination ('Enter', 'ctrl+z'); several: 'ctrl+a, Delete'."),
        ],
    ) -> str:
        """Press a key or a key combination."""
        s = screen()
        return await act(s.press_key(keys))

    @mcp.tool
    async def scroll(
        x: Coord,
        y: Coord,
        dx: Annotated[float, Field(description="Pixels to scroll right (negative: left).")] = 0,
        dy: Annotated[float, Field(description="Pixels to scroll down (negative: up).")] = 0,
    ) -> str:
        """Scroll with the mouse wheel at (x, y)."""
        s = screen()
        return await act(s.scroll(x, y, dx, dy))
