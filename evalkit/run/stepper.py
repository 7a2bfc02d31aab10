"""Step through one episode by hand, for debugging in a notebook.

    st = EpisodeStepper("anthropic:claude-sonnet-5", env, task="canvas-test-0007")
    st.reset()                 # system prompt, tools, the opening message (with the target)
    s = st.step(execute=False) # one model call; its tool calls wait in `st.pending`
    st.request()               # the exact request the provider would send next (wire format), if it has one
    st.edit(0, args={...})     # change a pending call before it runs
    st.execute()               # run the pending calls, hand the results to the model, take a frame
    st.call("view_canvas")     # an operator call: runs on the env, the model is told in a user message
    st.frame                   # the canvas after the last step (PIL image)

It drives the same pieces as `run_episode` (the env session, `make_agent`, the system prompt, opening
message, nudges and turn notes of `evalkit.run.wording`), one turn at a time, and keeps `sent`: every message
handed to the agent, in evalkit's own terms, for agents (such as the offline baselines) that keep no
wire-format history. On an env that shows the model a screen (reset metadata `screenshot_tool`, the gui
surface) it does what the loop does: a screenshot in the opening message, a fresh one after every turn in
which the model took none, and the screenshots as frames.
"""

from __future__ import annotations

import dataclasses
import html
import json
import time
from dataclasses import dataclass, field
from typing import Any

from evalkit.types import AgentOptions, Call, Image, ToolOutcome, ToolSpec, Turn


@dataclass
class Step:
    """One model turn (or operator call) and what the environment answered."""

    n: int
    turn: Turn | None
    pairs: list[tuple[Call, ToolOutcome]] = field(default_factory=list)
    frame: Image | None = None
    model_s: float = 0.0
    env_s: float = 0.0
    operator: bool = False

    @property
    def done(self) -> bool:
        return any(o.done for _, o in self.pairs)

    def _repr_html_(self) -> str:
        e = html.escape
        who = "operator" if self.operator else "model"
        parts = [
            f"<div style='font-family:system-ui;font-size:13px'><b>step {self.n}</b> ({who}, "
            f"model {self.model_s:.2f}s, env {self.env_s:.2f}s)"
        ]
        if self.turn is not None:
            if self.turn.reasoning:
                parts.append(
                    f"<details><summary>reasoning</summary><pre>{e(self.turn.reasoning)}</pre></details>"
                )
            if self.turn.text:
                parts.append(f"<pre style='white-space:pre-wrap'>{e(self.turn.text)}</pre>")
        for call, out in self.pairs:
            status = "error" if out.is_error else "ok"
            parts.append(
                f"<div><code>{e(call.name)}({e(json.dumps(call.args, default=str))})</code> → {status}: "
                f"<span>{e(out.text[:500])}</span></div>"
            )
        if self.turn is not None and not self.pairs and self.turn.calls:
            parts.append(
                "<div><i>pending:</i> "
                + ", ".join(
                    f"<code>{e(c.name)}({e(json.dumps(c.args, default=str))})</code>" for c in self.turn.calls
                )
                + "</div>"
            )
        if self.frame is not None:
            parts.append(
                f"<img src='data:{self.frame.mime};base64,{self.frame.b64}' "
                "style='max-width:420px;border:1px solid #ccc'>"
            )
        return "".join(parts) + "</div>"


class EpisodeStepper:
    """One episode of `agent` (a model spec or an agent factory) on `env`, advanced a turn at a time."""

    def __init__(
        self,
        agent: Any,
        env: Any,
        task: str | dict | None = None,
        *,
        surface: str | None = None,
        mode: str | None = None,
        max_turns: int = 30,
        options: AgentOptions | None = None,
        **reset_kw: Any,
    ):
        from evalkit.providers import check_keys
        from evalkit.providers.health import ProviderHealth
        from evalkit.providers.images import check_budget

        self.agent_spec, self.env, self.task = agent, env, task
        self.surface, self.mode, self.max_turns = surface, mode, max_turns
        self.options = options or AgentOptions()
        # What would only fail at the first step (a missing key, a bad image budget) is said here, at once.
        check_budget(self.options.keep_images, self.options.image_window)
        if isinstance(agent, str):
            check_keys([agent])
        self.health = ProviderHealth()
        """Providers that failed, remembered across resets as a batch remembers them across episodes."""
        self.reset_kw = reset_kw
        self.session: Any = None
        self.agent: Any = None
        self.meta: dict = {}
        self.tools: list[ToolSpec] = []
        self.system = ""
        """The system prompt the model was given: the env's instructions, else the generic one."""
        self.finish: str | None = None
        """The env's finishing tool, if it has one."""
        self.shot_tool: str | None = None
        """The env's screenshot tool, when it shows the model a screen."""
        self.target: Image | None = None
        self.steps: list[Step] = []
        self.sent: list[dict] = []
        """Everything handed to the agent: {"kind": "user" | "results" | "notes", ...} in evalkit's terms."""
        self.pending: Turn | None = None
        self.reward: float | None = None
        self.grade: dict | None = None
        self.ended = False
        """Whether the episode has ended: the env ended it (some call came back done), with or without a
        reward, or the model answered in text (`answered`)."""
        self.answered = False
        """The model replied in text in an env with no finishing tool: that reply was its answer."""

    # ------------------------------------------------------------ set-up

    def reset(self) -> dict:
        """Open a session, reset the env, create the agent and hand it the opening message. A model endpoint
        nothing answers at is a ConfigError naming its URL, before the env is touched."""
        from evalkit.envs import sessions
        from evalkit.providers import check_endpoints, make_agent
        from evalkit.run import wording

        if isinstance(self.agent_spec, str):
            check_endpoints([self.agent_spec])
        self.close()
        self.steps, self.sent, self.pending, self.reward, self.grade = [], [], None, None, None
        self.ended = self.answered = False
        name = sessions.env_name(self.env)
        mode = sessions.default_mode(name) if self.mode is None else self.mode
        surface = self.surface or sessions.default_surface(name)
        kw = sessions.reset_kwargs(self.task, name, surface, mode, **self.reset_kw)
        self.session, self.meta, _ = sessions.open_session(self.env, kw)
        self.tools = self.session.tools()
        finish = wording.finishing_tool(self.tools)
        self.finish = finish.name if finish else None
        self.system = wording.system_prompt(self.meta, self.tools)
        shot = self.meta.get("screenshot_tool")
        self.shot_tool = shot if any(t.name == shot for t in self.tools) else None
        options = self.options
        if self.shot_tool and not (options.keep_images or options.image_window):
            from evalkit.run.episode import SCREEN_IMAGE_WINDOW

            options = dataclasses.replace(options, image_window=SCREEN_IMAGE_WINDOW)  # as the loop does
        if isinstance(self.agent_spec, str):
            self.agent = make_agent(
                self.agent_spec,
                system=self.system,
                tools=self.tools,
                options=options,
                health=self.health,
            )
        else:
            self.agent = self.agent_spec(system=self.system, tools=self.tools, options=options)
        fn = getattr(self.session, "target", None)
        self.target = fn() if callable(fn) else None
        shots = self._run(self.shot_tool, {}).images if self.shot_tool else []
        opening = wording.session_opening(self.session, self.meta, self.max_turns, self.target, shots)
        self._user(opening.text, opening.images)
        return self.meta

    def _user(self, text: str, images: list[Image] | tuple = ()) -> None:
        self.sent.append({"kind": "user", "text": text, "images": [repr(i) for i in images]})
        self.agent.user(text, list(images))

    def _need(self) -> None:
        if self.agent is None:
            raise RuntimeError("call reset() first")

    # ------------------------------------------------------------ what the model sees

    @property
    def messages(self) -> list | None:
        """The agent's wire-format history (provider agents keep one), or None for agents that keep none."""
        for name in ("messages", "input", "history"):
            v = getattr(self.agent, name, None)
            if isinstance(v, list):
                return v
        return None

    def request(self) -> dict | None:
        """The exact request body the agent would send on its next `step()` (provider agents), else None."""
        fn = getattr(self.agent, "params", None)
        return fn() if callable(fn) else None

    def show_messages(self, max_chars: int = 2000) -> str:
        """The history as indented JSON with base64 images shortened, for reading."""

        def short(o: Any) -> Any:
            if isinstance(o, dict):
                return {k: short(v) for k, v in o.items()}
            if isinstance(o, list):
                return [short(v) for v in o]
            if isinstance(o, str) and len(o) > max_chars:
                return o[:80] + f"… [{len(o)} chars]"
            return o

        return json.dumps(
            short(self.messages if self.messages is not None else self.sent), indent=1, default=str
        )

    # ------------------------------------------------------------ stepping

    @property
    def turns_left(self) -> int:
        return self.max_turns - sum(1 for s in self.steps if not s.operator)

    def step(self, execute: bool = True) -> Step:
        """One model call. With `execute=False` its calls wait in `pending` for `edit` / `execute`."""
        self._need()
        if self.pending is not None:
            raise RuntimeError("a turn is pending: execute() or discard() it first")
        t = time.monotonic()
        turn = self.agent.step()
        self.pending = turn
        step = Step(len(self.steps) + 1, turn, model_s=time.monotonic() - t)
        self.steps.append(step)
        return self.execute() if execute else step

    def edit(self, i: int, name: str | None = None, args: dict | None = None) -> Call:
        """Change pending call `i` before it runs (the result goes back to the model under the same id)."""
        if self.pending is None:
            raise RuntimeError("no pending turn: step(execute=False) first")
        c = self.pending.calls[i]
        new = dataclasses.replace(
            c, name=name or c.name, args=dict(args) if args is not None else c.args, error=None
        )
        self.pending.calls[i] = new
        return new

    def discard(self) -> None:
        """Drop the pending turn's calls unexecuted; the model is told they were not run."""
        if self.pending is None:
            return
        pairs = [
            (c, ToolOutcome("not executed (discarded by the operator)", is_error=True))
            for c in self.pending.calls
        ]
        self.pending = None
        if pairs:
            self._results(pairs)

    def _results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        self.sent.append(
            {
                "kind": "results",
                "results": [
                    {
                        "id": c.id,
                        "name": c.name,
                        "text": o.text,
                        "is_error": o.is_error,
                        "images": len(o.images),
                    }
                    for c, o in pairs
                ],
            }
        )
        self.agent.results(pairs)

    def _run(self, name: str, args: dict) -> ToolOutcome:
        out = self.session.call(name, args)
        if out.done:
            self.ended = True
            self.reward = out.reward if out.reward is not None else (out.grade or {}).get("total")
            self.grade = out.grade
        return out

    def _look(self, turn: Turn, pairs: list[tuple[Call, ToolOutcome]], ended: bool) -> list[Image]:
        """On an env that shows a screen, a fresh screenshot after a turn in which the model took none (the
        loop's `_look`); nothing once the episode has ended."""
        if not self.shot_tool or ended or any(c.name == self.shot_tool for c in turn.calls):
            return []
        return list(self._run(self.shot_tool, {}).images)

    def _frame(self) -> Image | None:
        fn = getattr(self.session, "render", None)
        return fn() if callable(fn) else None

    def execute(self) -> Step:
        """Run the pending calls on the env, hand the results to the model, take a frame. Calls after the
        one that ended the episode (or all of them, if it had ended before) are not run: the model is told."""
        from evalkit.run.episode import NOTES_TAIL
        from evalkit.run.wording import answer_ends, nudge, turns_left_note, with_note

        if self.pending is None:
            raise RuntimeError("no pending turn")
        step, turn, self.pending = self.steps[-1], self.pending, None
        t = time.monotonic()
        pairs = []
        # `step.done` reads `step.pairs`, filled only after this loop: the flag is the loop's own.
        ended = self.ended
        for c in turn.calls:
            if ended:
                out = ToolOutcome("not executed: the episode had already ended", is_error=True)
            elif c.error is not None:
                out = ToolOutcome(c.error, is_error=True)
            else:
                out = self._run(c.name, c.args)
                ended = out.done
            pairs.append((c, out))
        step.pairs = pairs
        fresh = self._look(turn, pairs, ended)
        own = [o.images[-1] for c, o in pairs if c.name == self.shot_tool and o.images]
        step.frame = (fresh or own or [None])[-1] or self._frame()
        step.env_s = time.monotonic() - t
        if pairs:
            last_c, last_o = pairs[-1]
            note = turns_left_note(self.turns_left, self.finish)
            note_pairs = pairs[:-1] + [(last_c, with_note(last_o, note, fresh))]
            self._results(note_pairs if not step.done else pairs)
        elif answer_ends(self.finish, self.meta) and not turn.truncated:
            self.ended = self.answered = True  # no finishing tool: a reply in text is the answer
        elif not step.done:
            self._user(nudge(self.finish) + turns_left_note(self.turns_left, self.finish), fresh)
        if turn.truncated and not step.done:
            tail = turn.reasoning[-NOTES_TAIL:]
            self.sent.append({"kind": "notes", "text": tail})
            self.agent.notes(tail)
        return step

    def call(self, name: str, args: dict | None = None, tell_model: bool = True) -> Step:
        """An operator's tool call: run it on the env; with `tell_model`, the model gets the result (and its
        images) as a user message. Provider histories only accept results for calls the model made, so an
        injected call is told, not slipped into the model's own turn."""
        self._need()
        t = time.monotonic()
        c = Call(id=f"operator_{len(self.steps) + 1}", name=name, args=dict(args or {}))
        out = self._run(name, c.args)
        step = Step(len(self.steps) + 1, None, [(c, out)], operator=True)
        step.frame = self._frame()
        step.env_s = time.monotonic() - t
        self.steps.append(step)
        if tell_model:
            res = ("error: " if out.is_error else "") + out.text
            msg = f"[operator] called {name}({json.dumps(c.args, default=str)}) → {res}"
            self._user(msg, out.images)
        return step

    def run(self, n: int | None = None) -> list[Step]:
        """Step until the episode ends (the env said done, whether or not it gave a reward), the turns run
        out, or `n` steps have been taken."""
        done = []
        while self.turns_left > 0 and (n is None or len(done) < n) and not self.ended:
            done.append(self.step())
        return done

    def submit(self, **args: Any) -> ToolOutcome:
        """Call the env's finishing tool on the model's behalf (as the loop does when an episode ends
        without it); `args` for a finishing tool that needs some."""
        self._need()
        if self.finish is None:
            raise RuntimeError("this environment has no finishing tool")
        return self._run(self.finish, args)

    @property
    def frame(self) -> Any:
        """The canvas after the last step, as a PIL image (None before any step or without renders)."""
        for s in reversed(self.steps):
            if s.frame is not None:
                return s.frame.to_pil()
        img = self._frame() if self.session is not None else None
        return img.to_pil() if img is not None else None

    def close(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            finally:
                self.session = None

    def __enter__(self) -> EpisodeStepper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
