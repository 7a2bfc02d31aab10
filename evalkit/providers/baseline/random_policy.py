"""`baseline:random`: random schema-valid calls for a random number of turns, then the finishing tool if
there is one (`submit`, or a `submit_…` tool such as berth's `submit_plan`).

Works for any environment by drawing arguments from each tool's JSON schema; when the canvas tools are
present it mostly adds random shapes inside the canvas, and a tool that takes a berth plan gets a random
plan of the right shape (every vessel of the situation, each at a random berth and start hour). Its score
is a floor that still exercises the tools.
"""

from __future__ import annotations

import json
import random
import string

from . import CanvasInfo, Plan, ScriptedAgent, canvas_info, seed_for
from .greedy import Port, parse_port

WORDS = ("hello", "lorem", "ipsum", "data", "alpha", "beta", "note", "item", "value", "test")
KINDS = ("rect", "ellipse", "line", "text")
CANVAS_WEIGHTS = {
    "add_element": 12,
    "update_element": 2,
    "delete_element": 1,
    "set_background": 1,
    "view_canvas": 1,
    "get_document": 1,
}


def _colour(rng: random.Random) -> str:
    return "#" + "".join(rng.choice("0123456789abcdef") for _ in range(6))


def _pick_type(schema: dict, rng: random.Random) -> dict:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return {**{k: v for k, v in schema.items() if k != key}, **rng.choice(options)}
    t = schema.get("type")
    if isinstance(t, list):
        ts = [x for x in t if x != "null"] or t
        return {**schema, "type": rng.choice(ts)}
    return schema


def random_value(
    schema: dict,
    rng: random.Random,
    name: str = "",
    ids: list[str] | None = None,
    canvas: CanvasInfo | None = None,
):
    """A random value valid for `schema`, nudged by the argument's name (colours, ids, coordinates)."""
    schema = _pick_type(schema or {}, rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    t = schema.get("type", "string")
    lname = name.lower()
    if t == "string":
        if any(k in lname for k in ("color", "colour", "fill", "stroke", "background")):
            return _colour(rng)
        if lname == "id" or lname.endswith("_id"):
            return rng.choice(ids) if ids else "e1"
        if lname == "kind":
            return rng.choice(KINDS)
        if "text" in lname:
            return rng.choice(WORDS).capitalize()
        n = rng.randint(max(1, schema.get("minLength", 1)), max(1, min(schema.get("maxLength", 10), 10)))
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))
    if t in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", None))
        if hi is None:
            hi = _default_high(lname, canvas, lo)
        value = rng.uniform(lo, max(lo, hi))
        return int(round(value)) if t == "integer" else round(value, 1)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "array":
        item = schema.get("items", {})
        return [random_value(item, rng, name, ids, canvas) for _ in range(rng.randint(0, 3))]
    if t == "object":
        return random_args(schema, rng, ids, canvas)
    return None


def _default_high(lname: str, canvas: CanvasInfo | None, lo: float) -> float:
    span_x = 1000 if canvas and canvas.normalized else (canvas.width if canvas else 100)
    span_y = 1000 if canvas and canvas.normalized else (canvas.height if canvas else 100)
    if lname in ("x", "width"):
        return span_x
    if lname in ("y", "height"):
        return span_y
    if "font" in lname:
        return 48
    if "stroke" in lname or "radius" in lname:
        return 8
    return lo + 100


def random_args(
    schema: dict, rng: random.Random, ids: list[str] | None = None, canvas: CanvasInfo | None = None
) -> dict:
    props = (schema or {}).get("properties", {}) or {}
    required = set((schema or {}).get("required", []) or [])
    out = {}
    for name, sub in props.items():
        if name in required or rng.random() < 0.5:
            value = random_value(sub, rng, name, ids, canvas)
            if value is not None or name in required:
                out[name] = value
    return out


class RandomAgent(ScriptedAgent):
    name = "random"

    def _canvas_add(self, rng: random.Random, canvas: CanvasInfo) -> dict:
        kind = rng.choice(KINDS)
        x0, y0 = rng.uniform(0, canvas.width * 0.9), rng.uniform(0, canvas.height * 0.9)
        w = rng.uniform(10, canvas.width - x0)
        h = rng.uniform(10, canvas.height - y0)
        x, y = canvas.to_tool(x0, y0)
        tw, th = canvas.to_tool(w, h)
        args = {
            "kind": kind,
            "x": round(x, 1),
            "y": round(y, 1),
            "width": round(tw, 1),
            "height": round(th, 1),
        }
        if kind == "line":
            args.update(stroke=_colour(rng), stroke_width=rng.randint(1, 6))
        else:
            args["fill"] = _colour(rng)
        if kind == "text":
            args.update(text=rng.choice(WORDS).capitalize(), font_size=rng.choice((12, 16, 24, 32)))
        return args

    def _args(self, name: str, rng: random.Random, ids: list[str], canvas: CanvasInfo) -> dict:
        params = self.tools_by_name[name].parameters
        if "plan" in (params.get("properties") or {}) and self.port is not None:
            return {"plan": random_plan(self.port, self.plan_rng)}
        return random_args(params, rng, ids, canvas)

    def task(self) -> str:
        """What tells this episode's task apart: the instructions, the opening message and its pictures (a
        reference-mode canvas task differs from the next only by its target image)."""
        pictures = "".join(im.sha256 for im in self.images)
        return "\n".join((self.system, *self.messages[:1], pictures))

    def policy(self) -> Plan:
        # Seeded per task: seeded by the instructions alone, every task of a surface and mode (the same
        # instructions) got the same moves, and 60 tasks ended in 3 distinct designs.
        rng = random.Random(seed_for(self.task(), self.options, self.name))
        canvas = canvas_info(self.system)
        self.tools_by_name = tools = {t.name: t for t in self.tools}
        self.port = next((p for p in map(parse_port, self.messages) if p is not None), None)
        # Plans draw from the situation's own seed: every berth task has the same instructions.
        self.plan_rng = random.Random(
            seed_for(self.system + "".join(self.messages[:1]), self.options, "plan")
        )
        is_canvas = "add_element" in tools
        finish = next((n for n in tools if n == "submit" or n.startswith("submit_")), None)
        choices = [n for n in tools if n != finish]
        weights = [CANVAS_WEIGHTS.get(n, 0.5) if is_canvas else 1.0 for n in choices]
        ids: list[str] = []
        n_turns = rng.randint(2, 8)
        for turn in range(n_turns):
            calls = []
            for _ in range(rng.randint(1, 3) if choices else 0):
                name = rng.choices(choices, weights)[0]
                if is_canvas and name == "add_element":
                    args = self._canvas_add(rng, canvas)
                else:
                    args = self._args(name, rng, ids, canvas)
                calls.append((name, args))
            pairs = yield (
                f"random turn {turn + 1}/{n_turns}: {', '.join(n for n, _ in calls) or 'nothing'}",
                calls,
            )
            for _call, outcome in pairs or []:
                found = _id_in(outcome.text)
                if found and not outcome.is_error:
                    ids.append(found)
        if finish is not None:
            yield "submitting", [(finish, self._args(finish, rng, ids, canvas))]


def random_plan(port: Port, rng: random.Random) -> list[dict]:
    """Every vessel once, each at a random berth and a random start hour within the horizon."""
    return [
        {"vessel": s.id, "berth": rng.choice(port.berths), "start": rng.randint(0, port.horizon)}
        for s in port.ships
    ]


def _id_in(text: str) -> str | None:
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    return data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
