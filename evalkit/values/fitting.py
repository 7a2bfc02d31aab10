"""Values that fit a JSON schema: the probe's sample action (`example`), `baseline:random`'s draws (`draw`).

Both the probe (through `evalkit.envs.client.actions`) and the random baseline (a provider, which never
imports an env) use it, so it sits below both, in `evalkit.values`. A value keeps within the schema's own
limits: its `default`, `enum` and `const`; a number's minimum and maximum (exclusive ones too) and
`multipleOf`; a string's `pattern` (drawn from the regular expression by rstr) and length; an array's item
count and items; an object's required fields. `fits` is jsonschema's verdict on a value, and every value made
here is checked by it: a schema no value can be made for gives NONE rather than a value the env would refuse.

Envs also say which actions are legal now, in their observation (OpenSpiel's `legal_actions`, chess's
`legal_moves`): `legal_actions` finds such a list in dicts, `legal_in_text` in the text a model is sent.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

NONE: Any = object()
"""No value fits the schema."""

LEGAL = ("legal", "valid", "available", "allowed")
"""Words in the name of an observation field or metadata key that lists the actions the env accepts now."""

_MAX_DEPTH = 6
_PATTERN_TRIES = 8
"""Strings drawn from a pattern before giving up on one that also keeps the schema's length limits."""


def deref(prop: Any, root: dict, depth: int = 0) -> Any:
    """`prop` with its `$ref` (a local `#/...` pointer into `root`) followed."""
    ref = prop.get("$ref") if isinstance(prop, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/") or depth > 8:
        return prop
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, dict) else None
    return deref(target or {}, root, depth + 1)


def fits(value: Any, prop: Any, root: dict | None = None) -> bool:
    """Whether `value` is valid for the JSON schema `prop` (its `$ref`s resolved in `root`), as jsonschema
    judges it; a schema jsonschema cannot read (an unknown type) accepts nothing."""
    # start-up: jsonschema (and rfc3987 with it) only where a schema is checked
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError, UnknownType

    if not isinstance(prop, dict):
        return prop is True
    schema = dict(prop)
    for key in ("$defs", "definitions"):  # so that `#/$defs/...` resolves from this sub-schema
        if isinstance((root or {}).get(key), dict) and key not in schema:
            schema[key] = root[key]
    try:
        return Draft202012Validator(schema).is_valid(value)
    except (UnknownType, SchemaError, RecursionError, re.error):
        return False


def _options(prop: dict) -> list[dict]:
    """A schema's alternatives (`anyOf` / `oneOf`), those that are not a bare null first; [] for none."""
    options = [o for o in (prop.get("anyOf") or prop.get("oneOf") or []) if isinstance(o, dict)]
    return sorted(options, key=lambda o: o.get("type") == "null")


def _kind(prop: dict) -> str | None:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    return kind if isinstance(kind, str) else None


def _bounds(prop: dict, integer: bool) -> tuple[float, float]:
    """The lowest and highest value a number may take (±inf where unbounded)."""
    low, high = prop.get("minimum"), prop.get("maximum")
    low = -math.inf if not isinstance(low, int | float) else low
    high = math.inf if not isinstance(high, int | float) else high
    above, below = prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")
    above = above if isinstance(above, int | float) else None
    below = below if isinstance(below, int | float) else None
    if integer:
        low = low if above is None else max(low, math.floor(above) + 1)
        high = high if below is None else min(high, math.ceil(below) - 1)
    else:  # half a unit inside an exclusive bound, or halfway to the other bound when that is nearer
        if above is not None:
            room = (min(high, below if below is not None else math.inf) - above) / 2
            low = max(low, above + min(0.5, room))
        if below is not None:
            room = (below - max(low, above if above is not None else -math.inf)) / 2
            high = min(high, below - min(0.5, room))
    if integer:
        low, high = math.ceil(low) if low > -math.inf else low, math.floor(high) if high < math.inf else high
    return low, high


def _number(prop: dict, integer: bool, rng: random.Random | None, spread: float = 100.0) -> Any:
    low, high = _bounds(prop, integer)
    if low > high:
        return NONE
    if rng is None:  # the example: the lowest value it may take, else 0 (or the highest, if that is < 0)
        value = low if low > -math.inf else min(0, high)
    else:
        lo = low if low > -math.inf else (min(0, high) - spread if high < math.inf else 0)
        hi = high if high < math.inf else lo + spread
        value = rng.uniform(lo, hi)
    step = prop.get("multipleOf")
    if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
        value = math.ceil(value / step) * step
        if value > high:
            return NONE
    if integer:
        return int(round(value))
    return value if rng is None else round(value, 3)


def _string(prop: dict, rng: random.Random | None) -> Any:
    low = int(prop.get("minLength") or 0)
    high = prop.get("maxLength")
    pattern = prop.get("pattern")
    if isinstance(pattern, str):
        # start-up: rstr only to make a value for a pattern
        import rstr

        maker = rstr.Rstr(rng if rng is not None else random.Random(0))
        drawn = []
        for _ in range(_PATTERN_TRIES):
            try:
                text = maker.xeger(pattern)
            except (re.error, ValueError, IndexError, TypeError):
                return NONE
            if len(text) >= low and (high is None or len(text) <= high):
                drawn.append(text)
                if rng is not None:
                    break
        return min(drawn, key=len) if drawn else NONE
    if rng is None:
        return "a" * low
    n = rng.randint(max(1, low), max(max(1, low), min(int(high) if high is not None else 10, 10)))
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def _array(prop: dict, root: dict, rng: random.Random | None, depth: int) -> Any:
    low = int(prop.get("minItems") or 0)
    high = prop.get("maxItems")
    if rng is None:
        n = low
    else:
        top = int(high) if isinstance(high, int) else max(low, 3)
        n = rng.randint(low, max(low, top))
    prefix = prop.get("prefixItems") if isinstance(prop.get("prefixItems"), list) else []
    items = []
    for i in range(n):
        sub = prefix[i] if i < len(prefix) else prop.get("items", {})
        value = _make(sub if isinstance(sub, dict) else {}, root, rng, depth + 1)
        if value is NONE:
            return NONE
        items.append(value)
    if prop.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in items}) < len(items):
        return NONE if rng is None else _make(prop, root, None, depth + 1)
    return items


def _object(prop: dict, root: dict, rng: random.Random | None, depth: int) -> Any:
    props = prop.get("properties") or {}
    out = {}
    for name, sub in props.items():
        if name == "metadata" and name not in (prop.get("required") or []):
            continue
        if name in (prop.get("required") or []) or (rng is not None and rng.random() < 0.5):
            value = _make(sub, root, rng, depth + 1)
            if value is NONE:
                if name in (prop.get("required") or []):
                    return NONE
                continue
            out[name] = value
    return out


def _make(prop: Any, root: dict, rng: random.Random | None, depth: int = 0) -> Any:
    prop = deref(prop, root)
    if not isinstance(prop, dict) or depth > _MAX_DEPTH:
        return NONE
    if "const" in prop:
        return prop["const"]
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0] if rng is None else rng.choice(prop["enum"])
    if rng is None:
        for key in ("default", "examples"):
            value = prop.get(key)
            value = value[0] if key == "examples" and isinstance(value, list) and value else value
            if value is not None and key in prop and fits(value, prop, root):
                return value
    options = _options(prop)
    if options:
        if rng is not None:
            options = [o for o in options if o.get("type") != "null"] or options
            rng.shuffle(options)
        for option in options:
            merged = {**{k: v for k, v in prop.items() if k not in ("anyOf", "oneOf")}, **deref(option, root)}
            value = _make(merged, root, rng, depth + 1)
            if value is not NONE:
                return value
        return NONE
    kind = _kind(prop)
    if kind == "integer" or kind == "number":
        return _number(prop, kind == "integer", rng)
    if kind == "string":
        return _string(prop, rng)
    if kind == "boolean":
        return False if rng is None else rng.random() < 0.5
    if kind == "array":
        return _array(prop, root, rng, depth)
    if kind == "object" or (kind is None and "properties" in prop):
        return _object(prop, root, rng, depth)
    if kind == "null":
        return None
    return NONE if kind is not None else ("" if rng is None else _string({}, rng))


def example(prop: Any, root: dict | None = None) -> Any:
    """A value that fits the schema `prop` (`$ref`s resolved in `root`), the same each time: its default,
    the first of its enum, a number's lowest allowed value, the shortest string of its pattern, an array
    of as few items as it allows; NONE when none can be made."""
    root = root if root is not None else prop
    value = _make(prop, root, None)
    return value if value is NONE or fits(value, prop, root) else NONE


def draw(prop: Any, rng: random.Random, root: dict | None = None) -> Any:
    """A random value that fits the schema `prop`; NONE when none can be made. Optional fields of an object
    are filled at random, each with even odds."""
    root = root if root is not None else prop
    for _ in range(4):
        value = _make(prop, root, rng)
        if value is not NONE and fits(value, prop, root):
            return value
    return example(prop, root)


def legal_actions(*sources: dict | None) -> list:
    """The first non-empty list under a key naming legal actions, in `sources` (metadata, observation)."""
    for source in sources:
        for key, value in (source or {}).items():
            if any(w in str(key).lower() for w in LEGAL) and isinstance(value, list) and value:
                return value
    return []


_LINE = re.compile(r"^([A-Za-z_][\w ]*?):[ \t]*(\[.*\])[ \t]*$", re.M)


def legal_in_text(text: str) -> list:
    """The legal actions a text a model was sent lists, as `legal_actions: [0, 3, 5]` lines (how an
    observation's fields are written for it); the last such list wins. [] when it lists none."""
    found: list = []
    for key, value in _LINE.findall(text or ""):
        if not any(w in key.lower() for w in LEGAL):
            continue
        try:
            listed = json.loads(value)
        except ValueError:
            continue
        if isinstance(listed, list) and listed:
            found = listed
    return found
