"""A batch's episodes on a Ray cluster: runners placed on the live nodes, jobs handed to whoever is free, a
lost or frozen node costing only its episodes in flight.

- **Placement.** `Fleet` reads the cluster's node list (alive nodes only) and puts one runner actor on each
  node, or one per CPU the node has (`--ray-runners cpus`), with hard node affinity: Ray places an actor
  that asks for no resources wherever it likes unless told exactly where. The list is read again every few
  seconds, so a node that joins gets runners and one Ray marks dead loses them.
- **Dispatch.** The driver keeps at most `concurrency` episodes in flight across the cluster and gives each
  job to the started runner with the fewest in flight: a slow or frozen node is not handed more work.
- **A lost node.** A runner that dies (its node's raylet killed, the machine gone) or that leaves a ping
  unanswered for `--ray-node-timeout` seconds (a frozen node) gives up its node for the rest of the batch:
  its runners are killed, its episodes in flight go back to the front of the queue for the other nodes,
  and the batch says one line. A runner that has not started within the timeout (or a minute, whichever is
  longer) is not used: Ray can list a dead node as alive for a while. When no node is left, the batch
  stops as the env breaker does (the jobs left for a resume, exit status 4).
- **Files.** A runner keeps what an episode wrote (pictures, shared texts, raw bodies) in a temporary
  directory and returns the record with each file's sha256; the driver asks only for the files it does not
  already have (most frames after the first episodes, the task's target render, the shared texts).
- **What travels.** `Episodes` (the env, the settings), the variables named by `TRAVELS` and the user's
  prices as the driver read them (`prices.price_table`), once per runner. Each record says in
  `info["node"]` which node ran it.
- **Live progress.** The driver asks each runner with episodes in flight for their state about once a
  second and writes it into the run's live folder as the runner's own live file (`evalkit.records.live`),
  with the newest picture of each: a viewer watching the run shows them as it shows a local batch's.
- **A budget** (`--max-cost`): the driver admits each job as the thread executor does
  (`evalkit.run.budget`), but holds a job it may not start yet (its model's first episode still running)
  and goes on with the others; once the budget is spent no job starts and the episodes in flight land.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalkit.envs.client.loopback import on_this_machine
from evalkit.envs.client.resolved import served_by
from evalkit.errors import ConfigError, KeyRejectedError
from evalkit.notices import notice
from evalkit.providers import prices
from evalkit.providers.health import ProviderHealth
from evalkit.records import live
from evalkit.records.rundir import store_files
from evalkit.run import budget
from evalkit.types import EpisodeRecord

log = logging.getLogger("evalkit.run.batch")

TRAVELS = ("OPENAI_", "ANTHROPIC_", "HF_", "VLLM_", "OWNLOOP_", "EVALKIT_")
"""The driver's variables a runner gets, by prefix: the providers' keys, base URLs and router settings, and
evalkit's own (`EVALKIT_CHROMIUM` and the like). Declared here only."""
START_GRACE = 60.0
"""Seconds a runner may take to start (a new worker process importing evalkit, an embedded env served)."""
MAX_TRIES = 3
"""Times one episode is started on a node that is then lost before it is left for a resume."""
LOOK_EVERY = 5.0
"""Seconds between two reads of the cluster's node list."""


def travelling_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(TRAVELS)}


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray executor needs Ray: pip install 'evalkit[ray]'") from None
    return ray


def start_ray(address: str | None) -> Any:
    """Ray, connected: to `address` (a cluster's `host:port`), else to the instance this process already
    has, else to a new local one."""
    ray = ray_module()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            where = address or "(a new local instance)"
            raise ConfigError(f"cannot connect to Ray at {where}: {e}") from None
    return ray


class Runner:
    """Episodes on one node, run by the actor's threads (made a Ray actor by `Fleet`)."""

    def __init__(self, episodes: Any, driver_node: str, serve: Callable[[str], Any], priced: Any):
        import ray  # an extra (evalkit[ray]): on a node of a cluster it is there

        os.environ.update(episodes.environ)
        prices.use_table(priced)  # the user's prices as the driver read them: their file is not here
        _reachable_cwd()
        ctx = ray.get_runtime_context()
        self.node = {"id": ctx.get_node_id(), "address": ray.util.get_node_ip_address()}
        self.server = None
        if episodes.env.embedded and self.node["id"] != driver_node:
            self.server = serve(episodes.env.name)  # the batch's door to embedded envs (`executors`)
            episodes = replace(episodes, env=served_by(episodes.env, self.server))
        self.episodes = episodes
        self.health = ProviderHealth()
        self.kept: dict[str, str] = {}
        self.playing: dict[str, tuple[str, set[str]]] = {}
        """Each episode in flight, by key: its temporary directory, and the pictures `live` has sent of it."""

    def ping(self) -> bool:
        return True

    def play(self, job: Any) -> tuple[EpisodeRecord | None, dict[str, str], KeyRejectedError | None]:
        """One episode: its record and the sha256 of each file it wrote, by run-relative path (kept here
        until `take`). Its live progress the driver asks for (`live`). A refused key comes back instead of a
        record."""
        tmp = tempfile.mkdtemp(prefix="evalkit-ep-")
        self.playing[job.key] = (tmp, set())
        try:
            rec = self.episodes.play(job, Path(tmp), None, self.health)
        except KeyRejectedError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            return None, {}, e
        finally:
            self.playing.pop(job.key, None)
            # The live file is written by this process's writer thread: none of its writes may land in the
            # directory as it goes (or make it again).
            live.finish(tmp, job.key)
        rec.info["node"] = dict(self.node)
        self.kept[job.key] = tmp
        found = [p for p in Path(tmp).rglob("*") if p.is_file() and p.relative_to(tmp).parts[0] != ".live"]
        return rec, {p.relative_to(tmp).as_posix(): _sha(p.read_bytes()) for p in found}, None

    def live(self) -> tuple[int, str, list[dict], dict[str, bytes]]:
        """The state now of this runner's episodes in flight, for the driver's live file (`evalkit.records.
        live`): this process's id and host, the episodes, and the pictures they show not sent before."""
        episodes, files = [], {}
        for tmp, sent in list(self.playing.values()):
            for e in live.own(tmp):
                episodes.append(e)
                for rel in (e.get("frame"), e.get("target")):
                    if isinstance(rel, str) and rel not in sent and (Path(tmp) / rel).is_file():
                        files[rel] = (Path(tmp) / rel).read_bytes()
                        sent.add(rel)
        return os.getpid(), socket.gethostname(), episodes, files

    def take(self, key: str, paths: list[str]) -> dict[str, bytes]:
        """The files of episode `key` the driver lacks; the rest is thrown away."""
        tmp = self.kept.pop(key, None)
        if tmp is None:
            return {}
        try:
            return {rel: (Path(tmp) / rel).read_bytes() for rel in paths}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _reachable_cwd() -> None:
    """A worker whose working directory cannot be reached by its name (removed, or under a mount made after
    the node started) moves to the temporary directory: reading `.env` walks up from the working directory,
    and failed every episode of such a node."""
    try:
        if os.path.isdir(os.getcwd()):
            return
    except OSError:
        pass
    os.chdir(tempfile.gettempdir())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Post:
    """One runner, where it is and what it is doing."""

    actor: Any
    node: str
    address: str
    since: float
    ready: bool = False
    busy: int = 0
    ping_at: float | None = None
    """When the ping outstanding was sent (None: none outstanding)."""
    relayed: tuple[int, str] | None = None
    """The runner's process and host, once its episodes' live state has been relayed (`Dispatch.relay`)."""
    live_at: float = 0.0
    """When the driver last asked for it (or one is outstanding: inf)."""


@dataclass
class Flight:
    """What a reference the driver waits on stands for."""

    kind: str  # ready, ping, play, take, live
    post: Post
    job: Any = None
    rec: EpisodeRecord | None = None


@dataclass
class Ledger:
    """What the cluster did, for the closing line."""

    ran: Counter = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    rerun: int = 0
    started: dict[str, float] = field(default_factory=dict)
    """Seconds each node's first runner took to start."""
    shipped: int = 0
    spared: int = 0


def short(node: str, address: str) -> str:
    return f"{address} ({node[:8]})"


def lost_why(e: BaseException) -> str:
    """What a Ray error says of the runner, in a few words (its class, and the last line an actor that failed
    to start left)."""
    if getattr(e, "actor_init_failed", False):
        lines = [x.strip() for x in str(getattr(e, "error_msg", "") or e).splitlines() if x.strip()]
        return f"its runner failed to start: {lines[-1][:200] if lines else type(e).__name__}"
    return f"its runner is gone ({type(e).__name__})"


def usable_nodes(ray: Any, env: Any, driver_address: str) -> tuple[list[dict], list[dict]]:
    """The alive nodes the runners may go on, and those left out: an env served on the driver's loopback
    is out of reach of the other machines (an embedded env is served on each node, so all go)."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if env.embedded or not env.url or not on_this_machine(env.url):
        return alive, []
    near = [n for n in alive if n.get("NodeManagerAddress") == driver_address]
    return near, [n for n in alive if n not in near]


def run_ray(
    jobs: list, episodes: Any, concurrency: int, arrive: Any, gate: Any, left: Any,
    address: str | None = None, serve: Callable[[str], Any] | None = None,
) -> Iterator[EpisodeRecord | None]:  # fmt: skip
    """The Ray executor (`evalkit.run.executors.execute`); `serve(name)` serves an embedded env on a node
    (`executors.serve_embedded`, handed in: the loop reaches env servers through that one door)."""
    ray = start_ray(address)
    s = episodes.settings
    episodes = replace(episodes, environ={**travelling_environ(), **episodes.environ})
    fleet = Fleet(ray, episodes, concurrency, s.ray_runners, s.ray_node_timeout, serve)
    dispatch = Dispatch(fleet, jobs, concurrency, arrive, gate, left)
    try:
        yield from dispatch.run()
    finally:
        # Ctrl-C, the gate down, or the end: episodes still in flight are dropped with their runners
        # (resume runs them), and leave the live folder.
        for post in fleet.posts:
            dispatch.unrelay(post)
        fleet.stop()


class Fleet:
    """The runners of one batch, placed on the cluster's live nodes; the nodes given up on."""

    def __init__(
        self, ray: Any, episodes: Any, concurrency: int, per: str, timeout: float, serve: Callable | None
    ) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray, self.episodes, self.per, self.timeout, self.serve = ray, episodes, per, timeout, serve
        self.priced = prices.price_table()
        self.affinity = NodeAffinitySchedulingStrategy
        self.driver = ray.get_runtime_context().get_node_id()
        self.driver_address = ray.util.get_node_ip_address()
        # Threads beyond the episodes' own: a ping and a `take` are answered while every episode runs.
        self.actor = ray.remote(num_cpus=0, max_concurrency=concurrency + 4, max_restarts=0)(Runner)
        self.posts: list[Post] = []
        self.lost: set[str] = set()
        self.looked = 0.0
        self.far_said = False

    def look(self, flight: dict) -> set[str]:
        """Runners for every usable alive node that has none (their start awaited through `flight`); returns
        the nodes with runners that Ray no longer lists alive."""
        self.looked = time.monotonic()
        nodes, far = usable_nodes(self.ray, self.episodes.env, self.driver_address)
        if far and not self.far_said:
            self.far_said = True
            url = self.episodes.env.url
            notice(log, f"the env at {url} is on this machine's loopback: episodes run on this machine's "
                   f"node(s) only, not on {len(far)} other node(s) (give an address they reach, or an "
                   "embedded env, to use them)", logging.WARNING)  # fmt: skip
        placed = {p.node for p in self.posts}
        for n in nodes:
            node = n["NodeID"]
            if node in self.lost or node in placed:
                continue
            cpus = int((n.get("Resources") or {}).get("CPU", 1))
            for _ in range(1 if self.per == "node" else max(1, cpus)):
                strategy = self.affinity(node, soft=False)
                on = self.actor.options(scheduling_strategy=strategy)
                actor = on.remote(self.episodes, self.driver, self.serve, self.priced)
                post = Post(actor, node, str(n.get("NodeManagerAddress", "?")), self.looked)
                self.posts.append(post)
                flight[actor.ping.remote()] = Flight("ready", post)
        return placed - {n["NodeID"] for n in nodes}

    def free(self) -> Post | None:
        """The started runner with the fewest episodes in flight."""
        ready = [p for p in self.posts if p.ready]
        return min(ready, key=lambda p: p.busy) if ready else None

    def drop(self, node: str) -> list[Post]:
        """Give `node` up for the rest of the batch: its runners killed and returned."""
        self.lost.add(node)
        gone = [p for p in self.posts if p.node == node]
        self.posts = [p for p in self.posts if p.node != node]
        for p in gone:
            self.kill(p)
        return gone

    def kill(self, post: Post) -> None:
        try:
            self.ray.kill(post.actor, no_restart=True)
        except Exception as e:  # a runner already gone with its node: nothing left to stop
            log.debug("killing a runner: %s", e)

    def stop(self) -> None:
        for p in self.posts:
            self.kill(p)
        self.posts = []


class Dispatch:
    """The driver's loop: jobs to free runners, records and their missing files back, nodes watched."""

    def __init__(self, fleet: Fleet, jobs: list, concurrency: int, arrive: Any, gate: Any, left: Any):
        self.fleet, self.ray = fleet, fleet.ray
        self.out = fleet.episodes.out
        self.queue = deque(jobs)
        self.concurrency, self.arrive, self.gate, self.left = concurrency, arrive, gate, left
        self.flight: dict[Any, Flight] = {}
        self.playing = 0
        self.tries: Counter = Counter()
        self.have: dict[str, str] = {}
        """Render paths the driver wrote this batch, with their sha256 (the rest are named by content)."""
        self.ledger = Ledger()
        self.given_up = 0
        """Episodes left for a resume after losing `MAX_TRIES` nodes."""
        self.every = min(fleet.timeout / 3, 2.0)

    def run(self) -> Iterator[EpisodeRecord | None]:
        self.fleet.look(self.flight)
        while self.gate.down is None and ((self.queue and not self.spent()) or self.busy()):
            self.fill()
            if not self.fleet.posts:
                self.fleet.look(self.flight)
                if not self.fleet.posts:
                    self.all_lost()
                    break
            yield from self.wait()
            self.watch()
        if self.gate.down is not None or self.spent():
            for _ in self.queue:
                self.left("not_run")
        self.close()

    def busy(self) -> bool:
        return any(f.kind in ("play", "take") for f in self.flight.values())

    def spent(self) -> bool:
        return budget.stopped(self.gate) is not None

    def fill(self) -> None:
        held = []  # jobs of a model whose first episode is still running under a budget: its cost unknown
        while self.playing < self.concurrency and self.queue:
            post = self.fleet.free()
            if post is None:
                break
            job = self.queue.popleft()
            admitted = budget.admit(self.gate, job.model)
            if admitted is None:
                held.append(job)
            elif admitted:
                post.busy += 1
                self.playing += 1
                self.flight[post.actor.play.remote(job)] = Flight("play", post, job)
            elif self.spent():
                self.queue.appendleft(job)  # left with the rest of the queue
                break
            else:
                self.left("not_run")
        self.queue.extendleft(reversed(held))

    def wait(self) -> Iterator[EpisodeRecord | None]:
        refs = list(self.flight)
        if not refs:
            time.sleep(0.2)  # runners still starting, none placed yet
            return
        # Woken at least twice a second: the gate going down, pings due and silent nodes are seen while
        # every episode runs.
        done, _ = self.ray.wait(refs, num_returns=1, timeout=0.5)
        if done:
            done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            f = self.flight.pop(ref, None)
            if f is not None:  # (not given up with its node meanwhile)
                yield from self.land(ref, f)

    def land(self, ref: Any, f: Flight) -> Iterator[EpisodeRecord | None]:
        from ray.exceptions import RayError, RayTaskError

        try:
            value = self.ray.get(ref)
        except RayTaskError:  # the episode itself raised (a configuration mistake): the batch stops
            raise
        except RayError as e:
            self.lose(f.post.node, lost_why(e), f)
            return
        if f.kind == "ready":
            f.post.ready = True
            where = short(f.post.node, f.post.address)
            self.ledger.started.setdefault(where, round(time.monotonic() - f.post.since, 1))
        elif f.kind == "ping":
            f.post.ping_at = None
        elif f.kind == "play":
            f.post.busy -= 1
            self.playing -= 1
            yield from self.played(f, *value)
        elif f.kind == "live":
            self.relay(f.post, *value)
        else:
            yield from self.finish(f.rec, value, f.post)

    def relay(self, post: Post, pid: int, host: str, episodes: list[dict], files: dict) -> None:
        """A runner's episodes in flight into the run's live folder, as its own live file would be there (a
        viewer watching the run shows them), with the pictures they show (fetched once: the episode's `take`
        then skips them)."""
        post.live_at = time.monotonic()
        store_files(self.out, files)
        shown = episodes if post.busy and post in self.fleet.posts else []
        live.relay(self.out, pid, host, shown)
        post.relayed = (pid, host) if shown else None

    def unrelay(self, post: Post) -> None:
        """The runner's live file in the run goes (its node lost, or the batch over)."""
        if post.relayed is not None:
            live.relay(self.out, *post.relayed, [])
            post.relayed = None

    def played(self, f: Flight, rec: Any, sums: dict, refused: Any) -> Iterator[EpisodeRecord | None]:
        budget.release(self.gate, f.job.model, rec)  # what it cost counts from now on
        if refused is not None:
            self.gate.refused_by(refused)
            yield None
            return
        need = [rel for rel, h in sums.items() if self.lacks(rel, h)]
        self.ledger.spared += len(sums) - len(need)
        take = f.post.actor.take.remote(rec.key, need)
        if need:
            self.flight[take] = Flight("take", f.post, f.job, rec)
        else:  # nothing to fetch: the runner just throws its copy away
            yield from self.finish(rec, {}, f.post)

    def lacks(self, rel: str, sha: str) -> bool:
        """Whether the run still needs this file (`store_files` writes a path that exists only when it is a
        render that differs)."""
        if self.have.get(rel) == sha:
            return False
        path = self.out / rel
        if not path.exists():
            return True
        return rel.startswith("renders/") and _sha(path.read_bytes()) != sha

    def finish(self, rec: Any, files: dict, post: Post) -> Iterator[EpisodeRecord | None]:
        self.gate.ended(rec)
        store_files(self.out, files)
        self.have.update({rel: _sha(data) for rel, data in files.items() if rel.startswith("renders/")})
        self.ledger.shipped += len(files)
        rec.run_dir = str(self.out)
        self.arrive(rec, False)
        self.ledger.ran[short(post.node, post.address)] += 1
        yield rec

    def watch(self) -> None:
        """Pings due sent; a runner silent for the timeout (or not started in time) gives up its node; the
        live state of the runners' episodes asked for; the node list read again now and then."""
        now, timeout = time.monotonic(), self.fleet.timeout
        for post in list(self.fleet.posts):
            if post not in self.fleet.posts:  # given up with another runner of its node
                continue
            if not post.ready:
                if now - post.since > max(timeout, START_GRACE):
                    self.lose(post.node, f"its runner did not start in {now - post.since:.0f}s")
            elif post.ping_at is not None and now - post.ping_at > timeout:
                self.lose(post.node, f"it has not answered for {timeout:g}s")
            elif post.ping_at is None:
                post.ping_at = now
                self.flight[post.actor.ping.remote()] = Flight("ping", post)
            live_due = now - post.live_at > live.MIN_GAP_S and (post.busy or post.relayed)
            if post.ready and live_due and post in self.fleet.posts:
                post.live_at = float("inf")  # (one outstanding)
                self.flight[post.actor.live.remote()] = Flight("live", post)
        if now - self.fleet.looked > LOOK_EVERY:
            for node in self.fleet.look(self.flight):
                self.lose(node, "Ray lists it dead")

    def lose(self, node: str, why: str, also: Flight | None = None) -> None:
        """`node` given up: its runners killed, its episodes in flight queued again (first), one line."""
        if node in self.fleet.lost:
            return
        posts = self.fleet.drop(node)
        for p in posts:
            self.unrelay(p)
        back = [ref for ref, f in self.flight.items() if f.post.node == node]
        fl = [self.flight.pop(ref) for ref in back] + ([also] if also is not None else [])
        jobs = [f.job for f in fl if f.kind in ("play", "take")]
        for f in fl:
            if f.kind == "play":  # (a "take" was released when it played)
                budget.release(self.gate, f.job.model, None)
        self.playing -= sum(f.kind == "play" for f in fl)
        again = 0
        for job in reversed(jobs):
            self.tries[job.key] += 1
            if self.tries[job.key] >= MAX_TRIES:
                self.left("not_run")
                self.given_up += 1
            else:
                self.queue.appendleft(job)
                again += 1
        where = short(node, posts[0].address if posts else "?")
        self.ledger.lost.append(where)
        self.ledger.rerun += again
        dropped = len(jobs) - again
        notice(log, f"Ray node {where} given up: {why}; {again} episode(s) it was running go to the other "
               "nodes" + (f", {dropped} left for a resume (lost with {MAX_TRIES} nodes)" if dropped else ""),
               logging.WARNING)  # fmt: skip

    def all_lost(self) -> None:
        """No node left: the batch stops as the env breaker stops it (the rest left for a resume)."""
        self.gate.down = f"every node of the Ray cluster was given up ({', '.join(self.ledger.lost)})"
        self.gate.say(f"{self.gate.down}; no further episode is started (rerun the same command to resume)")

    def close(self) -> None:
        if self.given_up and self.gate.down is None:  # the run is not complete: its exit status says so
            self.gate.down = f"{self.given_up} episode(s) lost {MAX_TRIES} Ray nodes each: left for a resume"
        if not self.ledger.ran and not self.ledger.lost:
            return
        up = self.ledger.started
        ran = ", ".join(f"{n} on {w} (up after {up.get(w, '?')}s)" for w, n in self.ledger.ran.most_common())
        starting = {short(p.node, p.address) for p in self.fleet.posts if not p.ready}
        if starting:  # placed, but the batch ended first
            ran += f" (still starting: {', '.join(sorted(starting))})"
        lost = f"; given up: {', '.join(self.ledger.lost)} ({self.ledger.rerun} episode(s) run again)"
        notice(log, f"Ray: {ran or 'no episode finished'}{lost if self.ledger.lost else ''}; files fetched "
               f"{self.ledger.shipped}, already here {self.ledger.spared}")  # fmt: skip
