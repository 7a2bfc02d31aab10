"""An OpenEnv observation as a model reads it: its own fields as readable text, its pictures as images.

Observations are whatever the env's `Observation` class holds: a question, a board, a page's text, a
screenshot. Pictures are recognised by their content, not by the env's name for them, in any field and
nested: a base64 PNG / JPEG / WebP / GIF string (dm_control's `pixels`) or `data:image/...` URL whose bytes
are a real picture (its magic bytes, and a size its header gives), an MCP image item (`{"type": "image",
"data", ...}`), a pixel array (height × width × 1/3/4 channels), or a flat pixel list beside a
`<name>_shape` field. A picture is sent as an image and its place in the text says `[image N]`, never its
characters; a base64 string that is not a picture stays text.

What an env puts only in an observation's `metadata` (a maze's layout, a game's next player) is the model's
to read too: `shown_metadata` keeps all of it but the keys the env marks as hidden (`hidden_keys`, or a
leading underscore) and evalkit's own bookkeeping (ids, the loop's settings, rewards and grades), and
`render_metadata` writes it like the fields, each value cut at METADATA_CAP characters with a note.
Some of it is never the model's at all, text or picture (`withheld`): the evaluator's task spec that
OpenEnv's import wrappers put there (`EVALUATOR`), a value equal to the Task API's record of the task, and
what the user names with `--hide-field`.

The task itself (`task_of`) is a string, or a list: OpenReward's text and image blocks, or chat messages
(Verifiers), whose system role is the env's system prompt (`read_prompt`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalkit.types import Image

SKIP = frozenset({"done", "reward", "metadata"})
"""Fields every OpenEnv observation has that are not the observation itself."""

TASK_KEYS = ("prompt", "task_prompt", "question", "task", "instruction", "goal", "objective", "problem")
"""Where an env puts the task text, in order of preference (reset metadata first, then observation fields):
textarena's `prompt`, repl's `task_prompt`, reasoning_gym's `question`, BrowserGym's `goal`, ..."""

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

_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_B64_HEADS = ("iVBORw0KGgo", "/9j/", "UklGR", "R0lGOD")
"""How the base64 of a PNG, JPEG, RIFF (WebP) and GIF file begins: a string that does not begin so is not
decoded at all, so a long text costs one prefix test."""
MIN_B64 = 64
"""Characters below which an unlabelled base64 string is never taken for a picture (none is that small)."""
_MAX_DEPTH = 6


_MAGIC = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif"}


def _magic(data: bytes) -> str | None:
    """The picture type `data`'s first bytes say (a WebP's RIFF header says WEBP: a WAV's does not)."""
    if data[8:12] == b"WEBP" and data.startswith(b"RIFF"):
        return "image/webp"
    return next((mime for magic, mime in _MAGIC.items() if data.startswith(magic)), None)


def _sized(data: bytes) -> str | None:
    """The picture's type when its header also gives a size; None for anything else (a corrupt header,
    bytes that only begin like a PNG). PIL reads only the header here: the pixels are not decoded."""
    from PIL import Image as PILImage  # start-up: Pillow and numpy load only for an env that sends pictures
    from PIL import UnidentifiedImageError

    try:
        with PILImage.open(io.BytesIO(data)) as img:
            width, height = img.size
            mime = _FORMATS.get(str(img.format))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
    return mime if width > 0 and height > 0 else None


def _from_b64(text: str, labelled: bool = True) -> Image | None:
    """The picture base64 `text` holds. A `labelled` one (a `data:image/` URL, a `*_b64` key, an MCP image
    item: the env says it is a picture) needs only a picture's magic bytes; an unlabelled string must also
    begin as a picture's base64 does and have a header that gives a size, so that no other base64 is
    taken for one."""
    if text.startswith("data:image/"):
        head, _, text = text.partition(",")
        if ";base64" not in head:
            return None
    text = text.strip()
    if not labelled and not text.startswith(_B64_HEADS):
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        try:  # wrapped at 76 characters, as MIME base64 is
            data = base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            return None
    mime = _magic(data)
    if mime is not None and not labelled:
        mime = _sized(data)
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
    import numpy as np  # start-up (see `_sized`)

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
        from PIL import Image as PILImage  # start-up (see `_sized`)

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
        return _from_b64(value, labelled=False) if len(value) >= MIN_B64 else None
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
    """Every picture in a JSON value, outermost first, in the order `lift` numbers them."""
    found: list[Image] = []
    lift(value, key, siblings, found, 1, depth)
    return found


def lift(
    value: Any, key: str, siblings: dict | None, found: list[Image], first: int = 1, depth: int = 0
) -> Any:
    """`value` with each picture in it (at any depth) replaced by its reference `[image N]`, N counted from
    `first` over `found`, to which the picture is appended: the text keeps what surrounds a picture (a
    frame's step number beside it) without the picture's own characters."""
    img = as_image(key, value, siblings)
    if img is not None:
        found.append(img)
        return f"[image {first + len(found) - 1}]"
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: lift(v, str(k), value, found, first, depth + 1) for k, v in value.items()}
    if isinstance(value, list) and not (value and isinstance(value[0], int | float)):
        return [lift(v, key, None, found, first, depth + 1) for v in value]
    return value


def _refs(lifted: Any, n: int) -> str | None:
    """The text of a value whose every part was a picture (`[image 1], [image 2]`); None otherwise."""
    if n == 0:
        return None
    if isinstance(lifted, str):
        return lifted
    if isinstance(lifted, list) and len(lifted) == n and all(isinstance(v, str) for v in lifted):
        return ", ".join(lifted)
    return None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _cell(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if value is None or isinstance(value, bool) else str(value)


COLUMN_CAP = 40
"""Widest cell of a column other than the last that a table pads the others to; past it (or with a cell of
several lines) a list of records is written record by record instead of as a table."""


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
    # Padding every row to one long or multi-line cell buries a short table in spaces (an opening of 2,841
    # characters, 1,330 of them spaces): such records are written one by one, a grid as JSON.
    if any("\n" in c for r in rows for c in r) or any(w > COLUMN_CAP for w in widths[:-1]):
        return _records(value) if isinstance(value[0], dict) else None
    sep = " | " if isinstance(value[0], dict) else " "

    def line(row: list[str]) -> str:  # numbers right-aligned, as a table of them is read
        cells = [c.rjust(w) if _number(c) else c.ljust(w) for c, w in zip(row, widths, strict=True)]
        return sep.join(cells).rstrip()

    return "\n".join(map(line, rows))


def _records(records: list[dict]) -> str:
    """Flat records one after the other, a `key: value` line each, a value of several lines indented under
    its key, with a blank line between two records."""
    blocks = []
    for i, record in enumerate(records, 1):
        lines = [f"[{i}]"]
        for k, v in record.items():
            text = _cell(v)
            if "\n" in text:
                lines.append(f"{k}:")
                lines += [f"  {t}".rstrip() for t in text.splitlines()]
            else:
                lines.append(f"{k}: {text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


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


EVALUATOR = {
    "task_spec": "the evaluator's task, answer included (openenv import: for orchestration only)",
    "source_type": "the import wrapper's note of where the env came from (openenv import)",
    "original_env_class": "the import wrapper's note of the class it wraps (openenv import)",
}
"""Keys OpenEnv's import wrappers (`openenv import`, for Verifiers and OpenReward envs) put in the reset
metadata for the evaluator: the task spec with its answer, where the env came from. OpenEnv's RFC 006 keeps
task data to orchestration ("the agent never sees" it): the model is never sent them."""
HIDE_FIELD = "named by --hide-field"
RECORD = "equals the env's Task API record of the task (the evaluator's, with its answer)"


def digest(value: Any) -> str:
    """A short hash of a JSON value, its keys in order: two equal values, one digest."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def withheld(
    values: dict, hide: Iterable[str] = (), records: frozenset[str] | set[str] = frozenset()
) -> dict[str, str]:
    """The keys of `values` (reset metadata, observation fields) whose values the model is never sent,
    neither as text nor as pictures, each with why: the evaluator's (`EVALUATOR`), those the user named
    (`hide`), and any whose value equals one of the Task API's task `records` (by `digest`)."""
    hide = set(hide)
    out: dict[str, str] = {}
    for key, value in values.items():
        if key in EVALUATOR:
            out[key] = EVALUATOR[key]
        elif key in hide:
            out[key] = HIDE_FIELD
        elif records and isinstance(value, dict | list) and value and digest(value) in records:
            out[key] = RECORD
    return out


def withhold(values: dict, keys: Iterable[str]) -> dict:
    """`values` without `keys`."""
    keys = set(keys)
    return {k: v for k, v in values.items() if k not in keys} if keys else dict(values)


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
        and k not in EVALUATOR
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
    lines: list[str] = []
    images: list[Image] = []
    pictured: set[str] = set()
    for key, value in shown.items():
        before = len(images)
        lifted = lift(value, key, fields, images, first)
        if len(images) > before:
            pictured.add(key)
        lines.append(_line(key, lifted, len(images) - before, cap))
    # A flat pixel list's `<name>_shape` says nothing once the list is a picture.
    return "\n".join(
        line
        for key, line in zip(shown, lines, strict=True)
        if not (key.endswith("_shape") and key.removesuffix("_shape") in pictured)
    ), images


def _line(key: str, lifted: Any, pictures: int, cap: int | None) -> str:
    refs = _refs(lifted, pictures)
    text = refs if refs is not None else readable(lifted, cap)
    return f"{key}:\n{text}" if "\n" in text else f"{key}: {text}"


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
    lifted: dict[str, tuple[Any, int]] = {}
    found: list[Image] = []
    for k, v in meta.items():  # every picture of the metadata is attached, a hidden one too: count them all
        before = len(found)
        value = lift(v, str(k), meta, found, first, 1)
        lifted[str(k)] = (value, len(found) - before)
    lines = [_line(k, *lifted[str(k)], METADATA_CAP) for k in shown]
    return "\n".join(line for line in lines if line), []


@dataclass
class Task:
    """The task a reset states, as the model is sent it."""

    text: str
    """The task text; where its pictures were, `[image N]`."""
    key: str
    """The metadata key or observation field it came from."""
    in_fields: bool = False
    """It came from an observation field (else the reset metadata)."""
    system: str = ""
    """What a prompt given as chat messages says in its system role: the env's system prompt."""
    images: list[Image] = field(default_factory=list)
    """Its pictures, in the order the text numbers them."""


def _part(part: Any, found: list[Image], first: int) -> str:
    """One item of a prompt's content as text: a text part's text, a picture's `[image N]`."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str) and part.get("type", "text") in ("text", "input_text"):
        return part["text"]
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    picture = as_image("", url) if isinstance(url, str) else as_image("", part)
    if picture is None:
        return ""
    found.append(picture)
    return f"[image {first + len(found) - 1}]"


def _content(content: Any, found: list[Image], first: int) -> str:
    parts = content if isinstance(content, list) else [content]
    return "\n".join(t for t in (_part(p, found, first).strip() for p in parts) if t)


def read_prompt(value: Any, first: int = 1) -> tuple[str, str, list[Image]] | None:
    """A prompt as (system text, task text, pictures): a string as it is; a list of OpenReward blocks
    (`{"type": "text", "text"}`, `{"type": "image", "data", "mimeType"}`) as their text with `[image N]`
    where each picture is (N from `first`); a list of chat messages (`{"role", "content"}` — Verifiers —
    or `{"role", "blocks"}` — OpenReward's) as the system role's text and the others' (each line led by
    its role when there is more than one user message, or an assistant's). None for anything else."""
    if isinstance(value, str):
        return ("", value.strip(), []) if value.strip() else None
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        return None
    found: list[Image] = []
    if not any("role" in v for v in value):
        if not all(v.get("type") in ("text", "image", "image_url", "input_text") for v in value):
            return None
        text = _content(value, found, first)
        return ("", text, found) if text else None
    system, said = [], []
    for message in value:
        content = message.get("content", message.get("blocks"))
        text = _content(content, found, first)
        if text:
            (system if message.get("role") in ("system", "developer") else said).append((message, text))
    others = [m for m, _ in said]
    labelled = len(others) > 1 and any(m.get("role") != others[0].get("role") for m in others)
    lines = [f"{m.get('role')}: {t}" if labelled else t for m, t in said]
    if not lines and not system:
        return None
    return "\n\n".join(t for _, t in system), "\n\n".join(lines), found


def _task_value(value: Any) -> bool:
    return (
        read_prompt(value) is not None
        if isinstance(value, list)
        else isinstance(value, str) and bool(value.strip())
    )


def task_of(meta: dict, fields: dict, first: int = 1, first_field: int = 1) -> Task | None:
    """The task the reset states: the reset metadata's `prompt`, `question`, `task`, `goal` ... (`TASK_KEYS`),
    else an observation field of that name; a string, or a list of blocks or chat messages (`read_prompt`).
    Pictures in it are numbered as the opening attaches them: a metadata prompt's among all the metadata's
    pictures (from `first`, in key order), an observation field's first among the observation's (from
    `first_field`)."""
    key = meta_task_key(meta)
    if key is not None:
        before = len(images_in({k: meta[k] for k in list(meta)[: list(meta).index(key)]}))
        system, text, images = read_prompt(meta[key], first + before) or ("", "", [])
        return Task(text, key, False, system, images)
    for key in TASK_KEYS:
        if _task_value(fields.get(key)):
            system, text, images = read_prompt(fields[key], first_field) or ("", "", [])
            return Task(text, key, True, system, images)
    return None


def task_text(meta: dict, fields: dict) -> tuple[str | None, str | None]:
    """(the task text, the observation field it came from) — `task_of`, without its pictures."""
    task = task_of(meta, fields)
    if task is None:
        return None, None
    return task.text or None, task.key if task.in_fields else None


def meta_task_key(meta: dict) -> str | None:
    """The reset metadata key the task text comes from, if any (see `task_of`)."""
    return next((k for k in TASK_KEYS if _task_value(meta.get(k))), None)


def fingerprint(meta: dict, fields: dict, kept_back: Iterable[str] = ()) -> str:
    """A short hash of what a reset shows the model: its task text, its observation's fields and the
    metadata it is shown (not ids or other bookkeeping, nor what is `kept_back` from it), pictures by their
    bytes. Two resets that should give two tasks but have one fingerprint gave one task twice (an env that
    ignores its split and index)."""
    meta, fields = withhold(meta, kept_back), withhold(fields, kept_back)
    digest = hashlib.sha256()
    head, used = task_text(meta, fields)
    body, images = render(fields, skip=(used,) if used else ())
    known, pictures = render_metadata(meta, skip={meta_task_key(meta), *fields})
    for part in (head or "", body, known):
        digest.update(part.encode() + b"\0")
    for image in images + pictures:
        digest.update(hashlib.sha256(image.data).digest())
    return digest.hexdigest()[:16]
