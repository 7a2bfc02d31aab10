"""The episode: the one place an agent and an environment meet.

An `Episode` is one episode in progress: `open` (reset, tools, the agent made with the env's instructions,
the opening message), then `step` after `step` (one model call, its tool calls run on the env, the results
handed back with the turns-left note, or a nudge), then `conclude` (the finishing tool called on the model's
behalf when the episode ended without it, the score, the final render) and `seal` (usage, cost, transcript).
`ended` decides how it ended, in one place. `run_episode` drives an Episode to its end; `run_batch` does the
same for each of its jobs (`play`); `EpisodeStepper` drives one a turn at a time and may edit, inject or
discard what the model does, never the rules.

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

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit import secrets
from evalkit.envs.sessions import close_quietly
from evalkit.envs.target import Target, resolve, with_records
from evalkit.errors import (
    ConfigError,
    DeadlineReached,
    DiskFullError,
    EndpointError,
    EpisodeCancelled,
    ModelFailure,
    error_class_of,
)
from evalkit.providers import check_endpoints, check_keys, clock, make_agent, parse_spec
from evalkit.providers.attempts import log_usage
from evalkit.providers.common import notes_text
from evalkit.providers.health import ProviderHealth
from evalkit.providers.images import budget, check_budget
from evalkit.records import live, transcripts
from evalkit.records.traces import FrameStore, TraceWriter, read_run_json, write_run_json
from evalkit.run import wording
from evalkit.run.breaker import refused_key
from evalkit.run.budget import EpisodeMeter
from evalkit.run.pictures import Camera, frame_takers
from evalkit.run.settings import Settings
from evalkit.types import (
    MALFORMED_STOP,
    RESULT_CAP,
    Agent,
    AgentOptions,
    Call,
    CallRecord,
    EpisodeRecord,
    Image,
    PlanRecord,
    ToolOutcome,
    ToolSpec,
    Turn,
    TurnRecord,
    Usage,
    episode_key,
)

log = logging.getLogger(__name__)

MAX_NUDGES = 3
"""Silent turns in a row (no tool call) that end an episode in which a reply in text is not the answer."""
NOTES_TAIL = 8000
SCREEN_IMAGE_WINDOW = (12, 4)
"""The image budget of a computer-use episode given none: a screenshot a turn would outgrow any context."""
NOT_RUN = "not executed: the episode had already ended"

AgentFactory = Callable[..., Agent]


@dataclass
class Job:
    """What one episode is: which model, task, surface, mode, skin and repeat."""

    model: str
    surface: str
    mode: str
    task: dict | str | None
    """Reset arguments (`task_id`, or `split` and `index`, or what `--reset-json` gave), or a task id."""
    ident: str
    """The task's identity in the key (`task_identity`)."""
    repeat: int
    key: str
    evalset_task: str | None = None
    skin: str | None = None
    """None: the env's default skin for the task."""
    coordinates: str | None = None
    """Screen coordinates asked of the env (None: its default)."""

    @classmethod
    def of(
        cls,
        model: str,
        target: Target,
        task: Any,
        surface: str | None = None,
        mode: str | None = None,
        repeat: int = 0,
        skin: str | None = None,
        coordinates: str | None = None,
        evalset_task: str | None = None,
        ident: str | None = None,
    ) -> Job:
        """The job of `task` on `target`: surface and mode default to the env's first."""
        surface = surface or target.default_surface
        mode = target.default_mode if mode is None else mode
        ident = ident or task_identity(task, target.name)
        key = episode_key(model, target.name, surface, mode, ident, skin, repeat)
        return cls(model, surface, mode, task, ident, repeat, key, evalset_task, skin, coordinates)


def task_identity(task: str | dict | None, env_name: str) -> str:
    """The task's identity in keys and records: its id; for a dict, its `task_id` when that is all it
    holds, `<env>-<split>-<index>` (as `run_batch` names drawn tasks), else a canonical string of its
    contents — distinct resets never share a key."""
    if task is None or isinstance(task, str):
        return task or ""
    if task.get("task_id") and set(task) == {"task_id"}:
        return str(task["task_id"])
    if set(task) == {"split", "index"} and isinstance(task["index"], int):
        return f"{env_name}-{task['split']}-{task['index']:04d}"
    return _canonical(task)


def _canonical(task: str | dict) -> str:
    if isinstance(task, str):
        return task
    return json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def recorded_task_id(own: Any, task: str | dict | None, ident: str) -> str:
    """The task id a record carries: the env's own (reset metadata `task_id`), else the task's identity.
    A reset sent more than an id or a drawn split and index (a `--reset-json` row of seeds and levels)
    whose env answers with an id of its own gets a short hash of its arguments after that id: an env that
    gives one id to different resets still has them apart."""
    if own is None or own == "":
        return ident
    plain = not isinstance(task, dict) or set(task) <= {"task_id"} or set(task) == {"split", "index"}
    if plain or str(own) == ident:
        return str(own)
    digest = hashlib.sha256(_canonical(task).encode()).hexdigest()[:8]
    return f"{own}-{digest}"


def plan_tools(tools: list[ToolSpec]) -> set[str]:
    """Tools that take a `plan` argument: their plans are kept whole in the record, with the answers."""
    return {t.name for t in tools if "plan" in ((t.parameters or {}).get("properties") or {})}


def _plan_value(plan: Any) -> Any:
    if isinstance(plan, str):
        try:
            parsed = json.loads(plan)
        except ValueError:
            return plan
        return parsed if isinstance(parsed, list) else plan
    return plan


def _answer(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def agent_label(agent: str | AgentFactory) -> str:
    if isinstance(agent, str):
        return agent
    return getattr(agent, "model", None) or getattr(agent, "__name__", "custom")


def check_agent(agent: str | AgentFactory, options: AgentOptions, endpoint: bool = True) -> None:
    """What would only fail at the first model call, said before any work: an unknown provider, a missing
    key or endpoint URL, an image budget that cannot be honoured, and (`endpoint`) an endpoint nothing
    answers at."""
    check_budget(options.keep_images, options.image_window)
    if isinstance(agent, str):
        parse_spec(agent)
        check_keys([agent])
        if endpoint:
            check_endpoints([agent])


def run_episode(
    agent: str | AgentFactory,
    env: Any,
    task: str | dict | None = None,
    *,
    surface: str | None = None,
    mode: str | None = None,
    out: str | Path | None = None,
    max_turns: int | None = None,
    max_steps: int | None = None,
    episode_timeout: float | None = None,
    frames: bool = True,
    repeat: int = 0,
    skin: str | None = None,
    coordinates: str | None = None,
    options: AgentOptions | None = None,
    save_raw: bool = False,
    hide_fields: list[str] | None = None,
    episode_max_cost: float | None = None,
) -> EpisodeRecord:
    """Run one episode of `agent` (a model spec, or a factory `f(system=, tools=, options=) -> Agent`) on
    `env` (a served environment, a base URL, an EnvSession or a callable returning one) and return its
    record. With `out`, the record is appended to `<out>/trace.jsonl` and pictures go under `<out>`. A dict
    `task` is the reset's keyword arguments. `surface` and `mode` default to the first the env declares
    (`tools`, and no mode, for envs that declare none). `max_turns` None gives the env's own budget for the
    surface (reset metadata `max_turns`). The record keeps what the model was sent
    (`evalkit.records.transcripts`); `save_raw` also keeps each call's request and response bodies under
    `<out>/raw/`, images replaced by references to the frame store. `hide_fields` names reset-metadata keys
    and observation fields the model is never sent (beside the evaluator's, which never are).
    `episode_max_cost` (USD) ends the episode as `cost_limit` once its cost has passed it.

    Before anything starts, an unknown provider, a missing key or endpoint URL, an endpoint nothing answers
    at, or an image budget that cannot be honoured raises ConfigError."""
    settings = Settings.make(options=options or AgentOptions(), max_turns=max_turns, max_steps=max_steps,
                             episode_timeout=episode_timeout, frames=frames, save_raw=save_raw,
                             hide_fields=hide_fields, episode_max_cost=episode_max_cost)  # fmt: skip
    check_agent(agent, settings.options)
    target = resolve(env, strict=False)  # an unreachable server is this episode's env error
    target = with_records(target, [task])
    job = Job.of(agent_label(agent), target, task, surface, mode, repeat, skin, coordinates)
    writer = None
    if out is not None:
        out = Path(out)
        writer = TraceWriter(out)
        if not read_run_json(out):
            from evalkit import __version__

            write_run_json(out, {"kind": "episode", "env": target.name, "evalkit_version": __version__})
    try:
        rec = play(agent, target, job, settings, out)
        if writer is not None:
            writer.append(rec)
    finally:
        if out is not None:  # a batch removes the live file once it has written the record
            live.finish(out, job.key)
    return rec


def play(
    agent: str | AgentFactory,
    target: Target,
    job: Job,
    settings: Settings,
    store_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
    health: ProviderHealth | None = None,
) -> EpisodeRecord:
    """One episode to its end, its pictures under `store_dir`; writing its record is the caller's. What
    broke it is in the record (the episode boundary), except a configuration mistake, which is raised."""
    episode = Episode(agent, target, job, settings, store_dir, cancel, health)
    with frame_takers():
        try:
            episode.open()
            while not episode.over:
                episode.step()
            episode.conclude()
        except (ConfigError, DiskFullError):  # every episode would fail alike: the batch stops
            raise
        except Exception as e:  # the episode boundary: record what broke, never let it kill a batch
            episode.fail(e)
        finally:
            episode.close()
    return episode.seal()


class Episode:
    """One episode in progress; `rec` is its record as it fills in."""

    def __init__(
        self,
        agent: str | AgentFactory,
        target: Target,
        job: Job,
        settings: Settings,
        store_dir: str | Path | None = None,
        cancel: threading.Event | None = None,
        health: ProviderHealth | None = None,
    ):
        if settings.hide_fields and target.hide != tuple(settings.hide_fields):
            target = target.with_(hide=tuple(settings.hide_fields))  # its sessions withhold them too
        self.agent_spec, self.target, self.job, self.settings = agent, target, job, settings
        self.options = settings.options
        self.store = FrameStore(store_dir) if store_dir is not None else None
        self.cancel, self.health = cancel, health
        self.rec = EpisodeRecord(
            key=job.key,
            model=job.model,
            env=target.name,
            surface=job.surface,
            mode=job.mode,
            task_id=str(job.ident),
            skin=job.skin,
            coordinates=job.coordinates,
            repeat=job.repeat,
            evalset_task=job.evalset_task,
            started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            run_dir=str(store_dir) if store_dir is not None else None,
        )
        self.reset_kw = target.reset_kwargs(
            job.task,
            job.surface,
            job.mode,
            skin=job.skin,
            coordinates=job.coordinates,
            max_steps=settings.max_steps,
        )
        self.rec.reset = {k: v for k, v in self.reset_kw.items() if v is not None}
        if isinstance(self.rec.reset.get("split"), str):
            self.rec.split = self.rec.reset["split"]
        self.max_turns = settings.max_turns
        self.session: Any = None
        self.agent: Agent | None = None
        self.camera: Camera | None = None
        self.tx: transcripts.Recorder | None = None
        """What the model is sent, for the record's transcript."""
        self.meta: dict = {}
        self.tools: list[ToolSpec] = []
        self.system = ""
        """The system prompt: the env's instructions, else the generic one."""
        self.target_image: Image | None = None
        self.last_pairs: list[tuple[Call, ToolOutcome]] = []
        """The last turn's calls and what the env answered (before the turns-left note)."""
        self.skipped: set[str] = set()
        """Calls an operator discarded: not run, the model is told so."""
        self.finish: str | None = None
        """The env's finishing tool, if it has one."""
        self.auto_submit = False
        self.answers = False
        self.planners: set[str] = set()
        self.shot_tool: str | None = None
        self.shot: Image | None = None
        self.rewards: list[float] = []
        """Every reward the env gave in this episode, in order."""
        self.usage, self.usage_known = Usage(), True
        """`usage_known` False once some request may have been billed without reporting its usage."""
        self.nudges = 0
        self._malformed = ""
        """What the server said of the last tool call it refused to pass on (the model is told)."""
        self.ended: str | None = None
        """How the episode ended, once it has (one of `evalkit.types.END_REASONS`): set by `end` alone."""
        self.concluded = False
        self._dropped = 0
        self._turn_model_s = 0.0
        self.t0 = time.monotonic()
        self.deadline: float | None = None
        self.meter = EpisodeMeter(job.model, settings.episode_max_cost, self.rec.started)
        """Its cost so far against `--episode-max-cost` (`evalkit.run.budget`)."""

    # ---- how it ended: one place

    def end(self, reason: str, outcome: ToolOutcome | None = None, auto: bool = False) -> None:
        """The episode ends, for `reason`; with `outcome`, the env's answer that ended it (its grade and
        reward); `auto` when the env ended it on its own budget or on a call made on the model's behalf.
        The first end stands (calls after it are not run), but for `error`: infrastructure that broke the
        episode, whenever it did, makes it unscored."""
        if outcome is not None:
            self._score(outcome, auto)
        if self.ended is None or reason == "error":
            self.ended = reason
            self.rec.end_reason = "auto_submitted" if auto and reason in ("submitted", "done") else reason

    @property
    def over(self) -> bool:
        """Whether the episode has ended, or has no turn left to take."""
        return self.ended is not None or len(self.rec.turns) >= (self.max_turns or 0)

    def _score(self, outcome: ToolOutcome, auto: bool) -> None:
        rec = self.rec
        rec.grade = outcome.grade
        reward = outcome.reward if outcome.reward is not None else (outcome.grade or {}).get("total")
        rec.reward = reward if reward is not None else (self.rewards[-1] if self.rewards else None)
        rec.auto_submitted = auto

    # ---- open

    def open(self) -> dict:
        """Reset (waiting for a free session on a full server), list the tools, make the agent with the
        env's instructions as its system prompt, hand it the opening message; returns the reset metadata."""
        rec = self.rec
        self.session, self.meta, waited = self.target.open(self.reset_kw, self.cancel)
        if waited:
            rec.info["capacity_wait_s"] = round(waited, 2)
        rec.env_seconds = round(time.monotonic() - self.t0 - waited, 4)
        if self.settings.episode_timeout is not None:  # the episode's own time: waiting for a session is not
            self.deadline = time.monotonic() + self.settings.episode_timeout
        self.camera = Camera(self.session, self.store, self._env_time)
        meta = self.meta
        rec.task_id = recorded_task_id(meta.get("task_id"), self.job.task, rec.task_id)
        rec.episode_id = meta.get("episode_id")
        for name in ("split", "tier", "difficulty_score", "prompt_version", "coordinates", "skin"):
            if meta.get(name) is not None:
                setattr(rec, name, meta[name])
        self._publish()  # started: a viewer shows the episode from its reset on, before its agent is made
        self.tools = self.camera.timed(self.session.tools)
        self._rules(meta, self.tools)
        shown, fields = wording.seen(self.session, meta, self.settings.hide_fields or ())
        self.system = system = wording.system_prompt(shown, self.tools, fields)
        self.agent = self._make_agent(system)
        run_dir = self.store.run_dir if self.store is not None else None
        self.tx = transcripts.Recorder(run_dir, self.settings.frames, rec.key, self.settings.save_raw)
        self._opening(system)
        return meta

    def _rules(self, meta: dict, tools: list[ToolSpec]) -> None:
        """What the env's tools and metadata make of the rules: the turn budget, the finishing tool, whether a
        reply in text is the answer, whether the env shows a screen — then, unless the user set an image
        budget, old screenshots are dropped (SCREEN_IMAGE_WINDOW, the opening kept)."""
        self.max_turns = wording.turn_budget(self.settings.max_turns, meta)
        finish = wording.finishing_tool(tools)
        self.finish = finish.name if finish else None
        self.auto_submit = wording.can_auto_submit(finish)
        self.answers = wording.answer_ends(finish, meta)
        self.planners = plan_tools(tools)
        name = meta.get("screenshot_tool")
        self.shot_tool = name if any(t.name == name for t in tools) else None
        if self.shot_tool and not (self.options.keep_images or self.options.image_window):
            self.options = dataclasses.replace(self.options, image_window=SCREEN_IMAGE_WINDOW)
            self.rec.info["image_window"] = list(SCREEN_IMAGE_WINDOW)

    def _make_agent(self, system: str) -> Agent:
        spec, options = self.agent_spec, self.options
        if isinstance(spec, str):
            agent = make_agent(spec, system=system, tools=self.tools, options=options, health=self.health)
        else:
            agent = spec(system=system, tools=self.tools, options=options)
        if self.settings.save_raw and hasattr(agent, "keep_raw"):
            agent.keep_raw = True
        return agent

    def _opening(self, system: str) -> None:
        rec, camera = self.rec, self.camera
        self.target_image = target = camera.picture("target")
        if target is not None and self.store is not None:
            rec.target = self.store.put_render(f"{rec.task_id}__target", target)
            self.tx.alias(target, rec.target)
        shots = self._screenshot().images if self.shot_tool else []
        hide = self.settings.hide_fields or ()
        opening = wording.session_opening(self.session, self.meta, self.max_turns, target, shots, hide)
        self.agent.user(opening.text, opening.images)
        self.tx.begin(system, self.tools, opening.text, opening.images)
        if not self.settings.frames:
            self._publish()
            return
        seen = opening.observed[-1] if opening.observed else None

        def first_frame(timed: bool) -> None:
            rec.frame0 = camera.save(shots[-1] if shots else (camera.render(timed) or seen))
            self._publish()

        camera.later(first_frame)

    # ---- a turn

    def step(self) -> TurnRecord | None:
        """One turn: the model is called, what it did is carried out. None when the deadline had passed."""
        turn = self.think()
        return None if turn is None else self.act(turn)

    def think(self) -> Turn | None:
        """The model's next turn, not yet carried out (None when the episode ended instead: at the deadline,
        or on a prompt past the model's context)."""
        if self.cancel is not None and self.cancel.is_set():
            raise EpisodeCancelled("the batch was interrupted")
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.end("deadline")
            return None
        if self.meter.passed(self.rec.turns):
            self.rec.info["cost_limit"] = self.meter.said()
            self.end("cost_limit")
            return None
        window = budget(self.options.keep_images, self.options.image_window)
        if window is not None:
            self.agent.prune_images(window.keep, window.most)
        n = len(self.rec.turns) + 1
        t = time.monotonic()
        turn = self._model_call(n)
        self._turn_model_s = time.monotonic() - t
        self.rec.model_seconds = round(self.rec.model_seconds + self._turn_model_s, 4)
        if turn is None:  # the episode ended during the call
            return None
        self._sent(n)
        self.usage = self.usage + turn.usage
        self.usage_known = self.usage_known and turn.usage_known
        return turn

    def act(self, turn: Turn) -> TurnRecord:
        """Carry out `turn` (the model's, perhaps edited): its calls run on the env and their results go back
        with the turns-left note; a turn without a call is the answer, or is nudged."""
        n = len(self.rec.turns) + 1
        trec = self._turn_record(n, turn)
        env_before = self.rec.env_seconds
        self.last_pairs, self.shot = [], None  # (the loop's screenshot of this turn, if it takes one)
        if turn.refused:  # data: the model declined; what it said is not sent back to it
            self.end("refused")
            images = []
        elif turn.calls:
            self.nudges = 0
            images = self._calls(n, turn, trec)
        else:
            images = []
            self._silent(n, turn, trec)
        if turn.truncated and self.ended is None:
            tail = turn.reasoning[-NOTES_TAIL:]
            self.agent.notes(tail)
            self.tx.user(n, notes_text(tail), [], "notes from a cut turn")
        trec.env_s = round(self.rec.env_seconds - env_before, 3)
        self.rec.turns.append(trec)
        if self.settings.frames:
            self.camera.later(functools.partial(self._frame, trec, self.shot, images))
        else:
            self._publish()
        return trec

    def _turn_record(self, n: int, turn: Turn) -> TurnRecord:
        return TurnRecord(
            turn=n,
            text=turn.text,
            reasoning=turn.reasoning,
            stop=turn.stop,
            usage=turn.usage.to_dict(),
            model_s=round(self._turn_model_s, 3),
            attempts=1 + len(turn.attempts),
            failed_attempts=[a.to_dict() for a in turn.attempts],
            usage_known=turn.usage_known,
            provider=turn.provider,
            route=turn.route,
        )

    def _calls(self, n: int, turn: Turn, trec: TurnRecord) -> list[Image]:
        """Run the turn's calls in order (none after the one that ended the episode); the results go back to
        the model, the last with the turns-left note and, on a screen, a fresh screenshot."""
        pairs, images = [], []
        for call in turn.calls:
            outcome = self._outcome(n, call)
            images += outcome.images
            pairs.append((call, outcome))
            trec.calls.append(
                CallRecord(
                    id=call.id,
                    name=call.name,
                    args=call.args if call.error is None else call.raw,
                    ok=not outcome.is_error,
                    result=outcome.text[:RESULT_CAP],
                    images=self.camera.save_all(outcome.images) if self.settings.frames else [],
                    parse_error=call.error is not None,
                )
            )
        self.last_pairs = list(pairs)
        fresh = self._look(turn, pairs, trec)
        note = ""
        if self.ended is None:
            note = wording.turns_left_note(self.max_turns - n, self.finish)
            last_call, last_outcome = pairs[-1]
            pairs[-1] = (last_call, wording.with_note(last_outcome, note, fresh))
        self.agent.results(pairs)
        self.tx.results(n, pairs, note, bool(fresh) and self.ended is None)
        return images

    def _outcome(self, n: int, call: Call) -> ToolOutcome:
        """One of the model's calls: not run once the episode has ended, nor when its arguments could not be
        read (the error goes back to the model)."""
        if self.ended is not None:
            return ToolOutcome(NOT_RUN, is_error=True)
        if call.id in self.skipped:
            return ToolOutcome("not executed (discarded by the operator)", is_error=True)
        if call.error is not None:
            self.rec.parse_errors += 1
            return ToolOutcome(call.error, is_error=True)
        outcome = self._call(call.name, call.args)
        self.rec.tool_calls += 1
        self.rec.tool_errors += outcome.is_error
        if outcome.done:
            ended = "submitted" if call.name == self.finish else "done"
            self.end(ended, outcome, auto=bool(outcome.metadata.get("auto_submitted")))
        if call.name in self.planners:
            self._keep_plan(n, call, outcome)
        return outcome

    def _silent(self, n: int, turn: Turn, trec: TurnRecord) -> None:
        """A turn without a tool call: in an env with no finishing tool a reply in text is the answer (an
        empty one is no answer); elsewhere the model is nudged, and ends after MAX_NUDGES in a row. A call
        the server refused to pass on (`MALFORMED_STOP`) is a parse error the model is told about, never an
        answer; MAX_NUDGES of them in a row end the episode as `malformed_call`."""
        malformed = turn.stop == MALFORMED_STOP
        self.rec.parse_errors += malformed
        if self.answers and not turn.truncated and not malformed:
            self.end("answered" if turn.text.strip() else "no_tool_call")
            return
        if self.answers and not malformed:
            return
        fresh = self._look(turn, [], trec)
        if self.ended is not None:  # the env ended the episode on the loop's screenshot
            return
        self.nudges += 1
        if self.nudges >= MAX_NUDGES:
            self.end("malformed_call" if malformed else "no_tool_call")
            return
        said = wording.malformed(self.finish, self._malformed) if malformed else wording.nudge(self.finish)
        said += wording.turns_left_note(self.max_turns - n, self.finish)
        self.agent.user(said, fresh)
        self.tx.user(n, said, fresh, "nudge", shot=bool(fresh))

    def _look(self, turn: Turn, pairs: list, trec: TurnRecord) -> list[Image]:
        """The screen after a turn, on an env that shows one: the model's own newest screenshot, else a fresh
        one the loop takes to go with the model's last result (or the nudge). Returns the fresh images."""
        self.shot = None
        if not self.shot_tool:
            return []
        own = [o.images[-1] for c, o in pairs if c.name == self.shot_tool and o.images]
        if own or self.ended is not None or any(c.name == self.shot_tool for c in turn.calls):
            self.shot = own[-1] if own else None
            return []
        extra = self._screenshot()
        if extra.done:  # not the model's action: the env ended the episode on its own (its budget ran out)
            self.end("done", extra, auto=True)
        if extra.images:
            self.shot = extra.images[-1]
            if self.settings.frames and trec.calls:
                trec.calls[-1].images += self.camera.save_all(extra.images)
        return list(extra.images)

    def _model_call(self, n: int) -> Turn | None:
        """One model call; None when the episode ended instead: the model's prompt outgrew its context (its
        outcome), or the deadline passed during the call (the request was cut). When it fails, what its
        failed requests reported still counts, and whatever they may have cost without saying makes the
        episode's cost unknown."""
        try:
            with clock.until(self.deadline):  # a request in flight at the deadline is cut
                return self.agent.step()
        except ModelFailure as e:
            return self._model_failed(n, e)
        except DeadlineReached as e:
            self._failed_requests(n, e.attempts)
            partial = e.partial
            if partial is not None and (partial.text or partial.reasoning):  # what had come of the reply
                self.rec.info["cut_turn"] = {"turn": n, "text": partial.text, "reasoning": partial.reasoning}
            self.end("deadline")
            return None
        except EndpointError as e:
            refused = refused_key(self.rec.model, e)
            if refused is not None:  # every episode of this model would fail alike: not data, a config error
                raise refused from e
            self._failed_requests(n, e.attempts)
            raise
        except Exception:
            self.usage_known = False  # the request may have been answered, and billed, before the break
            raise

    def _failed_requests(self, n: int, log: list) -> None:
        """The requests of a call that brought no turn: their usage counts, the record keeps them."""
        usage, known = log_usage(log)
        self.usage = self.usage + usage
        self.usage_known = self.usage_known and known and bool(log)
        if log:
            self.rec.info["failed_turn"] = {
                "turn": n,
                "attempts": len(log),
                "failed_attempts": [a.to_dict() for a in log],
            }

    def _model_failed(self, n: int, e: ModelFailure) -> Turn | None:
        """The API said the model failed (`evalkit.errors.ModelFailure`): a malformed call is a turn of the
        model's, its generated text kept, and it is told (`_silent`); a prompt past its context ends the
        episode as `context_overflow`, scored as the env scores an unfinished one (`conclude`)."""
        last = e.attempts[-1] if e.attempts else None
        said = {"turn": n, "kind": e.kind, "status": e.status, "code": e.code,
                "error": last.error if last is not None else str(e)}  # fmt: skip
        self.rec.info.setdefault("model_failures", []).append(said)
        if e.kind == "malformed_call":
            self._malformed = e.detail or e.code or ""
            usage, known = log_usage(e.attempts)
            return Turn(text=e.generation or "", stop=MALFORMED_STOP, usage=usage, usage_known=known,
                        attempts=list(e.attempts[:-1]), route=getattr(last, "route", ""))  # fmt: skip
        self._failed_requests(n, e.attempts)
        self.end("context_overflow")
        return None

    # ---- the operator's hand (EpisodeStepper)

    def inject(self, name: str, args: dict, tell_model: bool = True) -> ToolOutcome:
        """An operator's tool call: run on the env (it may end the episode, as the model's calls do); with
        `tell_model`, the model is told in a user message, since provider histories only take results for
        calls the model made."""
        outcome = self._call(name, args)
        if outcome.done and self.ended is None:
            self.end("submitted" if name == self.finish else "done", outcome, auto=True)
        self.rec.info.setdefault("operator", []).append(
            {
                "turn": len(self.rec.turns),
                "kind": "call",
                "name": name,
                "args": args,
                "told": tell_model,
                "ok": not outcome.is_error,
                "result": outcome.text[:RESULT_CAP],
            }
        )
        if tell_model and self.ended is None:
            said = f"[operator] called {name}({json.dumps(args, default=str)}) → "
            said += ("error: " if outcome.is_error else "") + outcome.text
            self.agent.user(said, outcome.images)
            self.tx.user(len(self.rec.turns), said, list(outcome.images), "operator")
        return outcome

    def mark(self, kind: str, **what: Any) -> None:
        """Note an operator's edit in the record (`info["operator"]`), for whoever reads the episode later."""
        self.rec.info.setdefault("operator", []).append(
            {"turn": len(self.rec.turns) + 1, "kind": kind, **what}
        )

    # ---- the end

    def conclude(self) -> None:
        """After the last turn: an episode that ended without the env's verdict is submitted on the model's
        behalf (a finishing tool that needs no arguments), else scored as the env says an unfinished episode
        scores; then the final render and document. Runs once."""
        if self.concluded:
            return
        self.concluded = True
        if self.ended is None:
            self.end("turn_limit")
        unplayable = getattr(self.session, "unplayable", None)
        broken = unplayable() if callable(unplayable) else None
        if broken is not None:  # every step the env was sent failed: nothing the model did was played
            raise broken
        if not self._env_said_done():
            if self.auto_submit:
                self.rec.info["auto_submit"] = {"tool": self.finish, "args": {}}  # what was sent for it
                outcome = self._call(self.finish, {})
                self._score(outcome, True)
            else:
                # An env that says what an unfinished episode scores (berth: 0, nothing was submitted) gets
                # that score, rather than an episode that counts as never scored.
                unfinished = self.meta.get("unfinished_reward")
                numeric = isinstance(unfinished, int | float) and not isinstance(unfinished, bool)
                self.rec.reward = (
                    self.rewards[-1] if self.rewards else (float(unfinished) if numeric else None)
                )
        if len(self.rewards) > 1:
            # An env that rewards every step: `reward` is the last one, the return is kept beside it.
            self.rec.info["return"] = round(sum(self.rewards), 6)
            self.rec.info["rewards_given"] = len(self.rewards)
        self._final_pictures()

    def _env_said_done(self) -> bool:
        return self.ended in ("submitted", "done")

    def _final_pictures(self) -> None:
        rec, camera = self.rec, self.camera
        # The env's final document, asked for beside the last frame: two reads, neither waits for the other.
        doc = getattr(self.session, "document", None)
        document = camera.submit(doc) if callable(doc) else None
        camera.settle()
        final = camera.render()
        if final is not None and self.store is not None:
            rec.render = self.store.put_render(f"{rec.key}__final", final)
        if document is not None:
            rec.final_doc = camera.wait(document)
        else:
            rec.final_doc = camera.timed(doc) if callable(doc) else None
        if rec.final_doc is None and rec.plans and rec.plans[-1].final:
            rec.final_doc = rec.plans[-1].plan

    def fail(self, e: BaseException) -> None:
        """Infrastructure broke the episode: unscored, with what broke it (never anything like a key)."""
        rec = self.rec
        self.end("error")
        self.concluded = True
        rec.error_class = error_class_of(e)
        rec.error = secrets.scrub(f"{type(e).__name__}: {e}")
        rec.traceback = secrets.scrub(traceback.format_exc(limit=20))
        rec.reward = None

    def close(self) -> None:
        """Wait for the frame being taken and close the session. Never raises: it runs after the episode
        boundary, and one failure would kill a batch."""
        if self.camera is not None:
            try:
                self.camera.settle()
            except Exception as e:  # only after the episode broke: a normal end settled before its end
                log.debug("taking a frame failed: %s", e)
        if self.session is not None:
            close_quietly(self.session)
            self.session = None

    def seal(self) -> EpisodeRecord:
        """The record's totals: time, turns, usage and cost, the agent's notes, the transcript."""
        rec = self.rec
        rec.seconds = round(time.monotonic() - self.t0, 3)
        rec.n_turns = len(rec.turns)
        info = dict(getattr(self.agent, "info", None) or {})
        rec.provider_switches = list(info.pop("provider_switches", []) or [])
        # Requests that belong to no turn (the thinking-off probe) were billed too.
        probe = info.get("probe_usage")
        total = self.usage + Usage.from_dict(probe) if probe else self.usage
        rec.usage = total.to_dict()
        unknown = sum(not t.usage_known for t in rec.turns)
        if unknown:
            info["usage_unknown_turns"] = unknown
        rec.info.update(info)
        if self.tx is not None:
            rec.transcript = self.tx.to_dict()
        # Usage a provider never reported (a stream cut by the harness cap or the network, a request that
        # died with the harness) makes the cost unknown, not smaller.
        rec.cost_usd = _cost(rec) if self.usage_known else None
        return rec

    # ---- plumbing

    def _env_time(self, seconds: float) -> None:
        self.rec.env_seconds = round(self.rec.env_seconds + seconds, 4)

    def _call(self, name: str, args: dict) -> ToolOutcome:
        self.camera.settle()
        self.camera.calls_made += 1
        outcome = self.camera.timed(self.session.call, name, args)
        if outcome.reward is not None:
            self.rewards.append(outcome.reward)
        return outcome

    def _screenshot(self) -> ToolOutcome:
        """The env's screenshot tool, called by the loop (not a model call: no step of the model's)."""
        return self._call(self.shot_tool, {})

    def _frame(self, trec: TurnRecord, shot: Image | None, images: list[Image], timed: bool) -> None:
        """Turn `trec`'s frame: the loop's screenshot, else the env's render, else a tool's last image."""
        trec.frame = self.camera.save(shot or self.camera.render(timed) or (images[-1] if images else None))
        self._publish()

    def _sent(self, n: int) -> None:
        """After the model call of turn `n`: the images its request no longer carried (an image budget, a
        refused prompt) and, with `save_raw`, its request and response bodies."""
        dropped = getattr(self.agent, "dropped_images", None) or []
        if len(dropped) > self._dropped:
            self.tx.pruned(n, list(dropped[self._dropped :]))
            self._dropped = len(dropped)
        if self.settings.save_raw:
            self.tx.raw(n, getattr(self.agent, "last_raw", None))

    def _publish(self) -> None:
        """The episode's progress, for a viewer watching the run (`evalkit.records.live`)."""
        if self.store is not None:
            live.publish(self.store.run_dir, self.rec, self.max_turns)

    def _keep_plan(self, turn: int, call: Call, outcome: ToolOutcome) -> None:
        """Keep the plan whole with the env's whole answer (the call's result in the turn is capped)."""
        final = outcome.done and not outcome.metadata.get("auto_submitted")
        plan = PlanRecord(
            turn,
            call.id,
            call.name,
            _plan_value(call.args.get("plan")),
            _answer(outcome.text),
            not outcome.is_error,
            final,
        )
        self.rec.plans.append(plan)
        self.rec.drafts += plan.ok and not outcome.done


def _cost(rec: EpisodeRecord) -> float | None:
    """Each request priced at its provider and long-context tier (`prices.episode_cost`)."""
    try:
        from evalkit.providers.prices import episode_cost

        return episode_cost(rec)
    except Exception as e:  # a missing or broken price table costs the number, never the episode
        log.warning("no cost for %s: %s", rec.model, e)
        return None
