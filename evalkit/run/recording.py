"""An episode's record as it fills in: what the loop decided, written down.

`Recording` keeps the `EpisodeRecord` of one episode and everything that goes into it besides the loop's
rules: its identity and reset, the turn records and their calls, the plans kept whole, the frames (taken by
`pictures.Camera` while the model thinks and saved to the run's frame store), what the model was sent (the
transcript), the usage and what it cost (each request at its provider and tier: `prices.episode_cost`; so
far, against `--episode-max-cost`: `budget.EpisodeMeter`), the live progress a viewer watches, and the
totals it is sealed with. The episode (`episode.Episode`) says what happened; this module says how the
record keeps it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
import traceback
from pathlib import Path
from typing import Any

from evalkit import secrets
from evalkit.envs.client.selection import canonical
from evalkit.errors import error_class_of
from evalkit.providers import prices
from evalkit.providers.attempts import log_usage
from evalkit.records import live, transcripts
from evalkit.records.rundir import FrameStore
from evalkit.run import wording
from evalkit.run.budget import EpisodeMeter
from evalkit.run.jobs import Job
from evalkit.run.pictures import Camera
from evalkit.types import (
    RESULT_CAP,
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
)

log = logging.getLogger(__name__)

META_FIELDS = ("split", "tier", "difficulty_score", "prompt_version", "coordinates", "skin")
"""Fields of the record the env's reset metadata sets when it says them."""


class Recording:
    """The record of one episode (`rec`), with its frame store, its camera and its transcript."""

    def __init__(self, rec: EpisodeRecord, store_dir: str | Path | None, max_turns: int | None):
        self.rec = rec
        self.store = FrameStore(store_dir) if store_dir is not None else None
        self.camera: Camera | None = None
        self.tx: transcripts.Recorder | None = None
        """What the model is sent, for the record's transcript."""
        self.max_turns = max_turns
        """The turn budget a viewer is shown (the settings', then the rules')."""
        self.usage, self.usage_known = Usage(), True
        """`usage_known` False once some request may have been billed without reporting its usage."""
        self._dropped = 0
        self._env_before = 0.0
        self._meter: EpisodeMeter | None = None
        self.t0 = time.monotonic()

    @classmethod
    def start(cls, job: Job, env: str, reset: dict, store_dir: str | Path | None,
              max_turns: int | None) -> Recording:  # fmt: skip
        """The record of `job` on env `env`, reset with `reset`, its pictures under `store_dir`."""
        rec = EpisodeRecord(
            key=job.key, model=job.model, env=env, surface=job.surface, mode=job.mode, task_id=str(job.ident),
            skin=job.skin, coordinates=job.coordinates, repeat=job.repeat, evalset_task=job.evalset_task,
            started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            run_dir=str(store_dir) if store_dir is not None else None,
            reset={k: v for k, v in reset.items() if v is not None},
        )  # fmt: skip
        if isinstance(rec.reset.get("split"), str):
            rec.split = rec.reset["split"]
        return cls(rec, store_dir, max_turns)

    # ---- the start

    def opened(self, session: Any, meta: dict, task: Any, waited: float) -> Camera:
        """The session is reset: what the reset said goes into the record, and its camera is made."""
        rec = self.rec
        if waited:
            rec.info["capacity_wait_s"] = round(waited, 2)
        rec.env_seconds = round(time.monotonic() - self.t0 - waited, 4)
        self.camera = Camera(session, self.store, self.env_time)
        rec.task_id = recorded_task_id(meta.get("task_id"), task, rec.task_id)
        rec.episode_id = meta.get("episode_id")
        for name in META_FIELDS:
            if meta.get(name) is not None:
                setattr(rec, name, meta[name])
        self.publish()  # started: a viewer shows the episode from its reset on, before its agent is made
        return self.camera

    def begin(self, system: str, tools: list[ToolSpec], opening: wording.Opening, target: Image | None,
              shots: list[Image], frames: bool, save_raw: bool) -> None:  # fmt: skip
        """The conversation starts: the task's picture is kept, the opening message goes into the
        transcript, and the first frame is taken (the loop's screenshot, else the env's render, else the
        reset's own picture)."""
        rec, camera = self.rec, self.camera
        run_dir = self.store.run_dir if self.store is not None else None
        self.tx = transcripts.Recorder(run_dir, frames, rec.key, save_raw)
        if target is not None and self.store is not None:
            rec.target = self.store.put_render(f"{rec.task_id}__target", target)
            self.tx.alias(target, rec.target)
        self.tx.begin(system, tools, opening.text, opening.images)
        if not frames:
            self.publish()
            return
        shot = shots[-1] if shots else None

        def first_frame(timed: bool) -> None:
            rec.frame0 = camera.save(camera.frame(shot, opening.observed, timed))
            self.publish()

        camera.later(first_frame)

    # ---- a turn

    @property
    def turns(self) -> int:
        """Turns taken so far."""
        return len(self.rec.turns)

    def used(self, turn: Turn) -> None:
        """What the model call of a turn cost (its usage, and whether the provider said it all)."""
        self.usage = self.usage + turn.usage
        self.usage_known = self.usage_known and turn.usage_known

    def turn(self, n: int, turn: Turn, model_s: float) -> TurnRecord:
        """The record of the model's turn `n`, its calls to come (the env's time counted from now)."""
        self._env_before = self.rec.env_seconds
        return TurnRecord(
            turn=n, text=turn.text, reasoning=turn.reasoning, stop=turn.stop, usage=turn.usage.to_dict(),
            model_s=round(model_s, 3), attempts=1 + len(turn.attempts),
            failed_attempts=[a.to_dict() for a in turn.attempts], usage_known=turn.usage_known,
            provider=turn.provider, route=turn.route,
        )  # fmt: skip

    def called(self, trec: TurnRecord, call: Call, outcome: ToolOutcome, frames: bool) -> None:
        trec.calls.append(
            CallRecord(
                id=call.id,
                name=call.name,
                args=call.args if call.error is None else call.raw,
                ok=not outcome.is_error,
                result=outcome.text[:RESULT_CAP],
                images=self.camera.save_all(outcome.images) if frames else [],
                parse_error=call.error is not None,
            )
        )

    def ran(self, outcome: ToolOutcome) -> None:
        """One of the model's calls ran on the env."""
        self.rec.tool_calls += 1
        self.rec.tool_errors += outcome.is_error

    def parse_error(self) -> None:
        self.rec.parse_errors += 1

    def plan(self, turn: int, call: Call, outcome: ToolOutcome) -> None:
        """Keep the plan whole with the env's whole answer (the call's result in the turn is capped)."""
        final = outcome.done and not outcome.metadata.get("auto_submitted")
        plan = PlanRecord(
            turn, call.id, call.name, _plan_value(call.args.get("plan")), _answer(outcome.text),
            not outcome.is_error, final,
        )  # fmt: skip
        self.rec.plans.append(plan)
        self.rec.drafts += plan.ok and not outcome.done

    def screenshot(self, trec: TurnRecord, images: list[Image]) -> None:
        """The loop's own screenshot after a turn: kept with the turn's last call."""
        if trec.calls:
            trec.calls[-1].images += self.camera.save_all(images)

    def said(self, n: int, text: str, images: list[Image], note: str, shot: bool = False) -> None:
        """A user message the loop sent after turn `n` (a nudge, notes from a cut turn, an operator call)."""
        self.tx.user(n, text, images, note, shot=shot)

    def results(self, n: int, pairs: list, note: str, shot: bool) -> None:
        """The results of turn `n`'s calls as the model was sent them."""
        self.tx.results(n, pairs, note, shot)

    def turn_done(self, trec: TurnRecord, shot: Image | None, images: list[Image], frames: bool) -> None:
        """The turn is in the record; its frame is taken while the model thinks about the next one."""
        trec.env_s = round(self.rec.env_seconds - self._env_before, 3)
        self.rec.turns.append(trec)
        if not frames:
            self.publish()
            return

        def frame(timed: bool) -> None:
            trec.frame = self.camera.save(self.camera.frame(shot, images, timed))
            self.publish()

        self.camera.later(frame)

    def sent(self, n: int, agent: Any, save_raw: bool) -> None:
        """After the model call of turn `n`: the images its request no longer carried (an image budget, a
        refused prompt) and, with `save_raw`, its request and response bodies."""
        dropped = getattr(agent, "dropped_images", None) or []
        if len(dropped) > self._dropped:
            self.tx.pruned(n, list(dropped[self._dropped :]))
            self._dropped = len(dropped)
        if save_raw:
            self.tx.raw(n, getattr(agent, "last_raw", None))

    def past_cost(self, limit: float | None) -> bool:
        """Whether the turns so far cost more than `limit` (USD; None: no limit), each request priced as the
        sealed record's are; once they do, `info["cost_limit"]` says what was spent of it."""
        if limit is None:
            return False
        if self._meter is None:
            self._meter = EpisodeMeter(self.rec.model, limit, self.rec.started)
        if not self._meter.passed(self.rec.turns):
            return False
        self.rec.info["cost_limit"] = self._meter.said()
        return True

    def failed_requests(self, n: int, attempts: list) -> None:
        """The requests of a call that brought no turn: their usage counts, the record keeps them."""
        usage, known = log_usage(attempts)
        self.usage = self.usage + usage
        self.usage_known = self.usage_known and known and bool(attempts)
        if attempts:
            failed = [a.to_dict() for a in attempts]
            self.rec.info["failed_turn"] = {"turn": n, "attempts": len(attempts), "failed_attempts": failed}

    def usage_lost(self) -> None:
        """A request may have been answered, and billed, without its usage reaching us."""
        self.usage_known = False

    # ---- what the record says beside the turns

    def note(self, **items: Any) -> None:
        """Facts of the episode kept in `info` (`auto_submit`, `cut_turn`, `image_window`, …)."""
        self.rec.info.update(items)

    def add(self, key: str, item: dict) -> None:
        """An entry of a list kept in `info` (`model_failures`, `operator`)."""
        self.rec.info.setdefault(key, []).append(item)

    def env_time(self, seconds: float) -> None:
        self.rec.env_seconds = round(self.rec.env_seconds + seconds, 4)

    def model_time(self, seconds: float) -> None:
        self.rec.model_seconds = round(self.rec.model_seconds + seconds, 4)

    # ---- the outcome

    def ended(self, reason: str) -> None:
        self.rec.end_reason = reason

    def scored(self, reward: float | None, grade: dict | None = None, auto: bool | None = None) -> None:
        """The reward; with `auto` (the env's answer scored it), its grade and whether the call that ended
        the episode was made on the model's behalf."""
        self.rec.reward = reward
        if auto is not None:
            self.rec.grade, self.rec.auto_submitted = grade, auto

    def failed(self, e: BaseException) -> None:
        """Infrastructure broke the episode: unscored, with what broke it (never anything like a key)."""
        rec = self.rec
        rec.error_class = error_class_of(e)
        rec.error = secrets.scrub(f"{type(e).__name__}: {e}")
        rec.traceback = secrets.scrub(traceback.format_exc(limit=20))
        rec.reward = None

    def final_pictures(self, session: Any) -> None:
        """The final render and the env's final document, asked for beside each other: two reads, neither
        waits for the other."""
        rec, camera = self.rec, self.camera
        doc = getattr(session, "document", None)
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

    def settle(self) -> None:
        """Wait for the frame being taken. Never raises: only after the episode broke can it fail (a normal
        end settled before its end), and that failure would cost the record."""
        if self.camera is not None:
            try:
                self.camera.settle()
            except Exception as e:
                log.debug("taking a frame failed: %s", e)

    def publish(self) -> None:
        """The episode's progress, for a viewer watching the run (`evalkit.records.live`)."""
        if self.store is not None:
            live.publish(self.store.run_dir, self.rec, self.max_turns)

    def seal(self, agent: Any) -> EpisodeRecord:
        """The record with its totals counted now: time, turns, usage and cost, the agent's notes, the
        transcript."""
        rec = self.rec
        rec.seconds = round(time.monotonic() - self.t0, 3)
        rec.n_turns = len(rec.turns)
        info = dict(getattr(agent, "info", None) or {})
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
    digest = hashlib.sha256(canonical(task).encode()).hexdigest()[:8]
    return f"{own}-{digest}"


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


def _cost(rec: EpisodeRecord) -> float | None:
    """Each request priced at its provider and long-context tier (`prices.episode_cost`)."""
    try:
        return prices.episode_cost(rec)
    except Exception as e:  # a missing or broken price table costs the number, never the episode
        log.warning("no cost for %s: %s", rec.model, e)
        return None
