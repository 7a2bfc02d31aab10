"""`baseline:random`: random schema-valid calls for a random number of turns, then the finishing tool if
there is one (`submit`, or a `submit_…` tool such as berth's `submit_plan`).

Works for any environment by drawing arguments that fit each tool's JSON schema (its enums, bounds,
patterns and item counts: `evalkit.values.fitting`), a required field taking one of the actions the env lists
as legal where the model is shown such a list (OpenSpiel's `legal_actions`); when the canvas tools are
present it mostly adds random shapes inside the canvas, and a tool that takes a berth plan gets a random
plan of the right shape (every vessel of the situation, each at a random berth and start hour). Its score
is a floor that still exercises the tools.
"""

from __future__ import annotations

import json
import random

from evalkit.values import fitting

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


def _nudged(schema: dict, rng: random.Random, name: str, ids: list[str] | None, canvas: CanvasInfo | None):
    """A value its name suggests (a colour, an element id, a shape kind, a word, a coordinate within the
    canvas), for a schema that says only its type; NONE otherwise."""
    kind = schema.get("type")
    lname = name.lower()
    if kind == "string" and not {"pattern", "enum", "const", "format"} & set(schema):
        if any(k in lname for k in ("color", "colour", "fill", "stroke", "background")):
            return _colour(rng)
        if lname == "id" or lname.endswith("_id"):
            return rng.choice(ids) if ids else "e1"
        if lname == "kind":
            return rng.choice(KINDS)
        if "text" in lname:
            return rng.choice(WORDS).capitalize()
    if kind in ("integer", "number") and "maximum" not in schema and "exclusiveMaximum" not in schema:
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = rng.uniform(lo, max(lo, _default_high(lname, canvas, lo)))
        return int(round(value)) if kind == "integer" else round(value, 1)
    return fitting.NONE


def random_value(
    schema: dict,
    rng: random.Random,
    name: str = "",
    ids: list[str] | None = None,
    canvas: CanvasInfo | None = None,
    root: dict | None = None,
):
    """A random value valid for `schema` (`evalkit.values.fitting`: its enum, bounds, pattern, item counts),
    nudged by the argument's name (colours, ids, coordinates) where the schema leaves room; None when no
    value fits."""
    root = root if root is not None else schema
    schema = fitting.deref(schema or {}, root)
    for key in ("anyOf", "oneOf"):  # one alternative (not a bare null), so that its name can nudge it
        options = [o for o in schema.get(key) or [] if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            rest = {k: v for k, v in schema.items() if k != key}
            return random_value({**rest, **rng.choice(options)}, rng, name, ids, canvas, root)
    nudged = _nudged(schema, rng, name, ids, canvas)
    if nudged is not fitting.NONE and fitting.fits(nudged, schema, root):
        return nudged
    if schema.get("type") == "object" and schema.get("properties"):
        return random_args(schema, rng, ids, canvas, root)
    value = fitting.draw(schema, rng, root)
    return None if value is fitting.NONE else value


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
    schema: dict,
    rng: random.Random,
    ids: list[str] | None = None,
    canvas: CanvasInfo | None = None,
    root: dict | None = None,
    legal: list | None = None,
) -> dict:
    """Random arguments for a tool: every required field and, at even odds, each optional one (never
    OpenEnv's own `metadata`); a random one of the `legal` actions the env lists goes to the first
    required field it fits."""
    root = root if root is not None else schema
    props = (schema or {}).get("properties", {}) or {}
    required = [r for r in (schema or {}).get("required", []) or [] if r in props]
    pick = rng.choice(legal) if legal else fitting.NONE
    out = {}
    for name, sub in props.items():
        if name == "metadata" and name not in required:
            continue
        if name in required and pick is not fitting.NONE and fitting.fits(pick, sub, root):
            out[name], pick = pick, fitting.NONE
            continue
        if name in required or rng.random() < 0.5:
            value = random_value(sub, rng, name, ids, canvas, root)
            if value is not None or name in required:
                out[name] = value
    return out


class RandomAgent(ScriptedAgent):
    name = "random"
    legal: list = []

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
        return random_args(params, rng, ids, canvas, legal=self.legal)

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
        # The actions the env lists as legal now (OpenSpiel's `legal_actions`), as the model reads them.
        self.legal = fitting.legal_in_text(self.messages[0] if self.messages else "")
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
                listed = fitting.legal_actions(outcome.metadata) or fitting.legal_in_text(outcome.text)
                if listed and not outcome.is_error:
                    self.legal = listed
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
