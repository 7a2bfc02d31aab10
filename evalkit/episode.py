"""run_episode: the one place an agent and an environment meet.

reset → list tools → opening message (with the target image in `reference` mode) → turns, each one model
call whose tool calls all go through the environment → frames → submit (on the model's behalf if it never
did) → an EpisodeRecord. Mistakes the model makes are data in the turn; an infrastructure failure ends the
episode unscored (`reward` None, `error_class` set) so that resume runs it again.
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

from evalkit.errors import ConfigError, EndpointError, EvalkitError, error_class_of
from evalkit.providers import check_endpoints, check_keys, make_agent, parse_spec
from evalkit.providers.attempts import log_usage
from evalkit.providers.health import ProviderHealth
from evalkit.providers.images import budget, check_budget
from evalkit.traces import FrameStore, TraceWriter, read_run_json, write_run_json
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


class EpisodeCancelled(EvalkitError):
    """The caller asked the episode to stop (an interrupted batch); such a record is not kept."""

    error_class = "cancelled"


NUDGE = (
    "You did not call a tool. Continue the task by calling one of your tools; when you are done, call submit."
)
MAX_NUDGES = 3
NOTES_TAIL = 8000

AgentFactory = Callable[..., Agent]


def opening_text(meta: dict, mode: str, max_turns: int) -> str:
    """The first user message. The task rules live in the system prompt (the env's instructions)."""
    if meta.get("prompt"):
        head = str(meta["prompt"])
    elif mode == "reference":
        head = "The target is attached. Recreate it with your tools, then call submit."
    elif mode == "description":
        head = "Recreate the design described in your instructions with your tools, then call submit."
    else:
        head = "Begin the task described in your instructions."
    return f"{head}\nYou have {max_turns} turns; each turn may call several tools."


def turns_left_note(left: int) -> str:
    if left <= 0:
        return "\n[no turns left]"
    if left == 1:
        return "\n[1 turn left: your next turn is the last — finish and call submit in it]"
    return f"\n[{left} turns left]"


def _agent_label(agent: str | AgentFactory) -> str:
    return (
        agent
        if isinstance(agent, str)
        else getattr(agent, "model", None) or getattr(agent, "__name__", "custom")
    )


def _session(env: Any) -> EnvSession:
    if isinstance(env, EnvSession) and not hasattr(env, "base_url"):
        return env
    if callable(env) and not isinstance(env, str) and not hasattr(env, "base_url"):
        return env()
    from evalkit.envs.openenv import connect

    return connect(env)


def _env_name(env: Any) -> str:
    """The same name `run_batch` gives an env, so an episode run alone has the key a batch would give it."""
    if isinstance(env, str) or hasattr(env, "base_url"):
        from evalkit.envs.openenv import env_identity

        try:
            return env_identity(env)
        except ConfigError:  # unreachable: the episode itself records the env error
            return str(getattr(env, "base_url", env))
    return getattr(env, "name", None) or type(env).__name__


def default_mode(env_name: str) -> str:
    """The first mode an embedded env declares (berth's neutral `text`); `reference` for any other env."""
    from evalkit.envs import MODES

    return MODES.get(env_name, ("reference",))[0]


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


def _reset_kwargs(task: str | dict | None, **fixed: Any) -> dict:
    if isinstance(task, dict):
        return {**fixed, **task}
    return {**fixed, "task_id": task}


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
    health: ProviderHealth | None = None,
    preflight: bool = True,
) -> EpisodeRecord:
    """Run one episode of `agent` (a model spec, or a factory `f(system=, tools=, options=) -> Agent`) on
    `env` (a served environment, a base URL, or a callable returning an EnvSession) and return its record.
    With `out`, the record is appended to `<out>/trace.jsonl` and pictures go under `<out>`; with only
    `store_dir`, pictures go there and writing the record is left to the caller (`run_batch`). Setting
    `cancel` stops the episode before its next turn (error_class `cancelled`). `health` is the run's record
    of failing providers (`run_batch` shares one across its episodes).

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
    env_name = env_name or _env_name(env)
    mode = mode or default_mode(env_name)  # None: the env's first mode, as a batch picks it
    task_ident = task_key or (task if isinstance(task, str) else (task or {}).get("task_id")) or ""
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
    _Episode(rec, store, frames, options, max_turns, episode_timeout, cancel, health).run(
        agent,
        env,
        _reset_kwargs(
            task, surface=surface, mode=mode, skin=skin, coordinates=coordinates, max_steps=max_steps
        ),
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
        health: ProviderHealth | None = None,
    ):
        self.rec, self.store, self.frames, self.options = rec, store, frames, options
        self.max_turns, self.timeout, self.cancel = max_turns, episode_timeout, cancel
        self.health = health
        self.usage = Usage()
        self.usage_known = True
        """False once some request may have been billed without reporting its usage: the cost is unknown."""
        self.session: EnvSession | None = None
        self.agent: Agent | None = None

    def run(self, agent: str | AgentFactory, env: Any, reset_kw: dict) -> None:
        rec, t0 = self.rec, time.monotonic()
        try:
            self.session = _session(env)
            self._play(agent, reset_kw, t0)
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
                try:
                    self.session.close()
                except Exception as e:
                    log.debug("closing the env session failed: %s", e)
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
            # Usage a provider never reported (a stream cut by the harness cap or the network, a request that
            # died with the harness) makes the cost unknown, not smaller.
            rec.cost_usd = _cost(rec.model, total) if self.usage_known else None

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

    def _play(self, agent_spec: str | AgentFactory, reset_kw: dict, t0: float) -> None:
        rec, session = self.rec, self.session
        meta = self._timed_env(session.reset, **reset_kw)
        rec.task_id = str(meta.get("task_id") or rec.task_id)
        rec.episode_id = meta.get("episode_id")
        for name in ("split", "tier", "difficulty_score", "prompt_version", "coordinates", "skin"):
            if meta.get(name) is not None:
                setattr(rec, name, meta[name])
        tools = self._timed_env(session.tools)
        planners = plan_tools(tools)
        system = str(meta.get("instructions") or "")
        self.agent = agent = (
            make_agent(agent_spec, system=system, tools=tools, options=self.options, health=self.health)
            if isinstance(agent_spec, str)
            else agent_spec(system=system, tools=tools, options=self.options)
        )
        target = self._picture("target")
        if target is not None and self.store is not None:
            rec.target = self.store.put_render(f"{rec.task_id}__target", target)
        if self.frames:
            rec.frame0 = self._save(self._picture("render"))
        images = [target] if target is not None and rec.mode == "reference" else []
        agent.user(opening_text(meta, rec.mode, self.max_turns), images)

        done, nudges, last_reward = False, 0, None
        rec.end_reason = "turn_limit"
        has_submit = any(t.name == "submit" for t in tools)
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
                        outcome = self._timed_env(session.call, call.name, call.args)
                        rec.tool_calls += 1
                        if outcome.is_error:
                            rec.tool_errors += 1
                        if outcome.reward is not None:
                            last_reward = outcome.reward
                        if outcome.done:
                            done = True
                            self._finish(outcome, auto=bool(outcome.metadata.get("auto_submitted")))
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
                if not done:
                    last_call, last_outcome = pairs[-1]
                    pairs[-1] = (last_call, _with_note(last_outcome, turns_left_note(self.max_turns - n)))
                agent.results(pairs)
            elif not done:
                nudges += 1
                if nudges >= MAX_NUDGES:
                    rec.end_reason = "no_tool_call"
                else:
                    agent.user(NUDGE + turns_left_note(self.max_turns - n))
            if turn.truncated and not done:
                agent.notes(turn.reasoning[-NOTES_TAIL:])
            if self.frames:
                frame = self._picture("render") or (tool_images[-1] if tool_images else None)
                trec.frame = self._save(frame)
            trec.env_s = round(rec.env_seconds - env_before, 3)
            rec.turns.append(trec)
            if done or rec.end_reason == "no_tool_call":
                break

        if not done and has_submit:
            self._finish(self._timed_env(session.call, "submit", {}), auto=True, in_loop=False)
        elif not done:
            # An env that says what an unfinished episode scores (berth: 0, nothing was submitted) gets
            # that score, rather than an episode that counts as never scored.
            unfinished = meta.get("unfinished_reward")
            numeric = isinstance(unfinished, int | float) and not isinstance(unfinished, bool)
            rec.reward = last_reward if last_reward is not None or not numeric else float(unfinished)
        final = self._picture("render")
        if final is not None and self.store is not None:
            rec.render = self.store.put_render(f"{rec.key}__final", final)
        doc = getattr(session, "document", None)
        rec.final_doc = self._timed_env(doc) if callable(doc) else None
        if rec.final_doc is None and rec.plans and rec.plans[-1].final:
            rec.final_doc = rec.plans[-1].plan

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

    def _finish(self, outcome: ToolOutcome, auto: bool, in_loop: bool = True) -> None:
        """Take the grade. In the loop, the env ended the episode (the model's submit, or the env's own step
        limit); after it, the loop submitted on the model's behalf and the end reason says why it had to."""
        rec = self.rec
        rec.grade = outcome.grade
        rec.reward = outcome.reward if outcome.reward is not None else (outcome.grade or {}).get("total")
        rec.auto_submitted = auto or not in_loop
        if in_loop:
            rec.end_reason = "auto_submitted" if auto else "submitted"


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
