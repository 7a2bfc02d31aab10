"""An OpenEnv observation as a model reads it: its own fields as readable text, its pictures as images.

Observations are whatever the env's `Observation` class holds: a question, a board, a page's text, a
screenshot. Pictures are recognised by their shape, not by the env's name for them: a base64 string under a
`*_b64` / `*_base64` key or as a `data:image/...` URL, an MCP image item (`{"type": "image", "data", ...}`),
a pixel array (height × width × 1/3/4 channels), or a flat pixel list beside a `<name>_shape` field.

What an env puts only in an observation's `metadata` (a maze's layout, a game's next player) is the model's
to read too: `shown_metadata` keeps all of it but the keys the env marks as hidden (`hidden_keys`, or a
leading underscore) and evalkit's own bookkeeping (ids, the loop's settings, rewards and grades), and
`render_metadata` writes it like the fields, each value cut at METADATA_CAP characters with a note.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Iterable
from typing import Any

from evalkit.types import Image

SKIP = frozenset({"done", "reward", "metadata"})
"""Fields every OpenEnv observation has that are not the observation itself."""

TASK_KEYS = ("prompt", "question", "task", "goal")
"""Where an env puts the task text, in order of preference (reset metadata first, then observation fields)."""

BOOKKEEPING = frozenset(
    {
        "task_id", "episode_id", "instructions", "hidden_keys", "screenshot_tool", "max_turns", "modes",
        "unfinished_reward", "answer_ends_episode", "auto_submitted", "grade", "return", "split", "tier",
        "difficulty_score", "prompt_version", "surface", "mode", "skin", "coordinates",
    }
)  # fmt: skip
"""Metadata keys that are evalkit's to read, not the model's: ids, what the loop is told, the score."""
METADATA_CAP = 2000
"""Characters of one metadata value the model is shown; the rest is cut, with a note saying so."""

_MAGIC = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif", b"RIFF": "image/webp"}
_MAX_DEPTH = 4


def _mime_of(data: bytes) -> str | None:
    return next((mime for magic, mime in _MAGIC.items() if data.startswith(magic)), None)


def _from_b64(text: str) -> Image | None:
    if text.startswith("data:image/"):
        head, _, text = text.partition(",")
        if ";base64" not in head:
            return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    mime = _mime_of(data)
    return Image(data, mime) if mime else None


def _is_grid(value: Any) -> bool:
    """Height × width × channels, as nested lists (BrowserGym's screenshot)."""
    try:
        px = value[0][0]
        return (
            len(value) >= 8
            and len(value[0]) >= 8
            and isinstance(px, list)
            and len(px) in (1, 3, 4)
            and isinstance(px[0], int | float)
        )
    except (TypeError, IndexError, KeyError):
        return False


def _pixels(value: Any, shape: Any = None) -> Image | None:
    import numpy as np

    try:
        arr = np.asarray(value, dtype=np.float64)
        if shape is not None:
            arr = arr.reshape([int(s) for s in shape])
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
            return None
        if arr.size and arr.max() <= 1.0:
            arr = arr * 255.0
        from PIL import Image as PILImage

        img = PILImage.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    except (ValueError, TypeError):
        return None
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return Image(buf.getvalue(), "image/png")


def as_image(key: str, value: Any, siblings: dict | None = None) -> Image | None:
    """`value` (found under `key`) as a picture, or None if it is not one."""
    if isinstance(value, str):
        if value.startswith("data:image/") or key.endswith(("_b64", "_base64")):
            return _from_b64(value)
        return None
    if isinstance(value, dict) and value.get("type") == "image" and isinstance(value.get("data"), str):
        img = _from_b64(value["data"])
        mime = value.get("mimeType") or value.get("mime_type")  # fastmcp 3 and 4 spell it differently
        return Image(img.data, str(mime)) if img is not None and mime else img
    if isinstance(value, list) and value:
        shape = (siblings or {}).get(f"{key}_shape")
        if shape is not None and isinstance(value[0], int | float):
            return _pixels(value, shape)
        if _is_grid(value):
            return _pixels(value)
    return None


def images_in(value: Any, key: str = "", siblings: dict | None = None, depth: int = 0) -> list[Image]:
    """Every picture in a JSON value, outermost first."""
    img = as_image(key, value, siblings)
    if img is not None:
        return [img]
    if depth >= _MAX_DEPTH:
        return []
    if isinstance(value, dict):
        return [i for k, v in value.items() for i in images_in(v, str(k), value, depth + 1)]
    if isinstance(value, list) and not (value and isinstance(value[0], int | float)):
        return [i for v in value for i in images_in(v, key, None, depth + 1)]
    return []


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _cell(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if value is None or isinstance(value, bool) else str(value)


def _table(value: Any) -> str | None:
    """A grid (rows of scalars, all as long) as aligned rows, or a list of flat records with the same keys
    as a header and rows; None for any other value."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(r, list) and r and all(map(_scalar, r)) for r in value):
        if len({len(r) for r in value}) != 1 or len(value) < 2:
            return None
        rows = [[_cell(c) for c in r] for r in value]
    elif all(isinstance(r, dict) and r and all(map(_scalar, r.values())) for r in value):
        keys = list(value[0])
        if any(list(r) != keys for r in value):
            return None
        rows = [keys, *([_cell(r[k]) for k in keys] for r in value)]
    else:
        return None
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    sep = " | " if isinstance(value[0], dict) else " "

    def line(row: list[str]) -> str:  # numbers right-aligned, as a table of them is read
        cells = [c.rjust(w) if _number(c) else c.ljust(w) for c, w in zip(row, widths, strict=True)]
        return sep.join(cells).rstrip()

    return "\n".join(map(line, rows))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def readable(value: Any, cap: int | None = None) -> str:
    """`value` as the model reads it: a string as it is, a grid or a list of records as a table, anything
    else as one line of JSON; beyond `cap` characters, cut, with a note."""
    if isinstance(value, str):
        text = value
    else:
        text = _table(value) or json.dumps(value, ensure_ascii=False, default=str)
    if cap is not None and len(text) > cap:
        return f"{text[:cap]}… [cut: {cap:,} of {len(text):,} characters shown]"
    return text


def hidden_keys(meta: dict) -> set[str]:
    """The keys an env marks as not the model's: those listed under `hidden_keys`."""
    listed = meta.get("hidden_keys")
    return {str(k) for k in listed} if isinstance(listed, list | tuple) else set()


def shown_metadata(meta: dict, hidden: set[str] | frozenset[str] = frozenset()) -> dict:
    """The metadata the model is shown: everything but evalkit's bookkeeping (`BOOKKEEPING`, any key about
    a reward), the keys the env hides (listed in `hidden_keys`, or in `hidden`, or with a leading
    underscore) and empty values."""
    hidden = set(hidden) | hidden_keys(meta)
    return {
        k: v
        for k, v in meta.items()
        if isinstance(k, str)
        and k not in BOOKKEEPING
        and k not in hidden
        and not k.startswith("_")
        and "reward" not in k.lower()
        and v is not None
        and v != ""
        and v != []
        and v != {}
    }


def render(
    fields: dict, skip: tuple[str, ...] = (), first: int = 1, cap: int | None = None
) -> tuple[str, list[Image]]:
    """The observation's own fields as `name: value` lines (pictures become `[image N]`, numbered from
    `first` — the message's pictures before them count — and are returned), leaving out empty values, the
    fields every observation has, and `skip`; a value longer than `cap` characters is cut."""
    shown = {
        k: v
        for k, v in fields.items()
        if k not in SKIP and k not in skip and v is not None and v != "" and v != [] and v != {}
    }
    pictures = {k: found for k, v in shown.items() if (found := images_in(v, k, fields))}
    lines: list[str] = []
    images: list[Image] = []
    for key, value in shown.items():
        if key in pictures:
            refs = ", ".join(f"[image {first + len(images) + i}]" for i in range(len(pictures[key])))
            images += pictures[key]
            lines.append(f"{key}: {refs}")
        elif not (key.endswith("_shape") and key.removesuffix("_shape") in pictures):
            text = readable(value, cap)
            lines.append(f"{key}:\n{text}" if "\n" in text else f"{key}: {text}")
    return "\n".join(lines), images


def render_metadata(
    meta: dict,
    hidden: set[str] | frozenset[str] = frozenset(),
    skip: Iterable[str] = (),
    first: int = 1,
    attached: bool = False,
) -> tuple[str, list[Image]]:
    """The metadata the model is shown (`shown_metadata`, less `skip`) as `name: value` lines, each value cut
    at METADATA_CAP characters. Its pictures become `[image N]`, numbered from `first`: with `attached`
    (an opening, which attaches every picture of the reset metadata) in the order of all of them and none
    returned; else only the shown keys' pictures, returned."""
    skip = set(skip)
    shown = {k: v for k, v in shown_metadata(meta, hidden).items() if k not in skip}
    if not attached:
        return render(shown, first=first, cap=METADATA_CAP)
    numbers: dict[str, range] = {}
    n = first
    for k, v in meta.items():
        found = images_in(v, str(k), meta, 1)
        if found:
            numbers[k], n = range(n, n + len(found)), n + len(found)
    lines = []
    for k, v in shown.items():
        if k in numbers:
            lines.append(f"{k}: " + ", ".join(f"[image {i}]" for i in numbers[k]))
        else:
            lines.append(render({k: v}, cap=METADATA_CAP)[0])
    return "\n".join(line for line in lines if line), []


def task_text(meta: dict, fields: dict) -> tuple[str | None, str | None]:
    """(the task text, the observation field it came from) — from the reset metadata's `prompt`, `question`,
    `task` or `goal`, else an observation field of that name."""
    key = meta_task_key(meta)
    if key is not None:
        return meta[key].strip(), None
    for key in TASK_KEYS:
        if isinstance(fields.get(key), str) and fields[key].strip():
            return fields[key].strip(), key
    return None, None


def meta_task_key(meta: dict) -> str | None:
    """The reset metadata key the task text comes from, if any (see `task_text`)."""
    return next((k for k in TASK_KEYS if isinstance(meta.get(k), str) and meta[k].strip()), None)
