"""Key names as the GUI models and pyautogui write them → the names Playwright presses.

The common names (ctrl, enter, pagedown, f5, ...) are `evalkit.browser.keys`'s; pyautogui adds left/right
variants of modifiers, a few abbreviations and whitespace characters as keys.
"""

from __future__ import annotations

from evalkit.browser.keys import KeyNameError, key_name

PYAUTOGUI = {
    "ctrlleft": "Control",
    "ctrlright": "Control",
    "shiftleft": "Shift",
    "shiftright": "Shift",
    "altleft": "Alt",
    "altright": "Alt",
    "winleft": "Meta",
    "winright": "Meta",
    "optionleft": "Alt",
    "optionright": "Alt",
    "prtsc": "PrintScreen",
    "prtscr": "PrintScreen",
    "printscreen": "PrintScreen",
    "\n": "Enter",
    "\r": "Enter",
    "\t": "Tab",
    " ": "Space",
    "numlock": "NumLock",
    "scrolllock": "ScrollLock",
    "volumeup": "AudioVolumeUp",
    "volumedown": "AudioVolumeDown",
    "volumemute": "AudioVolumeMute",
}


def pw_key(name: str) -> str:
    """One key name → Playwright's. A name nobody maps is passed on as written: Playwright then refuses it,
    and that refusal is the model's mistake, recorded as an action error."""
    name = str(name)
    if name.lower() in PYAUTOGUI:
        return PYAUTOGUI[name.lower()]
    if name in PYAUTOGUI:
        return PYAUTOGUI[name]
    try:
        return key_name(name)
    except KeyNameError:
        return name.strip()


def pw_combo(keys: list[str]) -> str:
    """Keys held together (`["ctrl", "c"]`) → `Control+c`."""
    return "+".join(pw_key(k) for k in keys)
