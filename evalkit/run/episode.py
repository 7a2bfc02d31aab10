"""The episode: the one place an agent and an environment meet, under the loop's rules.

An `Episode` is one episode in progress: `open` (reset, tools, the rules read off them, the agent made with
the env's instructions, the opening message), then `step` after `step` — `think` (one model call) and `act`
(its tool calls run on the env, the results handed back with the turns-left note, or a nudge) — then
`finish`, the one way it ends and yields its record: the finishing tool called on the model's behalf when
the episode ended without it, the score, the final render; or, when infrastructure broke it, what broke it.
How it ended is decided in one place (`_end`). The rules are `rules.Rules`, the words `wording`, and what
goes into the record and how, `recording.Recording`.

`run_episode` drives an Episode to its end; `run_batch` does the same for each of its jobs (`play`);
`EpisodeStepper` drives one a turn at a time through the operator's calls at the end of the class (edit,
discard, inject, submit, the frame now) and its read-only views — never its state, never its rules.

The rules: the turn budget is the env's own (reset metadata `max_turns`) unless one is asked for; the episode
ends when the env says done, at the budget, after MAX_NUDGES turns in a row without a tool call, at the
deadline, when its cost passes `--episode-max-cost` (`cost_limit`, `evalkit.run.budget`), when the model
refuses (`refused`: its refusal is not sent back to it), or — in an env with no finishing tool — when the
model replies in text, which is its answer (`answered`, unless the reset metadata says `answer_ends_episode:
false`). An env that shows a screen (`screenshot_tool`) gets a screenshot in the opening and after every turn
in which the model took none.
Mistakes the model makes are data in the turn; an infrastructure failure ends the episode unscored (`reward`
None, `error_class` set) so that resume runs it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit.envs.client.resolved import ResolvedEnv, resolve, with_records
from evalkit.envs.client.sessions import close_quietly
from evalkit.errors import (
    ConfigError,
    DiskFullError,
    EpisodeCancelled,
)
from evalkit.providers.common import notes_text
from evalkit.providers.health import ProviderHealth
from evalkit.providers.images import budget
from evalkit.records import live
from evalkit.records.rundir import TraceWriter, read_run_json, write_run_json
from evalkit.run import wording
from evalkit.run.jobs import AgentFactory, Job, agent_label, check_agent, make
from evalkit.run.pictures import Camera, frame_takers
from evalkit.run.recording import Recording
from evalkit.run.reply import ask
from evalkit.run.rules import MAX_NUDGES, NOTES_TAIL, Rules, unfinished_reward
from evalkit.run.settings import Settings
from evalkit.types import (
    MALFORMED_STOP,
    Agent,
    Call,
    EpisodeRecord,
    Image,
    ToolOutcome,
    ToolSpec,
    Turn,
    TurnRecord,
)

NOT_RUN = "not executed: the episode had already ended"

Pairs = list[tuple[Call, ToolOutcome]]
"""A turn's calls and what the env answered each."""


def run_episode(
    agent: str | AgentFactory,
    env: Any,
    task: str | dict | None = None,
    settings: Settings | None = None,
    *,
    out: str | Path | None = None,
    surface: str | None = None,
    mode: str | None = None,
    repeat: int = 0,
    skin: str | None = None,
    coordinates: str | None = None,
    **overrides: Any,
) -> EpisodeRecord:
    """Run one episode of `agent` (a model spec, or a factory `f(system=, tools=, options=) -> Agent`) on
    `env` (a served environment, a base URL, an EnvSession or a callable returning one) and return its
    record. With `out`, the record is appended to `<out>/trace.jsonl` and pictures go under `<out>`. A dict
    `task` is the reset's keyword arguments. `surface` and `mode` default to the first the env declares
    (`tools`, and no mode, for envs that declare none); `skin`, `coordinates` and `repeat` say which episode
    of the task this is. `settings` (an `evalkit.run.settings.Settings`) and keyword overrides of it say the
    rest, as for a batch: `max_turns` (None: the env's own budget for the surface), `max_steps`,
    `episode_timeout`, `episode_max_cost` (USD: past it the episode ends as `cost_limit`), `frames`,
    `save_raw` (each call's request and response bodies under `<out>/raw/`), `hide_fields` (reset-metadata
    keys and observation fields the model is never sent, beside the evaluator's, which never are), the
    model's `options` (an AgentOptions) or its knobs one by one. The record keeps what the model was sent
    (`evalkit.records.transcripts`).

    Before anything starts, an unknown provider, a missing key or endpoint URL, an endpoint nothing answers
    at, or an image budget that cannot be honoured raises ConfigError."""
    settings = Settings.make(settings, who="run_episode()", **overrides)
    check_agent(agent)
    # An unreachable server is this episode's env error, not a configuration mistake.
    resolved = with_records(resolve(env, strict=False), [task])
    job = Job.of(agent_label(agent), resolved, task, surface, mode, repeat, skin, coordinates)
    writer = None
    if out is not None:
        out = Path(out)
        writer = TraceWriter(out)
        if not read_run_json(out):
            write_run_json(out, {"kind": "episode", "env": resolved.name, "evalkit_version": __version__})
    try:
        rec = play(agent, resolved, job, settings, out)
        if writer is not None:
            writer.append(rec)
    finally:
        if out is not None:  # a batch removes the live file once it has written the record
            live.finish(out, job.key)
    return rec


def play(
    agent: str | AgentFactory,
    env: ResolvedEnv,
    job: Job,
    settings: Settings,
    store_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
    health: ProviderHealth | None = None,
) -> EpisodeRecord:
    """One episode to its end, its pictures under `store_dir`; writing its record is the caller's. What
    broke it is in the record (the episode boundary), except a configuration mistake, which is raised."""
    episode = Episode(agent, env, job, settings, store_dir, cancel, health)
    with frame_takers(), contextlib.closing(episode):
        try:
            episode.open()
            while not episode.over:
                episode.step()
            return episode.finish()
        except (ConfigError, DiskFullError):  # every episode would fail alike: the batch stops
            raise
        except Exception as e:  # the episode boundary: record what broke, never let it kill a batch
            return episode.finish(e)


@dataclass(frozen=True)
class Opened:
    """What an episode's opening showed, for a driver that shows it (`EpisodeStepper`)."""

    session: Any
    meta: dict
    """The reset metadata."""
    tools: list[ToolSpec]
    system: str
    """The system prompt: the env's instructions, else the generic one."""
    rules: Rules
    target: Image | None
    """What the task asks for, as the env shows it (the canvas' target), if it has a picture of it."""


class Episode:
    """One episode in progress under the loop's rules; its record fills in as it goes."""

    def __init__(
        self,
        agent: str | AgentFactory,
        env: ResolvedEnv,
        job: Job,
        settings: Settings,
        store_dir: str | Path | None = None,
        cancel: threading.Event | None = None,
        health: ProviderHealth | None = None,
    ):
        if settings.hide_fields and env.hide != tuple(settings.hide_fields):
            env = env.with_(hide=tuple(settings.hide_fields))  # its sessions withhold them too
        self._spec, self._env, self._job, self._settings = agent, env, job, settings
        self._cancel, self._health = cancel, health
        fixed = {"skin": job.skin, "coordinates": job.coordinates, "max_steps": settings.max_steps}
        self._reset = env.reset_kwargs(job.task, job.surface, job.mode, **fixed)
        self._recording = Recording.start(job, env.name, self._reset, store_dir, settings.max_turns)
        self._options = settings.options
        self._max_turns = settings.max_turns
        self._session: Any = None
        self._agent: Agent | None = None
        self._camera: Camera | None = None
        self._opened: Opened | None = None
        self._ended: str | None = None
        self._finished, self._deadline, self._model_s, self._nudges = False, None, 0.0, 0
        self._rewards: list[float] = []
        """Every reward the env gave in this episode, in order."""
        self._malformed = ""
        """What the server said of the last tool call it refused to pass on (the model is told)."""
        self._shot: Image | None = None
        """The loop's screenshot of the turn just carried out, if it took one."""
        self._seen: list[Image] = []
        """The images the env returned in the turn just carried out."""

    # ---- how it ended: one place

    def _end(self, reason: str, outcome: ToolOutcome | None = None, auto: bool = False) -> None:
        """The episode ends, for `reason`; with `outcome`, the env's answer that ended it (its grade and
        reward); `auto` when the env ended it on its own budget or on a call made on the model's behalf.
        The first end stands (calls after it are not run), but for `error`: infrastructure that broke the
        episode, whenever it did, makes it unscored."""
        if outcome is not None:
            self._score(outcome, auto)
        if self._ended is None or reason == "error":
            self._ended = reason
            self._recording.ended("auto_submitted" if auto and reason in ("submitted", "done") else reason)

    def _score(self, outcome: ToolOutcome, auto: bool) -> None:
        """The env's answer scores the episode: its reward, else its grade's total, else the last reward."""
        reward = outcome.reward if outcome.reward is not None else (outcome.grade or {}).get("total")
        if reward is None and self._rewards:
            reward = self._rewards[-1]
        self._recording.scored(reward, outcome.grade, auto)

    @property
    def over(self) -> bool:
        """Whether the episode has ended, or has no turn left to take."""
        return self._ended is not None or self._recording.turns >= (self._max_turns or 0)

    # ---- open

    def open(self) -> Opened:
        """Reset (waiting for a free session on a full server), list the tools and read the rules off them,
        make the agent with the env's instructions as its system prompt, hand it the opening message."""
        self._session, meta, waited = self._env.open(self._reset, self._cancel)
        if self._settings.episode_timeout is not None:  # the episode's own time: waiting for a session is not
            self._deadline = time.monotonic() + self._settings.episode_timeout
        self._camera = self._recording.opened(self._session, meta, self._job.task, waited)
        tools = self._camera.timed(self._session.tools)
        rules = Rules.of(self._settings.max_turns, meta, tools, self._options)
        self._max_turns = self._recording.max_turns = rules.max_turns
        if rules.screen_window:  # old screenshots are dropped, the opening kept
            self._options = dataclasses.replace(self._options, image_window=rules.screen_window)
            self._recording.note(image_window=list(rules.screen_window))
        shown, fields = wording.seen(self._session, meta, self._settings.hide_fields or ())
        system = wording.system_prompt(shown, tools, fields)
        self._agent = make(self._spec, system, tools, self._options, self._health, self._settings.save_raw)
        self._opened = Opened(self._session, meta, tools, system, rules, self._camera.picture("target"))
        self._opening(self._opened)
        return self._opened

    def _opening(self, opened: Opened) -> None:
        shots = self._screenshot().images if opened.rules.shot_tool else []
        s = self._settings
        said = wording.session_opening(self._session, opened.meta, self._max_turns, opened.target, shots,
                                       s.hide_fields or ())  # fmt: skip
        self._agent.user(said.text, said.images)
        self._recording.begin(opened.system, opened.tools, said, opened.target, shots, s.frames, s.save_raw)

    # ---- a turn

    def step(self) -> Pairs | None:
        """One turn: the model is called, what it did is carried out. None when the episode ended instead."""
        turn = self.think()
        return None if turn is None else self.act(turn)

    def think(self) -> Turn | None:
        """The model's next turn, not yet carried out (None when the episode ended instead: at the deadline,
        or on a prompt past the model's context)."""
        if self._cancel is not None and self._cancel.is_set():
            raise EpisodeCancelled("the batch was interrupted")
        limit = self._past_limit()
        if limit is not None:
            self._end(limit)
            return None
        window = budget(self._options.keep_images, self._options.image_window)
        if window is not None:
            self._agent.prune_images(window.keep, window.most)
        n = self._recording.turns + 1
        t = time.monotonic()
        reply = ask(self._agent, n, self._deadline, self._job.model, self._recording)
        self._model_s = time.monotonic() - t
        self._recording.model_time(self._model_s)
        if reply.end is not None:
            self._end(reply.end)
            return None
        if reply.turn.stop == MALFORMED_STOP:
            self._malformed = reply.refused
        self._recording.sent(n, self._agent, self._settings.save_raw)
        self._recording.used(reply.turn)
        return reply.turn

    def _past_limit(self) -> str | None:
        """The end a limit reached before the next model call brings: the deadline, or the cost past
        `--episode-max-cost` (the turn that passed it has run: it ends within one turn's cost of it)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            return "deadline"
        return "cost_limit" if self._recording.past_cost(self._settings.episode_max_cost) else None

    def act(self, turn: Turn) -> Pairs:
        """Carry out `turn` (the model's, perhaps edited): its calls run on the env and their results go back
        with the turns-left note; a turn without a call is the answer, or is nudged. Returns its calls and
        what the env answered each (before the note)."""
        n = self._recording.turns + 1
        trec = self._recording.turn(n, turn, self._model_s)
        self._shot, self._seen, pairs = None, [], []
        if turn.refused:  # data: the model declined; what it said is not sent back to it
            self._end("refused")
        elif turn.calls:
            self._nudges = 0
            pairs = self._calls(n, turn, trec)
        else:
            self._silent(n, turn, trec)
        if turn.truncated and self._ended is None:
            tail = turn.reasoning[-NOTES_TAIL:]
            self._agent.notes(tail)
            self._recording.said(n, notes_text(tail), [], "notes from a cut turn")
        self._recording.turn_done(trec, self._shot, self._seen, self._settings.frames)
        return pairs

    def _calls(self, n: int, turn: Turn, trec: TurnRecord) -> Pairs:
        """Run the turn's calls in order (none after the one that ended the episode); the results go back to
        the model, the last with the turns-left note and, on a screen, a fresh screenshot."""
        pairs = []
        for call in turn.calls:
            outcome = self._outcome(n, call)
            self._seen += outcome.images
            pairs.append((call, outcome))
            self._recording.called(trec, call, outcome, self._settings.frames)
        answered = list(pairs)
        fresh = self._look(turn, pairs, trec)
        note = ""
        if self._ended is None:
            note = wording.turns_left_note(self._max_turns - n, self._opened.rules.finish)
            last_call, last_outcome = pairs[-1]
            pairs[-1] = (last_call, wording.with_note(last_outcome, note, fresh))
        self._agent.results(pairs)
        self._recording.results(n, pairs, note, bool(fresh) and self._ended is None)
        return answered

    def _outcome(self, n: int, call: Call) -> ToolOutcome:
        """One of the model's calls: not run once the episode has ended, nor when its arguments could not be
        read (the error goes back to the model)."""
        if self._ended is not None:
            return ToolOutcome(NOT_RUN, is_error=True)
        if call.error is not None:
            self._recording.parse_error()
            return ToolOutcome(call.error, is_error=True)
        outcome = self._call(call.name, call.args)
        self._recording.ran(outcome)
        rules = self._opened.rules
        if outcome.done:
            ended = "submitted" if call.name == rules.finish else "done"
            self._end(ended, outcome, auto=bool(outcome.metadata.get("auto_submitted")))
        if call.name in rules.planners:
            self._recording.plan(n, call, outcome)
        return outcome

    def _silent(self, n: int, turn: Turn, trec: TurnRecord) -> None:
        """A turn without a tool call: in an env with no finishing tool a reply in text is the answer (an
        empty one is no answer); elsewhere the model is nudged, and ends after MAX_NUDGES in a row. A call
        the server refused to pass on (`MALFORMED_STOP`) is a parse error the model is told about, never an
        answer; MAX_NUDGES of them in a row end the episode as `malformed_call`."""
        malformed, rules = turn.stop == MALFORMED_STOP, self._opened.rules
        if malformed:
            self._recording.parse_error()
        if rules.answers and not turn.truncated and not malformed:
            self._end("answered" if turn.text.strip() else "no_tool_call")
            return
        if rules.answers and not malformed:
            return
        fresh = self._look(turn, [], trec)
        if self._ended is not None:  # the env ended the episode on the loop's screenshot
            return
        self._nudges += 1
        if self._nudges >= MAX_NUDGES:
            self._end("malformed_call" if malformed else "no_tool_call")
            return
        said = wording.malformed(rules.finish, self._malformed) if malformed else wording.nudge(rules.finish)
        said += wording.turns_left_note(self._max_turns - n, rules.finish)
        self._agent.user(said, fresh)
        self._recording.said(n, said, fresh, "nudge", shot=bool(fresh))

    def _look(self, turn: Turn, pairs: Pairs, trec: TurnRecord) -> list[Image]:
        """The screen after a turn, on an env that shows one: the model's own newest screenshot, else a fresh
        one the loop takes to go with the model's last result (or the nudge). Returns the fresh images."""
        self._shot, shot_tool = None, self._opened.rules.shot_tool
        if not shot_tool:
            return []
        own = [o.images[-1] for c, o in pairs if c.name == shot_tool and o.images]
        if own or self._ended is not None or any(c.name == shot_tool for c in turn.calls):
            self._shot = own[-1] if own else None
            return []
        extra = self._screenshot()
        if extra.done:  # not the model's action: the env ended the episode on its own (its budget ran out)
            self._end("done", extra, auto=True)
        if extra.images:
            self._shot = extra.images[-1]
            if self._settings.frames:
                self._recording.screenshot(trec, extra.images)
        return list(extra.images)

    # ---- the end

    def finish(self, broke: BaseException | None = None) -> EpisodeRecord:
        """The one way an episode ends, yielding its record. After its last turn, an episode that ended
        without the env's verdict is submitted on the model's behalf (a finishing tool that needs no
        arguments), else scored as the env says an unfinished episode scores; then the final render and
        document. With `broke`, what broke it (infrastructure, whenever it did): it ends unscored, with what
        broke it. It is concluded once; each call returns the record as it stands."""
        if broke is not None:
            self._end("error")
            self._finished = True
            self._recording.failed(broke)
            self._recording.settle()
        elif not self._finished:
            self._finished = True
            self._conclude()
        return self.record

    def _conclude(self) -> None:
        if self._ended is None:
            self._end("turn_limit")
        unplayable = getattr(self._session, "unplayable", None)
        broken = unplayable() if callable(unplayable) else None
        if broken is not None:  # every step the env was sent failed: nothing the model did was played
            raise broken
        rules = self._opened.rules
        if self._ended not in ("submitted", "done"):  # the env gave no verdict
            if rules.auto_submit:
                self._recording.note(auto_submit={"tool": rules.finish, "args": {}})  # what was sent for it
                self._score(self._call(rules.finish, {}), True)
            else:
                given = self._rewards[-1] if self._rewards else unfinished_reward(self._opened.meta)
                self._recording.scored(given)
        if len(self._rewards) > 1:
            # An env that rewards every step: `reward` is the last one, the return is kept beside it.
            self._recording.note(
                **{"return": round(sum(self._rewards), 6), "rewards_given": len(self._rewards)}
            )
        self._recording.final_pictures(self._session)

    def close(self) -> None:
        """Release the session (a frame being taken is waited for first), whether the episode finished or a
        driver gave it up. Never raises: it runs after the episode boundary, and one failure would kill a
        batch."""
        self._recording.settle()
        if self._session is not None:
            close_quietly(self._session)
            self._session = None

    @property
    def record(self) -> EpisodeRecord:
        """The record as it stands, its totals counted now (what `finish` yields, once it has run)."""
        return self._recording.seal(self._agent)

    # ---- plumbing

    def _call(self, name: str, args: dict) -> ToolOutcome:
        outcome = self._camera.call(name, args)
        if outcome.reward is not None:
            self._rewards.append(outcome.reward)
        return outcome

    def _screenshot(self) -> ToolOutcome:
        """The env's screenshot tool, called by the loop (not a model call: no step of the model's)."""
        return self._call(self._opened.rules.shot_tool, {})
