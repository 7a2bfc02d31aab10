"""run_batch: models × surfaces × modes × tasks × skins × repeats, run concurrently into one run directory.

Before any work, a preflight probes the env (`evalkit.run.probe`): the kind of env, its tools, the modes it
declares, and how many sessions its server accepts at once — the batch's concurrency is capped to that, with
a one-line notice. Each finished episode is appended to `trace.jsonl` at once, so a killed batch loses at
most the episodes in flight. Rerunning into the same directory (resume) runs only the jobs whose key is
missing or whose latest record ended with an `error_class`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import logging
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.envs import EMBEDDED, MODES, SCREEN_SURFACES, SKINS, SURFACES, loopback
from evalkit.envs.evalsets import load_evalset
from evalkit.envs.openenv import env_identity, resolve
from evalkit.envs.sessions import close_quietly, default_mode, default_surface, open_session, reset_kwargs
from evalkit.errors import ConfigError, EnvCapacityError, EnvError
from evalkit.providers import check_endpoints, check_keys, parse_spec
from evalkit.providers.common import release_clients
from evalkit.providers.health import ProviderHealth
from evalkit.providers.images import check_budget
from evalkit.records import live
from evalkit.records.settings import OUTCOME_OPTIONS, OUTCOME_SETTINGS
from evalkit.records.traces import (
    TRACE,
    TraceWriter,
    completed_keys,
    read_records,
    read_run_json,
    write_run_json,
)
from evalkit.run import breaker, validate
from evalkit.run.episode import frame_takers, task_identity
from evalkit.run.executors import EXECUTORS, Episodes, execute, ray_module
from evalkit.types import AgentOptions, EpisodeRecord, episode_key

log = logging.getLogger(__name__)


@dataclass
class Job:
    model: str
    surface: str
    mode: str
    task: dict
    """Reset arguments: `task_id`, or `split` and `index`, or what `--reset-json` gave."""
    ident: str
    """The task's identity in the key (`evalkit.run.episode.task_identity`)."""
    repeat: int
    key: str
    evalset_task: str | None = None
    skin: str | None = None
    """None: the env's default skin for the task."""
    coordinates: str | None = None
    """Screen coordinates asked of the env (None: its default)."""


@dataclass
class Run:
    """A run directory and what a batch did to it."""

    path: Path
    ran: int = 0
    skipped: int = 0
    errors: int = 0
    meta: dict = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)
    """Episodes of this batch unscored by infrastructure errors, by `error_class`."""
    not_run: int = 0
    """Jobs left for a resume: the env breaker opened, or their model's key was refused."""
    abandoned: int = 0
    """Episodes still running when the breaker opened; not waited for (resume runs them again)."""
    stopped: str | None = None
    """Why the env circuit breaker stopped the batch (`evalkit.run.breaker`), if it did."""
    refused: dict[str, str] = field(default_factory=dict)
    """Models whose endpoint refused the key, with the line that said so."""

    @property
    def exit_status(self) -> int:
        """What `evalkit run` exits with (see `evalkit.run.breaker`)."""
        return breaker.exit_status(self)

    def records(self) -> list[EpisodeRecord]:
        from evalkit.analysis.display import attach

        return [attach(r, self.path) for r in read_records(self.path)]

    def df(self) -> Any:
        from evalkit.records.loading import load_runs

        return load_runs([self.path])

    def summary(self) -> Any:
        from evalkit.analysis.stats import summarise

        return summarise(self.df())

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, ran={self.ran}, skipped={self.skipped}, errors={self.errors})"

    def _repr_html_(self) -> str:
        from evalkit.analysis.display import run_html

        return run_html(self.path)


def select_tasks(
    env_name: str,
    *,
    evalset: str | Path | None = None,
    subset: str | None = None,
    tiers: list[str] | None = None,
    task_ids: list[str] | None = None,
    limit: int | None = None,
    split: str = "test",
    tasks: int | None = None,
    start: int = 0,
    stride: int = 1,
    reset: dict | list[dict] | None = None,
) -> tuple[list[tuple[dict, str]], str | None]:
    """(reset arguments, identity) per task, and the evalset id. Raises ConfigError on a bad selection.
    `reset` gives the reset arguments themselves: one dict, or a list of them (one task each)."""
    if reset is not None:
        if evalset is not None or task_ids or tasks is not None:
            raise ConfigError("--reset-json names the tasks itself: drop --evalset, --task-ids and --tasks")
        resets = [reset] if isinstance(reset, dict) else list(reset)
        if not resets or not all(isinstance(r, dict) for r in resets):
            raise ConfigError("--reset-json wants a JSON object or a non-empty list of objects")
        chosen = [(dict(r), task_identity(r, env_name)) for r in resets]
        if len({ident for _, ident in chosen}) < len(chosen):
            raise ConfigError("--reset-json lists the same task twice (use --repeats to run a task again)")
        return chosen, None
    if evalset is not None:
        es = load_evalset(evalset)
        chosen = es.select(subset=subset, tiers=tiers, task_ids=task_ids, limit=limit)
        if not chosen:
            raise ConfigError("the task selection is empty")
        return [({"task_id": t["task_id"]}, t["task_id"]) for t in chosen], es.evalset_id or es.name
    if subset or tiers:
        raise ConfigError("--subset and --tiers need --evalset")
    if task_ids:
        return [({"task_id": t}, t) for t in task_ids], None
    if stride < 1 or start < 0:
        raise ConfigError("--start must be ≥ 0 and --stride ≥ 1")
    n = tasks if tasks is not None else (limit if limit is not None else 10)
    if n < 1:
        raise ConfigError("--tasks must be ≥ 1")
    idx = range(start, start + n * stride, stride)
    return [({"split": split, "index": i}, f"{env_name}-{split}-{i:04d}") for i in idx], None


COORDINATES = ("auto", "pixels", "normalized")


def job_coordinates(choice: str | None, model: str, env_name: str, surface: str) -> str | None:
    """What to ask the env for: `auto` picks by model on the surfaces that show a screen (normalised for
    open VLMs, pixels for Claude and GPT) and leaves the others to the env; an explicit choice goes as is."""
    if choice not in (None, "auto"):
        return choice
    if surface in SCREEN_SURFACES.get(env_name, ()):
        from evalkit.browser.computer import coordinates_for

        return coordinates_for(model, "auto")
    return None


def plan_jobs(
    models: list[str],
    env_name: str,
    tasks: list[tuple[dict, str]],
    surfaces: list[str],
    modes: list[str],
    repeats: int,
    evalset_id: str | None = None,
    skins: list[str] | None = None,
    coordinates: str | None = "auto",
) -> list[Job]:
    """Jobs ordered task-major, so that a batch cut short still has every model on the same tasks. Skins
    multiply only the surfaces that show a screen (every surface of an env evalkit does not know)."""
    screens = SCREEN_SURFACES.get(env_name)
    jobs = []
    for r in range(repeats):
        for task, ident in tasks:
            for surface in surfaces:
                skinned = skins and (screens is None or surface in screens)
                for skin in skins if skinned else [None]:
                    for mode in modes:
                        for m in models:
                            key = episode_key(m, env_name, surface, mode, ident, skin, r)
                            coords = job_coordinates(coordinates, m, env_name, surface)
                            jobs.append(Job(m, surface, mode, task, ident, r, key, evalset_id, skin, coords))
    return jobs


def _as_list(x: Any) -> list[str]:
    if x is None:
        return []
    if isinstance(x, str):
        return [s.strip() for s in x.split(",") if s.strip()]
    return list(x)


def run_batch(
    models: list[str] | str,
    env: Any,
    *,
    out: str | Path,
    evalset: str | Path | None = None,
    subset: str | None = None,
    tiers: list[str] | None = None,
    task_ids: list[str] | None = None,
    limit: int | None = None,
    split: str = "test",
    tasks: int | None = None,
    start: int = 0,
    stride: int = 1,
    reset: dict | list[dict] | None = None,
    surfaces: list[str] | str | None = None,
    modes: list[str] | str | None = None,
    repeats: int = 1,
    skins: list[str] | str | None = None,
    coordinates: str | None = "auto",
    concurrency: int = 4,
    max_turns: int | None = None,
    max_steps: int | None = None,
    episode_timeout: float | None = None,
    frames: bool = True,
    save_raw: bool = False,
    options: AgentOptions | None = None,
    progress: bool = True,
    verbose: bool = False,
    argv: list[str] | None = None,
    health: ProviderHealth | None = None,
    executor: str = "threads",
    ray_address: str | None = None,
    env_breaker: breaker.BreakerSettings | None = None,
) -> Run:
    """Run every job that `out` does not already hold cleanly; return the Run.

    `env` is a served environment (`evalkit.serve`), a base URL of any OpenEnv server (MCP or typed-action),
    or the name of an embedded environment (served for the length of the batch). Tasks come from an evalset,
    `task_ids`, `split`/`tasks`, or `reset` (reset arguments: a dict, or a list of dicts, one task each).
    `surfaces` and `modes` default to the env's first (an env that declares no modes runs without one;
    one evalkit does not embed, on surface `tools`). `skins` runs each task of a screen surface in each skin
    (default: the env's skin for the task); `coordinates` is `auto` (by model), `pixels` or `normalized`;
    `max_turns` None gives each surface the env's own budget. `save_raw` keeps each model call's request
    and response bodies under `<out>/raw/` (images as references to the frame store). Every configuration
    mistake — unknown provider, missing key or endpoint URL, an endpoint nothing answers at, conflicting
    image budgets, bad evalset, empty selection, an env with no tools, a task, surface or skin the env
    refuses — raises ConfigError before the run directory exists.

    The episodes share one `ProviderHealth` (a fresh one unless given): a provider behind a router spec
    that fails is passed over by the following episodes for a cool-down. A model whose endpoint refuses its
    key, and an env that stops answering (`env_breaker`), stop the episodes that depend on them
    (`evalkit.run.breaker`); `Run.exit_status` says what happened.

    `executor` is `threads` (this process) or `ray` (tasks on the Ray cluster at `ray_address`, else on the
    instance this process has, else on a new local one; see `evalkit.run.executors`). On Ray each node's
    runner keeps its own `ProviderHealth`.
    """
    models, surfaces = _as_list(models), _as_list(surfaces)
    asked_modes = _as_list(modes)
    skins = _as_list(skins) or None
    if not models:
        raise ConfigError("no models given")
    for m in models:
        parse_spec(m)
    check_keys(models)
    if options is not None:
        check_budget(options.keep_images, options.image_window)
    check_endpoints(models)
    validate.batch(concurrency=concurrency, max_turns=max_turns, max_steps=max_steps, repeats=repeats,
                   episode_timeout=episode_timeout, options=options, executor=executor)  # fmt: skip
    out = validate.run_out("--out", out)
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}: use {' or '.join(EXECUTORS)}")
    if executor == "ray":
        ray_module()  # not installed: say so before any work
    elif ray_address:
        raise ConfigError("--ray-address needs --executor ray")
    if coordinates not in (None, *COORDINATES):
        raise ConfigError(f"unknown coordinates {coordinates!r}: use {', '.join(COORDINATES)}")
    served = None
    if isinstance(env, str) and "://" not in env:
        if env not in EMBEDDED:
            raise ConfigError(
                f"unknown environment {env!r} (embedded: {', '.join(sorted(EMBEDDED))}; or give a base URL)"
            )
        name = env
    else:
        name = env_identity(env)
    # None: the env's first surface (tools for envs evalkit does not embed).
    surfaces = surfaces or [default_surface(name)]
    _check_names(name, "surface", surfaces, SURFACES.get(name))
    if name in MODES:  # known before the env is reached: say so before serving it
        _resolve_modes(name, asked_modes, MODES[name])
    if skins:
        # An embedded env without skins has none to choose from; a foreign env's skins are its own business.
        _check_names(name, "skin", skins, SKINS.get(name, () if name in EMBEDDED else None))
    task_list, evalset_id = select_tasks(
        name,
        evalset=evalset,
        subset=subset,
        tiers=tiers,
        task_ids=task_ids,
        limit=limit,
        split=split,
        tasks=tasks,
        start=start,
        stride=stride,
        reset=reset,
    )
    if isinstance(env, str) and "://" not in env:
        served = env = serve_embedded(env, concurrency)
    try:
        first_mode = asked_modes[0] if asked_modes else default_mode(name)
        first = reset_kwargs(task_list[0][0], name, surfaces[0], first_mode)
        report = _probe(env, name, first, task_list[0][1], sessions=1 if served is not None else concurrency)
        modes = _resolve_modes(name, asked_modes, report.modes)
        notices = [report.summary()] if progress else []
        if report.capacity is not None and report.capacity < concurrency:
            notices.append(
                f"{name} accepts {report.capacity} session(s) at a time: running {report.capacity} "
                f"episode(s) at once instead of {concurrency}"
            )
            concurrency = report.capacity
        jobs = plan_jobs(models, name, task_list, surfaces, modes, repeats, evalset_id, skins, coordinates)
        from evalkit import __version__

        meta = {
            "models": models,
            "env": name,
            "env_kind": report.kind,
            "surfaces": surfaces,
            "modes": modes,
            "base_url": getattr(env, "base_url", env) if served is None else None,
            "evalset": str(evalset) if evalset else None,
            "evalset_id": evalset_id,
            "subset": subset,
            "tiers": tiers,
            "limit": limit,
            "split": None if evalset or reset is not None else split,
            "reset": reset,
            "repeats": repeats,
            "skins": skins,
            "coordinates": coordinates,
            "max_turns": max_turns,
            "max_steps": max_steps,
            "episode_timeout": episode_timeout,
            "frames": frames,
            "save_raw": save_raw,
            "concurrency": concurrency,
            "server_sessions": report.capacity,
            "n_jobs": len(jobs),
            "options": vars(options) if options else None,
            "evalkit_version": __version__,
            "argv": argv,
        }
        _check_resume(out, meta)
        done = completed_keys(out)
        explicit = evalset is None and bool(task_ids or reset is not None)
        _preflight(env, name, [j for j in jobs if j.key not in done], explicit, first)
        try:
            target = resolve(env, name)  # the env's kind, asked once: episodes connect without asking again
        except EnvError as e:
            raise ConfigError(f"cannot read what kind of env {name} is: {e}") from None
        for line in notices:
            _notice(line)
        episodes = Episodes(target, name, out, max_turns, max_steps, episode_timeout, frames, options,
                            save_raw=save_raw, embedded=name if served is not None else None)  # fmt: skip
        health = health if health is not None else ProviderHealth()
        guard = breaker.Guard(env, env_breaker, _error, models)
        return _execute(
            jobs, episodes, meta, health, concurrency, progress, verbose, executor, ray_address, guard
        )
    finally:
        if served is not None:
            served.stop()
        # What the batch's threads kept open (they are gone): connections to its env server and its models.
        loopback.release()
        release_clients()


PROCESS_FROM = 8
"""From this concurrency on, a batch serves its embedded env in child processes (`evalkit.envs.process`)
rather than in a thread: see `serve_embedded`."""
EPISODES_PER_PROCESS = 32
"""Episodes at once that one env server process serves; more get more processes, at most one per core."""


def env_processes(concurrency: int) -> int:
    """How many processes serve an embedded env for `concurrency` episodes at once (0: a thread)."""
    if concurrency < PROCESS_FROM:
        return 0
    return max(1, min(os.cpu_count() or 1, -(-concurrency // EPISODES_PER_PROCESS)))


def serve_embedded(name: str, concurrency: int) -> Any:
    """The embedded env `name`, served for one batch. Its CPU per episode (reset, renders, grading, the MCP
    and WebSocket layers) is about the client's own, so beside many episodes' threads it contends with them
    for one GIL: from `PROCESS_FROM` episodes at once it gets a process (and a core) of its own, and one
    more per EPISODES_PER_PROCESS episodes up to the machine's cores, since one server process is one event
    loop on one core (on 2 cores at concurrency 50, two processes took the efficiency from ~0.58 to ~0.62
    in alternating runs; at 8, 10 and 12 episodes at once one process beat a thread in six alternating
    runs each, medians 0.94/0.92/0.92 against 0.89/0.91/0.89, and `make demo`'s eight offline episodes at
    once took 31 s rather than 34). Below 8 a thread starts without a second interpreter's imports."""
    sessions = max(64, concurrency + 4)
    n = env_processes(concurrency)
    if n:
        from evalkit.envs.process import ProcessServers

        return ProcessServers(name, n, max_concurrent_envs=sessions)
    from evalkit.envs.server import serve

    return serve(name, max_concurrent_envs=sessions)


def _notice(text: str, level: int = logging.INFO) -> None:
    from evalkit.analysis.display import notice

    notice(log, text, level)


def _error(text: str) -> None:
    _notice(text, logging.ERROR)


def _check_names(name: str, what: str, asked: list[str], known: tuple[str, ...] | None) -> None:
    bad = [x for x in asked if known is not None and x not in known]
    if bad or not asked:
        raise ConfigError(
            f"{name} has no {what} {', '.join(bad) or '(none given)'}"
            + (f" (it has: {', '.join(known)})" if known else "")
        )


def _resolve_modes(name: str, asked: list[str], declared: tuple[str, ...] | None) -> list[str]:
    """Modes exist where the env declares them: asked ones are checked against those, and by default the
    first is run. An env that declares none runs without a mode (asked ones are passed to its reset)."""
    if asked:
        _check_names(name, "mode", asked, declared)
        return asked
    return [declared[0]] if declared else [""]


def _probe(env: Any, name: str, first: dict, ident: str, sessions: int) -> Any:
    """The preflight: the first task reset once, tools listed, capacity counted. A task the env refuses, an
    unreachable server or an env with no tools is the user's mistake, better said now than recorded as an
    env error per episode."""
    from evalkit.run.probe import probe

    try:
        report = probe(env, first, sessions=sessions, pictures=False)
    except EnvCapacityError as e:
        raise ConfigError(f"{name} has had no free session for a minute ({e}); try again later") from None
    except EnvError as e:
        raise ConfigError(f"the environment refused task {ident}: {e}") from None
    if not report.tools:
        raise ConfigError(f"{name} offers no tools: a model could not act in it")
    return report


# Settings that change what an episode is: resuming with other values would mix incomparable records.
_OUTCOME_SETTINGS, _OUTCOME_OPTIONS = OUTCOME_SETTINGS, OUTCOME_OPTIONS


def _check_resume(out: Path, meta: dict) -> None:
    if not (out / TRACE).exists():
        return
    old = read_run_json(out)

    def norm(v: Any) -> Any:
        return json.loads(json.dumps(v, default=str))

    changed = [k for k in _OUTCOME_SETTINGS if k in old and norm(old[k]) != norm(meta[k])]
    old_opts, new_opts = old.get("options") or {}, meta.get("options") or {}
    changed += [k for k in _OUTCOME_OPTIONS if k in old_opts and norm(old_opts[k]) != norm(new_opts.get(k))]
    if changed:
        was = ", ".join(f"{k}={old.get(k, old_opts.get(k))}" for k in changed)
        raise ConfigError(f"{out} was run with {was}; resume it with the same settings or use a new --out")


def _preflight(env: Any, name: str, jobs: list[Job], explicit: bool, probed: dict) -> None:
    """Reset the first task on each surface and skin (and every task the user named, by id or by reset
    arguments) once: a split, task or skin the env refuses, or a surface it cannot open (no Chromium), is the
    user's mistake, better said now than recorded as an env error per episode. The reset the probe made
    (`probed`) is not made again."""
    if not jobs:
        return
    first = jobs[0].ident
    probes: dict[tuple, Job] = {}
    for j in jobs if explicit else [j for j in jobs if j.ident == first]:
        probes.setdefault((j.ident, j.surface, j.skin, j.coordinates), j)
    session = None
    try:
        for job in probes.values():
            asked = dict(skin=job.skin, coordinates=job.coordinates)
            kw = reset_kwargs(job.task, name, job.surface, job.mode, **asked)
            if _asked(kw) == _asked(probed):
                continue
            try:
                if session is None:
                    session, _, _ = open_session(env, kw, wait=60.0)
                else:
                    session.reset(**kw)
            except EnvError as e:
                where = f"task {job.ident}" + (f" on surface {job.surface}" if job.surface != "tools" else "")
                where += f" in skin {job.skin}" if job.skin else ""
                raise ConfigError(f"the environment refused {where}: {e}") from None
    finally:
        if session is not None:
            close_quietly(session)


def _asked(kw: dict) -> dict:
    return {k: v for k, v in kw.items() if v is not None}


def _write_meta(out: Path, meta: dict) -> None:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    old = read_run_json(out)
    history = list(old.get("invocations", []))
    history.append({"at": now, "models": meta["models"], "n_jobs": meta["n_jobs"]})
    write_run_json(out, {**old, **meta, "created": old.get("created", now), "invocations": history[-50:]})


def _execute(
    jobs: list[Job],
    episodes: Episodes,
    meta: dict,
    health: ProviderHealth,
    concurrency: int,
    progress: bool,
    verbose: bool,
    executor: str,
    ray_address: str | None,
    guard: breaker.Guard | None = None,
) -> Run:
    out = episodes.out
    guard = guard or breaker.Guard(None)
    done_keys = completed_keys(out)
    todo = [j for j in jobs if j.key not in done_keys]
    _write_meta(out, meta)
    writer = TraceWriter(out)
    live.clear_stale(out)
    run = Run(out, skipped=len(jobs) - len(todo), meta=meta)
    rewards: dict[str, list[float]] = defaultdict(list)
    bar = _bar(len(todo), out.name, progress and bool(todo))
    lock = threading.Lock()
    closed = False

    def arrive(rec: EpisodeRecord, stopping: bool) -> None:
        # Every finished episode reaches the run here, the moment it ends, and is counted as it is written:
        # what the batch says it ran is what the trace holds. One that broke because the batch itself was
        # shutting down (interrupted, or the env breaker opened) is not data about the env: dropped; and
        # once the batch has returned, nothing more is written (resume runs what it left).
        with lock:
            if not closed and not (stopping and rec.error_class):
                writer.append(rec)
                _count(run, rec)
        live.finish(out, rec.key)  # after the record, so a watcher never sees the episode in neither

    def left(kind: str) -> None:
        """A job that was never started (`not_run`), left for a resume."""
        run.not_run += 1

    guard.start()
    try:
        with heap_frozen(), frame_takers():
            for rec in execute(
                executor, todo, episodes, concurrency, arrive, health, guard, left, address=ray_address
            ):
                _collect(rec, run, rewards, bar, verbose)
        with lock:  # (interrupted, the episodes still running are written as they end, as before)
            closed = True
            # The rest were in flight when the breaker opened (or broke as it did): resume runs them.
            run.abandoned = len(todo) - run.ran - run.not_run
    finally:
        guard.stop()
        bar.close()
    run.stopped = guard.down
    run.refused = {m: str(e) for m, e in guard.refused.items()}
    if (out / TRACE).stat().st_size:  # a run with no episode yet has nothing to summarise
        _summarise(out)
    return run


class _NoBar:
    """A batch's progress when none is shown: tqdm's disabled bar still starts its monitor thread, which
    outlives the batch."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass

    @staticmethod
    def write(s: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(s, file=sys.stderr)


def _bar(total: int, name: str, shown: bool) -> Any:
    if not shown:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="ep", file=sys.stderr)


_frozen = 0
_frozen_lock = threading.Lock()


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """While batches run, the objects this process had before them (the SDKs', pydantic's, numpy's: ~250,000)
    are left out of the cycle collector's full passes (`gc.freeze`): a full pass walked them all, one held
    every thread of the batch for 170 ms (fifty episodes at once), and new objects still make passes come.
    They go back to it when the last batch running in this process ends."""
    global _frozen
    with _frozen_lock:
        if not _frozen:
            gc.freeze()
        _frozen += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen -= 1
            if not _frozen:
                gc.unfreeze()


def _count(run: Run, rec: EpisodeRecord) -> None:
    run.ran += 1
    if rec.error_class:
        run.errors += 1
        run.unscored[rec.error_class] = run.unscored.get(rec.error_class, 0) + 1


def _collect(rec: EpisodeRecord | None, run: Run, rewards: dict, bar: Any, verbose: bool) -> None:
    bar.update(1)
    if rec is None:  # not started: the breaker opened, or its model's key was refused
        run.not_run += 1
        return
    if not rec.error_class and rec.reward is not None:
        rewards[rec.model].append(rec.reward)
    bar.set_postfix_str(
        " ".join(f"{m.split(':', 1)[-1][:14]}={sum(v) / len(v):.2f}" for m, v in rewards.items())
    )
    if verbose:
        outcome = rec.error_class or (f"{rec.reward:.3f}" if rec.reward is not None else "unscored")
        bar.write(
            f"{rec.model} {rec.task_id} {rec.surface}/{rec.mode}: {outcome} "
            f"({rec.end_reason}, {rec.n_turns} turns, {rec.seconds:.1f}s)"
        )


def _summarise(out: Path) -> None:
    from evalkit.analysis.summary import write_summary

    write_summary(out)
