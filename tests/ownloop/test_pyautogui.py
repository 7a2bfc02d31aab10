"""The safe pyautogui interpreter: what it runs lands on a real page, what it refuses never runs, and the
first failing statement stops the rest."""

from __future__ import annotations

import pytest

from evalkit.browser import new_session
from evalkit.ownloop.pyautogui import MAX_LOOP, PyAutoGUI, UnsupportedCode, run_pyautogui

pytestmark = pytest.mark.browser

PAGE = """<body style="margin:0;height:3000px"><input id="f" style="position:absolute;left:10px;top:100px">
<script>window.log = [];
for (const t of ['mousedown', 'mouseup', 'contextmenu', 'dblclick'])
  addEventListener(t, e => { log.push([t, e.clientX, e.clientY, e.button]);
                             if (t == 'contextmenu') e.preventDefault() });
addEventListener('keydown', e => log.push(['key', e.key, e.ctrlKey]));
addEventListener('wheel', e => log.push(['wheel', e.clientX, e.clientY, e.deltaX, e.deltaY]));
</script></body>"""


@pytest.fixture
def gui():
    s = new_session(width=800, height=600, allow_origins=())
    s.sync.set_content(PAGE)
    yield PyAutoGUI(s, max_sleep=0.05)
    s.sync.close()


def log(gui):
    gui.session.sync.settle()
    return gui.session.sync.evaluate("() => window.log")


def test_calls_land_on_the_page_and_the_pointer_is_tracked(gui):
    run_pyautogui("import pyautogui\nimport time\npyautogui.click(x=20, y=110)\npyautogui.write('ab\\ncd')\n"
                  "pyautogui.hotkey('ctrl', 'a')\npyautogui.press(['backspace'])\npyautogui.typewrite('xy')\n"
                  "time.sleep(5)\npass", gui)  # fmt: skip
    assert gui.session.sync.evaluate("() => document.getElementById('f').value") == "xy"
    keys = [e[1] for e in log(gui) if e[0] == "key"]
    assert keys[:6] == ["a", "b", "Enter", "c", "d", "Control"] and "Backspace" in keys
    run_pyautogui("pyautogui.moveTo(300, 200)\npyautogui.scroll(-5)\npyautogui.rightClick()\n"
                  "pyautogui.doubleClick(50, 60)\npyautogui.hscroll(2, x=10, y=20)", gui)  # fmt: skip
    events = log(gui)
    assert ["wheel", 300, 200, 0, 500] in events  # 5 clicks down, 100 px each, where the pointer was
    assert ["contextmenu", 300, 200, 2] in events and ["dblclick", 50, 60, 0] in events
    assert ["wheel", 10, 20, 200, 0] in events
    assert gui.pos == (10.0, 20.0)


def test_loops_run_and_are_capped(gui):
    run_pyautogui("pyautogui.click(20, 110)\nfor _ in range(3):\n    pyautogui.press('a')", gui)
    assert gui.session.sync.evaluate("() => document.getElementById('f').value") == "aaa"
    run_pyautogui("for i in range(1000000):\n    pyautogui.press('b')", gui)
    assert gui.session.sync.evaluate("() => document.getElementById('f').value").count("b") == MAX_LOOP


@pytest.mark.parametrize(
    "code",
    ["import os", "import pyautogui as p", "from pyautogui import click", "x = 1",
     "pyautogui.click(x=foo, y=1)",
     "os.system('true')", "__import__('os').system('true')", "eval('1')", "while True:\n    pass",
     "pyautogui.screenshot()", "computer.triple_click(1, 2)", "def f():\n    pass",
     "pyautogui.click(*[1, 2])",
     "pyautogui.click(**{'x': 1})", "pyautogui.click(1, 2) + 1", "pyautogui.click(f'{1}', 2)",
     "for _ in range(3):\n    import os", "for _ in range(n):\n    pass", "with open('x') as f:\n    pass",
     "pyautogui.click(1, 2", "pyautogui.os.system('true')", "lambda: 1"],
)  # fmt: skip
def test_everything_else_is_refused(gui, code):
    with pytest.raises(UnsupportedCode):
        run_pyautogui(code, gui)
    assert log(gui) == []


def test_the_first_failing_statement_stops_the_rest(gui):
    with pytest.raises(UnsupportedCode, match="pyautogui.nosuch is not defined"):
        run_pyautogui("pyautogui.click(20, 110)\npyautogui.nosuch()\npyautogui.click(30, 110)", gui)
    downs = [e for e in log(gui) if e[0] == "mousedown"]
    assert downs == [["mousedown", 20, 110, 0]]
    with pytest.raises(Exception, match="Unknown key"):  # Playwright refuses it: the model's mistake
        run_pyautogui("pyautogui.press('hyperkey')\npyautogui.click(40, 110)", gui)
    assert [e for e in log(gui) if e[0] == "mousedown"] == downs
