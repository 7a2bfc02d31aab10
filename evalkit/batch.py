"""run_batch: models × surfaces × modes × tasks × repeats, run concurrently into one run directory.

Each finished episode is appended to `trace.jsonl` at once, so a killed batch loses at most the episodes in
flight. Rerunning into the same directory (resume) runs only the jobs whose key is missing or whose latest
record ended with an `error_class`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.envs import EMBEDDED, MODES, SURFACES
from evalkit.envs.openenv import env_identity
from evalkit.episode import run_episode
from evalkit.errors import ConfigError, EnvError
from evalkit.evalsets import load_evalset
from evalkit.providers import check_keys, parse_spec
from evalkit.traces import TRACE, TraceWriter, completed_keys, read_records, read_run_json, write_run_json
from evalkit.types import AgentOptions, EpisodeRecord, episode_key


@dataclass
class Job:
    model: str
    surface: str
    mode: str
    task: dict
    """Reset arguments: `task_id`, or `split` and `index`."""
    ident: str
    """The task's identity in the key (its id, or `<env>-<split>-<index>`)."""
    repeat: int
    key: str
    evalset_task: str | None = None


@dataclass
class Run:
    """A run directory and what a batch did to it."""

    path: Path
    ran: int = 0
    skipped: int = 0
    errors: int = 0
    meta: dict = field(default_factory=dict)

    def records(self) -> list[EpisodeRecord]:
        from evalkit.display import attach

        return [attach(r, self.path) for r in read_records(self.path)]

    def df(self) -> Any:
        from evalkit.analysis import load_runs

        return load_runs([self.path])

    def summary(self) -> Any:
        from evalkit.analysis import summarise

        return summarise(self.df())

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, ran={self.ran}, skipped={self.skipped}, errors={self.errors})"

    def _repr_html_(self) -> str:
        from evalkit.display import run_html

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
) -> tuple[list[tuple[dict, str]], str | None]:
    """(reset arguments, identity) per task, and the evalset id. Raises ConfigError on a bad selection."""
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


def plan_jobs(
    models: list[str],
    env_name: str,
    tasks: list[tuple[dict, str]],
    surfaces: list[str],
    modes: list[str],
    repeats: int,
    evalset_id: str | None = None,
    skin: str | None = None,
) -> list[Job]:
    """Jobs ordered task-major, so that a batch cut short still has every model on the same tasks."""
    jobs = []
    for r in range(repeats):
        for task, ident in tasks:
            for surface in surfaces:
                for mode in modes:
                    for m in models:
                        key = episode_key(m, env_name, surface, mode, ident, skin, r)
                        jobs.append(Job(m, surface, mode, task, ident, r, key, evalset_id))
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
    surfaces: list[str] | str | None = None,
    modes: list[str] | str | None = None,
    repeats: int = 1,
    skin: str | None = None,
    coordinates: str | None = None,
    concurrency: int = 4,
    max_turns: int = 30,
    max_steps: int | None = None,
    episode_timeout: float | None = None,
    frames: bool = True,
    options: AgentOptions | None = None,
    progress: bool = True,
    verbose: bool = False,
    argv: list[str] | None = None,
) -> Run:
    """Run every job that `out` does not already hold cleanly; return the Run.

    `env` is a served environment (`evalkit.serve`), a base URL of any OpenEnv MCP server, or the name of an
    embedded environment (served for the length of the batch). Every configuration mistake — unknown
    provider, missing key, bad evalset, empty selection — raises ConfigError before the run directory exists.
    """
    models, surfaces, modes = _as_list(models), _as_list(surfaces), _as_list(modes)
    if not models:
        raise ConfigError("no models given")
    for m in models:
        parse_spec(m)
    check_keys(models)
    if concurrency < 1 or max_turns < 1 or repeats < 1:
        raise ConfigError("--concurrency, --max-turns and --repeats must be ≥ 1")
    served = None
    if isinstance(env, str) and "://" not in env:
        if env not in EMBEDDED:
            raise ConfigError(
                f"unknown environment {env!r} (embedded: {', '.join(sorted(EMBEDDED))}; or give a base URL)"
            )
        name = env
    else:
        name = env_identity(env)
    # None: the env's first surface and mode (tools / reference for envs evalkit does not embed).
    surfaces = surfaces or list(SURFACES.get(name, ("tools",))[:1])
    modes = modes or list(MODES.get(name, ("reference",))[:1])
    for what, asked, known in (("surface", surfaces, SURFACES.get(name)), ("mode", modes, MODES.get(name))):
        bad = [x for x in asked if known is not None and x not in known]
        if bad or not asked:
            raise ConfigError(
                f"{name} has no {what} {', '.join(bad) or '(none given)'}"
                + (f" (it has: {', '.join(known)})" if known else "")
            )
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
    )
    jobs = plan_jobs(models, name, task_list, surfaces, modes, repeats, evalset_id, skin)

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    if isinstance(env, str) and "://" not in env:
        from evalkit.envs.server import serve

        served = env = serve(env, max_concurrent_envs=max(64, concurrency + 4))
    from evalkit import __version__

    meta = {
        "models": models,
        "env": name,
        "surfaces": surfaces,
        "modes": modes,
        "base_url": getattr(env, "base_url", env) if served is None else None,
        "evalset": str(evalset) if evalset else None,
        "evalset_id": evalset_id,
        "subset": subset,
        "tiers": tiers,
        "limit": limit,
        "split": None if evalset else split,
        "repeats": repeats,
        "max_turns": max_turns,
        "max_steps": max_steps,
        "episode_timeout": episode_timeout,
        "frames": frames,
        "concurrency": concurrency,
        "n_jobs": len(jobs),
        "options": vars(options) if options else None,
        "evalkit_version": __version__,
        "argv": argv,
    }
    episode_kw = dict(
        max_turns=max_turns,
        max_steps=max_steps,
        episode_timeout=episode_timeout,
        frames=frames,
        options=options,
        skin=skin,
        coordinates=coordinates,
    )
    try:
        _check_resume(out, meta)
        done = completed_keys(out)
        _preflight(env, [j for j in jobs if j.key not in done], explicit=bool(task_ids) and evalset is None)
        return _execute(jobs, env, name, out, meta, episode_kw, concurrency, progress, verbose)
    finally:
        if served is not None:
            served.stop()


# Settings that change what an episode is: resuming with other values would mix incomparable records.
_OUTCOME_SETTINGS = ("max_turns", "max_steps", "episode_timeout")
_OUTCOME_OPTIONS = ("max_tokens", "keep_images", "image_window", "temperature", "seed")


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


def _preflight(env: Any, jobs: list[Job], explicit: bool) -> None:
    """Reset the first task (and every task named by --task-ids without an evalset) once: a split or task
    the env refuses is the user's mistake, better said now than recorded as an env error per episode."""
    if not jobs:
        return
    from evalkit.episode import _session

    probes = {j.ident: j.task for j in (jobs if explicit else jobs[:1])}
    session = None
    try:
        session = _session(env)
        for ident, task in probes.items():
            try:
                session.reset(**{**task, "surface": jobs[0].surface, "mode": jobs[0].mode})
            except EnvError as e:
                raise ConfigError(f"the environment refused task {ident}: {e}") from None
    except EnvError as e:
        raise ConfigError(str(e)) from None
    finally:
        if session is not None:
            session.close()


def _write_meta(out: Path, meta: dict) -> None:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    old = read_run_json(out)
    history = list(old.get("invocations", []))
    history.append({"at": now, "models": meta["models"], "n_jobs": meta["n_jobs"]})
    write_run_json(out, {**old, **meta, "created": old.get("created", now), "invocations": history[-50:]})


def _execute(
    jobs: list[Job],
    env: Any,
    env_name: str,
    out: Path,
    meta: dict,
    episode_kw: dict,
    concurrency: int,
    progress: bool,
    verbose: bool,
) -> Run:
    done_keys = completed_keys(out)
    todo = [j for j in jobs if j.key not in done_keys]
    _write_meta(out, meta)
    writer = TraceWriter(out)
    run = Run(out, skipped=len(jobs) - len(todo), meta=meta)
    rewards: dict[str, list[float]] = defaultdict(list)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc=out.name, unit="ep", disable=not progress or not todo, file=sys.stderr)

    stopping = threading.Event()

    def one(job: Job) -> EpisodeRecord:
        rec = run_episode(
            job.model,
            env,
            job.task,
            surface=job.surface,
            mode=job.mode,
            out=None,
            repeat=job.repeat,
            evalset_task=job.evalset_task,
            task_key=job.ident,
            store_dir=out,
            env_name=env_name,
            cancel=stopping,
            **episode_kw,
        )
        # Written by the worker as soon as the episode ends, so that an episode still in flight when the
        # batch is interrupted is kept if it finishes, and nothing waits on the main thread to be saved.
        # One that broke because the batch itself was shutting down is not data about the env: drop it.
        if not (stopping.is_set() and rec.error_class):
            writer.append(rec)
        return rec

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="evalkit-ep")
    pending: set[Future] = set()
    try:
        for job in todo:
            pending.add(pool.submit(one, job))
            if len(pending) >= concurrency * 2:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    _collect(f.result(), run, rewards, bar, verbose)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                _collect(f.result(), run, rewards, bar, verbose)
    except BaseException:
        stopping.set()
        # Ctrl-C (or a config error inside an episode): queued jobs are dropped, running ones finish in the
        # background and are written; nobody waits for them here. Resume picks up the rest.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        bar.close()
    pool.shutdown(wait=True)
    _summarise(out)
    return run


def _collect(rec: EpisodeRecord, run: Run, rewards: dict, bar: Any, verbose: bool) -> None:
    run.ran += 1
    if rec.error_class:
        run.errors += 1
    elif rec.reward is not None:
        rewards[rec.model].append(rec.reward)
    bar.update(1)
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
    from evalkit.analysis import write_summary

    write_summary(out)
