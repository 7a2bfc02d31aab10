"""How a recorded call is told from another and shown in a line: what the scanners' rules
(`evalkit.scanners.rules`) and the first step where two trajectories part (`evalkit.analysis.why`) compare.

A call's identity is its tool name and its arguments as canonical JSON (keys sorted): two calls written with
their keys in another order are the same call; arguments that did not parse (a string) are compared as
written. Works on a `CallRecord` and on anything with its `name` and `args`.
"""

from __future__ import annotations

from typing import Any

import msgspec

_ENCODE = msgspec.json.Encoder(order="sorted").encode
SHOWN = 100
"""Characters of an argument list, a result or a text quoted in a line."""


def identity(call: Any) -> tuple[str, bytes]:
    """(tool name, canonical JSON of its arguments)."""
    args = call.args
    try:
        body = _ENCODE(args)
    except (TypeError, msgspec.EncodeError):
        body = repr(args).encode()
    return call.name or "", body


def short(text: Any, n: int = SHOWN) -> str:
    """`text` on one line, cut to `n` characters with an ellipsis."""
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def shown(call: Any, n: int = SHOWN) -> str:
    """A call as a line shows it: `update_element {"id":"e9"}`."""
    args = call.args
    try:
        text = args if isinstance(args, str) else _ENCODE(args).decode() if args is not None else ""
    except (TypeError, msgspec.EncodeError):
        text = repr(args)
    return f"{call.name} {short(text, n)}".strip()
