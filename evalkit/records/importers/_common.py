"""What the importers share: the record skeleton, argument and text handling, the harness's own reward and
error kept beside evalkit's verdict, and the note an episode carries when the two part ways."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from evalkit.errors import NOT_JSON
from evalkit.types import FORMAT_VERSION, RESULT_CAP, episode_key


def text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content if p is not None
        ).strip()
    return json.dumps(content, default=str)


def result(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s[:RESULT_CAP]


def parse_args(raw: Any) -> tuple[Any, bool]:
    """(arguments, parse_error): a dict as it is; a string parsed as a JSON object, else kept raw."""
    if isinstance(raw, dict):
        return raw, False
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
        except NOT_JSON:
            return raw, True
        return (v, False) if isinstance(v, dict) else (raw, True)
    return ({}, False) if raw is None else (raw, True)


def rel(root: Path, p: Path) -> str | None:
    """`p` relative to the run directory when the file is there, else None (never a path to nothing)."""
    return p.relative_to(root).as_posix() if p.is_file() else None


def items(v: Any) -> list:
    """A field that should be a list, as one: anything else (a hand-edited or cut file) is empty."""
    return v if isinstance(v, list) else []


def fields(v: Any) -> dict:
    """A field that should be an object, as one: anything else is empty."""
    return v if isinstance(v, dict) else {}


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def finite(v: Any) -> float | None:
    """A number that is a number: NaN and infinity are none (a reward that is not one is no reward)."""
    x = number(v)
    return x if x is not None and math.isfinite(x) else None


def count(v: Any) -> int:
    """A count as an integer; anything else (text, NaN, infinity) is 0."""
    ok = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))
    return int(v) if ok and not isinstance(v, bool) else 0


def repeat_of(ek: dict, repeats: Counter, model: str, task: str) -> int:
    """An episode's repeat: the one evalkit's own fields kept (`ek`), else the next of (model, task) in the
    order the run is read (`repeats` counts them)."""
    if isinstance(ek.get("repeat"), int):
        return ek["repeat"]
    repeats[(model, task)] += 1
    return repeats[(model, task)] - 1


def whole_cost(costs: list[float | None]) -> float | None:
    """A foreign episode's cost: the sum of its parts' costs when each says it (a part is no whole), else
    None (an unknown cost is null, never the part that is known)."""
    return sum(c for c in costs if c is not None) if costs and None not in costs else None


def summed_usage(turns: list[dict]) -> dict:
    """The turns' token counts, summed key by key."""
    out: dict = {}
    for t in turns:
        for k, v in (t.get("usage") or {}).items():
            out[k] = out.get(k, 0) + count(v)
    return out


def skeleton(
    model: str, env: str, surface: str, mode: str, task_id: str, skin: str | None, repeat: int,
    job: tuple[str, str | None],
) -> dict:  # fmt: skip
    """The identity fields of an imported episode. `job` is (task, skin) as the harness itself tells jobs
    apart (its resume key), so that a later record of the same job gets the same key and replaces it."""
    return {
        "format_version": FORMAT_VERSION,
        "key": episode_key(model, env, surface, mode, job[0], job[1], repeat),
        "model": model,
        "env": env,
        "surface": surface,
        "mode": mode,
        "task_id": task_id,
        "skin": skin,
        "repeat": repeat,
    }


def harness(rec: dict, reward: float | None, error: Any) -> None:
    """Keep what the harness itself recorded for the episode, whatever evalkit makes of it: its own reward
    (`info.harness_reward`, null where it wrote none) and its own error (`info.harness_error`). The
    `harness_reward` and `harness_error` columns of `load_runs` come from these, and `summarise(...,
    as_harness=True)` rebuilds the harness's own summary from them."""
    rec["info"]["harness_reward"] = reward
    rec["info"]["harness_error"] = str(error) if error else None


def unscored(rec: dict, why: str) -> None:
    """Mark `rec` unscored by evalkit's rule where the harness scored it, saying why in `info`: a comparison
    with the harness's own numbers (`info.harness_reward`) then explains itself."""
    rec["reward"] = None
    rec["info"]["unscored_because"] = why


def declared_tools(defs: Any) -> list[dict] | None:
    """Tool definitions as a harness declared them to the model (OpenAI's function shape, `{"type":
    "function", "function": {...}}`, or a plain `{"name", "description", "parameters"}`), in the shape a
    record's transcript keeps them (`evalkit.records.transcripts.tools`); None when there are none."""
    out = []
    for d in defs if isinstance(defs, list) else []:
        d = d.get("function") if isinstance(d, dict) and isinstance(d.get("function"), dict) else d
        d = d.model_dump() if hasattr(d, "model_dump") else d
        if isinstance(d, dict) and isinstance(d.get("name"), str) and d["name"]:
            params = d.get("parameters")
            params = params.model_dump(exclude_none=True) if hasattr(params, "model_dump") else params
            params = params if isinstance(params, dict) else {"type": "object"}
            out.append(
                {"name": d["name"], "description": str(d.get("description") or ""), "parameters": params}
            )
    return out or None
