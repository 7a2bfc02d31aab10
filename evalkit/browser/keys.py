"""Key names as models write them ("ctrl+z", "Return", "pagedown", "cmd shift t") → Playwright's names.

Playwright presses a combination written as `Control+Shift+T`; its names are the DOM `KeyboardEvent.key`
values (`Enter`, `ArrowLeft`, `PageDown`, `Delete`) or single characters. Models and agent packages write
keys the xdotool / pyautogui way, in any case, joined by `+`, `-` or spaces.
"""

from __future__ import annotations

import re

ALIASES = {
    "ctrl": "Control", "control": "Control", "ctl": "Control",
    "shift": "Shift",
    "alt": "Alt", "option": "Alt", "opt": "Alt",
    "cmd": "Meta", "command": "Meta", "meta": "Meta", "super": "Meta", "win": "Meta", "windows": "Meta",
    "enter": "Enter", "return": "Enter", "kp_enter": "Enter",
    "esc": "Escape", "escape": "Escape",
    "tab": "Tab",
    "space": "Space", "spacebar": "Space", " ": "Space",
    "backspace": "Backspace", "back_space": "Backspace",
    "delete": "Delete", "del": "Delete",
    "insert": "Insert", "ins": "Insert",
    "home": "Home", "end": "End",
    "pageup": "PageUp", "page_up": "PageUp", "pgup": "PageUp", "prior": "PageUp",
    "pagedown": "PageDown", "page_down": "PageDown", "pgdn": "PageDown", "next": "PageDown",
    "up": "ArrowUp", "arrowup": "ArrowUp", "down": "ArrowDown", "arrowdown": "ArrowDown",
    "left": "ArrowLeft", "arrowleft": "ArrowLeft", "right": "ArrowRight", "arrowright": "ArrowRight",
    "capslock": "CapsLock", "caps_lock": "CapsLock",
    "plus": "+", "minus": "-", "comma": ",", "period": ".", "slash": "/", "backslash": "\\",
    "semicolon": ";", "equal": "=", "equals": "=", "quote": "'", "apostrophe": "'", "grave": "`",
    "bracketleft": "[", "bracketright": "]",
}  # fmt: skip
MODIFIERS = ("Control", "Shift", "Alt", "Meta")
_FUNCTION = re.compile(r"^f([1-9]|1[0-9]|2[0-4])$", re.I)


class KeyNameError(ValueError):
    """A key name that maps to nothing Playwright can press; its message is meant for the model."""


def key_name(name: str) -> str:
    """One key → Playwright's name. Single characters pass through (case kept: "A" types a capital)."""
    if len(name) == 1:
        return ALIASES.get(name, name)
    low = name.strip().lower()
    if low in ALIASES:
        return ALIASES[low]
    if _FUNCTION.match(low):
        return low.upper()
    if re.fullmatch(r"[A-Z][A-Za-z]+", name.strip()):  # already a DOM key name: Enter, ArrowLeft, PageDown
        return name.strip()
    raise KeyNameError(f"unknown key {name!r}: use names like Enter, Tab, Escape, Delete, ArrowLeft, ctrl+z")


def split_combo(combo: str) -> list[str]:
    """ "ctrl+shift+t", "ctrl - z", "cmd shift t", "ctrl++" → the keys, in order; a lone "+" is a key."""
    combo = combo.strip()
    if len(combo) <= 1:
        if not combo:
            raise KeyNameError("no key given")
        return [combo]
    sep = next((s for s in "+- " if s in combo), None)
    if sep is None:
        return [combo]
    parts = [p.strip() for p in combo.split(sep) if p.strip()]
    return parts + [sep] if combo.endswith(sep) and sep != " " else parts


def to_playwright(combo: str) -> str:
    """A combination as Playwright's `keyboard.press` wants it: modifiers first, joined by `+`."""
    keys = [key_name(k) for k in split_combo(combo)]
    mods = [k for k in keys if k in MODIFIERS]
    rest = [k for k in keys if k not in MODIFIERS]
    if len(rest) > 1:
        raise KeyNameError(f"{combo!r} presses {len(rest)} non-modifier keys at once; press them one by one")
    return "+".join(dict.fromkeys(mods)) + ("+" if mods and rest else "") + "".join(rest)


def press_sequence(keys: str) -> list[str]:
    """Several combinations separated by commas or whitespace-padded `then` ("ctrl+a, Delete") → each one."""
    parts = [p for p in re.split(r"\s*,\s*|\s+then\s+", keys.strip()) if p]
    if not parts:
        raise KeyNameError("no key given")
    return [to_playwright(p) for p in parts]
