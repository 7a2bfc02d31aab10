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

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.envs.client.resolved import ResolvedEnv
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

    env: ResolvedEnv
    out: Path
    settings: Settings
    environ: dict[str, str] = field(default_factory=dict)
    """Variables a Ray node gets from the driver besides those `evalkit.run.cluster.TRAVELS` names."""

    def play(self, job: Job, store_dir: Path, cancel: threading.Event | None, health: Any) -> EpisodeRecord:
        return play(job.model, self.env, job, self.settings, store_dir, cancel, health)


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
        return run_ray(jobs, episodes, concurrency, arrive, gate, left, serve=serve_embedded, **kw)
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


def serve_embedded(name: str, concurrency: int | None = None) -> Any:
    """Embedded env `name` served on loopback: the one door from the loop to evalkit's own env servers, which
    a client never imports (`evalkit.envs.client.prepare` is handed this). For a batch of `concurrency`
    episodes at once (`evalkit.envs.embedded.process.serve_embedded`: child processes past a few), else in
    a thread of this process (a Ray node's runner)."""
    # The door, on use: a batch against a URL never loads an env server.
    from evalkit.envs.embedded import process, server

    return process.serve_embedded(name, concurrency) if concurrency else server.serve(name)


FILES_PER_EPISODE = 8
"""Files (sockets) an episode holds open in the batch's process, with room: its WebSocket to the env, a kept
connection for pictures on its thread and on a frame taker, its model's connection — and as many again for
the env's ends when the env is served in this process. Measured: 4.8 per episode at 64 at once (the env in
child processes, the tests' model server in this process), 8.8 at 6 (both in this process)."""
MIB_PER_EPISODE = 4
"""Memory an episode adds at the least (the canvas `tools` surface; a screen surface's browser page takes
far more): 4.3 MiB measured between 8 and 64 episodes at once, the env's processes included."""


def most_episodes() -> tuple[int, str]:
    """How many episodes at once this machine can hold, and what bounds it: the files this process may
    open (past them every new connection fails), or the memory available now."""
    try:
        import resource  # Unix's alone: elsewhere the bound is the memory's

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        limit = -1
    bounds = []
    if limit > 0:  # (RLIM_INFINITY is -1)
        try:
            used = len(os.listdir("/proc/self/fd"))
        except OSError:
            used = 64
        bounds.append((max(1, (limit - used - 64) // FILES_PER_EPISODE),
                       f"each keeps ~{FILES_PER_EPISODE} files open and this process may open {limit:,}: "
                       "`ulimit -n` raises that"))  # fmt: skip
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(ln.split()[1]) for ln in f if ln.startswith("MemAvailable:")) // 1024
        why = f"each needs {MIB_PER_EPISODE} MiB or more and {avail:,} MiB is available"
        bounds.append((max(1, avail // MIB_PER_EPISODE), why))
    except (OSError, StopIteration, ValueError):
        pass
    return min(bounds) if bounds else (2**31, "")


def check_concurrency(n: int, executor: str = "threads") -> None:
    """Episodes run in this process's threads are bounded by what the machine holds (`most_episodes`); on
    Ray, by the cluster."""
    if executor == "threads":
        most, why = most_episodes()
        if n > most:
            raise ConfigError(f"--concurrency {n:,} is more than this machine holds: at most "
                              f"{most:,} episodes at once ({why})")  # fmt: skip
