"""One headless Chromium per process, driven by Playwright's async API on a private event-loop thread.

Every caller — an env server's event loop, a worker thread of a batch, an own-loop agent, a test — hops onto
that thread: async code awaits `BrowserSession` methods directly, synchronous code goes through
`session.sync`. Playwright objects never leave the thread that made them, so one browser serves any number
of threads and loops, and a session is an isolated context (cookies, storage, permissions) with one page.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import shutil
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from evalkit.errors import ConfigError, EnvError

from .keys import press_sequence

log = logging.getLogger(__name__)
T = TypeVar("T")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
]
# A settled page has painted twice since the last input: layout and paint have caught up with the DOM.
_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def chromium_executable() -> str | None:
    """The Chromium to launch: `EVALKIT_CHROMIUM`, else Debian's `chromium` (or a Chrome) on PATH."""
    if os.environ.get("EVALKIT_CHROMIUM"):
        return os.environ["EVALKIT_CHROMIUM"]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def launch_options() -> dict:
    """Keyword arguments for Playwright's `chromium.launch`: our Chromium, headless, no background traffic.
    Own-loop agents that launch through their own browser manager use these too."""
    exe = chromium_executable()
    if exe is None:
        raise ConfigError(
            "no Chromium found: install Debian's chromium (apt-get install chromium) or set EVALKIT_CHROMIUM"
        )
    return {"executable_path": exe, "args": list(CHROMIUM_ARGS), "headless": True}


@dataclass(frozen=True)
class SessionOptions:
    """How a session's context is made."""

    width: int = 1280
    height: int = 800
    allow_origins: tuple[str, ...] | None = None
    """Only requests to these origins (`http://127.0.0.1:8123`) go out; None allows all, () allows none
    (an offline page: `about:blank` and `data:` only)."""
    locale: str = "en-US"
    timezone: str = "UTC"
    permissions: tuple[str, ...] = ()
    """e.g. ("clipboard-read", "clipboard-write")."""
    focus_emulation: bool = True
    """Pages behave as focused (focus events, `document.hasFocus()`) although many share one browser."""
    javascript: bool = True
    reduced_motion: bool = True


class Browser:
    """The process's Chromium. `Browser.get()` starts it on first use; a browser that died is relaunched on
    the next session."""

    _instance: Browser | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="evalkit-browser", daemon=True)
        self._thread.start()
        self._playwright: Any = None
        self._browser: Any = None
        self._launch_lock = asyncio.Lock()
        self.launches = 0

    @classmethod
    def get(cls) -> Browser:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
                atexit.register(cls._instance.close)
            return cls._instance

    # ------------------------------------------------------------------ running on the browser thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the browser thread and wait for its result (from any thread but that one)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Browser.run called on the browser thread: await the coroutine instead")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    def start(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        """Run `coro` on the browser thread without waiting for it; a failure is logged (at debug) as
        `what`."""

        def done(fut: concurrent.futures.Future) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.debug("%s failed: %s", what, fut.exception())

        asyncio.run_coroutine_threadsafe(coro, self._loop).add_done_callback(done)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the browser thread from any event loop (or directly when already on it)."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self._loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _chromium(self) -> Any:
        async with self._launch_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self._playwright is None:
                # start-up: Playwright loads with the first browser
                from playwright.async_api import async_playwright

                self._playwright = await async_playwright().start()
            try:
                self._browser = await self._playwright.chromium.launch(**launch_options())
            except ConfigError:
                raise
            except Exception as e:
                raise EnvError(f"Chromium did not start: {type(e).__name__}: {e}") from e
            self.launches += 1
            return self._browser

    # ------------------------------------------------------------------ sessions

    async def _new_session(self, opts: SessionOptions) -> BrowserSession:
        browser = await self._chromium()
        context = await browser.new_context(**context_options(opts))
        try:
            await prepare_context(context, opts)
            page = await context.new_page()
            if opts.focus_emulation:
                await emulate_focus(context, page)
        except BaseException:
            await context.close()
            raise
        return BrowserSession(self, context, page, opts)

    def new_session(self, opts: SessionOptions | None = None, **kw: Any) -> BrowserSession:
        """A fresh isolated context with one page (blocking)."""
        return self.run(self._new_session(opts or SessionOptions(**kw)))

    async def anew_session(self, opts: SessionOptions | None = None, **kw: Any) -> BrowserSession:
        """A fresh isolated context with one page, from async code."""
        return await self.arun(self._new_session(opts or SessionOptions(**kw)))

    def close(self) -> None:
        """Close Chromium and stop the thread (at exit; a later `get()` starts a new one)."""

        async def shut() -> None:
            if self._browser is not None:
                await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()

        if self._loop.is_closed():
            return
        try:
            self.run(shut(), timeout=10)
        except Exception as e:  # at exit nothing is worth a traceback
            log.debug("closing Chromium failed: %s", e)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        with Browser._instance_lock:
            if Browser._instance is self:
                Browser._instance = None


def context_options(opts: SessionOptions) -> dict:
    """Keyword arguments for Playwright's `browser.new_context` that make a context as `opts` asks. Released
    agent code that owns its Playwright browser (`launch_options()`) makes its contexts with these too."""
    return {
        "viewport": {"width": opts.width, "height": opts.height},
        "device_scale_factor": 1,
        "locale": opts.locale,
        "timezone_id": opts.timezone,
        "java_script_enabled": opts.javascript,
        "reduced_motion": "reduce" if opts.reduced_motion else "no-preference",
        "service_workers": "block",
        "accept_downloads": False,
        "offline": opts.allow_origins == (),
    }


async def prepare_context(context: Any, opts: SessionOptions) -> None:
    """Grant `opts.permissions` and restrict requests to `opts.allow_origins` (async Playwright API)."""
    if opts.permissions:
        await context.grant_permissions(list(opts.permissions))
    if opts.allow_origins is not None:
        await _restrict(context, opts.allow_origins)


async def emulate_focus(context: Any, page: Any) -> None:
    """Make `page` behave as focused although other pages share the browser."""
    cdp = await context.new_cdp_session(page)
    await cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": True})


async def _restrict(context: Any, origins: Sequence[str]) -> None:
    allowed = tuple(o.rstrip("/") for o in origins)

    async def gate(route: Any) -> None:
        url = route.request.url
        if any(url == o or url.startswith(o + "/") for o in allowed):
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    await context.route("**/*", gate)

    async def refuse(ws: Any) -> None:
        if any(ws.url.replace("ws", "http", 1).startswith(o + "/") for o in allowed):
            ws.connect_to_server()
        else:
            await ws.close()

    await context.route_web_socket("**/*", refuse)


def _hop(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Make a coroutine method run on the browser thread whichever loop awaits it."""

    @functools.wraps(fn)
    async def wrapper(self: BrowserSession, *args: Any, **kw: Any) -> T:
        return await self.browser.arun(fn(self, *args, **kw))

    return wrapper


class BrowserSession:
    """One isolated context and its page. Coordinates are CSS pixels of the viewport (device scale 1, so
    screenshot pixels too). Await the methods from async code, or call them through `.sync`."""

    def __init__(self, browser: Browser, context: Any, page: Any, opts: SessionOptions):
        self.browser, self.context, self.page, self.opts = browser, context, page, opts
        self.closed = False
        self.crashed = False
        self.sync = _Sync(self)
        context.on("page", self._adopt)
        page.on("crash", self._on_crash)

    def _adopt(self, page: Any) -> None:
        """Follow a newly opened tab (a link with target=_blank): agents see one page, the newest."""
        self.page = page
        self.crashed = False
        page.on("crash", self._on_crash)

    def _on_crash(self, page: Any) -> None:
        if page is self.page:
            self.crashed = True

    @property
    def alive(self) -> bool:
        """False once the page's renderer crashed, the page or context closed, or Chromium itself died: the
        session can do nothing more, which is the infrastructure's failure, not the agent's."""
        if self.closed or self.crashed or self.page.is_closed():
            return False
        browser = self.context.browser
        return browser is None or browser.is_connected()

    @property
    def viewport(self) -> tuple[int, int]:
        return self.opts.width, self.opts.height

    @property
    def url(self) -> str:
        return self.page.url

    @_hop
    async def goto(self, url: str, timeout: float = 15.0) -> None:
        await self.page.goto(url, wait_until="load", timeout=timeout * 1000)

    @_hop
    async def set_content(self, html: str, timeout: float = 5.0) -> None:
        """Load `html` as the page. A page that does not finish loading in `timeout` raises TimeoutError and
        leaves a blank page behind (its scripts stopped)."""
        try:
            await self.page.set_content(html, wait_until="load", timeout=timeout * 1000)
        except Exception as e:
            if type(e).__name__ != "TimeoutError":
                raise
            await self._replace_page()
            raise TimeoutError(f"the page did not finish loading within {timeout:g} s") from None

    @_hop
    async def fresh_page(self) -> None:
        """Replace the page by a blank one (a page whose script never yields cannot be navigated away)."""
        await self._replace_page()

    async def _replace_page(self) -> None:
        """A page stuck in a script loop cannot be navigated away; close it and open a fresh one."""
        old = self.page
        self.page = await self.context.new_page()
        self.crashed = False
        if self.opts.focus_emulation:
            await emulate_focus(self.context, self.page)
        try:
            await asyncio.wait_for(old.close(run_before_unload=False), 5)
        except Exception as e:
            log.debug("closing a stuck page failed: %s", e)

    @_hop
    async def settle(self, timeout: float = 2.0) -> None:
        """Wait until a navigation the last input started has loaded and the page has painted."""
        # start-up (as above)
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        for attempt in (1, 2):
            try:
                await self.page.wait_for_load_state("load", timeout=timeout * 1000)
                await asyncio.wait_for(self.page.evaluate(_TWO_FRAMES), timeout)
                return
            except (TimeoutError, PlaywrightTimeout) as e:  # a page still busy is still worth a screenshot
                log.debug("page did not settle: %s", e)
                return
            except Exception as e:
                # The navigation committed after the old page reported itself loaded, and took the frames
                # being waited for with it: wait once more, for the new page.
                log.debug("page did not settle (attempt %d): %s", attempt, e)

    @_hop
    async def screenshot(self, fmt: str = "png", quality: int | None = None) -> bytes:
        """The viewport as PNG (or JPEG at `quality`)."""
        kind = "jpeg" if fmt.lower() in ("jpg", "jpeg") else "png"
        return await self.page.screenshot(
            type=kind, quality=(quality or 85) if kind == "jpeg" else None, caret="initial", timeout=10_000
        )

    @_hop
    async def click(self, x: float, y: float, button: str = "left", clicks: int = 1) -> None:
        await self.page.mouse.click(x, y, button=button, click_count=clicks, delay=10)

    @_hop
    async def move(self, x: float, y: float, steps: int = 1) -> None:
        await self.page.mouse.move(x, y, steps=max(1, steps))

    @_hop
    async def drag(self, x1: float, y1: float, x2: float, y2: float, steps: int = 8) -> None:
        mouse = self.page.mouse
        await mouse.move(x1, y1)
        await mouse.down()
        await mouse.move(x2, y2, steps=max(1, steps))
        await mouse.up()

    @_hop
    async def mouse_down(self, button: str = "left") -> None:
        await self.page.mouse.down(button=button)

    @_hop
    async def mouse_up(self, button: str = "left") -> None:
        await self.page.mouse.up(button=button)

    @_hop
    async def scroll(self, x: float, y: float, dx: float, dy: float) -> None:
        await self.page.mouse.move(x, y)
        await self.page.mouse.wheel(dx, dy)

    @_hop
    async def type_text(self, text: str) -> None:
        await self.page.keyboard.type(text)

    @_hop
    async def press(self, keys: str) -> None:
        """Press combinations such as "ctrl+z", "Delete" or "ctrl+a, Delete" (see `evalkit.browser.keys`)."""
        for combo in press_sequence(keys):
            await self.page.keyboard.press(combo)

    @_hop
    async def key_press(self, key: str) -> None:
        """Press one key by its Playwright name ("Enter", "Control+a", ","), without combination parsing."""
        await self.page.keyboard.press(key)

    @_hop
    async def key_down(self, key: str) -> None:
        await self.page.keyboard.down(key)

    @_hop
    async def key_up(self, key: str) -> None:
        await self.page.keyboard.up(key)

    @_hop
    async def fetch(self, url: str, headers: dict | None = None, timeout: float = 30.0) -> tuple[int, bytes]:
        """GET `url` as this session (its cookies, sent and stored), not through the page: (status, body)."""
        r = await self.context.request.get(url, headers=headers or {}, timeout=timeout * 1000)
        return r.status, await r.body()

    @_hop
    async def evaluate(self, script: str, arg: Any = None, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.page.evaluate(script, arg), timeout)

    @_hop
    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.wait_for(self.context.close(), 10)
        except Exception as e:  # a context of a crashed browser is already gone
            log.debug("closing a browser context failed: %s", e)


class _Sync:
    """`session.sync.click(x, y)`: the session's methods, blocking, for synchronous callers."""

    def __init__(self, session: BrowserSession):
        self._session = session

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._session, name)

        def call(*args: Any, **kw: Any) -> Any:
            return self._session.browser.run(method(*args, **kw))

        return call
