"""What the loop says to the model, in the environment's own language (the rules it speaks of are in
`rules`).

The system prompt is the env's `instructions` (else a short generic one naming its tools); the opening
message is the env's task text, what its reset observation shows and the pictures of both; nudges and the
turn-limit note name the env's finishing tool when it has one. Without one, a reply in text is the model's
answer (`answer_ends`): the system prompt says so, and no nudge is needed. No env's own
words live here: the canvas says "recreate the target, then call submit" through its reset metadata. On an
env that shows a screen (`screenshot_tool`), the loop's own screenshot joins the opening's pictures, after
the metadata's and before the observation's, and the opening says which picture it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evalkit.envs.client import observation
from evalkit.run.rules import answer_ends, can_auto_submit, finishing_tool
from evalkit.types import Image, ToolOutcome, ToolSpec


def auto_submit_text(tool: ToolSpec | None) -> str:
    """What the probe says the loop does with the finishing tool when the model never calls it."""
    if tool is None:
        return "none: the model ends by answering in text (or the env ends the episode)"
    if can_auto_submit(tool):
        return f"{tool.name}; called for the model as {tool.name}({{}}) if it never does"
    props = ", ".join((tool.parameters or {}).get("properties") or {})
    return (
        f"{tool.name}; it takes arguments ({props}), so it is never called for the model: an episode "
        "that ends without it is scored as the env scores one never submitted"
    )


def seen(session: object, meta: dict, hide: Sequence[str] = ()) -> tuple[dict, dict | None]:
    """The reset metadata and observation fields a model may be sent: without what is withheld from it
    (the evaluator's keys, those named by `hide`, and what the session itself withholds,
    `OpenEnvSession.withheld`: a Task API record). The fields are None for a session that has no
    observation of its own (a Python session)."""
    fields = getattr(session, "observation", None)
    own = getattr(session, "withheld", None)
    keys = {*observation.withheld(fields or {}, hide), *observation.withheld(meta, hide), *hide}
    keys |= set(own) if isinstance(own, dict) else set()
    fields = None if fields is None else observation.withhold(fields, keys)
    return observation.withhold(meta, keys), fields


def system_prompt(meta: dict, tools: Sequence[ToolSpec], fields: dict | None = None) -> str:
    """The env's `instructions`, and what its prompt's system role says (a chat-message prompt's system
    message); else a generic one naming the tools and how the episode ends."""
    task = observation.task_of(meta, fields or {})
    own = [str(meta["instructions"])] if meta.get("instructions") else []
    if task is not None and task.system and task.system not in own:
        own.append(task.system)
    if own:
        return "\n\n".join(own)
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
    task = observation.task_of(meta, fields, shown_first + 1, before + 1)
    head = task.text if task is not None and task.text else None
    used = task.key if task is not None and task.in_fields else None
    shown = task.images if used else []  # a metadata prompt's pictures are among `attached` already
    body, observed = observation.render(fields, skip=(used,) if used else (), first=before + len(shown) + 1)
    observed = shown + observed
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
    note = screen_note(shown_first + len(attached), len(screen), len(observed))
    if note:
        parts.append(note)
    return Opening("\n".join(parts), attached, observed, list(screen))


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
    session: object,
    meta: dict,
    max_turns: int,
    target: Image | None,
    screen: Sequence[Image] = (),
    hide: Sequence[str] = (),
) -> Opening:
    """The opening of an episode on `session`, with `screen` (the loop's screenshot) when the env shows one.
    An OpenEnv session shows what its reset observation carries (its `observation` fields, its metadata's
    pictures), less what is withheld from the model (`seen`, with the keys the user named in `hide`); a
    Python session that has no observation of its own says what the task asks for through `target()`, and
    that picture opens the message."""
    meta, fields = seen(session, meta, hide)
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
