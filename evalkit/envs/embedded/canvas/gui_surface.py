"""The `gui` surface: a small drawing editor in the episode's own Chromium page, driven by computer use.

The editor (`editor/`) is a static page assembled here with one of `SKINS` (the same editor, its tool bar,
properties and layers placed and styled differently) and loaded into an offline context the size of
`SCREEN`. The agent gets the shared computer-use tools (`evalkit.browser.add_computer_tools`) in the
coordinate system of its episode, and `submit`; after every action the env reads the editor's document
back, so the HTTP routes and the grade always see the canvas as it stands.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path

from evalkit.browser import BrowserSession, Screen, SessionOptions, anew_session

from .model import Doc, DocError, Element

log = logging.getLogger(__name__)

SKINS = ("classic", "midnight", "studio", "paper")
SCREEN = (1280, 800)
LOAD_S = 10.0
READ_S = 5.0
SETTLE_S = 2.0
EDITOR = Path(__file__).with_name("editor")


def default_skin(index: int) -> str:
    """A task's skin when none is asked for: it follows the task's index, so a split covers every skin."""
    return SKINS[index % len(SKINS)]


@lru_cache(maxsize=1)
def _assets() -> dict[str, str]:
    names = ("editor.html", "base.css", "skins.css", "editor.js")
    return {name: (EDITOR / name).read_text() for name in names}


def editor_html(skin: str, width: int, height: int) -> str:
    """The editor as one self-contained page for a `width` x `height` canvas in `skin`."""
    if skin not in SKINS:
        raise ValueError(f"unknown skin {skin!r}: use one of {', '.join(SKINS)}")
    a = _assets()
    config = json.dumps({"width": width, "height": height, "skin": skin}).replace("<", "\\u003c")
    page = (
        a["editor.html"]
        .replace("/*BASE*/", a["base.css"])
        .replace("/*SKIN*/", a["skins.css"])
        .replace("/*CONFIG*/", config)
        .replace("/*JS*/", a["editor.js"])
    )
    return page.replace("<body>", f'<body class="skin-{skin}">', 1)


def doc_from_editor(data: dict, width: int, height: int) -> Doc:
    """The editor's document as the grader's; an element the model could not have made valid is dropped."""
    bg = data.get("background") or "#ffffff"
    doc = Doc.from_dict({"width": width, "height": height, "background": bg, "elements": []})
    for raw in data.get("elements") or []:
        try:
            doc.elements.append(Element.from_dict(raw))
        except (DocError, KeyError, TypeError) as e:
            log.warning("editor element %s dropped: %s", raw.get("id"), e)
    return doc


class EditorPage:
    """One episode's editor: the page, and the screen the agent sees it through."""

    def __init__(self, session: BrowserSession, screen: Screen, width: int, height: int, skin: str):
        self.session, self.screen = session, screen
        self.width, self.height, self.skin = width, height, skin

    @classmethod
    async def open(cls, skin: str, width: int, height: int, coordinates: str) -> EditorPage:
        html = editor_html(skin, width, height)
        session = await anew_session(SessionOptions(width=SCREEN[0], height=SCREEN[1], allow_origins=()))
        try:
            await session.set_content(html, timeout=LOAD_S)
            await session.settle(SETTLE_S)
        except BaseException:
            await session.close()
            raise
        return cls(session, Screen(session, coordinates, settle_s=SETTLE_S), width, height, skin)

    async def read(self) -> Doc:
        data = await self.session.evaluate("() => window.__canvasDocument()", timeout=READ_S)
        return doc_from_editor(data or {}, self.width, self.height)

    async def close(self) -> None:
        await self.session.close()
