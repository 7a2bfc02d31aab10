"""run_episode: the one place an agent and an environment meet.

reset (waiting for a free session on a full server) → list tools → the env's instructions as the system
prompt and its task text and pictures as the opening message (`evalkit.run.wording`) → turns, each one model
call whose tool calls all go through the environment → frames → the episode ends when the env says done, at
the turn limit, when the model stops calling tools, or — in an env with no finishing tool — when it replies
in text, which is its answer (`answered`, unless the env's reset metadata says `answer_ends_episode:
false`); then, if the env has a finishing tool that needs no arguments, it is called on the model's behalf
→ an EpisodeRecord. Mistakes the model makes are data in the turn; an infrastructure failure ends the
episode unscored (`reward` None, `error_class` set) so that resume runs it again.

An env that shows the model a screen says so in its reset metadata (`screenshot_tool`): the loop then puts a
screenshot in the opening message, follows every turn in which the model took none with a fresh one on its
last tool result (or on the nudge), as any computer-use harness does, and uses the screenshots as frames.
The turn budget defaults to the env's own (`max_turns` in the reset metadata).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalkit import secrets
from evalkit.envs import loopback
from evalkit.envs.sessions import close_quietly, default_mode, default_surface, open_session, reset_kwargs
from evalkit.envs.sessions import env_name as name_of
from evalkit.errors import ConfigError, EndpointError, EpisodeCancelled, error_class_of
from evalkit.providers import check_endpoints, check_keys, make_agent, parse_spec
from evalkit.providers.attempts import log_usage
from evalkit.providers.common import notes_text
from evalkit.providers.health import ProviderHealth
from evalkit.providers.images import budget, check_budget
from evalkit.records import live, transcripts
from evalkit.records.traces import FrameStore, TraceWriter, read_run_json, write_run_json
from evalkit.run import wording
from evalkit.run.breaker import refused_key
from evalkit.types import (
    RESULT_CAP,
    Agent,
    AgentOptions,
    CallRecord,
    EnvSession,
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
DEFAULT_MAX_TURNS = wording.DEFAULT_MAX_TURNS
SCREEN_IMAGE_WINDOW = (12, 4)
"""The image budget of a computer-use episode given none: a screenshot a turn would outgrow any context."""

AgentFactory = Callable[..., Agent]

_frames_pool: ThreadPoolExecutor | None = None
_frames_users = 0
_frames_lock = threading.Lock()


def _frame_taker() -> ThreadPoolExecutor:
    """The threads that take episodes' frames while their models think (`_Episode._later`), one process's."""
    global _frames_pool
    with _frames_lock:
        if _frames_pool is None:
            _frames_pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="evalkit-frames")
        return _frames_pool


@contextlib.contextmanager
def frame_takers() -> Iterator[None]:
    """Held by every running episode (and by a batch, across its episodes): when the last lets go, the frame
    takers stop and their kept connections to env servers close, so that a notebook that runs batch after
    batch holds no thread or socket between them."""
    global _frames_pool, _frames_users
    with _frames_lock:
        _frames_users += 1
    try:
        yield
    finally:
        with _frames_lock:
            _frames_users -= 1
            pool = _frames_pool if not _frames_users else None
            if pool is not None:
                _frames_pool = None
        if pool is not None:
            pool.shutdown(wait=True)  # idle: each episode waited for its own frames before it ended
            loopback.release()


def _agent_label(agent: str | AgentFactory) -> str:
    return (
        agent
        if isinstance(agent, str)
        else getattr(agent, "model", None) or getattr(agent, "__name__", "custom")
    )


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
    evalset_task: str | None = None,
    task_key: str | None = None,
    env_name: str | None = None,
    store_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
    health: ProviderHealth | None = None,
    preflight: bool = True,
    save_raw: bool = False,
) -> EpisodeRecord:
    """Run one episode of `agent` (a model spec, or a factory `f(system=, tools=, options=) -> Agent`) on
    `env` (a served environment, a base URL, or a callable returning an EnvSession) and return its record.
    With `out`, the record is appended to `<out>/trace.jsonl` and pictures go under `<out>`; with only
    `store_dir`, pictures go there and writing the record is left to the caller (`run_batch`). A dict
    `task` is the reset's keyword arguments. `surface` and `mode` default to the first the env declares
    (`tools`, and no mode, for envs that declare none). Setting `cancel` stops the episode before its next
    turn (error_class `cancelled`). `max_turns` None gives the env's own budget for the surface (reset
    metadata `max_turns`), else DEFAULT_MAX_TURNS. `health` is the run's record of failing providers
    (`run_batch` shares one across its episodes). The record keeps what the model was sent
    (`evalkit.records.transcripts`); `save_raw` also keeps each call's request and response bodies under
    `<out>/raw/`, images replaced by references to the frame store.

    Before anything starts (unless `preflight=False`, as `run_batch` does after its own checks): an unknown
    provider, a missing key or endpoint URL, an endpoint nothing answers at, or an image budget that cannot
    be honoured raises ConfigError."""
    options = options or AgentOptions()
    check_budget(options.keep_images, options.image_window)
    if isinstance(agent, str):
        parse_spec(agent)  # an unknown provider is a config error: raise before touching the env
        if preflight:
            check_keys([agent])
            check_endpoints([agent])
    label = _agent_label(agent)
    env_name = env_name or name_of(env)
    surface = surface or default_surface(env_name)
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
    reset_kw = reset_kwargs(task, env_name, surface, mode, skin=skin, coordinates=coordinates,
                            max_steps=max_steps)  # fmt: skip
    rec.reset = {k: v for k, v in reset_kw.items() if v is not None}
    if isinstance(rec.reset.get("split"), str):
        rec.split = rec.reset["split"]
    try:
        episode = _Episode(rec, store, frames, options, max_turns, episode_timeout, cancel, health)
        episode.save_raw, episode.task = save_raw, task
        with frame_takers():
            episode.run(agent, env, reset_kw)
        if writer is not None:
            writer.append(rec)
    finally:
        if out is not None:  # a batch (store_dir only) removes the live file once it has written the record
            live.finish(out, rec.key)
    if store_dir is not None:
        from evalkit.analysis.display import attach  # the record's notebook display then finds its frames

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
        max_turns: int | None,
        episode_timeout: float | None,
        cancel: threading.Event | None = None,
        health: ProviderHealth | None = None,
    ):
        self.rec, self.store, self.frames, self.options = rec, store, frames, options
        self.max_turns, self.timeout, self.cancel = max_turns, episode_timeout, cancel
        self.health = health
        self.shot_tool: str | None = None
        self.shot: Image | None = None
        self.rewards: list[float] = []
        """Every reward the env gave in this episode, in order."""
        self.usage = Usage()
        self.usage_known = True
        """False once some request may have been billed without reporting its usage: the cost is unknown."""
        self.session: EnvSession | None = None
        self.agent: Agent | None = None
        self.save_raw = False
        self.task: str | dict | None = None
        """The task as asked (the reset's own arguments), which the recorded task id is told apart by."""
        self.tx: transcripts.Recorder | None = None
        """What the model is sent, for the record's transcript."""
        self._dropped = 0
        """Images the agent's budget dropped so far that the transcript has marked."""
        self.calls_made = 0
        """Tool calls sent to the env so far (the model's and the loop's)."""
        self._rendered: tuple[int, Image | None] | None = None
        self._pending: Future | None = None
        """The frame being taken in the background (`_later`), if any."""

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
            # What a server said can hold a key or a token (an echoed header): nothing like one is kept.
            rec.error = secrets.scrub(f"{type(e).__name__}: {e}")
            rec.traceback = secrets.scrub(traceback.format_exc(limit=20))
            rec.reward = None
        finally:
            # Nothing here may raise: it runs after the episode boundary, and one failure would kill a batch.
            try:
                self._settle()
            except Exception as e:  # only after the episode broke: a normal end settled before its end
                log.debug("taking a frame failed: %s", e)
            if self.session is not None:
                close_quietly(self.session)
            rec.seconds = round(time.monotonic() - t0, 3)
            rec.n_turns = len(rec.turns)
            info = dict(getattr(self.agent, "info", None) or {})
            rec.provider_switches = list(info.pop("provider_switches", []) or [])
            # Requests that belong to no turn (the thinking-off probe) were billed too.
            total = (
                self.usage + Usage.from_dict(info.get("probe_usage"))
                if info.get("probe_usage")
                else self.usage
            )
            rec.usage = total.to_dict()
            unknown = sum(not t.usage_known for t in rec.turns)
            if unknown:
                info["usage_unknown_turns"] = unknown
            rec.info.update(info)
            if self.tx is not None:
                rec.transcript = self.tx.to_dict()
            # Usage a provider never reported (a stream cut by the harness cap or the network, a request that
            # died with the harness) makes the cost unknown, not smaller.
            rec.cost_usd = _cost(rec.model, total) if self.usage_known else None

    def _timed_env(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        t = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            self.rec.env_seconds = round(self.rec.env_seconds + time.monotonic() - t, 4)

    def _picture(self, what: str, timed: bool = True) -> Image | None:
        fn = getattr(self.session, what, None)
        if not callable(fn):
            return None
        return self._timed_env(fn) if timed else fn()

    def _call(self, name: str, args: dict) -> ToolOutcome:
        self._settle()
        self.calls_made += 1
        return self._timed_env(self.session.call, name, args)

    def _render(self, timed: bool = True) -> Image | None:
        """The env's picture of its state; with no tool call since the last one, that one again (the final
        render after the last turn's frame is the same picture, and would cost the env an encode)."""
        if self._rendered is None or self._rendered[0] != self.calls_made:
            self._rendered = (self.calls_made, self._picture("render", timed))
        return self._rendered[1]

    def _later(self, take: Callable[[bool], None]) -> None:
        """Take a frame (`take(timed)`: a picture from the env, saved, then published) in the background,
        while the model thinks about its next turn: in series, its round trip and the env's encode lengthened
        every turn. Nothing moves the env's state meanwhile: `_settle` waits for it before the next tool call,
        the final render and the end of the episode. A session that does not say its pictures may be read
        from another thread (`background_reads`, as an OpenEnv session's HTTP reads may) is read in series."""
        if not self._background:
            take(True)
            return
        self._settle()
        self._pending = _frame_taker().submit(take, False)

    @property
    def _background(self) -> bool:
        return bool(getattr(self.session, "background_reads", False))

    def _settle(self) -> None:
        """Wait for the frame `_later` is taking (what it raised is raised here)."""
        pending, self._pending = self._pending, None
        self._wait(pending)

    def _wait(self, pending: Future | None) -> Any:
        """The result of env work done in the background; the wait for it is env time."""
        if pending is None:
            return None
        t = time.monotonic()
        try:
            return pending.result()
        finally:
            self.rec.env_seconds = round(self.rec.env_seconds + time.monotonic() - t, 4)

    def _save(self, image: Image | None) -> str | None:
        return self.store.put(image) if self.store is not None and image is not None else None

    def _play(self, agent_spec: str | AgentFactory, meta: dict, t0: float) -> None:
        rec, session = self.rec, self.session
        rec.task_id = recorded_task_id(meta.get("task_id"), self.task, rec.task_id)
        rec.episode_id = meta.get("episode_id")
        for name in ("split", "tier", "difficulty_score", "prompt_version", "coordinates", "skin"):
            if meta.get(name) is not None:
                setattr(rec, name, meta[name])
        self._publish()  # started: a viewer shows the episode from its reset on, before its agent is made
        tools = self._timed_env(session.tools)
        self._screen(meta, tools)
        finish_tool = wording.finishing_tool(tools)
        finish = finish_tool.name if finish_tool else None
        answers = wording.answer_ends(finish_tool, meta)
        planners = plan_tools(tools)
        system = wording.system_prompt(meta, tools)
        self.agent = agent = (
            make_agent(agent_spec, system=system, tools=tools, options=self.options, health=self.health)
            if isinstance(agent_spec, str)
            else agent_spec(system=system, tools=tools, options=self.options)
        )
        run_dir = self.store.run_dir if self.store is not None else None
        self.tx = transcripts.Recorder(run_dir, self.frames, rec.key, self.save_raw)
        if self.save_raw and hasattr(agent, "keep_raw"):
            agent.keep_raw = True
        target = self._picture("target")
        if target is not None and self.store is not None:
            rec.target = self.store.put_render(f"{rec.task_id}__target", target)
            self.tx.alias(target, rec.target)
        shots = self._screenshot().images if self.shot_tool else []
        opening = wording.session_opening(session, meta, self.max_turns, target, shots)
        agent.user(opening.text, opening.images)
        self.tx.begin(system, tools, opening.text, opening.images)
        if self.frames:
            seen = opening.observed[-1] if opening.observed else None

            def first_frame(timed: bool) -> None:
                rec.frame0 = self._save(shots[-1] if shots else (self._render(timed) or seen))
                self._publish()

            self._later(first_frame)
        else:
            self._publish()

        done, nudges, rewards = False, 0, self.rewards
        rec.end_reason = "turn_limit"
        images_budget = budget(self.options.keep_images, self.options.image_window)
        for n in range(1, self.max_turns + 1):
            if self.cancel is not None and self.cancel.is_set():
                raise EpisodeCancelled("the batch was interrupted")
            if self.timeout is not None and time.monotonic() - t0 > self.timeout:
                rec.end_reason = "deadline"
                break
            if images_budget is not None:
                agent.prune_images(images_budget.keep, images_budget.most)
            tm = time.monotonic()
            turn = self._step(agent, n)
            model_s = time.monotonic() - tm
            self._sent(agent, n)
            rec.model_seconds = round(rec.model_seconds + model_s, 4)
            self.usage = self.usage + turn.usage
            self.usage_known = self.usage_known and turn.usage_known
            trec = TurnRecord(
                turn=n,
                text=turn.text,
                reasoning=turn.reasoning,
                stop=turn.stop,
                usage=turn.usage.to_dict(),
                model_s=round(model_s, 3),
                attempts=1 + len(turn.attempts),
                failed_attempts=[a.to_dict() for a in turn.attempts],
                usage_known=turn.usage_known,
                provider=turn.provider,
                route=turn.route,
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
                        outcome = ToolOutcome(call.error, is_error=True)
                        rec.parse_errors += 1
                    else:
                        outcome = self._call(call.name, call.args)
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
                        if call.name in planners:
                            self._keep_plan(n, call.id, call.name, call.args, outcome)
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
                fresh, done = self._look(turn, pairs, done, trec)
                if not done:
                    last_call, last_outcome = pairs[-1]
                    note = wording.turns_left_note(self.max_turns - n, finish)
                    pairs[-1] = (last_call, wording.with_note(last_outcome, note, fresh))
                agent.results(pairs)
                self.tx.results(n, pairs, "" if done else note, bool(fresh) and not done)
            elif answers and not turn.truncated:
                # No finishing tool: a reply in text is the model's answer, and an empty one is no answer.
                rec.end_reason = "answered" if turn.text.strip() else "no_tool_call"
            elif not done and not answers:
                fresh, done = self._look(turn, [], done, trec)
                nudges += 1
                if not done and nudges >= MAX_NUDGES:
                    rec.end_reason = "no_tool_call"
                elif not done:  # (done: the env ended the episode on the loop's screenshot)
                    left = wording.turns_left_note(self.max_turns - n, finish)
                    said = wording.nudge(finish) + left
                    agent.user(said, fresh)
                    self.tx.user(n, said, fresh, "nudge", shot=bool(fresh))
            if turn.truncated and not done:
                agent.notes(turn.reasoning[-NOTES_TAIL:])
                self.tx.user(n, notes_text(turn.reasoning[-NOTES_TAIL:]), [], "notes from a cut turn")
            trec.env_s = round(rec.env_seconds - env_before, 3)
            rec.turns.append(trec)
            if self.frames:
                self._later(functools.partial(self._frame, trec, self.shot, tool_images))
            else:
                self._publish()
            if done or rec.end_reason in ("no_tool_call", "answered"):
                break

        if not done and wording.can_auto_submit(finish_tool):
            outcome = self._call(finish, {})
            if outcome.reward is not None:
                rewards.append(outcome.reward)
            self._finish(outcome, rewards, True, None)
        elif not done:
            # An env that says what an unfinished episode scores (berth: 0, nothing was submitted) gets that
            # score, rather than an episode that counts as never scored.
            unfinished = meta.get("unfinished_reward")
            numeric = isinstance(unfinished, int | float) and not isinstance(unfinished, bool)
            rec.reward = rewards[-1] if rewards else (float(unfinished) if numeric else None)
        if len(rewards) > 1:
            # An env that rewards every step: `reward` is the last one, the return is kept beside it.
            rec.info["return"] = round(sum(rewards), 6)
            rec.info["rewards_given"] = len(rewards)
        # The env's final document, asked for beside the last frame: two reads, neither waits for the other.
        doc = getattr(session, "document", None)
        document = _frame_taker().submit(doc) if callable(doc) and self._background else None
        self._settle()
        final = self._render()
        if final is not None and self.store is not None:
            rec.render = self.store.put_render(f"{rec.key}__final", final)
        if document is not None:
            rec.final_doc = self._wait(document)
        else:
            rec.final_doc = self._timed_env(doc) if callable(doc) else None
        if rec.final_doc is None and rec.plans and rec.plans[-1].final:
            rec.final_doc = rec.plans[-1].plan

    def _frame(self, trec: TurnRecord, shot: Image | None, images: list[Image], timed: bool) -> None:
        """Turn `trec`'s frame: the loop's screenshot, else the env's render, else a tool's last image."""
        trec.frame = self._save(shot or self._render(timed) or (images[-1] if images else None))
        self._publish()

    def _sent(self, agent: Agent, n: int) -> None:
        """After the model call of turn `n`: the images its request no longer carried (an image budget, a
        refused prompt) and, with `save_raw`, its request and response bodies."""
        dropped = getattr(agent, "dropped_images", None) or []
        if len(dropped) > self._dropped:
            self.tx.pruned(n, list(dropped[self._dropped :]))
            self._dropped = len(dropped)
        if self.save_raw:
            self.tx.raw(n, getattr(agent, "last_raw", None))

    def _publish(self) -> None:
        """The episode's progress, for a viewer watching the run (`evalkit.records.live`)."""
        if self.store is not None:
            live.publish(self.store.run_dir, self.rec, self.max_turns)

    def _keep_plan(self, turn: int, call_id: str, tool: str, args: dict, outcome: ToolOutcome) -> None:
        """Keep the plan whole with the env's whole answer (the call's result in the turn is capped)."""
        final = outcome.done and not outcome.metadata.get("auto_submitted")
        plan = PlanRecord(turn, call_id, tool, _plan_value(args.get("plan")), _answer(outcome.text),
                          not outcome.is_error, final)  # fmt: skip
        self.rec.plans.append(plan)
        self.rec.drafts += plan.ok and not outcome.done

    def _step(self, agent: Agent, n: int) -> Turn:
        """One model call. When it fails, what its failed requests reported still counts, and whatever
        they may have cost without saying makes the episode's cost unknown."""
        try:
            return agent.step()
        except EndpointError as e:
            refused = refused_key(self.rec.model, e)
            if refused is not None:  # every episode of this model would fail alike: not data, a config error
                raise refused from e
            usage, known = log_usage(e.attempts)
            self.usage = self.usage + usage
            self.usage_known = self.usage_known and known and bool(e.attempts)
            if e.attempts:
                self.rec.info["failed_turn"] = {
                    "turn": n,
                    "attempts": len(e.attempts),
                    "failed_attempts": [a.to_dict() for a in e.attempts],
                }
            raise
        except Exception:
            self.usage_known = False  # the request may have been answered, and billed, before the break
            raise

    def _screen(self, meta: dict, tools: list) -> None:
        """Settle the turn budget, and whether the env shows a screen (`screenshot_tool`): then, unless the
        user set an image budget, old screenshots are dropped (SCREEN_IMAGE_WINDOW, the opening kept)."""
        self.max_turns = wording.turn_budget(self.max_turns, meta)
        name = meta.get("screenshot_tool")
        self.shot_tool = name if any(t.name == name for t in tools) else None
        if self.shot_tool and not (self.options.keep_images or self.options.image_window):
            self.options = dataclasses.replace(self.options, image_window=SCREEN_IMAGE_WINDOW)
            self.rec.info["image_window"] = list(SCREEN_IMAGE_WINDOW)

    def _screenshot(self) -> ToolOutcome:
        """The env's screenshot tool, called by the loop (not a model call: no step of the model's)."""
        return self._call(self.shot_tool, {})

    def _look(self, turn: Any, pairs: list, done: bool, trec: TurnRecord) -> tuple[list[Image], bool]:
        """The screen after a turn, on an env that shows one: the model's own newest screenshot, else a fresh
        one the loop takes to go with the model's last result (or the nudge). Returns (the fresh images,
        whether the episode is over)."""
        self.shot = None
        if not self.shot_tool:
            return [], done
        own = [o.images[-1] for c, o in pairs if c.name == self.shot_tool and o.images]
        if own or done or any(c.name == self.shot_tool for c in turn.calls):
            self.shot = own[-1] if own else None
            return [], done
        extra = self._screenshot()
        if extra.reward is not None:
            self.rewards.append(extra.reward)
        if extra.done:
            # Not the model's action: the env ended the episode on its own (its budget ran out).
            self._finish(extra, self.rewards, True, "done")
        if extra.images:
            self.shot = extra.images[-1]
            if self.frames and trec.calls:
                trec.calls[-1].images += [p for p in map(self._save, extra.images) if p]
        return list(extra.images), done or extra.done

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


def _cost(model: str, usage: Usage) -> float | None:
    try:
        from evalkit.providers.prices import cost_usd

        return cost_usd(model, usage)
    except Exception as e:  # a missing or broken price table costs the number, never the episode
        log.warning("no cost for %s: %s", model, e)
        return None
