"""The loop's rules, read off what an env offers: how many turns an episode has, which tool finishes it,
whether the loop may call that tool for the model, whether a reply in text is the answer, how many silent
turns end it, and what an env that shows a screen changes.

An episode reads them once, when it opens (`Rules.of`: the env's tools and reset metadata, the settings'
turn budget and image budget); the probe reads them the same way. What the loop says to the model about
them is in `wording`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.types import AgentOptions, ToolSpec

DEFAULT_MAX_TURNS = 30
FINISH_WORDS = ("submit", "finish", "answer", "done")
"""A tool whose name starts or ends with one of these words is taken for the env's finishing tool."""
MAX_NUDGES = 3
"""Silent turns in a row (no tool call) that end an episode in which a reply in text is not the answer."""
NOTES_TAIL = 8000
"""Characters of a turn's reasoning handed back to the model when the output limit cut the turn."""
SCREEN_IMAGE_WINDOW = (12, 4)
"""The image budget of a computer-use episode given none: a screenshot a turn would outgrow any context."""


def _words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return [w for w in re.split(r"[^a-z0-9]+", spaced) if w]


def finishing_tool(tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The tool that ends the episode: one the env marks as finishing, else the best name match
    (`submit` before `finish_task` before `final_answer`), else None."""
    marked = [t for t in tools if t.finishes]
    if marked:
        return marked[0]
    best: tuple[tuple[int, int, int], ToolSpec] | None = None
    for i, tool in enumerate(tools):
        words = _words(tool.name)
        if not words:
            continue
        if len(words) == 1 and words[0] in FINISH_WORDS:
            rank = (0, FINISH_WORDS.index(words[0]), i)
        elif words[0] in FINISH_WORDS:
            rank = (1, FINISH_WORDS.index(words[0]), i)
        elif words[-1] in FINISH_WORDS:
            rank = (2, FINISH_WORDS.index(words[-1]), i)
        else:
            continue
        if best is None or rank < best[0]:
            best = (rank, tool)
    return best[1] if best else None


def turn_budget(asked: int | None, meta: dict) -> int:
    """The turns an episode has: those asked for, else the env's own budget (reset metadata `max_turns`, e.g.
    per canvas surface), else DEFAULT_MAX_TURNS."""
    own = meta.get("max_turns")
    if isinstance(own, bool) or not isinstance(own, int) or own < 1:
        own = None
    return asked or own or DEFAULT_MAX_TURNS


def can_auto_submit(tool: ToolSpec | None) -> bool:
    """The loop may call the finishing tool on the model's behalf (with no arguments) only when that call
    means something: the tool takes no arguments at all, or the env marks it as one to call with none
    (`ToolSpec.auto_submit`) and it requires none. A tool whose arguments are all optional — `openenv
    import`'s Verifiers `submit(completion, messages)` — would be scored on an empty answer."""
    if tool is None or (tool.parameters or {}).get("required"):
        return False
    return not (tool.parameters or {}).get("properties") or tool.auto_submit


def answer_ends(finish: ToolSpec | str | None, meta: dict) -> bool:
    """Whether a reply in text, with no tool call, is the model's answer and ends the episode: in an env
    with no finishing tool, unless its reset metadata says `answer_ends_episode: false`."""
    return finish is None and meta.get("answer_ends_episode") is not False


def unfinished_reward(meta: dict) -> float | None:
    """What an episode the env gave no verdict on scores: what the env says an unfinished one scores
    (reset metadata `unfinished_reward`; berth: 0, nothing was submitted), else None — never scored."""
    given = meta.get("unfinished_reward")
    return float(given) if isinstance(given, int | float) and not isinstance(given, bool) else None


def plan_tools(tools: Sequence[ToolSpec]) -> frozenset[str]:
    """Tools that take a `plan` argument: their plans are kept whole in the record, with the answers."""
    return frozenset(t.name for t in tools if "plan" in ((t.parameters or {}).get("properties") or {}))


def screenshot_tool(meta: dict, tools: Sequence[ToolSpec]) -> str | None:
    """The tool the env names as its screenshot (`screenshot_tool`), when it has it: the env shows a
    screen, and the loop shows it to the model in the opening and after every turn in which it took none."""
    name = meta.get("screenshot_tool")
    return name if any(t.name == name for t in tools) else None


@dataclass(frozen=True)
class Rules:
    """What one episode's env makes of the rules."""

    max_turns: int
    finish: str | None
    """The env's finishing tool, if it has one."""
    auto_submit: bool
    """The loop calls `finish` for the model when the episode ends without it (`can_auto_submit`)."""
    answers: bool
    """A reply in text is the model's answer (`answer_ends`)."""
    planners: frozenset[str]
    shot_tool: str | None
    screen_window: tuple[int, int] | None
    """The image budget the loop sets on a screen env the user gave none (SCREEN_IMAGE_WINDOW), else None."""

    @classmethod
    def of(
        cls, asked_turns: int | None, meta: dict, tools: Sequence[ToolSpec], options: AgentOptions
    ) -> Rules:
        finish = finishing_tool(tools)
        shot = screenshot_tool(meta, tools)
        unbounded = not (options.keep_images or options.image_window)
        return cls(
            max_turns=turn_budget(asked_turns, meta),
            finish=finish.name if finish else None,
            auto_submit=can_auto_submit(finish),
            answers=answer_ends(finish, meta),
            planners=plan_tools(tools),
            shot_tool=shot,
            screen_window=SCREEN_IMAGE_WINDOW if shot and unbounded else None,
        )
