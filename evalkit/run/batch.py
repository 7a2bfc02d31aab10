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
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.envs import loopback, target
from evalkit.envs.evalsets import load_evalset, repeated
from evalkit.envs.target import Draw, Target
from evalkit.errors import ConfigError, EnvCapacityError, EnvError, EnvSlowError, EnvUnreachableError
from evalkit.notices import notice
from evalkit.providers import check_endpoints, sent_as
from evalkit.providers.common import release_clients
from evalkit.providers.health import ProviderHealth
from evalkit.providers.prices import price_source
from evalkit.records import live
from evalkit.records.lock import RunLock
from evalkit.records.settings import outcome_settings
from evalkit.records.traces import (
    TRACE,
    TraceWriter,
    completed_keys,
    read_records,
    read_run_json,
    write_run_json,
)
from evalkit.run import breaker, budget, validate, wording
from evalkit.run.episode import Job, check_agent, task_identity
from evalkit.run.executors import Episodes, execute, ray_module
from evalkit.run.pictures import frame_takers
from evalkit.run.settings import Settings
from evalkit.types import EpisodeRecord

log = logging.getLogger(__name__)


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
    budget_stop: dict | None = None
    """Why `--max-cost` stopped the batch (run.json's `budget_stop`, `evalkit.run.budget`), if it did."""
    look: Any = None
    """With `--until-decided`: the last look taken (`evalkit.analysis.sequential.Look`), if any."""

    @property
    def exit_status(self) -> int:
        """What `evalkit run` exits with (see `evalkit.run.breaker`)."""
        return breaker.exit_status(self)

    def records(self) -> list[EpisodeRecord]:
        return list(read_records(self.path))

    def df(self) -> Any:
        from evalkit.records.loading import load_runs

        return load_runs([self.path])

    def summary(self) -> Any:
        from evalkit.analysis.stats import summarise

        return summarise(self.df())

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, ran={self.ran}, skipped={self.skipped}, errors={self.errors})"


def select_tasks(
    env_name: str,
    *,
    evalset: str | Path | None = None,
    subset: str | None = None,
    tiers: list[str] | None = None,
    task_ids: list[str] | None = None,
    limit: int | None = None,
    split: str | None = None,
    tasks: int | str | None = None,
    start: int = 0,
    stride: int = 1,
    reset: dict | list[dict] | None = None,
) -> tuple[list[tuple[dict, str]] | Draw, str | None]:
    """(reset arguments, identity) per task — or, drawn from a split by position, the `Draw` the env
    resolves (`evalkit.envs.target.start`: its own tasks where it has a Task API) — and the evalset id.
    Raises ConfigError on a bad selection. `reset` gives the reset arguments themselves: one dict, or a list
    of them (one task each)."""
    if task_ids and repeated(task_ids):
        raise ConfigError(f"--task-ids names a task more than once: {repeated(task_ids)}; name each once "
                          "(--repeats runs every task again)")  # fmt: skip
    if reset is not None:
        if evalset is not None or task_ids or tasks is not None or split is not None:
            raise ConfigError(
                "--reset-json names the tasks itself: drop --evalset, --task-ids, --split and --tasks"
            )
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
    if n != "all" and n < 1:
        raise ConfigError("--tasks must be ≥ 1")
    return Draw(split or "test", n, start, stride), None


COORDINATES = ("auto", "pixels", "normalized")


def job_coordinates(choice: str | None, model: str, env: Target, surface: str) -> str | None:
    """What to ask the env for: `auto` picks by model on the surfaces that show a screen (normalised for
    open VLMs, pixels for Claude and GPT) and leaves the others to the env; an explicit choice goes as is."""
    if choice not in (None, "auto"):
        return choice
    if surface in (env.screens or ()):
        from evalkit.browser.computer import coordinates_for

        return coordinates_for(model, "auto")
    return None


def plan_jobs(
    models: list[str],
    env: Target,
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
    jobs = []
    for r in range(repeats):
        for task, ident in tasks:
            for surface in surfaces:
                skinned = skins and (env.screens is None or surface in env.screens)
                for skin in skins if skinned else [None]:
                    for mode in modes:
                        for m in models:
                            coords = job_coordinates(coordinates, m, env, surface)
                            jobs.append(
                                Job.of(m, env, task, surface, mode, r, skin, coords, evalset_id, ident)
                            )
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
    settings: Settings | None = None,
    *,
    out: str | Path,
    health: ProviderHealth | None = None,
    **kw: Any,
) -> Run:
    """Run every job that `out` does not already hold cleanly; return the Run.

    `env` is a served environment (`evalkit.serve`), a base URL of any OpenEnv server (MCP or typed-action),
    or the name of an embedded environment (served for the length of the batch). `settings` (an
    `evalkit.run.settings.Settings`) and keyword overrides of it say everything else: tasks from an evalset,
    `task_ids`, `split`/`tasks`, or `reset` (reset arguments: a dict, or a list of dicts, one task each);
    `surfaces`, `modes`, `skins`, `coordinates`, `repeats`; the loop's `max_turns` (None: each surface's
    own), `max_steps`, `episode_timeout`, `frames`, `save_raw`; the model's `options` (an AgentOptions) or
    its knobs one by one; `concurrency`, `executor` (`threads`, or `ray` on the cluster at `ray_address`),
    `env_breaker`, `progress`, `verbose`. Every configuration mistake — unknown provider, missing key or
    endpoint URL, an endpoint nothing answers at, conflicting image budgets, bad evalset, empty selection,
    an env with no tools, a task, surface or skin the env refuses — raises ConfigError before the run
    directory exists.

    The episodes share one `ProviderHealth` (a fresh one unless given): a provider behind a router spec
    that fails is passed over by the following episodes for a cool-down. A model whose endpoint refuses its
    key, and an env that stops answering (`env_breaker`), stop the episodes that depend on them
    (`evalkit.run.breaker`); `Run.exit_status` says what happened."""
    s = Settings.make(settings, **kw)
    models = _as_list(models)
    if s.until_decided:  # rounds of this batch, each a batch of its own (`evalkit.run.rounds`)
        from evalkit.run.rounds import until_decided

        return until_decided(models, env, s, out, health, _batch, Run)
    return _batch(models, env, s, out, health)


def _batch(models: list[str], env: Any, s: Settings, out: str | Path, health: ProviderHealth | None) -> Run:
    out = _check(models, s, out)
    env, to_serve = _door(env)
    served = None
    try:
        surfaces = s.surfaces or [env.default_surface]
        _check_names(env.name, "surface", surfaces, env.surfaces)
        if env.modes:  # known before the env is reached: said before serving it
            _resolve_modes(env.name, s.modes or [], env.modes)
        if s.skins:  # a foreign env's skins are its own business
            _check_names(env.name, "skin", s.skins, env.skins)
        task_list, evalset_id = select_tasks(
            env.name,
            evalset=s.evalset,
            subset=s.subset,
            tiers=s.tiers,
            task_ids=s.task_ids,
            limit=s.limit,
            split=s.split,
            tasks=s.tasks,
            start=s.start,
            stride=s.stride,
            reset=s.reset,
        )
        env, found, served, said, s = _start(env, s, surfaces, task_list, to_serve)
        modes = _resolve_modes(env.name, s.modes or [], found.modes)
        repeats = s.repeats * found.copies  # copies of one task are run as its repeats
        jobs = plan_jobs(
            models, env, found.tasks, surfaces, modes, repeats, evalset_id, s.skins, s.coordinates
        )
        meta = _meta(models, env, s, found.kind, surfaces, modes, evalset_id, len(jobs))
        _check_resume(out, meta)
        target.check_resets(env, _to_reset(jobs, completed_keys(out), s), found.reset)
        for line in said:
            notice(log, line)
        guard = breaker.Guard(env.url, s.env_breaker, _error, models)
        gate = budget.gate(guard, s.max_cost, s.episode_max_cost, out)
        health = health if health is not None else ProviderHealth()
        with RunLock(out):  # one writer per run directory
            run = _execute(jobs, Episodes(env, out, s), meta, health, gate)
            run.budget_stop = budget.stopped(gate)
            return run
    finally:
        if served is not None:
            served.stop()
        # What the batch's threads kept open (they are gone): connections to its env server and its models.
        loopback.release()
        release_clients()


def _check(models: list[str], s: Settings, out: str | Path) -> Path:
    """What is asked, checked before the env is touched and before the run directory exists."""
    if not models:
        raise ConfigError("no models given")
    for m in models:
        check_agent(m, s.options, endpoint=False)
    check_endpoints(models)
    budget.check_priced(models, s.max_cost, s.episode_max_cost)
    validate.concurrency(s.concurrency, s.executor)
    out = validate.run_out("--out", out)
    if s.executor == "ray":
        ray_module()  # not installed: say so before any work
    return out


def _door(env: Any) -> tuple[Target, bool]:
    """The env, resolved: a name is an embedded env to serve for the batch (True), anything else is asked
    its name and kind once."""
    if isinstance(env, str) and "://" not in env:
        return target.embedded(env), True
    return target.resolve(env), False


def _error(text: str) -> None:
    notice(log, text, logging.ERROR)


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


def _start(env: Target, s: Settings, surfaces: list[str], tasks: list | Draw, serve: bool) -> tuple:
    """The env served (an embedded one, for the batch) and its preflight: the first task reset once, tools
    listed, capacity counted (`evalkit.envs.target.start`). A task the env refuses, an unreachable server or
    an env with no tools is the user's mistake, better said now than recorded as an env error per episode.
    Returns the env with what was measured, what was found, the server to stop (or None), the lines to say,
    and the settings with the concurrency the server allows."""
    mode = s.modes[0] if s.modes else None
    try:
        env, found, served = target.start(env, tasks, surfaces[0], mode, s.concurrency, serve)
    except EnvCapacityError as e:
        raise ConfigError(f"{env.name} has had no free session for a minute ({e}); try again later") from None
    except (EnvSlowError, EnvUnreachableError) as e:
        raise ConfigError(f"{env.name}: {e}") from None
    except EnvError as e:
        first = tasks[0][1] if isinstance(tasks, list) else f"{env.name}-{tasks.split}-{tasks.start:04d}"
        raise ConfigError(f"the environment refused task {first}: {e}") from None
    if not found.tools:
        if served is not None:
            served.stop()
        raise ConfigError(f"{env.name} offers no tools: a model could not act in it")
    said = [_summary(env, found)] if s.progress else []
    if found.copies > 1:
        said.append(f"{env.name} showed the same task at {tasks.split} indices {tasks.start} and "
                    f"{tasks.start + tasks.stride}, each reset in a new session as an episode is (its reset "
                    f"ignores split and index): running it as one task, {found.copies} time(s) per "
                    "repeat")  # fmt: skip
    if found.alike is not None:
        one, two = found.alike
        said.append(f"{env.name}'s tasks {one} and {two} open alike (the model is shown the same); they "
                    "are kept apart, as the env's Task API lists them")  # fmt: skip
    if found.capacity is not None and found.capacity < s.concurrency:
        said.append(f"{env.name} accepts {found.capacity} session(s) at a time: running "
                    f"{found.capacity} episode(s) at once instead of {s.concurrency}")  # fmt: skip
        s = Settings.make(s, concurrency=found.capacity)
    return env, found, served, said, s


def _summary(env: Target, found: Any) -> str:
    """One line: which kind of env this is and how it will be driven (`EnvReport.summary`)."""
    from evalkit.run.probe import EnvReport

    finish = wording.finishing_tool(found.tools)
    finish = finish.name if finish else None
    report = EnvReport(env.name, env.url, found.kind, found.tools, finish, found.meta, found.observation, "",
                       wording.Opening(""), found.reset, found.capacity, found.tried)  # fmt: skip
    return report.summary()


def _meta(
    models: list[str],
    env: Target,
    s: Settings,
    kind: str,
    surfaces: list[str],
    modes: list[str],
    evalset_id: str | None,
    n_jobs: int,
) -> dict:
    """run.json: what was asked (every setting, `outcome` those a resume may not change) and of what."""
    from evalkit import __version__

    return {
        **s.to_json(),
        "models": models,
        "env": env.name,
        "env_kind": kind,
        "surfaces": surfaces,
        "modes": modes,
        "base_url": env.url if not env.embedded else None,
        "evalset": str(s.evalset) if s.evalset else None,
        "evalset_id": evalset_id,
        "split": None if s.evalset or s.reset is not None else s.split,
        "server_sessions": env.capacity,
        "env_config": env.config,
        "n_jobs": n_jobs,
        "sent_as": sent_as(models, s.options),
        "evalkit_version": __version__,
        "prices": price_source(),
        "budget_stop": None,  # (set by `evalkit.run.budget` if this invocation stops at --max-cost)
    }


def _check_resume(out: Path, meta: dict) -> None:
    """A run resumed with settings that change what an episode is would mix incomparable records."""
    if not (out / TRACE).exists():
        return
    from evalkit.envs.identity import mismatch

    recorded = read_run_json(out).get("env_config")
    differs = mismatch(recorded, meta["env_config"]) if isinstance(recorded, dict) else None
    if differs:
        raise ConfigError(f"{out}: {differs}; use a new --out for it")
    old = outcome_settings(out)

    def norm(v: Any) -> Any:
        return json.loads(json.dumps(v, default=str))

    changed = [k for k, v in meta["outcome"].items() if k in old and norm(old[k]) != norm(v)]
    if changed:
        was = ", ".join(f"{k}={old[k]}" for k in changed)
        raise ConfigError(f"{out} was run with {was}; resume it with the same settings or use a new --out")


def _to_reset(jobs: list[Job], done: set[str], s: Settings) -> list[tuple]:
    """The resets a batch tries before any episode: the first task on each surface and skin (and every task
    the user named, by id or by reset arguments), among the jobs left to run."""
    jobs = [j for j in jobs if j.key not in done]
    explicit = s.evalset is None and bool(s.task_ids or s.reset is not None)
    if not explicit:
        jobs = [j for j in jobs if j.ident == jobs[0].ident]
    probes: dict[tuple, Job] = {}
    for j in jobs:
        probes.setdefault((j.ident, j.surface, j.skin, j.coordinates), j)
    return [(j.ident, j.task, j.surface, j.mode, j.skin, j.coordinates) for j in probes.values()]


def _keep_fallbacks(out: Path, rec: EpisodeRecord) -> None:
    """A fallback an episode learned (a feature its model's API refused: `evalkit.providers.capabilities`)
    goes into run.json under `fallbacks`, by model, once."""
    learned = [f for f in (rec.info or {}).get("fallbacks") or [] if f.get("turn")]
    if not learned:
        return
    meta = read_run_json(out)
    kept = meta.setdefault("fallbacks", {}).setdefault(rec.model, [])
    seen = {(k.get("feature"), k.get("sent")) for k in kept}
    new = [f for f in learned if (f.get("feature"), f.get("sent")) not in seen]
    if new:
        kept += [{k: v for k, v in f.items() if k != "turn"} | {"episode": rec.key} for f in new]
        write_run_json(out, meta)


def _write_meta(out: Path, meta: dict) -> None:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    old = read_run_json(out)
    history = list(old.get("invocations", []))
    history.append({"at": now, "models": meta["models"], "n_jobs": meta["n_jobs"]})
    write_run_json(out, {**old, **meta, "created": old.get("created", now), "invocations": history[-50:]})


def _execute(
    jobs: list[Job], episodes: Episodes, meta: dict, health: ProviderHealth, guard: breaker.Guard
) -> Run:
    out, s = episodes.out, episodes.settings
    done_keys = completed_keys(out)
    todo = [j for j in jobs if j.key not in done_keys]
    _write_meta(out, meta)
    for m, words in meta["sent_as"].items():
        notice(log, f"{m}: sent as {words}, which this model takes (evalkit's capability table)")
    writer = TraceWriter(out)
    live.clear_stale(out)
    run = Run(out, skipped=len(jobs) - len(todo), meta=meta)
    rewards: dict[str, list[float]] = defaultdict(list)
    bar = _bar(len(todo), out.name, s.progress and bool(todo))
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
                _keep_fallbacks(out, rec)
        live.finish(out, rec.key)  # after the record, so a watcher never sees the episode in neither

    def left(kind: str) -> None:
        """A job that was never started (`not_run`), left for a resume."""
        run.not_run += 1

    guard.start()
    try:
        with heap_frozen(), frame_takers():
            for rec in execute(
                s.executor, todo, episodes, s.concurrency, arrive, health, guard, left, address=s.ray_address
            ):
                _collect(rec, run, rewards, bar, s.verbose)
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
