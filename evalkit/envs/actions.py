"""A sample action typed from an action's JSON schema: what `evalkit probe` sends to show one step's result.

Each required field gets a value of its own type: its default, the first of its enum, a number's minimum,
false, an empty string or list. One field may instead take the first action the observation lists as
legal (`legal_actions`, `valid_moves`, ...), and only when that value fits the field's schema: OpenSpiel's
`action_id` takes the first legal id, a text field never gets a number.
"""

from __future__ import annotations

from typing import Any

LEGAL = ("legal", "valid", "available", "allowed")
"""Words in the name of an observation field or metadata key that lists the actions the env accepts now."""

NONE = object()
"""No value fits the schema."""

_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int, float),  # 2.0 is an integer to JSON Schema; 2.5 is refused below
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def legal_actions(*sources: dict) -> list:
    """The first non-empty list under a key naming legal actions, in `sources` (metadata, observation)."""
    for source in sources:
        for key, value in (source or {}).items():
            if any(w in str(key).lower() for w in LEGAL) and isinstance(value, list) and value:
                return value
    return []


def _deref(prop: Any, root: dict, depth: int = 0) -> Any:
    ref = prop.get("$ref") if isinstance(prop, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/") or depth > 8:
        return prop
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, dict) else None
    return _deref(target or {}, root, depth + 1)


def fits(value: Any, prop: Any, root: dict, depth: int = 0) -> bool:
    """Whether `value` is of the type `prop` asks (its `type`, `enum`, `const`, bounds, or one of its
    `anyOf` / `oneOf`); a schema that says nothing accepts anything."""
    prop = _deref(prop, root)
    if not isinstance(prop, dict) or depth > 6:
        return False
    if "enum" in prop:
        return value in prop["enum"]
    if "const" in prop:
        return value == prop["const"]
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        return any(fits(value, o, root, depth + 1) for o in options)
    kinds = prop.get("type")
    if kinds is None:
        return True
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if isinstance(value, bool) and "boolean" not in kinds:  # a bool is an int to Python, not to JSON
        return False
    if not any(isinstance(value, _TYPES.get(k, ())) for k in kinds):
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "integer" in kinds and "number" not in kinds and not float(value).is_integer():
            return False
        low, high = prop.get("minimum"), prop.get("maximum")
        return (low is None or value >= low) and (high is None or value <= high)
    return True


def example(prop: Any, root: dict, depth: int = 0) -> Any:
    """A value that fits the JSON schema `prop` (`$ref`s resolved in `root`), or NONE."""
    prop = _deref(prop, root)
    if depth > 4 or not isinstance(prop, dict):
        return NONE
    if prop.get("default") is not None:
        return prop["default"]
    for key in ("enum", "examples"):
        if isinstance(prop.get(key), list) and prop[key]:
            return prop[key][0]
    if "const" in prop:
        return prop["const"]
    for key in ("anyOf", "oneOf"):
        for option in prop.get(key) or []:
            if isinstance(option, dict) and option.get("type") != "null":
                value = example(option, root, depth + 1)
                if value is not NONE:
                    return value
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind in ("integer", "number"):
        low = prop.get("minimum")
        if low is None and "exclusiveMinimum" in prop:
            low = prop["exclusiveMinimum"] + (1 if kind == "integer" else 0.5)
        low = 0 if low is None else low
        return int(low) if kind == "integer" else low
    if kind == "array" and prop.get("minItems"):
        item = example(prop.get("items") or {}, root, depth + 1)
        return NONE if item is NONE else [item] * int(prop["minItems"])
    if kind == "object" and prop.get("properties"):
        return sample_action(prop, root=root) or NONE
    return {"boolean": False, "string": "", "array": [], "object": {}}.get(kind, NONE)


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
