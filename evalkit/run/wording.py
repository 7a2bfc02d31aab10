"""What the loop says to the model, in the environment's own language.

The system prompt is the env's `instructions` (else a short generic one naming its tools); the opening
message is the env's task text, what its reset observation shows and the pictures of both; nudges and the
turn-limit note name the env's finishing tool when it has one. Without one, a reply in text is the model's
answer (`answer_ends`): the system prompt says so, and no nudge is needed. No env's own
words live here: the canvas says "recreate the target, then call submit" through its reset metadata. On an
env that shows a screen (`screenshot_tool`), the loop's own screenshot joins the opening's pictures, after
the metadata's and before the observation's, and the opening says which picture it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from evalkit.envs import observation
from evalkit.types import Image, ToolOutcome, ToolSpec

DEFAULT_MAX_TURNS = 30
FINISH_WORDS = ("submit", "finish", "answer", "done")
"""A tool whose name starts or ends with one of these words is taken for the env's finishing tool."""


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
    """The loop may call the finishing tool on the model's behalf only when it needs no arguments."""
    return tool is not None and not (tool.parameters or {}).get("required")


def answer_ends(finish: ToolSpec | str | None, meta: dict) -> bool:
    """Whether a reply in text, with no tool call, is the model's answer and ends the episode: in an env
    with no finishing tool, unless its reset metadata says `answer_ends_episode: false`."""
    return finish is None and meta.get("answer_ends_episode") is not False


def system_prompt(meta: dict, tools: Sequence[ToolSpec]) -> str:
    if meta.get("instructions"):
        return str(meta["instructions"])
    names = ", ".join(t.name for t in tools) or "(none)"
    finish = finishing_tool(tools)
    if finish:
        end = f"When you are done, call {finish.name}."
    elif answer_ends(finish, meta):
        end = "When you are done, give your final answer in text, without calling a tool."
    else:
        end = "Keep acting through your tools until the environment ends the task."
    return (
        f"You act in an environment through the tools you are given: {names}. "
        f"Use them to complete the task you are given. {end}"
    )


@dataclass
class Opening:
    """The first user message."""

    text: str
    attached: list[Image] = field(default_factory=list)
    """Pictures in the reset metadata (the canvas's target)."""
    observed: list[Image] = field(default_factory=list)
    """Pictures among the reset observation's own fields (a screen, a board)."""
    screen: list[Image] = field(default_factory=list)
    """The loop's screenshot of an env that shows a screen, between the two."""

    @property
    def images(self) -> list[Image]:
        return self.attached + self.screen + self.observed


def opening(
    meta: dict, fields: dict, max_turns: int, screen: Sequence[Image] = (), shown_first: int = 0
) -> Opening:
    """The env's task text, then its reset observation's own fields and the metadata the model is shown
    (`observation.shown_metadata`) as readable text, with the pictures of both (those of the metadata
    first, then `screen`, then the observation's, which the text numbers in that order). `shown_first`
    counts pictures put before all of them (a Python session's target)."""
    attached = observation.images_in(meta)
    before = shown_first + len(attached) + len(screen)
    head, used = observation.task_text(meta, fields)
    body, seen = observation.render(fields, skip=(used,) if used else (), first=before + 1)
    known, _ = observation.render_metadata(
        meta, skip={observation.meta_task_key(meta), *fields}, first=shown_first + 1, attached=True
    )
    body = "\n".join(t for t in (body, known) if t)
    parts = [head] if head else []
    if body:
        parts.append(("What you observe:\n" if head else "The environment's first observation:\n") + body)
    if not parts:
        parts.append(
            "Begin the task described in your instructions."
            if meta.get("instructions")
            else "Begin: use your tools to act in the environment."
        )
    parts.append(f"You have {max_turns} turns; each turn may call several tools.")
    note = screen_note(shown_first + len(attached), len(screen), len(seen))
    if note:
        parts.append(note)
    return Opening("\n".join(parts), attached, seen, list(screen))


def screen_note(before: int, shots: int, after: int = 0) -> str:
    """Says which opening pictures are the loop's screenshots (`before` pictures come first, `after` last)."""
    if shots == 0:
        return ""
    if before == 0 and after == 0:
        if shots == 1:
            return "The attached image is a screenshot of the screen as it is now."
        return "The attached images are screenshots of the screen as it is now."
    if shots == 1:
        return f"Image {before + 1} is a screenshot of the screen as it is now."
    return f"Images {before + 1} to {before + shots} are screenshots of the screen as it is now."


def session_opening(
    session: object, meta: dict, max_turns: int, target: Image | None, screen: Sequence[Image] = ()
) -> Opening:
    """The opening of an episode on `session`, with `screen` (the loop's screenshot) when the env shows one.
    An OpenEnv session shows what its reset observation carries (its `observation` fields, its metadata's
    pictures); a Python session that has no observation of its own says what the task asks for through
    `target()`, and that picture opens the message."""
    fields = getattr(session, "observation", None)
    first = fields is None and target is not None and target not in observation.images_in(meta)
    op = opening(meta, fields or {}, max_turns, screen, shown_first=1 if first else 0)
    if first:
        op.attached.insert(0, target)
    return op


def nudge(finish: str | None) -> str:
    """What a model that called no tool is told, where a reply in text does not end the episode: in an env
    with a finishing tool, or one that says a text answer does not end it (`answer_ends`)."""
    head = "You did not call a tool. Continue the task by calling one of your tools"
    if finish:
        return f"{head}; when you are done, call {finish}."
    return f"{head}."


def malformed(finish: str | None, why: str) -> str:
    """What a model whose tool call the server refused to pass on is told (`why`: the server's words)."""
    head = f"Your last tool call could not be parsed and was not run ({why.strip() or 'malformed'})."
    tail = f"; when you are done, call {finish}." if finish else "."
    return f"{head} Call one of your tools again, with arguments that are a JSON object{tail}"


def turns_left_note(left: int, finish: str | None) -> str:
    """Appended to the last tool result of a turn."""
    if left <= 0:
        return "\n[no turns left]"
    if left == 1:
        last = f"finish and call {finish} in it" if finish else "finish the task in it"
        return f"\n[1 turn left: your next turn is the last — {last}]"
    return f"\n[{left} turns left]"


def with_note(outcome: ToolOutcome, note: str, images: Sequence[Image] = ()) -> ToolOutcome:
    """`outcome` as it is sent to the model: a note on its text, and more images (a fresh screenshot)."""
    return ToolOutcome(
        outcome.text + note,
        [*outcome.images, *images],
        outcome.is_error,
        outcome.done,
        outcome.reward,
        outcome.grade,
        outcome.metadata,
    )
