"""The shared Chromium: sessions are isolated, input lands, offline pages stay offline, stuck pages time out,
and one browser serves threads and event loops at once."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from evalkit.browser import Browser, SessionOptions, chromium_executable, new_session

pytestmark = pytest.mark.browser

if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

PAGE = """<html><body style="margin:0;background:#123456">
<div id="box" style="position:absolute;left:10px;top:20px;width:100px;height:50px;background:red"
     onclick="this.dataset.clicks = (+this.dataset.clicks || 0) + 1"></div>
<input id="field" style="position:absolute;left:200px;top:200px;width:150px">
<div id="pad" style="position:absolute;left:0;top:300px;width:400px;height:100px"></div>
<script>
  const pad = document.getElementById('pad'); window.moves = [];
  pad.addEventListener('mousedown', e => window.moves.push(['down', e.clientX, e.clientY]));
  pad.addEventListener('mouseup', e => window.moves.push(['up', e.clientX, e.clientY]));
  window.addEventListener('wheel', e => window.wheel = [e.deltaX, e.deltaY]);
</script></body></html>"""


@pytest.fixture
def session():
    s = new_session(width=640, height=480, allow_origins=())
    s.sync.set_content(PAGE)
    yield s
    s.sync.close()


def test_input_reaches_the_page(session):
    s = session.sync
    s.click(50, 40)
    s.click(50, 40, clicks=2)
    assert s.evaluate("() => document.getElementById('box').dataset.clicks") == "3"
    s.click(210, 210)
    s.type_text("hello")
    s.press("ctrl+a, Delete")
    s.type_text("bye")
    assert s.evaluate("() => document.getElementById('field').value") == "bye"
    s.drag(20, 320, 300, 380)
    assert s.evaluate("() => window.moves") == [["down", 20, 320], ["up", 300, 380]]
    s.scroll(100, 100, 0, 300)
    s.settle()  # wheel events are dispatched after the call returns
    assert s.evaluate("() => window.wheel") == [0, 300]


def test_screenshots_are_the_viewport_in_png_and_jpeg(session):
    from io import BytesIO

    from PIL import Image

    png = session.sync.screenshot()
    jpg = session.sync.screenshot("jpeg", quality=70)
    assert png[:4] == b"\x89PNG" and jpg[:2] == b"\xff\xd8"
    img = Image.open(BytesIO(png)).convert("RGB")
    assert img.size == (640, 480)
    assert img.getpixel((300, 10)) == (0x12, 0x34, 0x56)  # the page background
    assert img.getpixel((50, 40)) == (255, 0, 0)  # the box, where the DOM put it


def test_offline_pages_reach_nothing(session, tmp_path):
    from evalkit.envs.embedded.server import serve

    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    with serve("canvas") as env:
        probe = """async (urls) => { const out = [];
            for (const u of urls) { try { const r = await fetch(u); out.push(await r.text()) }
                                    catch (e) { out.push('blocked') } }
            return out }"""
        got = session.sync.evaluate(probe, [f"{env.base_url}/health", f"file://{secret}"])
        assert got == ["blocked", "blocked"]
        ws = """(url) => new Promise(r => { const w = new WebSocket(url);
            w.onopen = () => r('open'); w.onerror = () => r('blocked');
            setTimeout(() => r('blocked'), 3000) })"""
        assert session.sync.evaluate(ws, env.base_url.replace("http", "ws") + "/ws") == "blocked"
        session.sync.set_content(f'<a id="l" href="{env.base_url}/health">go</a>')
        session.sync.click(5, 5)
        session.sync.settle()
        assert not session.url.startswith(env.base_url)


def test_allowed_origin_only_and_sessions_share_no_storage():
    from evalkit.envs.embedded.server import serve

    opts = SessionOptions(width=400, height=300, allow_origins=None)
    with serve("canvas") as env, serve("canvas") as other:
        s = new_session(SessionOptions(width=400, height=300, allow_origins=(env.base_url,)))
        t = new_session(opts)
        try:
            s.sync.goto(f"{env.base_url}/health")
            assert "healthy" in s.sync.evaluate("() => document.body.innerText")
            probe = "async (u) => { try { return (await fetch(u)).status } catch (e) { return 'blocked' } }"
            assert s.sync.evaluate(probe, f"{other.base_url}/health") == "blocked"
            assert s.sync.evaluate(probe, f"{env.base_url}/health") == 200
            s.sync.evaluate("() => localStorage.setItem('who', 's')")
            t.sync.goto(f"{env.base_url}/health")
            assert t.sync.evaluate("() => localStorage.getItem('who')") is None
        finally:
            s.sync.close()
            t.sync.close()


def test_a_page_that_never_loads_times_out_and_the_session_goes_on(session):
    with pytest.raises(TimeoutError):
        session.sync.set_content("<script>while (true) {}</script>", timeout=1.5)
    session.sync.set_content("<p>after</p>")
    assert session.sync.evaluate("() => document.body.innerText") == "after"


def test_sessions_are_isolated_and_serve_threads_and_loops():
    def from_a_thread(i: int) -> str:
        s = new_session(width=320, height=200, allow_origins=())
        try:
            s.sync.set_content(f"<p>{i}</p>")
            return f"{i}:" + s.sync.evaluate("() => document.body.innerText")
        finally:
            s.sync.close()

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(from_a_thread, range(4))) == [f"{i}:{i}" for i in range(4)]

    async def in_a_loop() -> list[str]:
        sessions = await asyncio.gather(
            *(Browser.get().anew_session(width=320, height=200) for _ in range(3))
        )
        await asyncio.gather(*(s.set_content(f"<p>{i}</p>") for i, s in enumerate(sessions)))
        texts = await asyncio.gather(*(s.evaluate("() => document.body.innerText") for s in sessions))
        await asyncio.gather(*(s.close() for s in sessions))
        return texts

    assert asyncio.run(in_a_loop()) == ["0", "1", "2"]
    assert threading.current_thread() is not Browser.get()._thread


def test_calling_run_on_the_browser_thread_is_refused():
    browser = Browser.get()

    async def nested() -> str:
        try:
            browser.run(asyncio.sleep(0))
        except RuntimeError as e:
            return str(e)
        return "ran"

    assert "await the coroutine" in browser.run(nested())


def test_a_new_tab_becomes_the_page(session):
    session.sync.set_content('<a href="about:blank#two" target="_blank" style="font-size:40px">open</a>')
    first = session.page
    session.sync.click(20, 20)
    deadline = time.monotonic() + 5
    while session.page is first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert session.page is not first
    session.sync.settle()
    assert session.url.endswith("#two")
