"""`run_ownloop`: an own-loop agent on the web-app tasks, into a run directory.

Everything that can be wrong with what was asked (agent, task file, task ids, released code on the path,
the model endpoint) raises ConfigError before anything is written. The endpoint `fake` is a scripted model
served for the run (`evalkit.ownloop.fake.TaskPolicy`), answering in the agent's own released format and
solving each task from its definition, so a run needs no GPU. Then web-app servers start on loopback,
workers take tasks (each worker keeps to one server), and each finished task writes its folder
(`session.json` or `session_failed.json`, `steps.jsonl`, `screens/`) and one EpisodeRecord in `trace.jsonl`.
A harness or model-server failure is unscored (`session_failed.json`, `error_class` set) and resume runs
it again; resume skips the tasks that finished.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import shutil
import threading
import traceback
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit.envs.embedded.webapp.grade import grade
from evalkit.envs.embedded.webapp.tasks import load_tasks
from evalkit.errors import ConfigError, EndpointError, error_class_of
from evalkit.notices import notice
from evalkit.records.lock import RunLock
from evalkit.records.rundir import (
    FrameStore,
    TraceWriter,
    atomic_write,
    completed_keys,
    read_run_json,
    write_run_json,
)
from evalkit.types import EpisodeRecord, episode_key

from .runners import runner_for
from .settings import Settings
from .task import TaskRun, on_path

logger = logging.getLogger(__name__)
ENV, SURFACE, MODE = "webapp", "gui", "ownloop"
FAKE = "fake"
"""`--endpoint fake`: the fake endpoint, served for the run; its model is named this unless --model says."""
FAILED = ("endpoint_error", "crash")
"""Statuses that mean the harness or the model server broke: unscored, rerun on resume."""
END_REASONS = {
    "max_steps": "turn_limit",
    "timeout": "deadline",
    "parse_error": "no_tool_call",
    "no_action": "no_tool_call",
    "error": "error",
    "endpoint_error": "error",
    "crash": "error",
}
_SUBJECT = ("agent", "model")
"""Who a run is of: a resume may not change it, as it may not change the settings that change what an
episode is (`Settings.outcome`)."""


def model_label(agent: str, model: str | None) -> str:
    return f"ownloop:{agent}" + (f"/{model}" if model else "")


@dataclass
class OwnloopRun:
    path: Path
    ran: int = 0
    skipped: int = 0
    unscored: int = 0
    records: list[EpisodeRecord] = field(default_factory=list)

    def __repr__(self) -> str:
        counts = f"ran={self.ran}, skipped={self.skipped}, unscored={self.unscored}"
        return f"OwnloopRun({str(self.path)!r}, {counts})"


def run_ownloop(
    settings: Settings | None,
    out: str | Path,
    tasks: str | Path | None = None,
    *,
    log: Callable[[str], None] | None = None,
    **overrides: Any,
) -> OwnloopRun:
    """Run `settings.agent` on the tasks of `tasks` (default: data/evalsets/webapp-v1.json) into `out`.
    `settings` (an `evalkit.ownloop.Settings`) and keyword overrides of it say the rest: which tasks
    (`task_ids`, `limit`), how many at once (`workers`, on `servers` web-app servers or at `ports`), the
    agent's model, endpoint and released knobs; `log` gets a line per finished task."""
    settings = Settings.make(settings, **overrides)
    runner = runner_for(settings.agent)
    chosen = _chosen(load_tasks(tasks), settings.task_ids, settings.limit)
    settings.width = settings.width or runner.viewport[0]
    settings.height = settings.height or runner.viewport[1]
    runner.check(settings)
    fake = _check_endpoint(runner, settings)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    label = model_label(settings.agent, settings.model)
    meta = {
        "kind": "ownloop",
        "model": label,
        "env": ENV,
        "tasks": str(tasks or "webapp-v1"),
        **{k: getattr(settings, k) for k in _SUBJECT},
        **settings.outcome(),
        "outcome": settings.outcome(),
        "endpoint": settings.endpoint,
        "n_tasks": len(chosen),
        "workers": settings.workers,
    }
    _check_resume(out, meta)
    with RunLock(out):  # one writer per run directory, from before its run.json is written
        done = completed_keys(out)
        todo = [t for t in chosen if _key(label, t["task_id"]) not in done]
        old = read_run_json(out)
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        created = old.get("created", now)
        argv = settings.argv
        write_run_json(out, {**old, **meta, "created": created, "evalkit_version": __version__, "argv": argv})
        run = OwnloopRun(out, skipped=len(chosen) - len(todo))
        if not todo:
            return run
        on_path(settings.path)
        say = log or (lambda line: notice(logger, line))
        ports = settings.ports
        _play(runner, todo, run, settings, label, say, fake=fake, tasks=tasks, workers=settings.workers,
              servers=len(ports) if ports else min(settings.servers, len(todo)), ports=ports)  # fmt: skip
    from evalkit.analysis.summary import write_summary  # start-up: it loads Polars, for the run's end alone

    write_summary(out)
    return run


def _chosen(all_tasks: list[dict], task_ids: list[str] | None, limit: int | None) -> list[dict]:
    """The tasks asked for: those of `task_ids` (each must exist) in the file's order, the first `limit`."""
    chosen = all_tasks
    if task_ids:
        known = {t["task_id"] for t in all_tasks}
        missing = [i for i in task_ids if i not in known]
        if missing:
            raise ConfigError(f"the task file has no task {', '.join(missing[:5])}")
        chosen = [t for t in all_tasks if t["task_id"] in set(task_ids)]
    return chosen if limit is None else chosen[:limit]


def _check_endpoint(runner: Any, settings: Settings) -> bool:
    """Whether the run serves its own fake endpoint; else a model agent's endpoint must answer for its
    model (a baseline needs none)."""
    fake = runner.needs_endpoint and settings.endpoint == FAKE
    if fake:
        settings.model = settings.model or FAKE
    elif runner.needs_endpoint:
        if not settings.endpoint or not settings.model:
            raise ConfigError(f"{settings.agent} needs --endpoint and --model (or --endpoint fake)")
        # start-up: the SDK check, the web apps and the scripted model only when a run starts
        from .endpoint import check_endpoint

        check_endpoint(settings.endpoint, settings.model)
    return fake


def _play(
    runner: Any, todo: list[dict], run: OwnloopRun, settings: Settings, label: str,
    say: Callable[[str], None], *, fake: bool, tasks: str | Path | None, workers: int, servers: int,
    ports: list[int] | None,
) -> None:  # fmt: skip
    """Play `todo` on `workers` threads over `servers` web-app servers (and the fake endpoint), each
    episode appended to the run's trace as it ends."""
    # start-up (as above)
    from evalkit.envs.embedded.webapp.serve import SiteServer

    writer, frames = TraceWriter(run.path), FrameStore(run.path)
    lock, queue = threading.Lock(), list(todo)
    with ExitStack() as stack:
        if fake:
            # start-up (as above)
            from .fake import FakeEndpoint, TaskPolicy

            policy = TaskPolicy(settings.agent, settings.width, settings.height, tasks)
            served = stack.enter_context(FakeEndpoint(policy, model=settings.model))
            settings = dataclasses.replace(settings, endpoint=served.url)
            say(f"{settings.agent}: the fake endpoint at {served.url} answers as {settings.agent} would")
        sites = [stack.enter_context(SiteServer(port=p)) for p in (ports or [None] * servers)]
        say(
            f"{settings.agent}: {len(todo)} task(s), {workers} worker(s) on "
            + ", ".join(s.base for s in sites)
        )

        def worker(i: int) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    task = queue.pop(0)
                rec = run_task(runner, task, sites[i % len(sites)], run.path, settings, frames, label)
                writer.append(rec)
                with lock:
                    run.ran += 1
                    run.unscored += rec.error_class is not None
                    run.records.append(rec)
                info = rec.info
                outcome = rec.error_class or (
                    f"reward={rec.reward:.0f}" if rec.reward is not None else "ungraded"
                )
                say(
                    f"{rec.task_id}: {outcome} status={info.get('status')} rounds={rec.n_turns} "
                    f"{rec.seconds:.1f}s answer={str(info.get('answer'))[:60]!r}"
                )

        threads = [threading.Thread(target=worker, args=(i,), name=f"ownloop-{i}") for i in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _key(label: str, task_id: str) -> str:
    return episode_key(label, ENV, SURFACE, MODE, task_id, None, 0)


def _check_resume(out: Path, meta: dict) -> None:
    old = read_run_json(out) if out.is_dir() else {}
    if not old:
        return
    if old.get("kind") != "ownloop":
        raise ConfigError(f"{out} holds a run that is not an own-loop run; use a new --out")
    changed = [k for k in (*_SUBJECT, *meta["outcome"]) if k in old and old[k] != meta[k]]
    if changed:
        was = ", ".join(f"{k}={old[k]}" for k in changed)
        raise ConfigError(f"{out} was run with {was}; resume it with the same settings or use a new --out")


def _clear(folder: Path) -> None:
    """A rerun starts clean; earlier error attempts (kept aside by a runner) stay."""
    if not folder.exists():
        return
    for p in folder.iterdir():
        if p.name.startswith("error_attempt_"):
            continue
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def run_task(
    runner: Any, task: dict, site: Any, out: Path, settings: Settings, frames: FrameStore, label: str
) -> EpisodeRecord:
    """One task, start to record. Nothing raised by the runner escapes: it becomes the task's outcome."""
    folder = out / task["task_id"]
    _clear(folder)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    ctx = TaskRun(task, site, folder, settings, frames)
    err: BaseException | None = None
    tb = None
    try:
        runner.run(ctx)
    except Exception as e:  # the task boundary: one broken task never stops the run
        err, tb = e, traceback.format_exc(limit=20)
        ctx.result["status"] = "endpoint_error" if isinstance(e, EndpointError) else "crash"
        ctx.result["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        ctx.close()
    res = ctx.result
    status = res.get("status") or "crash"
    res["status"] = status
    gradable = status not in FAILED and res.get("record_read", True)
    res.pop("record_read", None)
    g = grade(task, res["record"], res["answer"]) if gradable else None
    res["reward"] = g["total"] if g else None
    res["grade"] = g
    name = "session.json" if gradable else "session_failed.json"
    (folder / ("session_failed.json" if gradable else "session.json")).unlink(missing_ok=True)
    atomic_write(folder / name, json.dumps({**res, "model": label}, default=str))
    return _record(ctx, task, label, started, g, err, tb, runner)


def _record(
    ctx: TaskRun,
    task: dict,
    label: str,
    started: str,
    g: dict | None,
    err: BaseException | None,
    tb: str | None,
    runner: Any,
) -> EpisodeRecord:
    res = ctx.result
    status = res["status"]
    error_class = None
    if g is None:
        error_class = error_class_of(err) if err is not None else "harness_error"
        if status == "endpoint_error":
            error_class = "endpoint_error"
    for t in ctx.turns:  # a turn's frame is the screen its action left behind
        t.frame = ctx.frames.get(t.turn + 1)
    steps = sorted(ctx.frames)
    return EpisodeRecord(
        key=_key(label, task["task_id"]),
        model=label,
        env=ENV,
        surface=SURFACE,
        mode=MODE,
        task_id=task["task_id"],
        evalset_task=None,
        tier=task.get("tier"),
        difficulty_score=task.get("difficulty_score"),
        coordinates=runner.coordinates,
        episode_id=uuid.uuid4().hex,
        prompt_version=runner.prompt_version,
        reward=g["total"] if g else None,
        grade=g,
        end_reason=END_REASONS.get(status, "submitted"),
        error_class=error_class,
        error=res.get("error"),
        traceback=tb,
        usage=ctx.usage.to_dict(),
        cost_usd=None,
        n_turns=len(ctx.turns),
        tool_calls=sum(len(t.calls) for t in ctx.turns),
        tool_errors=int(res.get("action_errors") or 0),
        parse_errors=int(res.get("parse_fails") or 0),
        seconds=float(res.get("seconds") or 0.0),
        model_seconds=round(ctx.timing["model"], 3),
        env_seconds=round(ctx.timing["action"] + ctx.timing["screenshot"], 3),
        started=started,
        frame0=ctx.frames.get(steps[0]) if steps else None,
        render=ctx.frames.get(steps[-1]) if steps else None,
        final_doc=res.get("answer"),
        turns=ctx.turns,
        info={
            "status": status,
            "answer": res.get("answer"),
            "folder": task["task_id"],
            "base": res.get("base"),
            "prompt": ctx.prompt,
            "seconds_split": {k: round(v, 3) for k, v in ctx.timing.items()},
            **({"usage_unknown": True} if not ctx.usage_known else {}),
        },
    )
