"""What each field of a trace record must hold, and how a record that breaks that is read.

Every line of a trace that parses as a JSON object is read: `EpisodeRecord.from_dict` never raises on it.
A field holding the wrong kind of value — a string where the list of turns belongs, a string reward, a turn
that is not an object, a reward that is NaN — reads as the field's default and is named in the record's
`problems` ("turns is a string", "turn 3: calls is a number"). Such a record is malformed: the viewer shows
it with its problems, analysis leaves it out and says so in one counted warning, and resume runs its
episode again. Null is never wrong: it reads as the field's default, as a missing field does.

The kind each field must hold is read off the record dataclasses' annotations (`kinds`), so a new field is
checked as soon as it is declared. The fast index reader (`evalkit.records._index`) derives its msgspec
types from the same `kinds`, so that msgspec refuses every line whose record `problems` would fault.
The record types themselves live in `evalkit.types`, which uses this module (`EpisodeRecord.from_dict`,
`types.record_problems`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from typing import Any

STR, INT, NUM, BOOL, OBJ, LIST, OBJS, ANY = "str", "int", "num", "bool", "obj", "list", "objs", "any"
_ANNOTATIONS = {
    "str": STR, "str | None": STR, "int": INT, "float": NUM, "float | None": NUM, "bool": BOOL,
    "dict": OBJ, "dict | None": OBJ, "list": LIST, "list[str]": LIST, "list[dict]": OBJS, "Any": ANY,
}  # fmt: skip
DERIVED = ("problems", "run_dir")
"""Fields a reader fills in, never read from a line."""
INT_LIMIT = 2**63
PROBLEMS_SHOWN = 3


@functools.cache
def kinds(cls: type) -> dict[str, tuple[str, type | None]]:
    """Field name → (kind, record class of its items for a list of records) of a record dataclass."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in DERIVED:
            continue
        ann = str(f.type)
        inner = ann[5:-1] if ann.startswith("list[") else ""
        child = getattr(sys.modules[cls.__module__], inner, None) if inner else None
        if child is not None and dataclasses.is_dataclass(child):
            out[f.name] = (OBJS, child)
        elif ann in _ANNOTATIONS:
            out[f.name] = (_ANNOTATIONS[ann], None)
        else:  # a new annotation must say here what a line may hold for it
            raise TypeError(f"{cls.__name__}.{f.name}: no kind for annotation {ann!r}")
    return out


def text(s: str) -> str:
    """`s` as text that can be written: a lone surrogate (`"\\ud800"` in a line reads as one) becomes `?`,
    as nothing downstream (Polars, Parquet, a browser) can encode it."""
    if s.isascii():
        return s
    try:
        s.encode()
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode()
    return s


def _what(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, int):
        return "a number"
    if isinstance(v, float):
        return "a number" if math.isfinite(v) else "not a finite number"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


def _fits(kind: str, v: Any) -> bool:
    if kind == ANY:
        return True
    if kind == STR:
        return isinstance(v, str)
    if kind == BOOL:
        return isinstance(v, bool)
    if kind in (INT, NUM):
        if isinstance(v, bool) or not isinstance(v, int | float):
            return False
        if kind == INT:
            return abs(v) < INT_LIMIT  # False for inf and NaN too
        try:  # math.isfinite converts: an integer no float holds overflows (json.loads keeps it whole)
            return math.isfinite(v)
        except OverflowError:
            return False
    if kind == OBJ:
        return isinstance(v, dict)
    return isinstance(v, list)


def clean(d: dict, cls: type, problems: list[str], where: str = "") -> dict:
    """The fields of `d` that `cls` declares and that hold the right kind of value, nested records cleaned
    too; every field left out for holding the wrong kind is appended to `problems`."""
    out: dict[str, Any] = {}
    for name, (kind, child) in kinds(cls).items():
        v = d.get(name)
        if v is None:
            continue
        if not _fits(kind, v):
            why = "is out of range" if kind in (INT, NUM) and _what(v) == "a number" else f"is {_what(v)}"
            problems.append(f"{where}{name} {why}")
            continue
        if kind == INT:
            v = int(v)
        elif kind == STR:
            v = text(v)
        elif kind == OBJS:
            v = _items(name, v, child, problems, where)
        out[name] = v
    return out


_ITEM = {"turns": "turn", "calls": "call", "plans": "plan", "failed_attempts": "failed attempt"}


def _items(name: str, items: list, child: type | None, problems: list[str], where: str) -> list:
    kept = []
    for i, item in enumerate(items, 1):
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            kept.append(item)  # a record built in memory, not read from a line
        elif not isinstance(item, dict):
            problems.append(f"{where}{_ITEM.get(name, name)} {i} is {_what(item)}")
        elif child is None:
            kept.append(item)
        else:
            kept.append(clean(item, child, problems, f"{where}{_ITEM.get(name, name)} {i}: "))
    return kept


def problems(d: Any, cls: type) -> list[str]:
    """What is wrong with `d` as a record of `cls` (empty when nothing is)."""
    if not isinstance(d, dict):
        return [f"the line holds {_what(d)}, not an object"]
    found: list[str] = []
    clean(d, cls, found)
    return found


def summary(found: list[str]) -> str | None:
    """The problems of one record in a line: the first few, and how many more."""
    if not found:
        return None
    more = len(found) - PROBLEMS_SHOWN
    return "; ".join(found[:PROBLEMS_SHOWN]) + (f" (and {more} more)" if more > 0 else "")
