"""Key names as models and agent packages write them, mapped to what Playwright presses."""

from __future__ import annotations

import pytest

from evalkit.browser.keys import KeyNameError, press_sequence, split_combo, to_playwright


@pytest.mark.parametrize(
    ("combo", "expected"),
    [
        ("ctrl+z", "Control+z"),
        ("Ctrl+Shift+T", "Control+Shift+T"),
        ("cmd shift t", "Meta+Shift+t"),
        ("ctrl - z", "Control+z"),
        ("ctrl++", "Control++"),
        ("ctrl+-", "Control+-"),
        ("Return", "Enter"),
        ("enter", "Enter"),
        ("esc", "Escape"),
        ("Delete", "Delete"),
        ("del", "Delete"),
        ("backspace", "Backspace"),
        ("pagedown", "PageDown"),
        ("page_up", "PageUp"),
        ("up", "ArrowUp"),
        ("ArrowLeft", "ArrowLeft"),
        ("space", "Space"),
        ("f5", "F5"),
        ("alt+F4", "Alt+F4"),
        ("a", "a"),
        ("A", "A"),
        ("-", "-"),
        ("super", "Meta"),
    ],
)
def test_combinations(combo, expected):
    assert to_playwright(combo) == expected


def test_split_keeps_a_trailing_plus_as_a_key():
    assert split_combo("ctrl++") == ["ctrl", "+"]
    assert split_combo("shift + a") == ["shift", "a"]


def test_sequences():
    assert press_sequence("ctrl+a, Delete") == ["Control+a", "Delete"]
    assert press_sequence("Tab then Enter") == ["Tab", "Enter"]


@pytest.mark.parametrize("bad", ["", "hyper", "ctrl+a+b", "f99", "   "])
def test_unknown_keys_say_what_to_use(bad):
    with pytest.raises(KeyNameError):
        press_sequence(bad)
