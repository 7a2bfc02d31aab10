"""pyautogui code from a model, run safely as Playwright input.

OSWorld hands the code OpenCUA writes to `python -c` on a VM. Here it goes through an interpreter written
for the purpose: the code is parsed, never exec'd, and only these statements run —

- calls of `pyautogui.<name>(...)` for the names in `PyAutoGUI.API` and `time.sleep(...)`, every argument a
  literal (numbers, strings, tuples, lists, True/False/None);
- `import pyautogui`, `import time`, `pass`;
- `for _ in range(n):` over such statements (at most `MAX_LOOP` rounds).

Anything else (assignments, names, attribute chains, other modules, `computer.*` helpers the VM would not
define) raises `UnsupportedCode`. Statements run in order and the first that fails stops the rest, as
`python -c` would. The mouse position is tracked as pyautogui tracks it; one scroll click is 100 px.
"""

from __future__ import annotations

import ast
import time
from typing import Any

from .keys import pw_key

MAX_LOOP = 100
SCROLL_PX = 100


class UnsupportedCode(Exception):
    """A statement the interpreter does not run; its message says which."""


class PyAutoGUI:
    """The pyautogui functions OSWorld's VM offers, on a `BrowserSession` of the same screen size."""

    API = frozenset(
        {
            "click",
            "doubleClick",
            "tripleClick",
            "rightClick",
            "middleClick",
            "moveTo",
            "moveRel",
            "move",
            "dragTo",
            "dragRel",
            "drag",
            "mouseDown",
            "mouseUp",
            "scroll",
            "vscroll",
            "hscroll",
            "write",
            "typewrite",
            "press",
            "hotkey",
            "keyDown",
            "keyUp",
            "sleep",
        }
    )

    def __init__(self, session: Any, max_sleep: float = 60.0):
        self.session, self.max_sleep = session, max_sleep
        self.pos = (0.0, 0.0)  # Playwright's mouse starts at the top-left corner, as a fresh pyautogui does

    @property
    def _s(self) -> Any:
        return self.session.sync

    def _xy(self, x: Any, y: Any) -> tuple[float, float]:
        if isinstance(x, tuple | list):
            x, y = x[0], x[1]
        if x is None or y is None:
            return self.pos
        return float(x), float(y)

    @staticmethod
    def _button(b: Any) -> str:
        return {"right": "right", "secondary": "right", "middle": "middle"}.get(str(b).lower(), "left")

    def moveTo(self, x: Any = None, y: Any = None, duration: float = 0.0, *a: Any, **kw: Any) -> None:
        self.pos = self._xy(x, y)
        self._s.move(*self.pos)

    def moveRel(self, xOffset: float = 0, yOffset: float = 0, *a: Any, **kw: Any) -> None:
        self.moveTo(self.pos[0] + float(xOffset or 0), self.pos[1] + float(yOffset or 0))

    move = moveRel

    def click(
        self,
        x: Any = None,
        y: Any = None,
        clicks: int = 1,
        interval: float = 0.0,
        button: str = "left",
        *a: Any,
        **kw: Any,
    ) -> None:
        self.pos = self._xy(x, y)
        self._s.click(*self.pos, button=self._button(button), clicks=max(1, int(clicks)))

    def doubleClick(
        self, x: Any = None, y: Any = None, interval: float = 0.0, button: str = "left", *a: Any, **kw: Any
    ) -> None:
        self.click(x, y, 2, button=button)

    def tripleClick(
        self, x: Any = None, y: Any = None, interval: float = 0.0, button: str = "left", *a: Any, **kw: Any
    ) -> None:
        self.click(x, y, 3, button=button)

    def rightClick(self, x: Any = None, y: Any = None, *a: Any, **kw: Any) -> None:
        self.click(x, y, button="right")

    def middleClick(self, x: Any = None, y: Any = None, *a: Any, **kw: Any) -> None:
        self.click(x, y, button="middle")

    def mouseDown(self, x: Any = None, y: Any = None, button: str = "left", *a: Any, **kw: Any) -> None:
        if x is not None:
            self.moveTo(x, y)
        self._s.mouse_down(self._button(button))

    def mouseUp(self, x: Any = None, y: Any = None, button: str = "left", *a: Any, **kw: Any) -> None:
        if x is not None:
            self.moveTo(x, y)
        self._s.mouse_up(self._button(button))

    def dragTo(
        self, x: Any = None, y: Any = None, duration: float = 0.0, button: str = "left", *a: Any, **kw: Any
    ) -> None:
        start, self.pos = self.pos, self._xy(x, y)
        self._s.move(*start)
        self._s.mouse_down(self._button(button))
        self._s.move(*self.pos, steps=20)  # pyautogui moves in steps over `duration`
        self._s.mouse_up(self._button(button))

    def dragRel(
        self,
        xOffset: float = 0,
        yOffset: float = 0,
        duration: float = 0.0,
        button: str = "left",
        *a: Any,
        **kw: Any,
    ) -> None:
        self.dragTo(self.pos[0] + float(xOffset or 0), self.pos[1] + float(yOffset or 0), button=button)

    drag = dragRel

    def scroll(self, clicks: float, x: Any = None, y: Any = None, *a: Any, **kw: Any) -> None:
        """Positive clicks scroll up, as pyautogui's do."""
        if x is not None and y is not None:
            self.pos = self._xy(x, y)
        self._s.scroll(*self.pos, 0, -float(clicks) * SCROLL_PX)

    vscroll = scroll

    def hscroll(self, clicks: float, x: Any = None, y: Any = None, *a: Any, **kw: Any) -> None:
        """Positive clicks scroll right."""
        if x is not None and y is not None:
            self.pos = self._xy(x, y)
        self._s.scroll(*self.pos, float(clicks) * SCROLL_PX, 0)

    def write(self, message: Any, interval: float = 0.0, *a: Any, **kw: Any) -> None:
        if isinstance(message, list | tuple):  # typewrite(["a", "enter"]) presses key names
            for k in message:
                self.press(k)
            return
        parts = str(message).split("\n")  # pyautogui types "\n" as the Enter key
        for i, part in enumerate(parts):
            if part:
                self._s.type_text(part)
            if i < len(parts) - 1:
                self._s.key_press("Enter")

    typewrite = write

    def press(self, keys: Any, presses: int = 1, interval: float = 0.0, *a: Any, **kw: Any) -> None:
        for _ in range(max(1, min(int(presses), MAX_LOOP))):
            for k in keys if isinstance(keys, list | tuple) else [keys]:
                self._s.key_press(pw_key(k))

    def hotkey(self, *keys: Any, **kw: Any) -> None:
        names = keys[0] if len(keys) == 1 and isinstance(keys[0], list | tuple) else keys
        pressed = [pw_key(k) for k in names]
        for k in pressed:
            self._s.key_down(k)
        for k in reversed(pressed):
            self._s.key_up(k)

    def keyDown(self, key: Any, *a: Any, **kw: Any) -> None:
        self._s.key_down(pw_key(key))

    def keyUp(self, key: Any, *a: Any, **kw: Any) -> None:
        self._s.key_up(pw_key(key))

    def sleep(self, seconds: float = 0, *a: Any, **kw: Any) -> None:
        time.sleep(min(max(float(seconds), 0.0), self.max_sleep))


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UnsupportedCode(f"not a literal argument: {ast.unparse(node)[:80]}") from None


def _call(node: ast.Call, gui: PyAutoGUI) -> None:
    f = node.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        raise UnsupportedCode(f"unsupported call: {ast.unparse(node)[:120]}")
    module, name = f.value.id, f.attr
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise UnsupportedCode(f"unsupported call: {ast.unparse(node)[:120]}")
    args = [_literal(a) for a in node.args]
    kwargs = {k.arg: _literal(k.value) for k in node.keywords}
    if module == "time" and name == "sleep":
        gui.sleep(*args, **kwargs)
    elif module == "pyautogui" and name in PyAutoGUI.API:
        getattr(gui, name)(*args, **kwargs)
    else:
        raise UnsupportedCode(f"{module}.{name} is not defined")


def _statement(node: ast.stmt, gui: PyAutoGUI) -> None:
    if (
        isinstance(node, ast.Import)
        and {a.name for a in node.names} <= {"pyautogui", "time"}
        and all(a.asname is None for a in node.names)
    ):
        return
    if isinstance(node, ast.Pass):
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        _call(node.value, gui)
        return
    if (
        isinstance(node, ast.For)
        and isinstance(node.target, ast.Name)
        and not node.orelse
        and isinstance(node.iter, ast.Call)
        and isinstance(node.iter.func, ast.Name)
        and node.iter.func.id == "range"
        and not node.iter.keywords
        and 1 <= len(node.iter.args) <= 3
    ):
        bounds = [_literal(a) for a in node.iter.args]
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            raise UnsupportedCode("range() wants integer literals")
        for _ in range(min(len(range(*bounds)), MAX_LOOP)):
            for inner in node.body:
                _statement(inner, gui)
        return
    raise UnsupportedCode(f"unsupported statement: {ast.unparse(node)[:120]}")


def run_pyautogui(code: str, gui: PyAutoGUI) -> None:
    """Run `code` statement by statement; the first that fails (unsupported, or refused by the page) raises
    and stops the rest. Code that does not parse runs nothing."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise UnsupportedCode(f"not Python: {e.msg} (line {e.lineno})") from None
    for node in tree.body:
        _statement(node, gui)
