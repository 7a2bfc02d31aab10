"""An OpenEnv observation as a model reads it: its own fields as readable text, its pictures as images.

Observations are whatever the env's `Observation` class holds: a question, a board, a page's text, a
screenshot. Pictures are recognised by their shape, not by the env's name for them: a base64 string under a
`*_b64` / `*_base64` key or as a `data:image/...` URL, an MCP image item (`{"type": "image", "data", ...}`),
a pixel array (height × width × 1/3/4 channels), or a flat pixel list beside a `<name>_shape` field.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from typing import Any

from evalkit.types import Image

SKIP = frozenset({"done", "reward", "metadata"})
"""Fields every OpenEnv observation has that are not the observation itself."""

TASK_KEYS = ("prompt", "question", "task", "goal")
"""Where an env puts the task text, in order of preference (reset metadata first, then observation fields)."""

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


def _readable(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render(fields: dict, skip: tuple[str, ...] = (), first: int = 1) -> tuple[str, list[Image]]:
    """The observation's own fields as `name: value` lines (pictures become `[image N]`, numbered from
    `first` — the message's pictures before them count — and are returned), leaving out empty values, the
    fields every observation has, and `skip`."""
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
            text = _readable(value)
            lines.append(f"{key}:\n{text}" if "\n" in text else f"{key}: {text}")
    return "\n".join(lines), images


def task_text(meta: dict, fields: dict) -> tuple[str | None, str | None]:
    """(the task text, the observation field it came from) — from the reset metadata's `prompt`, `question`,
    `task` or `goal`, else an observation field of that name."""
    for key in TASK_KEYS:
        if isinstance(meta.get(key), str) and meta[key].strip():
            return meta[key].strip(), None
    for key in TASK_KEYS:
        if isinstance(fields.get(key), str) and fields[key].strip():
            return fields[key].strip(), key
    return None, None
