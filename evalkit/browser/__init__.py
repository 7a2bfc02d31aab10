"""The Chromium layer shared by the canvas `html` / `gui` surfaces, the `webapp` env and the own-loop agents.

One Chromium per process (`Browser.get()`), a context per session (`new_session`), screenshots and input.
Nothing here knows about any environment: envs and agents import this package, never each other.

May import: the modules at evalkit's top.
"""

from .chromium import (
    CHROMIUM_ARGS,
    Browser,
    BrowserSession,
    SessionOptions,
    chromium_executable,
    context_options,
    emulate_focus,
    launch_options,
    prepare_context,
)
from .computer import ActionError, Screen, add_computer_tools, coordinates_for
from .keys import KeyNameError, press_sequence, to_playwright


def new_session(opts: SessionOptions | None = None, **kw) -> BrowserSession:
    """A fresh isolated context with one page in this process's Chromium (blocking)."""
    return Browser.get().new_session(opts, **kw)


async def anew_session(opts: SessionOptions | None = None, **kw) -> BrowserSession:
    """A fresh isolated context with one page in this process's Chromium, from async code."""
    return await Browser.get().anew_session(opts, **kw)


__all__ = [
    "ActionError",
    "CHROMIUM_ARGS",
    "Screen",
    "add_computer_tools",
    "coordinates_for",
    "Browser",
    "BrowserSession",
    "SessionOptions",
    "KeyNameError",
    "anew_session",
    "chromium_executable",
    "context_options",
    "emulate_focus",
    "prepare_context",
    "launch_options",
    "new_session",
    "press_sequence",
    "to_playwright",
]
