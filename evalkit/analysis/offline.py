"""Altair charts that draw with no network, in any notebook.

Altair's default renderer writes HTML whose script fetches vega, vega-lite and vega-embed from a CDN: with no
network (or behind a firewall) a chart is an error box. The `evalkit` renderer draws the chart in the kernel
with vl-convert (already a dependency) and hands the notebook an SVG and a PNG: JupyterLab, VS Code,
nbconvert's HTML and GitHub all show one of them with nothing to load. JupyterLab shows the SVG of a trusted
notebook and the PNG of one it does not trust (it never renders an untrusted SVG). What is lost is the
tooltips: a user who wants them picks another renderer, which we then leave alone.

`use()` switches to it only while Altair's renderer is still its own default: `ek.plots` (and `import
evalkit` in a kernel, see `evalkit.analysis.kernel`) call it, and a choice the user made is never undone.
"""

from __future__ import annotations

import logging
from typing import Any

NAME = "evalkit"
PNG_SCALE = 2
"""The PNG is drawn at twice its size and shown at its size: sharp on a high-density screen."""

log = logging.getLogger(__name__)


def render(spec: dict, **options: Any) -> tuple[dict, dict]:
    """The mime bundle of a Vega-Lite spec: an SVG, a PNG (half its pixels wide and high on screen) and a
    line of text; a spec vl-convert cannot draw gets Altair's own HTML, so it is never lost."""
    # start-up: Altair is the caller's; this module is imported before it
    from altair.vegalite.v6 import display

    try:
        svg = display.svg_renderer(spec)
        png, meta = display.png_renderer(spec, scale_factor=PNG_SCALE, ppi=72 * PNG_SCALE)
    except Exception as e:  # an odd spec or a broken vl-convert install: Altair's HTML still shows it online
        log.warning("evalkit: this chart could not be drawn offline (%s: %s)", type(e).__name__, e)
        return display.html_renderer(spec, **options), {}
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    text = f"<Chart{': ' + str(title) if isinstance(title, str) and title else ''}>"
    return {**svg, **png, "text/plain": text}, meta


def use() -> bool:
    """Make `evalkit` Altair's renderer unless the user has chosen one; True if it is the active one."""
    # start-up (as above)
    import altair as alt

    if NAME not in alt.renderers.names():
        alt.renderers.register(NAME, render)
    if alt.renderers.active == "default":
        alt.renderers.enable(NAME)
    return alt.renderers.active == NAME
