"""Step through one episode by hand, for debugging in a notebook.

    st = EpisodeStepper("anthropic:claude-sonnet-5", env, task="canvas-test-0007")
    st.reset()                 # system prompt, tools, the opening message (with the target)
    s = st.step(execute=False) # one model call; its tool calls wait in `st.pending`
    st.request()               # the exact request the provider would send next (wire format), if it has one
    st.edit(0, args={...})     # change a pending call before it runs
    st.execute()               # run the pending calls, hand the results to the model, take a frame
    st.call("view_canvas")     # an operator call: runs on the env, the model is told in a user message
    st.frame                   # the canvas after the last step (PIL image)
    st.run()                   # on to the end, as the batch would go
    st.record                  # the EpisodeRecord the batch would have written (edits marked in `info`)
    st.save("runs/debug")      # ... appended to a run: load_runs, the viewer and the report show it

It drives the batch's own `evalkit.run.episode.Episode` a turn at a time, through the operator's door
(`evalkit.run.operator`) and never its state: the env's turn budget, nudges, auto-submit and scoring are the
loop's, not a copy of them, and a step's frame follows the record's rule. What the operator changes (an
edited call, an injected one, a discarded turn, a submit) is marked in the record's `info["operator"]`.
`sent` keeps every message handed to the agent in evalkit's own terms, for agents (such as the offline
baselines) that keep no wire-format history.
"""

from __future__ import annotations

import dataclasses
import html
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit.envs.client.resolved import resolve, with_records
from evalkit.errors import EpisodeOver
from evalkit.providers import make_agent
from evalkit.providers.health import ProviderHealth
from evalkit.records.checks import run_out
from evalkit.records.lock import RunLock
from evalkit.records.rundir import TraceWriter, read_run_json, store_files, write_run_json
from evalkit.run.episode import Opened
from evalkit.run.jobs import Job, agent_label, check_agent
from evalkit.run.operator import OperatedEpisode
from evalkit.run.settings import Settings
from evalkit.types import Call, EpisodeRecord, Image, ToolOutcome, ToolSpec, Turn


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
            pending = ", ".join(
                f"<code>{e(c.name)}({e(json.dumps(c.args, default=str))})</code>" for c in self.turn.calls
            )
            parts.append(f"<div><i>pending:</i> {pending}</div>")
        if self.frame is not None:
            parts.append(
                f"<img src='data:{self.frame.mime};base64,{self.frame.b64}' "
                "style='max-width:420px;border:1px solid #ccc'>"
            )
        return "".join(parts) + "</div>"


class _Watched:
    """The agent as the episode holds it, with everything handed to it noted in `sent`."""

    def __init__(self, agent: Any, sent: list[dict]):
        self._agent, self._sent = agent, sent

    def user(self, text: str, images: Any = ()) -> None:
        self._sent.append({"kind": "user", "text": text, "images": [repr(i) for i in images]})
        self._agent.user(text, list(images))

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        self._sent.append(
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
        self._agent.results(pairs)

    def notes(self, text: str) -> None:
        self._sent.append({"kind": "notes", "text": text})
        self._agent.notes(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:  # (`keep_raw`, set by the episode) the agent's own
            setattr(self._agent, name, value)


def _shortened(o: Any, max_chars: int) -> Any:
    """`o` with its strings over `max_chars` (base64 images) cut short."""
    if isinstance(o, dict):
        return {k: _shortened(v, max_chars) for k, v in o.items()}
    if isinstance(o, list):
        return [_shortened(v, max_chars) for v in o]
    if isinstance(o, str) and len(o) > max_chars:
        return o[:80] + f"… [{len(o)} chars]"
    return o


class EpisodeStepper:
    """One episode of `agent` (a model spec or an agent factory) on `env`, advanced a turn at a time.
    `surface`, `mode`, `skin` and `coordinates` say which episode of `task` it is; `settings` (an
    `evalkit.run.settings.Settings`) and keyword overrides of it say the rest, as for `run_episode`
    (`max_turns` None gives the env's own budget, as the batch does)."""

    def __init__(
        self,
        agent: Any,
        env: Any,
        task: str | dict | None = None,
        settings: Settings | None = None,
        *,
        surface: str | None = None,
        mode: str | None = None,
        skin: str | None = None,
        coordinates: str | None = None,
        **overrides: Any,
    ):
        self.settings = Settings.make(settings, who="EpisodeStepper()", **overrides)
        check_agent(agent, endpoint=False)  # a missing key is said at once
        self.agent_spec, self.task, self.surface, self.mode = agent, task, surface, mode
        self.skin, self.coordinates = skin, coordinates
        self.env = with_records(resolve(env, strict=False), [task])
        self.health = ProviderHealth()
        """Providers that failed, remembered across resets as a batch remembers them across episodes."""
        self.episode: OperatedEpisode | None = None
        """The episode being stepped (after `reset`): the batch's own, with the operator's hand."""
        self.steps: list[Step] = []
        self.sent: list[dict] = []
        """Everything handed to the agent: {"kind": "user" | "results" | "notes", ...} in evalkit's terms."""
        self.pending: Turn | None = None
        self._opened: Opened | None = None
        self._agent: Any = None
        self._store: str | None = None

    # ------------------------------------------------------------ set-up

    def reset(self) -> dict:
        """Open a session, reset the env, create the agent and hand it the opening message. A model endpoint
        nothing answers at is a ConfigError naming its URL, before the env is touched."""
        check_agent(self.agent_spec)
        self.close()
        self.steps, self.sent, self.pending = [], [], None
        self._store = tempfile.mkdtemp(prefix="evalkit-stepper-")
        label = agent_label(self.agent_spec)
        job = Job.of(
            label, self.env, self.task, self.surface, self.mode, skin=self.skin, coordinates=self.coordinates
        )
        self.episode = OperatedEpisode(
            self._factory, self.env, job, self.settings, self._store, health=self.health
        )
        try:
            self._opened = self.episode.open()
        except BaseException:
            self.close()
            raise
        return self._opened.meta

    def _factory(self, **kw: Any) -> Any:
        spec = self.agent_spec
        self._agent = make_agent(spec, health=self.health, **kw) if isinstance(spec, str) else spec(**kw)
        return _Watched(self._agent, self.sent)

    def _need(self) -> OperatedEpisode:
        if self.episode is None or self._opened is None:
            raise RuntimeError("call reset() first")
        return self.episode

    # ------------------------------------------------------------ what the model sees

    @property
    def agent(self) -> Any:
        return self._agent if self._opened is not None else None

    @property
    def session(self) -> Any:
        return self._opened.session if self._opened is not None else None

    @property
    def meta(self) -> dict:
        return self._opened.meta if self._opened is not None else {}

    @property
    def tools(self) -> list[ToolSpec]:
        return self._opened.tools if self._opened is not None else []

    @property
    def system(self) -> str:
        """The system prompt the model was given: the env's instructions, else the generic one."""
        return self._opened.system if self._opened is not None else ""

    @property
    def finish(self) -> str | None:
        """The env's finishing tool, if it has one."""
        return self._opened.rules.finish if self._opened is not None else None

    @property
    def shot_tool(self) -> str | None:
        """The env's screenshot tool, when it shows the model a screen."""
        return self._opened.rules.shot_tool if self._opened is not None else None

    @property
    def max_turns(self) -> int | None:
        """The turn budget: the env's own unless one was asked for."""
        return self._opened.rules.max_turns if self._opened is not None else self.settings.max_turns

    @property
    def target(self) -> Image | None:
        """What the task asks for, as the env shows it (the canvas' target), if it has a picture of it."""
        return self._opened.target if self._opened is not None else None

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
        history = self.messages if self.messages is not None else self.sent
        return json.dumps(_shortened(history, max_chars), indent=1, default=str)

    # ------------------------------------------------------------ the episode's state

    @property
    def ended(self) -> bool:
        """Whether the episode is over: the env ended it, the model answered in text, it stopped calling
        tools, or its turns ran out (then it was submitted on the model's behalf, as the batch does)."""
        return self._opened is not None and self.episode.over

    @property
    def answered(self) -> bool:
        """The model replied in text in an env with no finishing tool: that reply was its answer."""
        return self.episode is not None and self.episode.ended == "answered"

    @property
    def reward(self) -> float | None:
        return self.episode.record.reward if self.episode is not None else None

    @property
    def grade(self) -> dict | None:
        return self.episode.record.grade if self.episode is not None else None

    @property
    def turns_left(self) -> int:
        ep = self._need()
        return max(0, self._opened.rules.max_turns - ep.turns)

    # ------------------------------------------------------------ stepping

    def step(self, execute: bool = True) -> Step:
        """One model call. With `execute=False` its calls wait in `pending` for `edit` / `execute`. Past the
        episode's end, EpisodeOver says how it ended."""
        ep = self._need()
        if self.pending is not None:
            raise RuntimeError("a turn is pending: execute() or discard() it first")
        self._not_over(ep)
        t = time.monotonic()
        turn = ep.think()
        if turn is None:  # the episode ended without a model call (the deadline had passed)
            self._not_over(ep)
        self.pending = turn
        step = Step(len(self.steps) + 1, turn, model_s=time.monotonic() - t)
        self.steps.append(step)
        return self.execute() if execute else step

    def _not_over(self, ep: OperatedEpisode) -> None:
        if ep.over:
            rec = ep.finish()
            reward = "unscored" if rec.reward is None else f"reward {rec.reward:.3f}"
            raise EpisodeOver(
                f"the episode is over ({rec.end_reason} after {rec.n_turns} turn(s), "
                f"{reward}): st.record has it, st.save(OUT) keeps it"
            )

    def edit(self, i: int, name: str | None = None, args: dict | None = None) -> Call:
        """Change pending call `i` before it runs (the result goes back to the model under the same id)."""
        if self.pending is None:
            raise RuntimeError("no pending turn: step(execute=False) first")
        return self._need().edit(self.pending, i, name, args)

    def discard(self) -> None:
        """Drop the pending turn's calls unexecuted: the turn counts, and the model is told they were not
        run."""
        if self.pending is not None:
            self._carry_out(self._need().discard)

    def execute(self) -> Step:
        """Run the pending calls on the env, hand the results to the model, take a frame — the loop's own
        turn. Calls after the one that ended the episode are not run: the model is told. When the episode is
        over (the env ended it, or the turns ran out), it is finished as the batch finishes it."""
        if self.pending is None:
            raise RuntimeError("no pending turn")
        return self._carry_out(self._need().act)

    def _carry_out(self, how: Callable[[Turn], Any]) -> Step:
        ep = self._need()
        step, turn, self.pending = self.steps[-1], self.pending, None
        t = time.monotonic()
        step.pairs = how(turn)
        if ep.over:
            ep.finish()
        step.frame = ep.frame_now()
        step.env_s = time.monotonic() - t
        return step

    def call(self, name: str, args: dict | None = None, tell_model: bool = True) -> Step:
        """An operator's tool call: run it on the env; with `tell_model`, the model gets the result (and its
        images) as a user message. It may end the episode, as a call of the model's would."""
        ep = self._need()
        t = time.monotonic()
        c = Call(id=f"operator_{len(self.steps) + 1}", name=name, args=dict(args or {}))
        out = ep.inject(name, c.args, tell_model)
        step = Step(len(self.steps) + 1, None, [(c, out)], operator=True)
        step.frame = ep.frame_now()
        step.env_s = time.monotonic() - t
        self.steps.append(step)
        return step

    def run(self, n: int | None = None) -> list[Step]:
        """Step until the episode is over (then finished as the batch finishes it), or `n` steps have been
        taken."""
        ep = self._need()
        done: list[Step] = []
        while not ep.over and (n is None or len(done) < n):
            done.append(self.step())
        if ep.over:
            ep.finish()
        return done

    def submit(self, **args: Any) -> ToolOutcome:
        """Call the env's finishing tool on the model's behalf (as the loop does when an episode ends
        without it); `args` for a finishing tool that needs some."""
        ep = self._need()
        if self.finish is None:
            raise RuntimeError("this environment has no finishing tool")
        self._not_over(ep)
        out = ep.submit(dict(args))
        if ep.over:
            ep.finish()
        return out

    # ------------------------------------------------------------ the record

    @property
    def record(self) -> EpisodeRecord:
        """The EpisodeRecord the batch would have written for this episode (so far, if it is not over)."""
        return self._need().record

    def save(self, out: str | Path) -> EpisodeRecord:
        """Append the episode's record, its frames and its transcript's texts to the run directory `out`
        (made if new): `evalkit.load_runs`, `evalkit view` and the report then show the debugged episode."""
        ep = self._need()
        if not ep.over:
            raise RuntimeError("the episode is not over yet: step on (st.run()), or st.submit()")
        out = run_out("out", out)
        rec = dataclasses.replace(ep.finish(), run_dir=str(out))
        with RunLock(out):  # one writer per run directory: a batch writing it refuses this, and the reverse
            store_files(out, Path(self._store))
            if not read_run_json(out):
                write_run_json(out, {"kind": "episode", "env": self.env.name, "evalkit_version": __version__})
            TraceWriter(out).append(rec)
        return rec

    @property
    def frame(self) -> Any:
        """The env's picture after the last step, as a PIL image (None before any step or without one)."""
        for s in reversed(self.steps):
            if s.frame is not None:
                return s.frame.to_pil()
        img = self.episode.frame_now() if self.episode is not None else None
        return img.to_pil() if img is not None else None

    def close(self) -> None:
        ep, self.episode, self._opened = self.episode, None, None
        if ep is not None:
            ep.close()
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)
            self._store = None

    def __enter__(self) -> EpisodeStepper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
