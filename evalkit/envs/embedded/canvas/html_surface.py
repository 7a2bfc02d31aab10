"""The `html` surface: the agent writes a page, Chromium renders it, the page is read back into elements.

Tools: `set_html(html)` (a fragment or a whole document; the canvas is the viewport), `view_canvas()` (the
page as Chromium renders it, in `env.py` with the tools surface's) and `submit()`. The page lives in an
offline context of the process's Chromium: its scripts reach no network and no server file, and a page that
does not finish loading, or whose script never yields afterwards, is replaced by a blank one and reported to
the agent as its mistake.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from evalkit.browser import BrowserSession, SessionOptions, anew_session

from . import dom
from .episode import Episode
from .model import Doc

LOAD_S = 5.0
READ_S = 3.0
SHOT_S = 10.0
MAX_HTML = 200_000
BASE_CSS = "<style>html,body{margin:0;padding:0}</style>"
_DOCUMENT = re.compile(r"<!doctype|<html[\s>]|<body[\s>]|<head[\s>]", re.I)
_HEAD = re.compile(r"<head[^>]*>", re.I)
_HTML = re.compile(r"<html[^>]*>", re.I)


def page_html(html: str) -> str:
    """A whole document for `html`: a fragment goes into an empty page; a document gets the margin reset as
    its first style, which its own CSS can override."""
    if not _DOCUMENT.search(html):
        return f'<!doctype html><html><head><meta charset="utf-8">{BASE_CSS}</head><body>{html}</body></html>'
    for tag in (_HEAD, _HTML):
        m = tag.search(html)
        if m:
            return html[: m.end()] + BASE_CSS + html[m.end() :]
    return html.replace(">", ">" + BASE_CSS, 1)  # a doctype alone: right after it


class PageHung(Exception):
    """The agent's page stopped answering (a script that never yields); it was replaced by a blank one."""


class HtmlPage:
    """One episode's page: the viewport is the canvas."""

    def __init__(self, session: BrowserSession, width: int, height: int):
        self.session, self.width, self.height = session, width, height
        self.html = ""

    @classmethod
    async def open(cls, width: int, height: int) -> HtmlPage:
        session = await anew_session(SessionOptions(width=width, height=height, allow_origins=()))
        page = cls(session, width, height)
        try:
            await session.set_content(page_html(""), timeout=LOAD_S)
        except BaseException:
            await session.close()
            raise
        return page

    async def load(self, html: str) -> None:
        """Show `html`; TimeoutError (page left blank) when it does not finish loading in LOAD_S."""
        self.html = html
        try:
            await self.session.set_content(page_html(html), timeout=LOAD_S)
        except TimeoutError:
            self.html = ""
            raise

    async def read(self) -> Doc:
        """The page as a canvas document; PageHung when it no longer answers."""
        try:
            raw = await self.session.evaluate(dom.script(), timeout=READ_S)
        except TimeoutError:
            await self._blank()
            hung = f"the page stopped responding for {READ_S:g} s (a script that never yields?)"
            raise PageHung(hung) from None
        return dom.to_doc(raw, self.width, self.height)

    async def screenshot(self) -> bytes:
        try:
            return await asyncio.wait_for(self.session.screenshot("png"), SHOT_S)
        except Exception:
            if not self.session.alive:
                raise
            await self._blank()
            raise PageHung("the page could not be drawn (a script that never yields?)") from None

    async def _blank(self) -> None:
        self.html = ""
        await self.session.fresh_page()
        await self.session.set_content(page_html(""), timeout=LOAD_S)

    async def close(self) -> None:
        await self.session.close()


def register(mcp: Any, current: Callable[[], Episode], fail: Callable[[str], Exception]) -> None:
    """Add `set_html` to the FastMCP server `mcp`."""

    @mcp.tool
    async def set_html(
        html: Annotated[
            str, Field(description="A fragment (placed in <body>) or a whole document; inline everything.")
        ],
    ) -> str:
        """Replace the page with this HTML and return the elements it reads back as (JSON: background and
        elements, bottom to top, in pixels)."""
        ep = current()
        if not isinstance(html, str):
            raise fail(f"html must be a string, got {type(html).__name__}")
        if len(html) > MAX_HTML:
            raise fail(f"html is {len(html)} characters; the limit is {MAX_HTML}")
        page: HtmlPage = ep.page
        try:
            await page.load(html)
            doc = await page.read()
        except (TimeoutError, PageHung) as e:
            ep.set_doc(Doc(page.width, page.height))
            raise fail(f"{e}; the page is blank now") from None
        ep.set_doc(doc)
        return json.dumps(doc.to_dict())


async def screenshot(ep: Episode, fail: Callable[[str], Exception]) -> bytes:
    """`view_canvas` on the html surface: the page as Chromium draws it."""
    page: HtmlPage = ep.page
    try:
        return await page.screenshot()
    except PageHung as e:
        ep.set_doc(Doc(page.width, page.height))
        raise fail(f"{e}; the page is blank now") from None


async def read(ep: Episode) -> Doc:
    """The document to grade: the page as it stands (blank if it hung)."""
    page: HtmlPage = ep.page
    try:
        doc = await page.read()
    except PageHung:
        doc = Doc(page.width, page.height)
    ep.set_doc(doc)
    return doc
