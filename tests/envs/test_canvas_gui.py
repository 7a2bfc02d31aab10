"""The gui surface over the real wire: the editor in Chromium, driven by the computer-use tools through
OpenEnv's client, in every skin and both coordinate systems."""

from __future__ import annotations

import asyncio
import base64
import io
import time

import httpx
import numpy as np
import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from PIL import Image

from evalkit.browser import Browser, chromium_executable
from evalkit.envs.client.openenv import connect
from evalkit.envs.embedded.canvas.episode import registry
from evalkit.envs.embedded.canvas.gui_surface import SKINS
from evalkit.errors import EnvError
from evalkit.providers.baseline.gui_policy import find_canvas

pytestmark = pytest.mark.browser
if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

TASK = "canvas-test-0007"  # 800 x 600, index 7: skin paper by default
COMPUTER = {"screenshot", "click", "double_click", "drag", "type_text", "press_key", "scroll", "submit"}


@pytest.fixture
def client(canvas_server):
    with MCPToolClient(canvas_server.base_url, message_timeout_s=60).sync() as c:
        yield c


def act(c, name, **args):
    r = c.step(CallToolAction(tool_name=name, arguments=args))
    assert r.observation.error is None, r.observation.error
    return r


def shot(c) -> np.ndarray:
    item = act(c, "screenshot").observation.result["content"][0]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(item["data"]))).convert("RGB"))


def document(server, meta) -> dict:
    return httpx.get(f"{server.base_url}/api/episodes/{meta['episode_id']}").json()


def test_reset_declares_a_screen(client):
    meta = client.reset(task_id=TASK, surface="gui").observation.metadata
    assert meta["screenshot_tool"] == "screenshot" and meta["screen"] == {"width": 1280, "height": 800}
    assert meta["skin"] == "paper" and meta["max_turns"] == 200 and meta["max_steps"] == 1000
    assert meta["prompt_version"] == "canvas-gui-1" and meta["coordinates"] == "pixels"
    assert "canvas is 800 x 600 pixels" in meta["instructions"]
    assert "screenshot is 1280 x 800" in meta["instructions"] and "Rectangle (R)" in meta["instructions"]
    assert {t.name for t in client.list_tools(use_cache=False)} == COMPUTER
    assert shot(client).shape == (800, 1280, 3)


def test_a_person_can_open_the_editor(canvas_server):
    page = httpx.get(f"{canvas_server.base_url}/editor/midnight", params={"width": 960, "height": 540})
    assert page.status_code == 200 and 'class="skin-midnight"' in page.text and '"width": 960' in page.text
    assert httpx.get(f"{canvas_server.base_url}/editor/neon").status_code == 404


def test_skins_place_the_editor_differently(client):
    places = {}
    for skin in SKINS:
        meta = client.reset(task_id=TASK, surface="gui", skin=skin).observation.metadata
        assert meta["skin"] == skin
        found = find_canvas(shot(client), 800, 600)
        assert found is not None, skin
        places[skin] = tuple(round(v, 2) for v in found)
    assert len(set(places.values())) == len(SKINS), places  # no two skins put the canvas in one place


def test_drawing_and_typing_properties(client, canvas_server):
    meta = client.reset(task_id=TASK, surface="gui", skin="classic").observation.metadata
    left, top, scale = find_canvas(shot(client), 800, 600)
    at = lambda x, y: {"x": left + x * scale, "y": top + y * scale}  # noqa: E731
    act(client, "press_key", keys="r")
    a, b = at(100, 100), at(300, 200)
    act(client, "drag", x1=a["x"], y1=a["y"], x2=b["x"], y2=b["y"])
    for value in ("110", "120", "150", "90", "#1f77b4", "#000000", "4", "12"):
        act(client, "press_key", keys="Tab")
        act(client, "type_text", text=value)
    act(client, "press_key", keys="Enter")
    act(client, "press_key", keys="e")
    a, b = at(400, 300), at(500, 350)
    act(client, "drag", x1=a["x"], y1=a["y"], x2=b["x"], y2=b["y"])
    act(client, "press_key", keys="t")
    act(client, "click", **at(50, 500))
    act(client, "press_key", keys="Tab, Tab, Tab")
    act(client, "type_text", text="Hello")
    act(client, "press_key", keys="Enter")
    els = document(canvas_server, meta)["elements"]
    assert [e["kind"] for e in els] == ["rect", "ellipse", "text"]
    rect = els[0]
    assert (rect["x"], rect["y"], rect["width"], rect["height"]) == (110, 120, 150, 90)
    assert (rect["fill"], rect["stroke"], rect["stroke_width"], rect["radius"]) == (
        "#1f77b4",
        "#000000",
        4,
        12,
    )
    assert (els[1]["x"], els[1]["y"], els[1]["width"], els[1]["height"]) == (400, 300, 100, 50)
    assert (els[2]["text"], els[2]["x"], els[2]["y"]) == ("Hello", 50, 500)
    # the text is selected: send it to the back, then delete the rect and undo that
    act(client, "press_key", keys="ctrl+shift+[")
    assert [e["kind"] for e in document(canvas_server, meta)["elements"]] == ["text", "rect", "ellipse"]
    act(client, "click", **at(150, 150))
    act(client, "press_key", keys="Delete")
    assert [e["kind"] for e in document(canvas_server, meta)["elements"]] == ["text", "ellipse"]
    act(client, "press_key", keys="ctrl+z")
    assert [e["kind"] for e in document(canvas_server, meta)["elements"]] == ["text", "rect", "ellipse"]
    # nothing selected: the panel's first field is the background
    act(client, "click", **at(790, 10))
    act(client, "press_key", keys="Tab")
    act(client, "type_text", text="navy")
    act(client, "press_key", keys="Enter")
    r = act(client, "submit")
    assert r.done and document(canvas_server, meta)["background"] == "#000080"
    assert r.metadata["grade"]["n_submitted"] == 3


def test_normalized_coordinates_and_refused_actions(client, canvas_server):
    meta = client.reset(
        task_id=TASK, surface="gui", skin="classic", coordinates="normalized"
    ).observation.metadata
    assert meta["coordinates"] == "normalized" and "0 to 1000" in meta["instructions"]
    left, top, scale = find_canvas(shot(client), 800, 600)
    norm = lambda x, y: ((left + x * scale) * 1000 / 1280, (top + y * scale) * 1000 / 800)  # noqa: E731
    act(client, "press_key", keys="l")
    (x1, y1), (x2, y2) = norm(200, 100), norm(500, 400)
    act(client, "drag", x1=x1, y1=y1, x2=x2, y2=y2)
    line = document(canvas_server, meta)["elements"][0]
    assert line["kind"] == "line" and (line["x"], line["y"]) == pytest.approx((200, 100), abs=1)
    assert (line["width"], line["height"]) == pytest.approx((300, 300), abs=1)
    off = client.step(CallToolAction(tool_name="click", arguments={"x": 1001, "y": 5}))
    assert off.observation.error is not None and "0 to 1000" in off.observation.error.message and not off.done


def test_screenshots_are_free_and_actions_count(client):
    client.reset(task_id=TASK, surface="gui", max_steps=2)
    for _ in range(4):
        assert not act(client, "screenshot").done
    assert not act(client, "press_key", keys="r").done
    r = act(client, "press_key", keys="Escape")
    assert r.done and r.metadata["auto_submitted"] and r.metadata["steps"] == 2


def test_a_crashed_page_is_an_env_error_and_closing_frees_the_context(canvas_server):
    session = connect(canvas_server)
    try:
        meta = session.reset(task_id=TASK, surface="gui")
        page = registry.get(meta["episode_id"]).page.session

        async def crash() -> None:
            cdp = await page.context.new_cdp_session(page.page)
            asyncio.ensure_future(cdp.send("Page.crash"))  # the renderer dies before it answers
            for _ in range(100):
                if page.crashed:
                    return
                await asyncio.sleep(0.05)

        Browser.get().run(crash())
        assert not page.alive
        with pytest.raises(EnvError, match="crashed or closed"):
            session.call("click", {"x": 10, "y": 10})
    finally:
        session.close()
    other = connect(canvas_server)
    try:
        meta = other.reset(task_id=TASK, surface="gui")
        live = registry.get(meta["episode_id"]).page.session
        assert live.alive and not live.closed
    finally:
        other.close()
    deadline = time.monotonic() + 10
    while not live.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.closed  # the session's end closed its browser context
