"""A sample action typed from an action's JSON schema: what `evalkit probe` sends to show one step's result.

Each required field gets a value that fits its schema (`evalkit.values.fitting.example`: its default, the
first of its enum, a number's lowest allowed value, the shortest string of its pattern, as few array items
as it allows). One field may instead take the first action the observation lists as legal (`legal_actions`,
`valid_moves`, ...), and only when that value fits the field's schema: OpenSpiel's `action_id` takes the
first legal id, a text field never gets a number.

An env may say in its state what its schema does not: dm_control's `action_spec` gives the shape and
bounds of its one list of torques. `shaped` writes them into the schema (`minItems`, `maxItems`, the
items' bounds), so that the model, the probe and the random baseline all send an action of that shape.
"""

from __future__ import annotations

import math
from typing import Any

from evalkit.values.fitting import LEGAL, NONE, deref, example, fits, legal_actions

__all__ = ["LEGAL", "NONE", "example", "fits", "legal_actions", "sample_action", "sample_step", "shaped"]


def sample_action(schema: dict, legal: list | None = None, root: dict | None = None) -> dict | None:
    """An action that fits `schema` (an object's JSON schema, as `/schema` or a tool's `inputSchema` gives
    it): every required field filled with a value of its type, the first of the `legal` actions going to
    the first required field it fits. OpenEnv's own `metadata` field is left out. None when a required
    field can be given no value."""
    root = root if root is not None else schema
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    required = [r for r in schema.get("required") or [] if r in props]
    action: dict = {}
    pick = legal[0] if legal else NONE
    for name in required:
        if pick is not NONE and fits(pick, props[name], root):
            action[name], pick = pick, NONE
            continue
        value = example(props[name], root)
        if value is NONE:
            return None
        action[name] = value
    return action


def sample_step(tools: list, legal: list | None = None, skip: str | None = None) -> tuple[str, dict] | None:
    """The first tool (but `skip`, the finishing one) whose arguments `sample_action` can fill, with them;
    None when no tool's can be. `tools` are `evalkit.types.ToolSpec`s (a typed env's one `step` among
    them, whose parameters are its action schema)."""
    for tool in tools:
        if tool.name == skip:
            continue
        args = sample_action(tool.parameters or {}, legal)
        if args is not None:
            return tool.name, args
    return None


def _numbers(value: Any) -> list[float] | None:
    flat = value if isinstance(value, list) else [value]
    if not flat or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in flat):
        return None
    return [float(v) for v in flat]


def shaped(schema: dict, state: dict | None) -> dict:
    """`schema` with the shape of its one list of numbers taken from the env's state (`action_spec`:
    `shape`, `minimum`, `maximum`, as dm_control reports it), and required (an empty one never fits);
    `schema` itself when the state says nothing of it, or the schema has no such list, or has several, or
    already bounds its length."""
    spec = (state or {}).get("action_spec")
    shape = spec.get("shape") if isinstance(spec, dict) else None
    if not isinstance(shape, list) or not shape or not all(isinstance(n, int) and n > 0 for n in shape):
        return schema
    props = schema.get("properties") or {}
    lists = [
        name
        for name, prop in props.items()
        if name != "metadata"
        and (p := deref(prop, schema)).get("type") == "array"
        and deref(p.get("items") or {}, schema).get("type") in ("number", "integer")
    ]
    if len(lists) != 1 or {"minItems", "maxItems"} & set(deref(props[lists[0]], schema)):
        return schema
    prop = dict(deref(props[lists[0]], schema))
    n = math.prod(shape)
    prop["minItems"] = prop["maxItems"] = n
    items = dict(deref(prop.get("items") or {}, schema))
    low, high = _numbers(spec.get("minimum")), _numbers(spec.get("maximum"))
    if low is not None:
        items["minimum"] = max(low)  # one bound for every item: the tightest the spec gives
    if high is not None:
        items["maximum"] = min(high)
    prop["items"] = items
    about = f"{n} number(s)" + (f", each from {max(low):g} to {min(high):g}" if low and high else "")
    prop["description"] = " ".join(filter(None, [str(prop.get("description") or ""), f"({about})"]))
    required = list(schema.get("required") or [])  # an empty list is never the shape it asks for
    return {**schema, "properties": {**props, lists[0]: prop}, "required": [*required, lists[0]]
            if lists[0] not in required else required}  # fmt: skip
