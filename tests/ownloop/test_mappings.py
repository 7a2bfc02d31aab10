"""Coordinate spaces and key names of the GUI models, checked against the released `ui-tars` code."""

from __future__ import annotations

import pytest

from evalkit.ownloop.coords import box_centre, fit_pixels, smart_resize, to_smart
from evalkit.ownloop.keys import pw_combo, pw_key

VIEWPORTS = [
    (1280, 800),
    (1280, 720),
    (1440, 900),
    (1920, 1080),
    (800, 600),
    (100, 60),
    (9000, 5000),
    (37, 999),
]


@pytest.mark.parametrize(("w", "h"), VIEWPORTS)
def test_smart_resize_is_the_released_one(w, h):
    from ui_tars.action_parser import smart_resize as released

    assert smart_resize(h, w) == released(h, w)
    rh, rw = smart_resize(h, w)
    assert rh % 28 == 0 and rw % 28 == 0 and 100 * 28 * 28 <= rh * rw <= 16384 * 28 * 28


@pytest.mark.parametrize("form", ["point='<point>{} {}</point>'", "start_box='({},{})'"])
@pytest.mark.parametrize(("w", "h"), VIEWPORTS[:5])
def test_a_page_point_survives_the_released_parser(w, h, form):
    """A point written the way UI-TARS names it — its released prompt's `<point>x y</point>`, or the older
    `start_box` — comes back, through the released parser, to the same page pixel within half a resized
    pixel."""
    from ui_tars.action_parser import parse_action_to_structure_output

    for x, y in [(0, 0), (w / 3, h / 7), (w - 1, h - 1), (123.4, 56.7)]:
        sx, sy = to_smart(x, y, w, h)
        parsed = parse_action_to_structure_output(
            f"Thought: t\nAction: click({form.format(sx, sy)})", 1000, h, w
        )
        px, py = box_centre(parsed[0]["action_inputs"]["start_box"], w, h)
        rh, rw = smart_resize(h, w)
        assert abs(px - x) <= w / rw / 2 + 1e-6 and abs(py - y) <= h / rh / 2 + 1e-6


def test_box_centre():
    assert box_centre("[0.25, 0.5, 0.75, 0.5]", 1000, 800) == (500.0, 400.0)
    assert box_centre([0.1, 0.2], 100, 100) == (10.0, 20.0)
    with pytest.raises(ValueError):
        box_centre("[1, 2, 3]", 10, 10)
    with pytest.raises((ValueError, SyntaxError)):
        box_centre("__import__('os')", 10, 10)  # literal_eval: model text is never evaluated


def test_fit_pixels():
    assert fit_pixels(1920, 1080) == (1920, 1080)
    w, h = fit_pixels(20000, 10000)
    assert w * h <= 16384 * 28 * 28 and abs(w / h - 2) < 0.01
    assert fit_pixels(100, 50)[0] * fit_pixels(100, 50)[1] >= 100 * 28 * 28


@pytest.mark.parametrize(
    ("name", "key"),
    [("ctrl", "Control"), ("ctrlleft", "Control"), ("winleft", "Meta"), ("enter", "Enter"), ("\n", "Enter"),
     ("pgdn", "PageDown"), ("f5", "F5"), ("a", "a"), ("A", "A"), ("esc", "Escape"), ("prtsc", "PrintScreen"),
     (",", ","), ("nosuchkey", "nosuchkey")],
)  # fmt: skip
def test_key_names(name, key):
    assert pw_key(name) == key


def test_combos():
    assert pw_combo("ctrl shift t".split()) == "Control+Shift+t"
    assert pw_combo(["command", "a"]) == "Meta+a"
