"""Scripted agents that fail in known ways at known turns, for the scanners' tests and benchmark.

`plan(kind, seed)` is an episode's script on the canvas env's tools surface (budget `MAX_TURNS`): honest work
(distinct shapes, a look at the canvas now and then, a submit well after the first quarter of the budget),
with one failure planted at a known turn, or none (`clean`, which plants near misses instead: a call sent
twice, one failing call then a corrected one, two errors in a row). `TRUTH[kind]` is the scanner that must
fire, and `Plan.step` the turn it must point to; every other built-in must stay quiet.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from evalkit.errors import EndpointError
from evalkit.types import AgentOptions, Attempt, Call, ToolSpec, Turn, Usage

MAX_TURNS = 16
KINDS = ("clean", "loop", "retry", "streak", "unknown", "give_up", "early", "output_limit", "refusal",
         "context", "infra")  # fmt: skip
TRUTH = {
    "clean": None, "loop": "repeated_call", "retry": "retry_unchanged", "streak": "error_streak",
    "unknown": "unknown_tool", "give_up": "no_tool_call", "early": "early_finish",
    "output_limit": "output_limit", "refusal": "refusal", "context": "context_overflow",
    "infra": "infra_error",
}  # fmt: skip

Action = list[tuple[str, dict]] | Turn | Exception


@dataclass
class Plan:
    kind: str
    step: int | None
    """The turn the planted failure is at (None for a clean episode)."""
    turns: list[Action] = field(default_factory=list)


def _shape(rng: random.Random, n: int) -> tuple[str, dict]:
    kind = rng.choice(("rect", "ellipse", "rect", "line"))
    return "add_element", {"kind": kind, "x": 20 + 37 * n % 600, "y": 15 + 53 * n % 450,
                           "width": rng.randint(20, 200), "height": rng.randint(20, 150),
                           "fill": f"#{rng.randrange(16**6):06x}"}  # fmt: skip


def _work(rng: random.Random, t: int) -> list[tuple[str, dict]]:
    """Honest work of turn `t`: a new shape, and now and then a look at the canvas."""
    out = [_shape(rng, t)]
    if t % 4 == 3:
        out.append(("view_canvas", {}))
    return out


def plan(kind: str, seed: int) -> Plan:
    """The script of one episode of `kind` (see the module doc)."""
    rng = random.Random(f"{kind}-{seed}")
    submit = rng.randint(9, 11)  # after the first quarter of the budget, and after any planted failure
    k = rng.randint(2, 5)
    turns: dict[int, Action] = {t: _work(rng, t) for t in range(1, submit)}
    step: int | None = k
    if kind == "clean":
        step = None
        miss = rng.choice(("twice", "fix", "two_errors", "plain"))
        if miss == "twice":  # the same call twice in a row, between other calls
            turns[k] = [_shape(rng, 40 + k), ("view_canvas", {})]
            turns[k + 1] = [("view_canvas", {}), _shape(rng, 41 + k)]
        elif miss == "fix":
            turns[k] = [("update_element", {"id": "e90", "fill": "#222222"})]
            turns[k + 1] = [("update_element", {"id": "e1", "fill": "#222222"})]
        elif miss == "two_errors":
            turns[k] = [
                ("delete_element", {"id": "e91"}),
                ("update_element", {"id": "e92", "fill": "#333333"}),
            ]
    elif kind == "loop":
        for t in range(k, k + 4):
            turns[t] = [("get_document", {})]
    elif kind == "retry":  # the failure is the retry, a turn after the error
        turns[k] = turns[k + 1] = [("update_element", {"id": "e999", "fill": "#123456"})]
        step = k + 1
    elif kind == "streak":
        turns[k] = [("update_element", {"id": "e991", "fill": "#111111"})]
        turns[k + 1] = [("delete_element", {"id": "e992"})]
        turns[k + 2] = [("update_element", {"id": "e993", "x": 5})]
    elif kind == "unknown":
        turns[k] = [("draw_star", {"x": 100, "y": 100, "points": 5})]
    elif kind == "give_up":
        for t in range(k, submit):
            turns[t] = Turn(text="I cannot work out how to recreate this; I will stop here.", stop="end_turn")
    elif kind == "early":
        step = rng.choice((1, 2))
        return Plan(kind, step, [_work(rng, 1)] * (step - 1) + [[("submit", {})]])
    elif kind == "output_limit":
        turns[k] = Turn(reasoning="Let me think about every shape. " * 300, stop="max_tokens", truncated=True,
                        usage=Usage(output=16000))  # fmt: skip
    elif kind == "refusal":
        turns[k] = Turn(text="I can't help with this request.", stop="refusal")
    elif kind == "context":
        turns[k] = Turn(text="", stop="model_context_window_exceeded")
    elif kind == "infra":
        turns[k] = EndpointError(
            "server_error: 503 (planted)", 503, [Attempt(status=503, kind="server_error", error="planted")]
        )
    return Plan(kind, step, [turns[t] for t in range(1, submit)] + [[("submit", {})]])


class Planted:
    """Plays a `Plan` through the Agent protocol."""

    def __init__(self, p: Plan, system: str, tools: list[ToolSpec], options: AgentOptions):
        self.plan, self.model = p, f"planted:{p.kind}"
        self._turns = list(p.turns)
        self._n = 0

    def user(self, text, images=()):
        pass

    def results(self, pairs):
        pass

    def notes(self, text):
        pass

    def prune_images(self, keep, window=None):
        pass

    def step(self) -> Turn:
        if not self._turns:
            return Turn(text="(done)", stop="end_turn")
        nxt = self._turns.pop(0)
        if isinstance(nxt, Exception):
            raise nxt
        if isinstance(nxt, Turn):
            return nxt
        calls = []
        for name, args in nxt:
            self._n += 1
            calls.append(Call(f"call_{self._n}", name, dict(args)))
        return Turn(text=f"working: {', '.join(n for n, _ in nxt)}", calls=calls, stop="tool_use",
                    usage=Usage(input=100, output=20))  # fmt: skip


def factory(kind: str, seed: int):
    """An agent factory for `run_episode`, labelled `planted:<kind>`, and its plan."""
    p = plan(kind, seed)

    def make(*, system, tools, options):
        return Planted(p, system, tools, options)

    make.model = f"planted:{kind}"
    return make, p
