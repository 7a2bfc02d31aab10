"""Where a batch's episodes run: in threads of this process (`threads`), or on a Ray cluster (`ray`).

Both take the jobs the batch planned and an `Episodes` (everything an episode needs but its job, plain data
that travels to other processes), run at most `concurrency` episodes at once, and hand each finished
record to `arrive` — the one place a record reaches the batch, which writes it. They yield the records as
they arrive, for the batch's progress.

Threads: `arrive` runs in the worker as soon as the episode ends (written even after Ctrl-C, while the
batch shuts down). Ray (`evalkit.run.cluster`): each episode is a task on a runner actor, one per node (or
per CPU), handed to whichever runner is free; the driver alone writes `trace.jsonl`, frames and renders,
fetching from the node only the files it lacks. The driver keeps at most `concurrency` tasks in flight, so
the limit holds across the cluster; a lost or frozen node costs only its episodes in flight, run again on
the others. An embedded env is served by the driver for its own node and by each other node's runner for
that node; a `--base-url` env is reached from every node as given.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.envs.target import Target
from evalkit.errors import ConfigError
from evalkit.records import live
from evalkit.run.cluster import ray_module, run_ray, start_ray  # noqa: F401 (batch and benchmarks use them)
from evalkit.run.episode import Job, play
from evalkit.run.settings import Settings
from evalkit.types import EpisodeRecord

EXECUTORS = ("threads", "ray")


@dataclass
class Episodes:
    """What every episode of a batch shares: the env, the run directory, the settings. Plain data, so it
    travels to other processes."""

    target: Target
    out: Path
    settings: Settings
    environ: dict[str, str] = field(default_factory=dict)
    """Variables a Ray node gets from the driver besides those `evalkit.run.cluster.TRAVELS` names."""

    def play(self, job: Job, store_dir: Path, cancel: threading.Event | None, health: Any) -> EpisodeRecord:
        return play(job.model, self.target, job, self.settings, store_dir, cancel, health)


Arrive = Callable[[EpisodeRecord, bool], None]
"""`arrive(record, stopping)`: a finished episode reaches the batch (`stopping`: it is shutting down)."""
Left = Callable[[str], None]
"""`left("not_run")`: a job never started, left for a resume (the batch counts what was in flight when the
gate went down as what neither arrived nor was left)."""


def execute(
    kind: str,
    jobs: list,
    episodes: Episodes,
    concurrency: int,
    arrive: Arrive,
    health: Any,
    gate: Any,
    left: Left,
    **kw: Any,
) -> Iterator[EpisodeRecord | None]:
    """Run `jobs`, yielding each record as it arrives (None for a job `gate` stopped as it started).

    `gate` is the batch's `evalkit.run.breaker.Guard`: a job of a model it does not `allow` is not started;
    once its `down` is set no further job starts, the executor stops waiting for the episodes in flight and
    returns (resume runs them again)."""
    if kind == "threads":
        return run_threads(jobs, episodes, concurrency, arrive, health, gate, left)
    if kind == "ray":
        return run_ray(jobs, episodes, concurrency, arrive, gate, left, **kw)
    raise ConfigError(f"unknown executor {kind!r}: use {' or '.join(EXECUTORS)}")


def run_threads(
    jobs: list, episodes: Episodes, concurrency: int, arrive: Arrive, health: Any, gate: Any, left: Left
) -> Iterator[EpisodeRecord | None]:
    stopping = threading.Event()

    def one(job: Any) -> EpisodeRecord | None:
        rec = None
        try:
            rec = gate.episode(job.model, episodes.play, job, episodes.out, stopping, health)
        finally:
            if rec is None:  # refused (or raised): no record takes it out of the live file
                live.finish(episodes.out, job.key)
        if rec is not None:
            arrive(rec, stopping.is_set())  # which takes it out of the live file once it is written
        return rec

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="evalkit-ep")
    pending: set[Future] = set()

    def drain(limit: int) -> Iterator[EpisodeRecord | None]:
        nonlocal pending
        # Woken every second, so that a gate that went down while every episode hangs on a frozen server is
        # seen.
        while len(pending) > limit and gate.down is None:
            finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            yield from (f.result() for f in finished)

    try:
        for job in jobs:
            if not gate.allow(job.model):
                left("not_run")
                continue
            pending.add(pool.submit(one, job))
            yield from drain(concurrency * 2 - 1)
        yield from drain(0)
    except BaseException:
        stopping.set()
        # Ctrl-C (or a config error inside an episode): queued jobs are dropped, running ones finish in the
        # background and are written; nobody waits for them here. Resume picks up the rest.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    if gate.down is None:
        pool.shutdown(wait=True)
        return
    stopping.set()  # what the episodes in flight record now is about the outage: not kept
    for f in pending:
        if f.cancel():
            left("not_run")
    pool.shutdown(wait=False, cancel_futures=True)
