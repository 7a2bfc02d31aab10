"""The html surface over the real wire: uvicorn, OpenEnv's MCPToolClient, the agent's page in Chromium."""

from __future__ import annotations

import base64
import io
import json
import time

import httpx
import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from PIL import Image

from evalkit.browser import chromium_executable
from evalkit.envs.embedded.canvas import grade_doc, task_from_id
from evalkit.envs.embedded.canvas.model import Doc

pytestmark = pytest.mark.browser
if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

TASK = "canvas-test-0007"  # 800 x 600


@pytest.fixture
def quick(monkeypatch):
    """Shorter limits for the agent's page (the server runs in this process), so stuck pages fail fast."""
    from evalkit.envs.embedded.canvas import html_surface

    monkeypatch.setattr(html_surface, "LOAD_S", 1.5)
    monkeypatch.setattr(html_surface, "READ_S", 1.0)
    monkeypatch.setattr(html_surface, "SHOT_S", 1.5)


@pytest.fixture
def client(canvas_server):
    with MCPToolClient(canvas_server.base_url, message_timeout_s=60).sync() as c:
        yield c


def call(c, name, **args):
    return c.step(CallToolAction(tool_name=name, arguments=args))


def text_of(result) -> str:
    assert result.observation.error is None, result.observation.error
    return result.observation.result["content"][0]["text"]


def test_reset_tools_and_instructions(client):
    meta = client.reset(task_id=TASK, surface="html").observation.metadata
    assert meta["surface"] == "html" and meta["max_turns"] == 20 and meta["max_steps"] == 40
    assert meta["prompt_version"] == "canvas-html-1" and meta["coordinates"] == "pixels"
    assert "screenshot_tool" not in meta and meta["skin"] is None
    assert "800 x 600 pixel viewport" in meta["instructions"] and "border-radius: 50%" in meta["instructions"]
    assert {t.name for t in client.list_tools(use_cache=False)} == {"set_html", "view_canvas", "submit"}
    refused = call(client, "add_element", kind="rect", x=0, y=0, width=1, height=1)
    assert refused.observation.error is not None  # another surface's tool is not there


def test_set_html_view_and_submit_grade_the_read_back(client, canvas_server):
    meta = client.reset(task_id=TASK, surface="html").observation.metadata
    page = (
        '<div style="position:absolute;left:100px;top:120px;width:200px;height:150px;'
        'background:#1f77b4;border-radius:50%"></div>'
        '<div style="position:absolute;left:40px;top:30px;font-size:24px;line-height:1;color:#222">Sale</div>'
    )
    doc = json.loads(text_of(call(client, "set_html", html=page)))
    assert [e["kind"] for e in doc["elements"]] == ["ellipse", "text"] and doc["width"] == 800
    shot = call(client, "view_canvas").observation.result["content"][0]
    img = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    assert img.size == (800, 600) and img.getpixel((200, 195)) == (0x1F, 0x77, 0xB4)  # Chromium drew it
    route = httpx.get(f"{canvas_server.base_url}/api/episodes/{meta['episode_id']}").json()
    assert route["elements"] == doc["elements"]  # the HTTP routes see the page as read back
    r = call(client, "submit")
    assert r.done and json.loads(text_of(r)) == r.metadata["grade"]
    assert r.metadata["grade"] == grade_doc(task_from_id(TASK).doc, Doc.from_dict(doc))


def test_the_page_is_offline(client, canvas_server):
    client.reset(task_id=TASK, surface="html")
    probe = f"""<div id="r" style="font-size:20px">waiting</div><script>
      fetch("{canvas_server.base_url}/health").then(() => r.textContent = "reached")
        .catch(() => r.textContent = "blocked");</script>"""
    call(client, "set_html", html=probe)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        shown = json.loads(text_of(call(client, "set_html", html=probe)))["elements"]
        if shown and shown[0]["text"] != "waiting":
            break
    assert [e["text"] for e in shown] == ["blocked"]


def test_a_page_that_never_loads_times_out_cleanly(client, quick):
    client.reset(task_id=TASK, surface="html")
    t = time.monotonic()
    stuck = call(client, "set_html", html="<p>x</p><script>while (true) {}</script>")
    assert stuck.observation.error is not None and "did not finish loading" in stuck.observation.error.message
    assert time.monotonic() - t < 10 and not stuck.done
    after = json.loads(text_of(call(client, "set_html", html="<p style='color:red'>back</p>")))
    assert [e["text"] for e in after["elements"]] == ["back"]  # the session goes on


def test_a_page_that_hangs_after_loading_is_blanked(client, quick):
    client.reset(task_id=TASK, surface="html")
    late = "<p>soon stuck</p><script>setTimeout(() => { while (true) {} }, 50)</script>"
    r = call(client, "set_html", html=late)
    if r.observation.error is None:  # the read-back may beat the timer; the screenshot cannot
        time.sleep(0.2)
        r = call(client, "view_canvas")
    assert r.observation.error is not None and "blank" in r.observation.error.message
    assert call(client, "view_canvas").observation.error is None
    r = call(client, "submit")
    assert r.done and r.metadata["grade"]["n_submitted"] == 0
