"""run_episode: the one place an agent and an environment meet.

reset (waiting for a free session on a full server) → list tools → the env's instructions as the system
prompt and its task text and pictures as the opening message (`evalkit.wording`) → turns, each one model call
whose tool calls all go through the environment → frames → the episode ends when the env says done, at the
turn limit, or when the model stops calling tools; then, if the env has a finishing tool that needs no
arguments, it is called on the model's behalf → an EpisodeRecord. Mistakes the model makes are data in the
turn; an infrastructure failure ends the episode unscored (`reward` None, `error_class` set) so that resume
runs it again.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit import wording
from evalkit.envs.sessions import close_quietly, default_mode, open_session, reset_kwargs
from evalkit.envs.sessions import env_name as name_of
from evalkit.errors import ConfigError, EpisodeCancelled, error_class_of
from evalkit.providers import make_agent, parse_spec
from evalkit.traces import FrameStore, TraceWriter, read_run_json, write_run_json
from evalkit.types import (
    RESULT_CAP,
    Agent,
    AgentOptions,
    CallRecord,
    EnvSession,
    EpisodeRecord,
    Image,
    ToolOutcome,
    TurnRecord,
    Usage,
    episode_key,
)

log = logging.getLogger(__name__)


MAX_NUDGES = 3
"""Silent turns in a row (no tool call) that end an episode whose env has a finishing tool."""
MAX_SILENT_WITHOUT_FINISH = 2
"""The same without a finishing tool: the nudge asks for the answer in text, so the next silent turn is it."""
NOTES_TAIL = 8000

AgentFactory = Callable[..., Agent]


def _agent_label(agent: str | AgentFactory) -> str:
    return (
        agent
        if isinstance(agent, str)
        else getattr(agent, "model", None) or getattr(agent, "__name__", "custom")
    )


def task_identity(task: str | dict | None, env_name: str) -> str:
    """The task's identity in keys and records: its id; for a dict, its `task_id`, else
    `<env>-<split>-<index>` (as `run_batch` names drawn tasks), else a canonical string of its contents —
    distinct tasks never share a key."""
    if task is None or isinstance(task, str):
        return task or ""
    if task.get("task_id"):
        return str(task["task_id"])
    if set(task) == {"split", "index"} and isinstance(task["index"], int):
        return f"{env_name}-{task['split']}-{task['index']:04d}"
    return json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def run_episode(
    agent: str | AgentFactory,
    env: Any,
    task: str | dict | None = None,
    *,
    surface: str = "tools",
    mode: str | None = None,
    out: str | Path | None = None,
    max_turns: int = 30,
    max_steps: int | None = None,
    episode_timeout: float | None = None,
    frames: bool = True,
    repeat: int = 0,
    skin: str | None = None,
    coordinates: str | None = None,
    options: AgentOptions | None = None,
    evalset_task: str | None = None,
    task_key: str | None = None,
    env_name: str | None = None,
    store_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
) -> EpisodeRecord:
    """Run one episode of `agent` (a model spec, or a factory `f(system=, tools=, options=) -> Agent`) on
    `env` (a served environment, a base URL, or a callable returning an EnvSession) and return its record.
    With `out`, the record is appended to `<out>/trace.jsonl` and pictures go under `<out>`; with only
    `store_dir`, pictures go there and writing the record is left to the caller (`run_batch`). A dict
    `task` is the reset's keyword arguments. `mode` defaults to the first the env declares (none for envs
    that declare no modes). Setting `cancel` stops the episode before its next turn (error_class
    `cancelled`)."""
    if isinstance(agent, str):
        parse_spec(agent)  # an unknown provider is a config error: raise before touching the env
    options = options or AgentOptions()
    label = _agent_label(agent)
    env_name = env_name or name_of(env)
    mode = default_mode(env_name) if mode is None else mode
    task_ident = task_key or task_identity(task, env_name)
    rec = EpisodeRecord(
        key=episode_key(label, env_name, surface, mode, str(task_ident), skin, repeat),
        model=label,
        env=env_name,
        surface=surface,
        mode=mode,
        task_id=str(task_ident),
        skin=skin,
        coordinates=coordinates,
        repeat=repeat,
        evalset_task=evalset_task,
        started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    writer = None
    if out is not None:
        out = store_dir = Path(out)
        writer = TraceWriter(out)
        if not read_run_json(out):
            from evalkit import __version__

            write_run_json(out, {"kind": "episode", "env": env_name, "evalkit_version": __version__})
    store = FrameStore(store_dir) if store_dir is not None else None
    _Episode(rec, store, frames, options, max_turns, episode_timeout, cancel).run(
        agent,
        env,
        reset_kwargs(task, env_name, surface, mode, skin=skin, coordinates=coordinates, max_steps=max_steps),
    )
    if writer is not None:
        writer.append(rec)
    if store_dir is not None:
        from evalkit.display import attach  # the record's notebook display then finds its frames

        attach(rec, store_dir)
    return rec


class _Episode:
    """The state of one running episode; `run` fills in `rec`."""

    def __init__(
        self,
        rec: EpisodeRecord,
        store: FrameStore | None,
        frames: bool,
        options: AgentOptions,
        max_turns: int,
        episode_timeout: float | None,
        cancel: threading.Event | None = None,
    ):
        self.rec, self.store, self.frames, self.options = rec, store, frames, options
        self.max_turns, self.timeout, self.cancel = max_turns, episode_timeout, cancel
        self.usage = Usage()
        self.session: EnvSession | None = None
        self.agent: Agent | None = None

    def run(self, agent: str | AgentFactory, env: Any, reset_kw: dict) -> None:
        rec, t0 = self.rec, time.monotonic()
        try:
            self.session, meta, waited = open_session(env, reset_kw, self.cancel)
            if waited:
                rec.info["capacity_wait_s"] = round(waited, 2)
            rec.env_seconds = round(time.monotonic() - t0 - waited, 4)
            # The deadline is the episode's own time: waiting for a free session does not count.
            self._play(agent, meta, time.monotonic())
        except ConfigError:
            raise
        except Exception as e:  # the episode boundary: record what broke, never let it kill a batch
            rec.error_class, rec.end_reason = error_class_of(e), "error"
            rec.error = f"{type(e).__name__}: {e}"
            rec.traceback = traceback.format_exc(limit=20)
            rec.reward = None
        finally:
            # Nothing here may raise: it runs after the episode boundary, and one failure would kill a batch.
            if self.session is not None:
                close_quietly(self.session)
            rec.usage = self.usage.to_dict()
            rec.seconds = round(time.monotonic() - t0, 3)
            rec.n_turns = len(rec.turns)
            info = dict(getattr(self.agent, "info", None) or {})
            rec.provider_switches = list(info.pop("provider_switches", []) or [])
            rec.info.update(info)
            # A turn whose usage the provider never reported (a stream cut by the harness cap) makes the
            # cost unknown, not smaller.
            rec.cost_usd = None if info.get("usage_unknown_turns") else _cost(rec.model, self.usage)

    def _timed_env(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        t = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            self.rec.env_seconds = round(self.rec.env_seconds + time.monotonic() - t, 4)

    def _picture(self, what: str) -> Image | None:
        fn = getattr(self.session, what, None)
        return self._timed_env(fn) if callable(fn) else None

    def _save(self, image: Image | None) -> str | None:
        return self.store.put(image) if self.store is not None and image is not None else None

    def _play(self, agent_spec: str | AgentFactory, meta: dict, t0: float) -> None:
        rec, session = self.rec, self.session
        rec.task_id = str(meta.get("task_id") or rec.task_id)
        rec.episode_id = meta.get("episode_id")
        for name in ("split", "tier", "difficulty_score", "prompt_version", "coordinates", "skin"):
            if meta.get(name) is not None:
                setattr(rec, name, meta[name])
        tools = self._timed_env(session.tools)
        finish_tool = wording.finishing_tool(tools)
        finish = finish_tool.name if finish_tool else None
        system = wording.system_prompt(meta, tools)
        make = make_agent if isinstance(agent_spec, str) else None
        self.agent = agent = (
            make(agent_spec, system=system, tools=tools, options=self.options)
            if make
            else agent_spec(system=system, tools=tools, options=self.options)
        )
        target = self._picture("target")
        if target is not None and self.store is not None:
            rec.target = self.store.put_render(f"{rec.task_id}__target", target)
        opening = wording.session_opening(session, meta, self.max_turns, target)
        if self.frames:
            first = self._picture("render") or (opening.observed[-1] if opening.observed else None)
            rec.frame0 = self._save(first)
        agent.user(opening.text, opening.images)

        done, nudges, rewards = False, 0, []
        rec.end_reason = "turn_limit"
        for n in range(1, self.max_turns + 1):
            if self.cancel is not None and self.cancel.is_set():
                raise EpisodeCancelled("the batch was interrupted")
            if self.timeout is not None and time.monotonic() - t0 > self.timeout:
                rec.end_reason = "deadline"
                break
            if self.options.keep_images or self.options.image_window:
                window = self.options.image_window
                agent.prune_images(
                    window[1] if window else self.options.keep_images, window[0] if window else None
                )
            tm = time.monotonic()
            turn = agent.step()
            model_s = time.monotonic() - tm
            rec.model_seconds = round(rec.model_seconds + model_s, 4)
            self.usage = self.usage + turn.usage
            trec = TurnRecord(
                turn=n,
                text=turn.text,
                reasoning=turn.reasoning,
                stop=turn.stop,
                usage=turn.usage.to_dict(),
                model_s=round(model_s, 3),
            )
            env_before = rec.env_seconds
            tool_images: list[Image] = []
            if turn.calls:
                nudges = 0
                pairs = []
                for call in turn.calls:
                    if done:
                        outcome = ToolOutcome("not executed: the episode had already ended", is_error=True)
                    elif call.error is not None:
                        outcome = ToolOutcome(f"error: {call.error}", is_error=True)
                        rec.parse_errors += 1
                    else:
                        outcome = self._timed_env(session.call, call.name, call.args)
                        rec.tool_calls += 1
                        if outcome.is_error:
                            rec.tool_errors += 1
                        if outcome.reward is not None:
                            rewards.append(outcome.reward)
                        if outcome.done:
                            done = True
                            auto = bool(outcome.metadata.get("auto_submitted"))
                            ended = "submitted" if call.name == finish else "done"
                            self._finish(outcome, rewards, auto, ended)
                    tool_images += outcome.images
                    pairs.append((call, outcome))
                    trec.calls.append(
                        CallRecord(
                            id=call.id,
                            name=call.name,
                            args=call.args if call.error is None else call.raw,
                            ok=not outcome.is_error,
                            result=outcome.text[:RESULT_CAP],
                            images=[p for p in map(self._save, outcome.images if self.frames else []) if p],
                            parse_error=call.error is not None,
                        )
                    )
                if not done:
                    last_call, last_outcome = pairs[-1]
                    note = wording.turns_left_note(self.max_turns - n, finish)
                    pairs[-1] = (last_call, _with_note(last_outcome, note))
                agent.results(pairs)
            elif not done:
                nudges += 1
                if nudges >= (MAX_NUDGES if finish else MAX_SILENT_WITHOUT_FINISH):
                    rec.end_reason = "no_tool_call"
                else:
                    agent.user(wording.nudge(finish) + wording.turns_left_note(self.max_turns - n, finish))
            if turn.truncated and not done:
                agent.notes(turn.reasoning[-NOTES_TAIL:])
            if self.frames:
                frame = self._picture("render") or (tool_images[-1] if tool_images else None)
                trec.frame = self._save(frame)
            trec.env_s = round(rec.env_seconds - env_before, 3)
            rec.turns.append(trec)
            if done or rec.end_reason == "no_tool_call":
                break

        if not done and wording.can_auto_submit(finish_tool):
            outcome = self._timed_env(session.call, finish, {})
            if outcome.reward is not None:
                rewards.append(outcome.reward)
            self._finish(outcome, rewards, True, None)
        elif not done:
            rec.reward = rewards[-1] if rewards else None
        if len(rewards) > 1:
            # An env that rewards every step: `reward` is the last one, the return is kept beside it.
            rec.info["return"] = round(sum(rewards), 6)
            rec.info["rewards_given"] = len(rewards)
        final = self._picture("render")
        if final is not None and self.store is not None:
            rec.render = self.store.put_render(f"{rec.key}__final", final)
        doc = getattr(session, "document", None)
        rec.final_doc = self._timed_env(doc) if callable(doc) else None

    def _finish(self, outcome: ToolOutcome, rewards: list[float], auto: bool, ended: str | None) -> None:
        """Take the grade. `ended` says how the env ended the episode in the loop (`submitted` through its
        finishing tool, `done` on another action; `auto` when it ended it on its own budget); None when the
        loop submitted on the model's behalf after the loop, whose end reason then says why it had to."""
        rec = self.rec
        rec.grade = outcome.grade
        reward = outcome.reward if outcome.reward is not None else (outcome.grade or {}).get("total")
        rec.reward = reward if reward is not None else (rewards[-1] if rewards else None)
        rec.auto_submitted = auto
        if ended is not None:
            rec.end_reason = "auto_submitted" if auto else ended


def _with_note(outcome: ToolOutcome, note: str) -> ToolOutcome:
    return ToolOutcome(
        outcome.text + note,
        outcome.images,
        outcome.is_error,
        outcome.done,
        outcome.reward,
        outcome.grade,
        outcome.metadata,
    )


def _cost(model: str, usage: Usage) -> float | None:
    try:
        from evalkit.providers.prices import cost_usd

        return cost_usd(model, usage)
    except Exception as e:  # a missing or broken price table costs the number, never the episode
        log.warning("no cost for %s: %s", model, e)
        return None
