"""The operator's hand: an episode a person drives a turn at a time (`EpisodeStepper`), by the loop's rules.

`OperatedEpisode` is the batch's own `Episode` with the calls a debugger needs, none of which bypasses a
rule: change a call the model made before it runs (`edit`), carry out a turn without running its calls
(`discard`: the turn counts, the model is told), make a tool call of one's own (`inject`: it may end the
episode, as the model's calls do; the model may be told), submit on the model's behalf (`submit`), and see
the env's picture now (`frame_now`, by the rule the record's frames follow) — with read-only views of how
the episode stands. Each edit, discard, call and submit is marked in the record's `info["operator"]`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from evalkit.run.episode import Episode, Pairs
from evalkit.run.pictures import Camera
from evalkit.types import RESULT_CAP, Call, Image, ToolOutcome, Turn

DISCARDED = "not executed (discarded by the operator)"


class OperatedEpisode(Episode):
    """An Episode an operator may edit, discard, call into, submit and look at."""

    _discarded: frozenset[str] = frozenset()
    """Calls an operator discarded: not run, the model is told so."""

    # ---- how it stands

    @property
    def ended(self) -> str | None:
        """How the episode ended, once it has (one of `evalkit.types.END_REASONS`)."""
        return self._ended

    @property
    def turns(self) -> int:
        """Turns taken so far."""
        return self._recording.turns

    @property
    def camera(self) -> Camera | None:
        """The episode's pictures of its session (after `open`)."""
        return self._camera

    def frame_now(self) -> Image | None:
        """The env's picture as it is now, by the rule of the record's frames (`Camera.frame`)."""
        if self._camera is None or self._session is None:
            return None
        self._camera.settle()
        return self._camera.frame(self._shot, self._seen)

    # ---- the hand

    def edit(self, turn: Turn, i: int, name: str | None = None, args: dict | None = None) -> Call:
        """Change call `i` of `turn` (thought, not yet carried out): the result goes back to the model under
        the same id."""
        c = turn.calls[i]
        new = dataclasses.replace(
            c, name=name or c.name, args=dict(args) if args is not None else c.args, error=None
        )
        turn.calls[i] = new
        was, now = {"name": c.name, "args": c.args}, {"name": new.name, "args": new.args}
        self._mark("edit", call=c.id, was=was, now=now)
        return new

    def discard(self, turn: Turn) -> Pairs:
        """Carry out `turn` with none of its calls run: the turn counts, the model is told they were not."""
        self._mark("discard", calls=[c.id for c in turn.calls])
        self._discarded = self._discarded | {c.id for c in turn.calls}
        return self.act(turn)

    def inject(self, name: str, args: dict, tell_model: bool = True, kind: str = "call") -> ToolOutcome:
        """An operator's tool call: run on the env (it may end the episode, as the model's calls do); with
        `tell_model`, the model is told in a user message, since provider histories only take results for
        calls the model made. `kind` says what it was in the record (`call`, `submit`)."""
        outcome = self._call(name, args)
        self._shot, self._seen = None, list(outcome.images)
        if outcome.done and self._ended is None:
            self._end("submitted" if name == self._opened.rules.finish else "done", outcome, auto=True)
        self._recording.add("operator", {
            "turn": self.turns, "kind": kind, "name": name, "args": args, "told": tell_model,
            "ok": not outcome.is_error, "result": outcome.text[:RESULT_CAP],
        })  # fmt: skip
        if tell_model and self._ended is None:
            said = f"[operator] called {name}({json.dumps(args, default=str)}) → "
            said += ("error: " if outcome.is_error else "") + outcome.text
            self._agent.user(said, outcome.images)
            self._recording.said(self.turns, said, list(outcome.images), "operator")
        return outcome

    def submit(self, args: dict) -> ToolOutcome:
        """Call the env's finishing tool on the model's behalf, as the loop does when an episode ends without
        it (`args` for a finishing tool that needs some)."""
        finish = self._opened.rules.finish
        if finish is None:
            raise RuntimeError("this environment has no finishing tool")
        return self.inject(finish, args, tell_model=False, kind="submit")

    # ---- the loop, where the hand shows

    def _outcome(self, n: int, call: Call) -> ToolOutcome:
        if call.id in self._discarded and self._ended is None:
            return ToolOutcome(DISCARDED, is_error=True)
        return super()._outcome(n, call)

    def _mark(self, kind: str, **what: Any) -> None:
        self._recording.add("operator", {"turn": self.turns + 1, "kind": kind, **what})
