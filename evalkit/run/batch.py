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

from tqdm.auto import tqdm

from evalkit import __version__
from evalkit.envs.client import loopback
from evalkit.envs.client.identity import mismatch
from evalkit.envs.client.prepare import Prepared, prepare
from evalkit.errors import ConfigError
from evalkit.notices import notice
from evalkit.providers import check_endpoints, sent_as
from evalkit.providers.common import release_clients
from evalkit.providers.health import ProviderHealth
from evalkit.providers.prices import price_source
from evalkit.records import live
from evalkit.records.checks import run_out
from evalkit.records.lock import RunLock
from evalkit.records.rundir import (
    TRACE,
    TraceWriter,
    completed_keys,
    read_records,
    read_run_json,
    write_run_json,
)
from evalkit.records.settings import outcome_settings
from evalkit.run import breaker, budget, probe, rounds
from evalkit.run.executors import Episodes, check_concurrency, execute, ray_module, serve_embedded
from evalkit.run.jobs import Job, check_agent, plan_jobs
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
        from evalkit.records.loading import load_runs  # start-up: it loads Polars, which a batch never needs

        return load_runs([self.path])

    def summary(self) -> Any:
        from evalkit.analysis.stats import summarise  # start-up (as `df`)

        return summarise(self.df())

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, ran={self.ran}, skipped={self.skipped}, errors={self.errors})"


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
    `env_breaker`, `progress`, `verbose`; what it may cost, `max_cost` (the run directory's, in USD) and
    `episode_max_cost` (`evalkit.run.budget`); `until_decided` with `compare_a`, `compare_b` and `delta`:
    the tasks run in rounds until the paired comparison is decided (`evalkit.run.rounds`). Every
    configuration mistake — unknown provider, missing key or endpoint URL, an endpoint nothing answers at,
    conflicting image budgets, bad evalset, empty selection, an env with no tools, a task, surface or skin
    the env refuses, a budget for a model evalkit cannot price — raises ConfigError before the run directory
    exists.

    The episodes share one `ProviderHealth` (a fresh one unless given): a provider behind a router spec
    that fails is passed over by the following episodes for a cool-down. A model whose endpoint refuses its
    key, and an env that stops answering (`env_breaker`), stop the episodes that depend on them
    (`evalkit.run.breaker`); `Run.exit_status` says what happened."""
    s = Settings.make(settings, **kw)
    models = _as_list(models)
    if s.until_decided:  # rounds of this batch, each a batch of its own
        return rounds.until_decided(models, env, s, out, health, _batch, Run)
    return _batch(models, env, s, out, health)


def _batch(models: list[str], env: Any, s: Settings, out: str | Path, health: ProviderHealth | None) -> Run:
    """One batch: the whole of a plain one, or one round of `--until-decided`'s (see `run_batch`)."""
    _check(models, s)
    out = run_out("--out", out)
    try:
        with prepare(env, s, serve_embedded) as ready:
            jobs = plan_jobs(models, ready.env, ready.tasks, ready.surfaces, ready.modes,
                             s.repeats * ready.copies, ready.evalset_id, s.skins, s.coordinates)  # fmt: skip
            meta = _meta(models, ready, s, len(jobs))
            _check_resume(out, meta)
            resets = _to_reset(jobs, completed_keys(out), s)
            ready.check_resets(resets)
            said = ([probe.summary(ready.found)] if s.progress else []) + ready.notices
            guard = breaker.Guard(ready.env.url, s.env_breaker, _error, models)
            health = health if health is not None else ProviderHealth()
            with RunLock(out):  # one writer per run directory
                gate = budget.gate(guard, s.max_cost, s.episode_max_cost, out)  # what the trace spent
                run, todo, writer = _begin(out, meta, jobs, said)
                run = _execute(
                    run, todo, writer, Episodes(ready.env, out, s), ready.concurrency, health, gate
                )
                run.budget_stop = budget.stopped(gate)
                return run
    finally:
        # What the batch's threads kept open (they are gone): connections to its env server and its models.
        loopback.release()
        release_clients()


def _check(models: list[str], s: Settings) -> None:
    """What is asked, checked before the env is touched and before the run directory exists."""
    if not models:
        raise ConfigError("no models given")
    check_concurrency(s.concurrency, s.executor)
    for m in models:
        check_agent(m, endpoint=False)
    check_endpoints(models)
    budget.check_priced(models, s.max_cost, s.episode_max_cost)
    if s.executor == "ray":
        ray_module()  # not installed: say so before any work


def _error(text: str) -> None:
    notice(log, text, logging.ERROR)


def _meta(models: list[str], ready: Prepared, s: Settings, n_jobs: int) -> dict:
    """run.json: what was asked (every setting, `outcome` those a resume may not change) and of what."""
    env = ready.env
    return {
        **s.to_json(),
        "concurrency": ready.concurrency,  # what the server accepts, when fewer than asked (a notice says so)
        "models": models,
        "env": env.name,
        "env_kind": ready.found.kind,
        "surfaces": ready.surfaces,
        "modes": ready.modes,
        "base_url": env.url if not env.embedded else None,
        "evalset": str(s.evalset) if s.evalset else None,
        "evalset_id": ready.evalset_id,
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


def _begin(out: Path, meta: dict, jobs: list[Job], said: list[str]) -> tuple[Run, list[Job], TraceWriter]:
    """The run directory, begun (or resumed): its run.json says this invocation, a live file a killed batch
    left is cleared, the user is told what there is to say; the Run, the jobs it does not hold cleanly, and
    its trace's writer."""
    done = completed_keys(out)
    old = read_run_json(out)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    history = [*old.get("invocations", []), {"at": now, "models": meta["models"], "n_jobs": meta["n_jobs"]}]
    write_run_json(out, {**old, **meta, "created": old.get("created", now), "invocations": history[-50:]})
    sent = [
        f"{m}: sent as {w}, which this model takes (evalkit's capability table)"
        for m, w in meta["sent_as"].items()
    ]
    for line in said + sent:
        notice(log, line)
    writer = TraceWriter(out)
    live.clear_stale(out)
    todo = [j for j in jobs if j.key not in done]
    return Run(out, skipped=len(jobs) - len(todo), meta=meta), todo, writer


def _execute(run: Run, todo: list[Job], writer: TraceWriter, episodes: Episodes, concurrency: int,
             health: ProviderHealth, guard: breaker.Guard | budget.BudgetGate) -> Run:  # fmt: skip
    """The jobs left to run, `concurrency` at once, each record written as it arrives (`guard`: the env
    breaker, with the budget over it when there is one); then the run's summary files. (`--until-decided`'s
    rounds go around `_batch`: `evalkit.run.rounds`.)"""
    s = episodes.settings
    arrivals, rewards = _Arrivals(run, writer), defaultdict(list)
    bar = _bar(len(todo), run.path.name, s.progress and bool(todo))
    guard.start()
    try:
        with heap_frozen(), frame_takers():
            for rec in execute(s.executor, todo, episodes, concurrency, arrivals.arrive, health, guard,
                               arrivals.left, address=s.ray_address):  # fmt: skip
                _collect(rec, run, rewards, bar, s.verbose)
        arrivals.close(len(todo))
    finally:
        guard.stop()
        bar.close()
    run.stopped = guard.down
    run.refused = {m: str(e) for m, e in guard.refused.items()}
    if (run.path / TRACE).stat().st_size:  # a run with no episode yet has nothing to summarise
        from evalkit.analysis.summary import write_summary  # start-up: it loads Polars, for the end alone

        write_summary(run.path)
    return run


class _Arrivals:
    """Where a batch's finished episodes reach its run: each is written the moment it ends and counted as it
    is (what the batch says it ran is what the trace holds). One that broke
    because the batch itself was shutting down (interrupted, or the env breaker opened) is not data about
    the env: dropped; once the batch has returned, nothing more is written (resume runs what it left)."""

    def __init__(self, run: Run, writer: TraceWriter):
        self.run, self.writer = run, writer
        self.lock = threading.Lock()
        self.closed = False

    def arrive(self, rec: EpisodeRecord, stopping: bool) -> None:
        with self.lock:
            if not self.closed and not (stopping and rec.error_class):
                self.writer.append(rec)
                self.run.ran += 1
                if rec.error_class:
                    self.run.errors += 1
                    self.run.unscored[rec.error_class] = self.run.unscored.get(rec.error_class, 0) + 1
                _keep_fallbacks(self.run.path, rec)
        # After the record, so a watcher never sees the episode in neither.
        live.finish(self.run.path, rec.key)

    def left(self, kind: str) -> None:
        """A job that was never started (`not_run`), left for a resume."""
        self.run.not_run += 1

    def close(self, todo: int) -> None:
        """Nothing more is written (interrupted, the episodes still running are written as they end); the
        rest were in flight when the breaker opened (or broke as it did): resume runs them."""
        with self.lock:
            self.closed = True
            self.run.abandoned = todo - self.run.ran - self.run.not_run


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
        tqdm.write(s, file=sys.stderr)


def _bar(total: int, name: str, shown: bool) -> Any:
    if not shown:
        return _NoBar()
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


def _collect(rec: EpisodeRecord | None, run: Run, rewards: dict, bar: Any, verbose: bool) -> None:
    """An episode in the progress: the mean reward by model so far, and a line each if `verbose`."""
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
