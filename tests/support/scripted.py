"""A scripted agent for loop tests: plays a fixed list of turns and records what the loop told it."""

from __future__ import annotations

from collections.abc import Callable

from evalkit.types import AgentOptions, Call, Image, ToolOutcome, ToolSpec, Turn, Usage


class Scripted:
    def __init__(
        self,
        turns: list[Turn | Callable[[], Turn]],
        system: str,
        tools: list[ToolSpec],
        options: AgentOptions,
    ):
        self.turns, self.system, self.tools, self.options = list(turns), system, tools, options
        self.model = "scripted"
        self.users: list[tuple[str, list[Image]]] = []
        self.results_seen: list[list[tuple[Call, ToolOutcome]]] = []
        self.notes_seen: list[str] = []
        self.pruned: list[tuple[int, int | None]] = []
        self.info: dict = {}

    def user(self, text, images=()):
        self.users.append((text, list(images)))

    def results(self, pairs):
        self.results_seen.append(pairs)

    def notes(self, text):
        self.notes_seen.append(text)

    def prune_images(self, keep, window=None):
        self.pruned.append((keep, window))

    def step(self) -> Turn:
        if not self.turns:
            return Turn(text="(script over)", usage=Usage(input=1))
        nxt = self.turns.pop(0)
        return nxt() if callable(nxt) else nxt


def factory(turns, sink: list | None = None):
    """An agent factory for run_episode; `sink` receives the agent so tests can inspect it."""

    def make(*, system, tools, options):
        agent = Scripted(turns, system, tools, options)
        if sink is not None:
            sink.append(agent)
        return agent

    make.model = "scripted"
    return make


def call(name: str, **args) -> Call:
    call.n = getattr(call, "n", 0) + 1
    return Call(f"c{call.n}", name, args)
