"""Computer use: a model's coordinates land where they should, bad actions are refused in words the model
can act on, and the MCP tool set works through a real FastMCP client."""

from __future__ import annotations

import asyncio
import base64
import io

import pytest

from evalkit.browser import ActionError, Screen, add_computer_tools, chromium_executable, coordinates_for
from evalkit.browser.chromium import Browser

pytestmark = pytest.mark.browser
if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

PAGE = """<body style="margin:0"><script>
window.log = [];
for (const t of ['mousedown', 'mouseup', 'dblclick', 'contextmenu'])
  addEventListener(t, e => { window.log.push([t, e.clientX, e.clientY, e.button]);
                             if (t == 'contextmenu') e.preventDefault() });
addEventListener('keydown', e => window.log.push(['key', e.key, e.ctrlKey]));
</script><input id="f" style="position:absolute;left:10px;top:150px"></body>"""


def test_coordinates_per_model():
    assert coordinates_for("hf:Qwen/Qwen3-VL-8B-Instruct") == "normalized"
    assert coordinates_for("vllm:my-model@off") == "normalized"
    assert coordinates_for("anthropic:claude-sonnet-5") == "pixels"
    assert coordinates_for("hf:x", "pixels") == "pixels"
    with pytest.raises(ValueError):
        coordinates_for("openai:gpt", "polar")


class _FakeSession:
    viewport = (1280, 800)


@pytest.mark.parametrize(
    ("coords", "point", "expected"),
    [("pixels", (0, 0), (0, 0)), ("pixels", (1279, 799), (1279, 799)), ("normalized", (500, 500), (640, 400)),
     ("normalized", (1000, 1000), (1279, 799)), ("normalized", (250, 100), (320, 80))],
)  # fmt: skip
def test_to_page(coords, point, expected):
    screen = Screen(_FakeSession(), coords)
    assert screen.to_page(*point) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("coords", "point", "says"),
    [("pixels", (1280, 10), "off the screen"), ("pixels", (-1, 10), "off the screen"),
     ("normalized", (1001, 10), "0 to 1000"), ("pixels", ("10", 10), "must be a number"),
     ("pixels", (float("nan"), 1), "must be a number"), ("pixels", (True, 1), "must be a number")],
)  # fmt: skip
def test_bad_points_are_refused(coords, point, says):
    with pytest.raises(ActionError, match=says):
        Screen(_FakeSession(), coords).to_page(*point)


def test_actions_land_in_model_coordinates():
    session = Browser.get().new_session(width=800, height=400, allow_origins=())
    try:
        session.sync.set_content(PAGE)
        screen = Screen(session, "normalized", settle_s=1.0)

        async def act() -> None:
            await screen.click(500, 250)
            await screen.click(100, 100, button="right")
            await screen.drag(0, 0, 250, 500)
            with pytest.raises(ActionError):
                await screen.press_key("hyper+q")
            with pytest.raises(ActionError):
                await screen.scroll(10, 10, 0, 1e9)

        Browser.get().run(act())
        log = session.sync.evaluate("() => window.log")
        assert log[:2] == [["mousedown", 400, 100, 0], ["mouseup", 400, 100, 0]]
        assert ["mousedown", 80, 40, 2] in log
        assert log[-2:] == [["mousedown", 0, 0, 0], ["mouseup", 200, 200, 0]]
    finally:
        session.sync.close()


def test_tool_set_through_a_fastmcp_client():
    from fastmcp import Client, FastMCP
    from fastmcp.exceptions import ToolError
    from PIL import Image

    session = Browser.get().new_session(width=640, height=360, allow_origins=())
    session.sync.set_content(PAGE)
    screen = Screen(session, "pixels", settle_s=1.0)
    steps = []
    mcp = FastMCP("probe")
    add_computer_tools(mcp, lambda: screen, ToolError, after=lambda: steps.append(1))

    async def drive() -> tuple:
        async with Client(mcp) as client:
            names = sorted(t.name for t in await client.list_tools())
            shot = await client.call_tool("screenshot", {})
            await client.call_tool("click", {"x": 20, "y": 160})
            await client.call_tool("type_text", {"text": "abc"})
            await client.call_tool("press_key", {"keys": "ctrl+a, Backspace"})
            await client.call_tool("type_text", {"text": "xy"})
            bad = await client.call_tool("click", {"x": 9999, "y": 1}, raise_on_error=False)
            return names, shot, bad

    try:
        names, shot, bad = asyncio.run(drive())
        assert names == ["click", "double_click", "drag", "press_key", "screenshot", "scroll", "type_text"]
        img = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data)))
        assert img.size == (640, 360)
        assert session.sync.evaluate("() => document.getElementById('f').value") == "xy"
        assert bad.is_error and "off the screen" in bad.content[0].text
        assert len(steps) == 4  # the refused click is not a step
    finally:
        session.sync.close()
