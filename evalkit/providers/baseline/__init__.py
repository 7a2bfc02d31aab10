"""`baseline:<name>` — honest non-LLM policies that act only through the environment's tools.

- `baseline:tracer` segments the reference image into flat shapes (or reads the written brief), adds them,
  compares `view_canvas` with the target, corrects, submits.
- `baseline:random` makes random schema-valid calls for a random number of turns, then submits (random
  plans, vessel by vessel, where a tool takes a berth plan).
- `baseline:greedy` plans berths first come, first served, checks the plan once and submits it.

Each policy is a generator: it yields `(text, [(tool name, args), ...])` for one turn and receives the list of
`(Call, ToolOutcome)` pairs of that turn. They use no tokens and are never presented as models.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from evalkit.errors import ConfigError
from evalkit.types import AgentOptions, Call, Image, ToolOutcome, ToolSpec, Turn, Usage

Plan = Generator[tuple[str, list[tuple[str, dict]]], "list[tuple[Call, ToolOutcome]] | None", None]


@dataclass
class CanvasInfo:
    """What the instructions say about the canvas: its pixel size and the coordinate space tools take."""

    width: int = 800
    height: int = 600
    normalized: bool = False

    def to_tool(self, x: float, y: float) -> tuple[float, float]:
        """Canvas pixels → the space tool arguments use (the same for positions and extents)."""
        if self.normalized:
            return x * 1000.0 / self.width, y * 1000.0 / self.height
        return x, y


_SIZE = re.compile(r"(\d{2,5})\s*(?:x|×|by)\s*(\d{2,5})(?:\s*(?:px|pixels))?", re.I)
_NORMALIZED = re.compile(
    r"coordinates?[^.\n]{0,60}\bnormali[sz]ed\b|\bnormali[sz]ed\b[^.\n]{0,40}0\s*[-–to ]+\s*1000", re.I
)
_PIXEL = re.compile(r"coordinates?[^.\n]{0,40}\b(?:are|in)\b[^.\n]{0,20}\bpixels?\b", re.I)


def canvas_info(system: str, metadata: dict | None = None) -> CanvasInfo:
    """Read canvas size and coordinate space from the instructions (metadata wins when the loop passes it)."""
    info = CanvasInfo()
    m = _SIZE.search(system or "")
    if m:
        info.width, info.height = int(m.group(1)), int(m.group(2))
    n, p = _NORMALIZED.search(system or ""), _PIXEL.search(system or "")
    info.normalized = bool(n) and (not p or n.start() < p.start())
    return info


def seed_for(system: str, options: AgentOptions | None, name: str) -> int:
    """Reproducible per episode: the same instructions and seed give the same policy."""
    seed = options.seed if options and options.seed is not None else 0
    return int.from_bytes(hashlib.sha256(f"{name}:{seed}:{system}".encode()).digest()[:8], "big")


class ScriptedAgent:
    """Drives a policy generator through the Agent protocol: one yielded turn per `step()`."""

    name = "scripted"

    def __init__(self, system: str, tools: list[ToolSpec], options: AgentOptions | None = None):
        self.model = f"baseline:{self.name}"
        self.system = system or ""
        self.tools = list(tools or [])
        self.tool_names = {t.name for t in self.tools}
        self.options = options or AgentOptions()
        self.images: list[Image] = []
        self.messages: list[str] = []
        self._plan: Plan | None = None
        self._pending: list[tuple[Call, ToolOutcome]] | None = None
        self._ids = itertools.count(1)
        self._done = False

    def user(self, text: str, images: Sequence[Image] = ()) -> None:
        self.messages.append(text)
        self.images.extend(images)

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        self._pending = list(pairs)

    def notes(self, text: str) -> None:
        pass

    def prune_images(self, keep: int, window: int | None = None) -> None:
        pass

    def policy(self) -> Plan:
        raise NotImplementedError

    def step(self) -> Turn:
        if self._done:
            return Turn(text="nothing left to do", stop="end_turn", usage=Usage())
        try:
            if self._plan is None:
                self._plan = self.policy()
                text, calls = next(self._plan)
            else:
                pending, self._pending = self._pending or [], None
                text, calls = self._plan.send(pending)
        except StopIteration:
            self._done = True
            return Turn(text="nothing left to do", stop="end_turn", usage=Usage())
        out = [Call(id=f"call_{next(self._ids)}", name=n, args=a) for n, a in calls]
        return Turn(text=text, calls=out, stop="tool_use" if out else "end_turn", usage=Usage())


POLICIES = ("tracer", "random", "greedy")


def _policies() -> dict[str, type[ScriptedAgent]]:
    # Imported when an agent is made, never by `validate` (see there).
    # start-up: an agent's module loads when that agent is made
    from .greedy import GreedyAgent
    from .random_policy import RandomAgent
    from .tracer import TracerAgent

    return {"tracer": TracerAgent, "random": RandomAgent, "greedy": GreedyAgent}


def validate(model: str) -> None:
    """An unknown policy name is a configuration mistake, reported before any work — without importing the
    policies, whose image analysis (scipy) costs a quarter second that a batch's first episode then waited
    for; an episode imports its policy when it makes its agent."""
    if model not in POLICIES:
        raise ConfigError(f"unknown baseline {model!r} (known: {', '.join(sorted(POLICIES))})")


def create(
    model: str,
    thinking: str | None = None,
    *,
    system: str = "",
    tools: list[ToolSpec] | None = None,
    options: AgentOptions | None = None,
    provider: str = "baseline",
) -> ScriptedAgent:
    validate(model)
    return _policies()[model](system, tools or [], options)
