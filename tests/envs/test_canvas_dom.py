"""The html surface's read-back: a page Chromium drew becomes the elements its instructions promise."""

from __future__ import annotations

import pytest

from evalkit.browser import Browser, chromium_executable
from evalkit.envs.embedded.canvas.dom import to_doc
from evalkit.envs.embedded.canvas.html_surface import HtmlPage, page_html

pytestmark = pytest.mark.browser
if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

W, H = 400, 300


@pytest.fixture(scope="module")
def page():
    p = Browser.get().run(HtmlPage.open(W, H))
    yield p
    Browser.get().run(p.close())


def read(page: HtmlPage, html: str):
    async def go():
        await page.load(html)
        return await page.read()

    doc = Browser.get().run(go())
    return doc, [e.to_dict() for e in doc.elements]


def box(left, top, width, height, extra=""):
    return (
        f'<div style="position:absolute;left:{left}px;top:{top}px;width:{width}px;height:{height}px;'
        f'box-sizing:border-box;{extra}"></div>'
    )


def test_boxes_are_rects_and_ellipses_with_their_outline(page):
    doc, els = read(
        page,
        box(10, 20, 100, 50, "background:#ff0000;border:3px solid #0000ff;border-radius:8px")
        + box(200, 40, 80, 60, "background:rgb(0,128,0);border-radius:50%")
        + box(20, 150, 40, 30, "background:teal;border-radius:40px"),
    )
    assert [e["kind"] for e in els] == ["rect", "ellipse", "rect"]
    r, e, pill = els
    assert (r["x"], r["y"], r["width"], r["height"]) == (10, 20, 100, 50)
    assert (r["fill"], r["stroke"], r["stroke_width"], r["radius"]) == ("#ff0000", "#0000ff", 3, 8)
    assert (e["x"], e["y"], e["width"], e["height"], e["fill"], e["stroke"]) == (
        200,
        40,
        80,
        60,
        "#008000",
        None,
    )
    assert pill["radius"] == 40  # a px radius, however large, stays a rounded rect
    assert doc.background == "#ffffff"


def test_lines_from_svg_thin_boxes_and_rotated_boxes(page):
    _, els = read(
        page,
        f'<svg width="{W}" height="{H}" style="position:absolute;left:0;top:0">'
        '<line x1="10" y1="20" x2="110" y2="70" stroke="#123456" stroke-width="3"/></svg>'
        + box(50, 100, 200, 4, "background:#ff00ff")
        + box(300, 50, 2, 120, "background:#00ffff")
        + box(150, 200, 100, 6, "background:#888888;transform:rotate(90deg)")
        + box(100, 250, 100, 4, "background:#444444;transform:rotate(30deg)"),
    )
    assert [e["kind"] for e in els] == ["line"] * 5
    svg, flat, upright, quarter, turned = els
    assert (svg["x"], svg["y"], svg["width"], svg["height"]) == (10, 20, 100, 50)
    assert (svg["stroke"], svg["stroke_width"]) == ("#123456", 3)
    assert (flat["x"], flat["y"], flat["width"], flat["height"], flat["stroke_width"]) == (50, 102, 200, 0, 4)
    assert (upright["x"], upright["y"], upright["width"], upright["height"]) == (301, 50, 0, 120)
    # a thin box turned a quarter is a vertical line through its centre
    assert quarter["width"] == pytest.approx(0, abs=0.01) and abs(quarter["height"]) == pytest.approx(100)
    assert quarter["x"] == pytest.approx(200) and quarter["stroke_width"] == 6
    # turned 30°: a line along its long side, through its centre (150, 252)
    assert turned["x"] + turned["width"] / 2 == pytest.approx(150, abs=0.5)
    assert turned["y"] + turned["height"] / 2 == pytest.approx(252, abs=0.5)
    assert turned["height"] / turned["width"] == pytest.approx(0.5774, abs=0.01)


def test_text_top_left_size_and_colour(page):
    _, els = read(
        page,
        '<div style="position:absolute;left:30px;top:40px;font-size:32px;line-height:1;color:#d62728">'
        "Hello  world</div>"
        '<p style="position:absolute;left:10px;top:200px;margin:0;font-size:12px;line-height:1">small</p>'
        f'<svg width="{W}" height="{H}" style="position:absolute;left:0;top:0">'
        '<text x="250" y="100" font-size="20" fill="#0000ff">svg</text></svg>',
    )
    assert [e["kind"] for e in els] == ["text", "text", "text"]
    big, small, svg = els
    assert (big["text"], big["x"], big["font_size"], big["fill"]) == ("Hello world", 30, 32, "#d62728")
    assert big["y"] == pytest.approx(40, abs=1)
    assert small["y"] == pytest.approx(200, abs=1) and small["fill"] == "#000000"
    assert (svg["text"], svg["font_size"], svg["fill"]) == ("svg", 20, "#0000ff")


def test_stacking_follows_paint_order_not_document_order(page):
    _, els = read(
        page,
        box(10, 10, 100, 100, "position:absolute;z-index:3;background:#ff0000")
        + box(50, 50, 100, 100, "background:#00ff00")
        + box(300, 10, 50, 50, "background:#0000ff"),
    )
    fills = [e["fill"] for e in els]
    assert fills.index("#00ff00") < fills.index("#ff0000")  # z-index lifts the red box over the green
    assert fills.index("#0000ff") > fills.index("#00ff00")  # untouched boxes keep document order


def test_background_translucency_and_what_is_not_read(page):
    doc, els = read(
        page,
        "<!doctype html><html><head><style>body{background:#000080}</style></head><body>"
        + box(0, 0, W, H, "background:#f7f3e9")
        + box(10, 10, 50, 50, "background:rgba(255,0,0,0.5)")
        + box(100, 10, 50, 50, "background:#00ff00;opacity:0")
        + box(200, 10, 50, 50, "background:#00ff00;visibility:hidden")
        + box(600, 10, 50, 50, "background:#00ff00")
        + '<canvas width="50" height="50" style="position:absolute;left:300px;top:200px"></canvas>'
        + "</body></html>",
    )
    assert doc.background == "#f7f3e9"  # the bottom box covering the canvas is its background
    assert len(els) == 1  # only the translucent box: nothing hidden, transparent, off screen or drawn
    half_red = [int(els[0]["fill"][i : i + 2], 16) for i in (1, 3, 5)]  # half red over the background
    assert half_red == pytest.approx([251, 122, 116], abs=2)


def test_fragments_and_documents_start_without_margins():
    assert "<body><b>x</b></body>" in page_html("<b>x</b>")
    doc = page_html("<!DOCTYPE html><html><head><title>t</title></head><body>x</body></html>")
    assert doc.index("margin:0") < doc.index("<title>")
    assert to_doc({"background": None, "items": []}, W, H).background == "#ffffff"
