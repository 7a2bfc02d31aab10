"""Where a batch's episodes run: in threads of this process (`threads`), or on a Ray cluster (`ray`).

Both take the jobs the batch planned and an `Episodes` (everything an episode needs but its job, plain data
that travels to other processes), run at most `concurrency` episodes at once, and hand each finished
record to `arrive` — the one place a record reaches the batch, which writes it. They yield the records as
they arrive, for the batch's progress.

Threads: `arrive` runs in the worker as soon as the episode ends (written even after Ctrl-C, while the
batch shuts down). Ray: each episode is a task on a runner actor, one per node, whose threads run the
node's share of the episodes; a task stores its pictures in a temporary directory and returns them as
bytes with the record, and the driver alone writes `trace.jsonl`, frames and renders (content-addressed,
so a picture two episodes share is written once). The driver keeps at most `concurrency` tasks in flight,
so the limit holds across the cluster. An embedded env is served by the driver for its own node and by
each other node's runner for that node; a `--base-url` env is reached from every node as given.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalkit.envs.client.resolved import ResolvedEnv, served_by
from evalkit.errors import ConfigError, KeyRejectedError
from evalkit.providers.health import ProviderHealth
from evalkit.records import live
from evalkit.records.rundir import store_files
from evalkit.run.episode import Job, play
from evalkit.run.settings import Settings
from evalkit.types import EpisodeRecord

EXECUTORS = ("threads", "ray")
ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "HF_", "VLLM_")
"""Variables a provider reads (keys, base URLs, router settings): a Ray task gets the driver's values."""


@dataclass
class Episodes:
    """What every episode of a batch shares: the env, the run directory, the settings. Plain data, so it
    travels to other processes."""

    env: ResolvedEnv
    out: Path
    settings: Settings
    environ: dict[str, str] = field(default_factory=dict)
    """Provider variables (keys, base URLs) a Ray node gets from the driver."""

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


def serve_embedded(name: str, concurrency: int | None = None) -> Any:
    """Embedded env `name` served on loopback: the one door from the loop to evalkit's own env servers, which
    a client never imports (`evalkit.envs.client.prepare` is handed this). For a batch of `concurrency`
    episodes at once (`evalkit.envs.embedded.process.serve_embedded`: child processes past a few), else in
    a thread of this process (a Ray node's runner)."""
    # The door, on use: a batch against a URL never loads an env server.
    from evalkit.envs.embedded import process, server

    return process.serve_embedded(name, concurrency) if concurrency else server.serve(name)


def provider_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}


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


# ---- Ray ---------------------------------------------------------------------------------------------------


def ray_module() -> Any:
    try:
        import ray  # an extra (evalkit[ray]): imported where a Ray batch needs it
    except ImportError:
        raise ConfigError("the Ray executor needs Ray: pip install 'evalkit[ray]'") from None
    return ray


def start_ray(address: str | None) -> Any:
    """Ray, connected: to `address` (a cluster's `ray://…` or `host:port`), else to the instance this
    process already has, else to a new local one."""
    ray = ray_module()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            where = address or "(a new local instance)"
            raise ConfigError(f"cannot connect to Ray at {where}: {e}") from None
    return ray


class Runner:
    """A node's episodes, run by the actor's threads (made a Ray actor by `run_ray`)."""

    def __init__(self, episodes: Episodes, driver_node: str):
        ray = ray_module()
        os.environ.update(episodes.environ)
        self.server = None
        if episodes.env.embedded and ray.get_runtime_context().get_node_id() != driver_node:
            self.server = serve_embedded(episodes.env.name)
            episodes = replace(episodes, env=served_by(episodes.env, self.server))
        self.episodes = episodes
        self.health = ProviderHealth()

    def play(self, job: Any) -> tuple[EpisodeRecord | None, dict[str, bytes], KeyRejectedError | None]:
        """One episode; the files it wrote (pictures, shared texts, raw bodies) come back as bytes by their
        run-relative paths. Its live progress stays on the node (a viewer of the run sees it finished). A
        refused key comes back instead of a record (the driver's gate stops the model)."""
        with tempfile.TemporaryDirectory(prefix="evalkit-ep-") as tmp:
            try:
                rec = self.episodes.play(job, Path(tmp), None, self.health)
            except KeyRejectedError as e:
                return None, {}, e
            finally:
                # The live file is written by this process's writer thread: none of its writes may land in
                # the directory as it goes (or make it again).
                live.finish(tmp, job.key)
            found = [
                p for p in Path(tmp).rglob("*") if p.is_file() and p.relative_to(tmp).parts[0] != ".live"
            ]
            files = {p.relative_to(tmp).as_posix(): p.read_bytes() for p in found}
        return rec, files, None


def run_ray(
    jobs: list,
    episodes: Episodes,
    concurrency: int,
    arrive: Arrive,
    gate: Any,
    left: Left,
    address: str | None = None,
) -> Iterator[EpisodeRecord | None]:
    ray = start_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # (the extra, as above)

    driver = ray.get_runtime_context().get_node_id()
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")] or [driver]
    episodes = replace(episodes, environ={**provider_environ(), **episodes.environ})
    actor = ray.remote(num_cpus=0, max_concurrency=concurrency)(Runner)
    on = [NodeAffinitySchedulingStrategy(n, soft=True) for n in nodes]
    runners = [actor.options(scheduling_strategy=s).remote(episodes, driver) for s in on]
    queue = iter(jobs)
    flight: dict[Any, Any] = {}
    turn = 0

    def submit() -> bool:
        nonlocal turn
        for job in queue:
            if not gate.allow(job.model):
                left("not_run")
                continue
            flight[runners[turn % len(runners)].play.remote(job)] = job
            turn += 1
            return True
        return False

    try:
        while len(flight) < concurrency and submit():
            pass
        while flight and gate.down is None:
            # Woken every second, so that the gate going down is seen while every episode hangs.
            done, _ = ray.wait(list(flight), num_returns=1, timeout=1.0)
            for ref in done:
                flight.pop(ref)
                rec, files, refused = ray.get(ref)
                if refused is not None:
                    gate.refused_by(refused)
                    yield None
                else:
                    gate.ended(rec)
                    store_files(episodes.out, files)
                    rec.run_dir = str(episodes.out)
                    arrive(rec, False)
                    yield rec
                submit()
        if gate.down is not None:
            for _ in queue:
                left("not_run")
    finally:
        # Ctrl-C, the gate down, or the end: episodes still in flight are dropped with their runners (resume
        # runs them).
        for r in runners:
            ray.kill(r)
