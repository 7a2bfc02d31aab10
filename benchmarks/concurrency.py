"""Is the harness ever the bottleneck? Efficiency of run_batch against a model that answers in exactly 0.5 s.

A stand-in model in its own process (`benchmarks/standin_model.py`: OpenAI-compatible chat completions,
streamed, reached by the real SDK as `vllm:standin`) answers every call after `--delay` seconds with a canvas
tool call; each episode takes two turns (a shape, then submit) on the tools surface of the embedded canvas
env, frames on. Measured in one run, on whatever else the machine is doing (a shared machine makes
absolute times noise: read the ratios):

- efficiency = ideal / measured wall, ideal = turns × delay / concurrency, at each `--concurrency` (the
  median of `--repeat` batches, with their range), for threads and for Ray (a local instance), each batch
  serving its env as `--env canvas` does (in a thread below `evalkit.envs.embedded.process.PROCESS_FROM`
  episodes at once, in child processes from there on, one per `EPISODES_PER_PROCESS` up to the cores);
  start-up (serving the env, the preflight, starting Ray, its runner actors importing evalkit) is reported
  apart and excluded: the wall runs from the first episode's start to the last episode written. The env's
  processes' CPU includes their start-up. The gui surface (Chromium: a click, then submit) at concurrency 16
  beside it.
- client CPU per turn and per episode (fixed costs), with the env in a process of its own (`evalkit
  serve`) so that the client's CPU is the harness's alone: batches of 2-turn and 4-turn episodes, per turn
  = the slope, per episode = the rest; the env's CPU per episode and per tool call beside it.
- start-up: `evalkit run --help`, and the first episode of `make demo` (time to its start and to its
  record).
- memory at the largest concurrency: peak RSS of each process in the median batch (this one, the model, the
  env's processes; Ray's workers).
- the host's speed before each concurrency's batches (`host_speed`: a pure-Python loop, and the CPU of a
  round trip to another process), since the figures at 50 follow it.

    PYTHONPATH=. python benchmarks/concurrency.py [--episodes 200] [--concurrency 10,50,100] [--repeat 3]
        [--no-ray]

Two modes measure one thing each, for comparing code (run them alternately from two checkouts, with
PYTHONPATH on each): `--cpu-per-episode` runs only the thread batches at each concurrency and prints, with
the efficiency, the CPU per episode of this process and of the env's processes from the first episode's
start to the last record (medians of `--repeat`, and the load average), the stand-in model's beside them
(`--models N`: N models play each task); `--env-messages N` prints the env's CPU per message of an episode
(each kind sent N times on one env process, one at a time).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def free_port() -> int:
    from evalkit.serving import free_port as fp

    return fp()


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def descendants(pid: int) -> dict[int, str]:
    """Every process under `pid` (Ray's raylet, workers, …), by pid → command name."""
    kids: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            head, _, rest = stat.rpartition(")")
            names[int(d.name)] = head.split("(", 1)[1]
            kids.setdefault(int(rest.split()[1]), []).append(int(d.name))
    out, todo = {}, list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out[p] = names.get(p, "?")
        todo += kids.get(p, [])
    return out


class PeakRSS:
    """Samples the RSS of this process, the model server and every descendant while a batch runs."""

    def __init__(self, others: dict[str, int]):
        self.others = others
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        known = {pid: label for label, pid in {"harness (this process)": os.getpid(), **self.others}.items()}
        names: dict[int, str] = {}
        while not self._stop.wait(0.25):
            procs = {**descendants(os.getpid()), **known}
            for pid, name in procs.items():
                try:
                    rss = rss_mib(pid)
                except OSError:
                    continue
                # A Ray worker renames itself as it starts (ray::IDLE, ray::Runner): its last name stands.
                old = names.get(pid)
                names[pid] = name if pid in known else f"{name} ({pid})"
                self.peak[names[pid]] = max(self.peak.pop(old, 0.0) if old else 0.0, rss)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


NOT_ENV: set[int] = set()
"""Processes under this one that are not the batch's env (the stand-in model)."""


def model_cpu() -> float:
    """CPU seconds the stand-in model's process has used so far (0 when there is none): it shares the
    machine's cores with the batch and the env, though a real model's server would not."""
    total = 0.0
    for pid in NOT_ENV:
        with contextlib.suppress(OSError):
            total += cpu_of(pid)
    return total


def env_cpu() -> float:
    """CPU seconds the batch's env processes (this process's children but the model) have used so far."""
    total = 0.0
    for pid in descendants(os.getpid()):
        if pid not in NOT_ENV:
            try:
                total += cpu_of(pid)
            except OSError:  # gone since the listing
                pass
    return total


def timed_batch(
    env,
    model: str | list[str],
    episodes: int,
    concurrency: int,
    executor: str = "threads",
    surface: str = "tools",
) -> dict:
    """One batch; the wall runs from the first episode queued to the last written (the executor's span).
    Several models play the same tasks, `episodes` in all."""
    from evalkit.records.rundir import read_records
    from evalkit.run import batch

    span: dict[str, float] = {}
    real = batch.execute

    def execute(*a, **kw):
        # The wall runs from the first episode's start (its arrival less its length) to the last arrival:
        # what comes before the first episode starts (Ray's runners importing evalkit) is start-up.
        span["queued"] = time.perf_counter()
        span["cpu0"], span["env0"], span["model0"] = time.process_time(), env_cpu(), model_cpu()
        starts = []
        for rec in real(*a, **kw):
            span["end"] = time.perf_counter()
            starts.append(span["end"] - rec.seconds)
            yield rec
        # Before the batch stops its env's processes: what they and this process used while episodes ran.
        span["cpu1"], span["env1"], span["model1"] = time.process_time(), env_cpu(), model_cpu()
        span["start"] = min(starts)

    batch.execute = execute
    try:
        with tempfile.TemporaryDirectory() as tmp:
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            models = model if isinstance(model, list) else [model]
            batch.run_batch(models, env, tasks=episodes // len(models), out=Path(tmp) / "r",
                            concurrency=concurrency, max_turns=6, frames=True, progress=False,
                            executor=executor, surfaces=[surface])  # fmt: skip
            t1 = time.perf_counter()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the env's process, when the batch gave it one
            recs = list(read_records(Path(tmp) / "r"))
    finally:
        batch.execute = real
    return {
        "wall": span["end"] - span["start"],
        "startup": span["start"] - t0,
        "queued": span["queued"] - t0,
        "after": t1 - span["end"],
        "cpu": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
        "child_cpu": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime),
        "cpu_in": span["cpu1"] - span["cpu0"],
        "env_in": span["env1"] - span["env0"],
        "model_in": span["model1"] - span["model0"],
        "load": os.getloadavg()[0],
        "turns": sum(r.n_turns for r in recs),
        "calls": sum(r.tool_calls for r in recs),
        "episodes": len(recs),
        "errors": sum(r.error_class is not None for r in recs),
        "median_episode": statistics.median(r.seconds for r in recs),
        "median_model": statistics.median(r.model_seconds for r in recs),
        "median_env": statistics.median(r.env_seconds for r in recs),
    }


def host_speed() -> tuple[float, float]:
    """The machine's speed at the moment: seconds a fixed pure-Python loop takes, and microseconds of CPU a
    round trip between two processes over pipes costs (a wake-up of the other process each way, as every
    message between the client, the env and the model is), the median of three each. Other work on
    the host slows every process here alike, within minutes, and an efficiency at 50, which is queueing for
    the two cores, follows it: compare figures taken at like speeds (the README gives both)."""
    loops, trips = [], []
    for _ in range(3):
        t, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        loops.append(time.perf_counter() - t)
        trips.append(_round_trip_cpu())
    return statistics.median(loops), statistics.median(trips)


_ECHO = "import os, sys\nr, w = map(int, sys.argv[1:])\nwhile os.read(r, 1):\n    os.write(w, b'x')"
"""A child that sends back each byte it reads, until its pipe closes."""


def _round_trip_cpu(n: int = 5000) -> float:
    """CPU microseconds this process spends per round trip of a byte to a child process and back."""
    down, up = os.pipe(), os.pipe()
    child = subprocess.Popen([PY, "-c", _ECHO, str(down[0]), str(up[1])], pass_fds=(down[0], up[1]))
    os.close(down[0])
    os.close(up[1])
    try:
        os.write(down[1], b"x")
        os.read(up[0], 1)  # the child is up
        t = time.process_time()
        for _ in range(n):
            os.write(down[1], b"x")
            os.read(up[0], 1)
        return (time.process_time() - t) / n * 1e6
    finally:
        os.close(down[1])
        os.close(up[0])
        child.wait()


def repeated(n: int, others: dict[str, int], *args, **kw) -> dict:
    """`n` batches alike (`timed_batch`'s arguments), one after the other, each with the peak RSS of this
    process, of `others` and of the batch's own children: the one of median efficiency (the lower middle
    one for an even `n`), with every batch's turns per second of wall beside it, in order."""
    runs, host = [], host_speed()
    for _ in range(max(n, 1)):
        with PeakRSS(others) as rss:
            runs.append(timed_batch(*args, **kw))
        runs[-1]["rss"] = rss.peak
    runs.sort(key=lambda r: r["turns"] / r["wall"])
    return {**runs[(len(runs) - 1) // 2], "turns_per_s": [r["turns"] / r["wall"] for r in runs], "host": host}


def efficiency_line(label: str, r: dict, delay: float, concurrency: int) -> str:
    ideal = r["turns"] * delay / concurrency
    effs = [rate * delay / concurrency for rate in r.get("turns_per_s") or ()]
    spread = f" (median of {len(effs)}: {effs[0]:.2f}–{effs[-1]:.2f})" if len(effs) > 1 else ""
    return (
        f"{label:<34} efficiency {ideal / r['wall']:.2f}{spread}  (ideal {ideal:.1f} s / wall "
        f"{r['wall']:.1f} s; "
        f"start-up {r['startup']:.1f} s apart; median episode {r['median_episode']:.2f} s = model "
        f"{r['median_model']:.2f} + env {r['median_env']:.2f} + other; {r['errors']} errors"
        + (f"; host: loop {r['host'][0]:.2f} s, round trip {r['host'][1]:.0f} µs" if "host" in r else "")
        + ")\n"
        f"{'':<34} CPU per episode: this process {r['cpu'] / r['episodes'] * 1e3:.0f} ms"
        + (f", the env's processes {r['child_cpu'] / r['episodes'] * 1e3:.0f} ms" if r["child_cpu"] else "")
    )


def startup_help() -> float:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([PY, "-m", "evalkit.cli", "run", "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def startup_demo() -> tuple[float, float]:
    """Seconds from the `make demo` command to its first episode's start (its live progress file, written
    once the env was reset and the agent made) and to its first record (the batch is then stopped). Eight
    offline episodes run at once on two cores, so the first record waits for most of their CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "demo" / "trace.jsonl"
        models = "baseline:tracer,baseline:random"
        cmd = [PY, "-m", "evalkit.cli", "run", "--env", "canvas", "--models", models,
               "--evalset", str(ROOT / "data/evalsets/canvas-test-300.json"), "--subset", "lite",
               "--concurrency", "8", "--out", str(trace.parent), "--no-progress"]  # fmt: skip
        live, started = trace.parent / ".live", None
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not (trace.exists() and trace.read_bytes().count(b"\n") >= 1):
                if proc.poll() is not None:
                    raise RuntimeError("the demo ended before its first episode")
                if started is None and live.is_dir() and any(live.glob("*.json")):
                    started = time.perf_counter() - t
                time.sleep(0.01)
            recorded = time.perf_counter() - t
            return (started if started is not None else recorded), recorded
        finally:
            proc.terminate()
            proc.wait()


def client_cpu(model_url: str, episodes: int, concurrency: int) -> dict:
    """Client and env CPU with the env in its own process: 2-turn and 4-turn batches."""
    port = free_port()
    env_proc = subprocess.Popen([PY, "-m", "evalkit.cli", "serve", "canvas", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(f"{url}/health", env_proc)
        timed_batch(url, "vllm:standin", concurrency, concurrency)  # warm-up: imports, the env's sessions
        out = {}
        for k in (2, 4):
            e0 = cpu_of(env_proc.pid)
            r = timed_batch(url, f"vllm:standin-{k}", episodes, concurrency)
            r["env_cpu"] = cpu_of(env_proc.pid) - e0
            out[k] = r
        return out
    finally:
        env_proc.terminate()
        env_proc.wait()


def cpu_ns(pid: int) -> float:
    """CPU seconds a process's threads have run, to the nanosecond (the scheduler's count, /proc's
    schedstat; `cpu_of`'s clock ticks are 10 ms)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that has just gone
            pass
    return total / 1e9


def env_messages(n: int) -> None:
    """`--env-messages`: what each message of a two-turn canvas episode costs the env's process (and this
    one, the client), each kind sent `n` times in a row on `n` sessions of one env process, alone on it:
    the parts of an episode's env CPU without a batch's contention. A reset's grade preparation runs 0.15 s
    after it, and is counted with it. The client's CPU here is its share of the env's messages only (no
    model, no records)."""
    from evalkit.envs.client.openenv import OpenEnvSession
    from evalkit.envs.embedded.process import ProcessServer

    add = {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40}
    with ProcessServer("canvas", max_concurrent_envs=n + 8) as env:
        for i in range(8):  # imports, the first instances, the encoders
            s = OpenEnvSession(env.base_url)
            s.reset(index=90_000 + i)
            s.tools(), s.call("add_element", add), s.render(), s.document(), s.call("submit", {}), s.close()
        time.sleep(0.5)
        sessions: list = []

        def each(label: str, fn: Any, settle: float = 0.0) -> None:
            e, c = cpu_ns(env.pid), time.process_time()
            for i in range(n):
                fn(i)
            c = (time.process_time() - c) / n * 1e3
            time.sleep(settle)
            ms = (cpu_ns(env.pid) - e) / n * 1e3
            print(f"  {label:<36} env {ms:5.2f} ms, client {c:5.2f} ms", flush=True)

        each("connect (a new session)", lambda i: sessions.append(OpenEnvSession(env.base_url)))
        each("reset on a new task (+ grade prep.)", lambda i: sessions[i].reset(index=100_000 + i), 0.5)
        each("state", lambda i: sessions[i]._conn.request("state"))
        each("tools/list (the env instance's 1st)", lambda i: sessions[i].tools())
        each("tools/list again", lambda i: sessions[i].tools())
        each("a tool call (add_element)", lambda i: sessions[i].call("add_element", {**add, "x": i % 400}))
        each("render of a new state (PNG)", lambda i: sessions[i].render())
        each("the same render again", lambda i: sessions[i].render())
        each("the document", lambda i: sessions[i].document())
        each("submit (the grade)", lambda i: sessions[i].call("submit", {}))
        each("close", lambda i: sessions[i].close())
    print(f"  ({n} of each; load average {os.getloadavg()[0]:.1f})")


def cpu_per_episode(levels: list[int], episodes: int, repeat: int, delay: float, models: int = 1) -> None:
    """`--cpu-per-episode`: at each concurrency, `repeat` thread batches and, from the first episode's start
    to the last record, the CPU per episode of this process (the batch) and of the env's processes (their
    start-up left out): what a change to either costs or saves, which the machine's other load moves far
    less than it moves the efficiency (printed beside it, with the load average at each batch's end).
    `models` > 1: that many models play each task (`vllm:standin`, `vllm:standin-2`, ...: two turns each),
    as a comparison of models does."""
    names = ["vllm:standin", *(f"vllm:standin-2{'-2' * i}" for i in range(models - 1))]
    for c in levels:
        runs = [timed_batch("canvas", names, episodes, c) for _ in range(max(repeat, 1))]
        effs = sorted(r["turns"] * delay / c / r["wall"] for r in runs)

        loads = ", ".join(f"{r['load']:.1f}" for r in runs)
        print(f"threads, concurrency {c}: efficiency {statistics.median(effs):.2f} ({effs[0]:.2f}–"
              f"{effs[-1]:.2f}); CPU per episode, this process {_ms(runs, 'cpu_in')}, the env's processes "
              f"{_ms(runs, 'env_in')} (the stand-in model's {_ms(runs, 'model_in')}); medians of "
              f"{len(runs)}, load {loads}; "
              f"{sum(r['errors'] for r in runs)} errors", flush=True)  # fmt: skip
        print(f"  {ceilings(runs, c, delay)}", flush=True)


def ceilings(runs: list[dict], concurrency: int, delay: float) -> str:
    """The efficiency the CPU alone allows at `concurrency`, whatever the scheduling: every episode's
    seconds of CPU (this process's, the env's and the model's) against the machine's cores over an ideal
    episode's seconds, and this process's alone against one core (its Python holds one lock)."""
    per = {k: statistics.median(r[k] / r["episodes"] for r in runs) for k in ("cpu_in", "env_in", "model_in")}
    ideal = statistics.median(r["turns"] / r["episodes"] for r in runs) * delay  # an episode's seconds
    cores = len(os.sched_getaffinity(0))
    machine = cores * ideal / (concurrency * sum(per.values()))
    gil = ideal / (concurrency * per["cpu_in"])
    return (f"ceilings the CPU sets: {min(1.0, machine):.2f} on this machine's {cores} cores (all three "
            f"processes' CPU per episode), {min(1.0, gil):.2f} for this process on one core")  # fmt: skip


def _ms(runs: list[dict], key: str) -> str:
    """Milliseconds of `key` per episode: the median of `runs`, with their range."""
    each = sorted(r[key] / r["episodes"] * 1e3 for r in runs)
    return f"{statistics.median(each):.1f} ms ({each[0]:.1f}–{each[-1]:.1f})"


@contextlib.contextmanager
def standin(delay: float) -> Iterator[subprocess.Popen]:
    """The stand-in model in a process of its own, reached as `vllm:standin` while the block runs."""
    port = free_port()
    model = subprocess.Popen([PY, str(ROOT / "benchmarks/standin_model.py"), "--port", str(port),
                              "--delay", str(delay)])  # fmt: skip
    NOT_ENV.add(model.pid)
    os.environ.update(VLLM_BASE_URL=f"http://127.0.0.1:{port}/v1", VLLM_API_KEY="-")
    try:
        wait_up(f"http://127.0.0.1:{port}/", model)
        yield model
    finally:
        model.terminate()
        model.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--concurrency", default="10,50,100")
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="batches at each concurrency (the median is shown: a shared machine moves each one)",
    )
    ap.add_argument("--gui-episodes", type=int, default=48, help="episodes on the gui surface (0: none)")
    ap.add_argument("--cpu-episodes", type=int, default=100, help="episodes per batch of the CPU measure")
    ap.add_argument("--cpu-per-episode", action="store_true",
                    help="only the thread batches' efficiency and CPU per episode (batch and env) at each "
                         "concurrency, medians of --repeat; nothing else")  # fmt: skip
    ap.add_argument("--models", type=int, default=1,
                    help="with --cpu-per-episode: models playing each task (--episodes / N tasks)",
                    )  # fmt: skip
    ap.add_argument("--env-messages", type=int, default=0, metavar="N",
                    help="only the env's CPU per message of an episode, each kind sent N times")  # fmt: skip
    a = ap.parse_args()
    levels = [int(c) for c in a.concurrency.split(",")]
    if a.env_messages:
        print("the canvas env's CPU per message, one env process, one message at a time:")
        env_messages(a.env_messages)
        return
    if a.cpu_per_episode:
        with standin(a.delay):
            timed_batch("canvas", "vllm:standin", 8, 8)  # imports, connections
            cpu_per_episode(levels, a.episodes, a.repeat, a.delay, a.models)
        return

    print(f"evalkit run --help: {startup_help():.2f} s")
    demo = [startup_demo() for _ in range(3)]
    started, recorded = (statistics.median(d[i] for d in demo) for i in (0, 1))
    print(f"make demo, first episode started {started:.2f} s after the command (goal ≤ 2), recorded "
          f"{recorded:.2f} s (medians of 3)")  # fmt: skip

    with standin(a.delay) as model:
        from evalkit.envs.embedded.process import PROCESS_FROM, ProcessServer
        from evalkit.envs.embedded.server import serve

        with ProcessServer("canvas") as env:
            print(f"embedded canvas env served in a process in {env.startup_s:.2f} s (start-up, concurrency "
                  f"≥ {PROCESS_FROM})")  # fmt: skip
        t = time.perf_counter()
        with serve("canvas") as env:
            print(f"embedded canvas env served in a thread in {time.perf_counter() - t:.2f} s (start-up)")
            timed_batch(env, "vllm:standin", 4, 4)  # imports, connections
        rows = {}
        others = {"stand-in model": model.pid}
        for c in levels:
            rows[("threads", c)] = repeated(a.repeat, others, "canvas", "vllm:standin", a.episodes, c)
        if not a.no_ray:
            from evalkit.run.executors import start_ray

            t = time.perf_counter()
            start_ray(None)
            print(f"local Ray instance started in {time.perf_counter() - t:.1f} s (start-up)")
            for c in levels:
                rows[("ray", c)] = repeated(a.repeat, others, "canvas", "vllm:standin", a.episodes, c,
                                            executor="ray")  # fmt: skip
        if a.gui_episodes:
            rows[("threads, gui surface", 16)] = timed_batch("canvas", "vllm:standin", a.gui_episodes, 16,
                                                             surface="gui")  # fmt: skip
        cpu = client_cpu(os.environ["VLLM_BASE_URL"], a.cpu_episodes, min(levels))

    print(f"\n{a.episodes} two-turn episodes, model {a.delay} s per call, frames on, embedded canvas env:")
    for (kind, c), r in rows.items():
        print(efficiency_line(f"{kind}, concurrency {c}:", r, a.delay, c))
    for (kind, c), r in rows.items():
        if c == max(levels):
            mem = ", ".join(f"{k} {v:.0f} MiB" for k, v in sorted(r["rss"].items(), key=lambda kv: -kv[1]))
            print(f"peak RSS, {kind} at concurrency {c}: {mem}")

    two, four = cpu[2], cpu[4]
    n = two["episodes"]
    per_turn = (four["cpu"] - two["cpu"]) / (four["turns"] - two["turns"])
    per_episode = two["cpu"] / n - per_turn * two["turns"] / n
    env_turn = (four["env_cpu"] - two["env_cpu"]) / (four["turns"] - two["turns"])
    print(f"\nclient CPU (env in its own process, concurrency {min(levels)}, {n} episodes a batch):")
    print(f"  per turn {per_turn * 1e3:.1f} ms (goal ≤ 10), per episode fixed {per_episode * 1e3:.1f} ms "
          f"(goal ≤ 50); all in: {two['cpu'] / n * 1e3:.1f} ms per 2-turn episode")  # fmt: skip
    print(f"  env CPU beside it: {two['env_cpu'] / n * 1e3:.1f} ms per 2-turn episode, "
          f"{env_turn * 1e3:.1f} ms per further turn (a tool call and a frame)")  # fmt: skip
    load = os.getloadavg()[0]
    print(f"  load average now: {load:.1f} on {os.cpu_count()} cores (others share this machine)")


if __name__ == "__main__":
    main()
