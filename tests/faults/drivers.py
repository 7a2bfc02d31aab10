"""What the fault suite drives, shared by `tests/faults/` and `benchmarks/faults.py`: a stand-in model served
from this process over the real chat-completions wire (with a seeded mix of faults), `evalkit run` in a
child process that can be killed at any moment, and an embedded env served by `evalkit serve` in a child
process that can be killed or frozen.

The stand-in plays the canvas `tools` surface in two model calls (add a rectangle, submit) and reports a
fixed usage per reply, so a finished run's usage totals are known exactly: `CALL_USAGE` per call.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from evalkit.serving import free_port
from tests.providers.fakes import FakeModelServer, Reply

ROOT = Path(__file__).resolve().parents[2]
MODEL = "vllm:standin"
RECT = {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40, "fill": "#ff0000"}
CALL_USAGE = {"input": 10, "output": 5}
FAULTS = ("500", "429", "timeout", "cut", "malformed", "unknown_tool")
"""Transport faults (retried by the client) first, then model mistakes (data in the turn)."""


def turns_taken(body: dict) -> int:
    return sum(m["role"] == "assistant" for m in body["messages"])


class StandIn:
    """The stand-in model. `fault_rate` of the replies (seeded) are drawn from `FAULTS`; a model whose name
    ends in `-dead` answers every request with a 500, one whose name ends in `-refused` with a 401 (its key
    refused). `served` counts every reply by kind."""

    def __init__(self, fault_rate: float = 0.0, seed: int = 0, timeout_delay: float = 3.0):
        self.server = FakeModelServer().start()
        self.rate = fault_rate
        self.rng = random.Random(seed)
        self.first = self.rng.sample(FAULTS, len(FAULTS))
        """Each kind once (in a random order), served to every other request of a live model until all are:
        every kind is met however few faults the draws would give (seed 2633833806 drew five in 24)."""
        self.live = 0
        self.delay = timeout_delay
        self.served: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.server.reset(default=self.reply)

    @property
    def base_url(self) -> str:
        return self.server.url + "/v1"

    def env(self, **extra: str) -> dict:
        """The environment of a child `evalkit run` that reaches this model as `vllm:standin`."""
        env = {k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "EVALKIT_RUNS")}
        return env | {"VLLM_BASE_URL": self.base_url, "PYTHONPATH": str(ROOT)} | extra

    def reply(self, body: dict) -> Reply:
        with self.lock:
            kind = "ok"
            if body["model"].endswith("-dead"):
                kind = "dead"
            elif body["model"].endswith("-refused"):
                kind = "refused"
            elif self.rate:
                self.live += 1
                if self.first:
                    kind = self.first.pop() if self.live % 2 == 0 else "ok"
                elif self.rng.random() < self.rate:
                    kind = self.rng.choice(FAULTS)
            self.served[kind] += 1
        usage = dict(CALL_USAGE)
        if kind == "dead":
            return Reply(status=500)
        if kind == "refused":
            return Reply(status=401, error={"code": "invalid_api_key"})
        if kind == "500":
            return Reply(status=500)
        if kind == "429":
            return Reply(status=429, retry_after=0.05)
        if kind == "timeout":
            return Reply(text="late", delay=self.delay)
        if kind == "cut":
            return Reply(calls=[("add_element", RECT)], cut_after=3)
        if kind == "malformed":
            return Reply(calls=[("add_element", '{"kind": "rect", "x": 1')], usage=usage)
        if kind == "unknown_tool":
            return Reply(calls=[("paint_everything", {"color": "red"})], usage=usage)
        if turns_taken(body) == 0:
            return Reply(text="adding a box", calls=[("add_element", RECT)], usage=usage)
        return Reply(text="done", calls=[("submit", {})], usage=usage)

    def stop(self) -> None:
        self.server.stop()


def run_argv(out: Path, *extra: str, models: str = MODEL, tasks: int = 8, env: str = "canvas") -> list[str]:
    """`evalkit run` of `tasks` canvas tasks (an embedded env name, or a base URL) into `out`."""
    where = ["--base-url", env] if "://" in env else ["--env", env]
    return [
        sys.executable, "-m", "evalkit.cli", "run", *where, "--models", models, "--tasks", str(tasks),
        "--max-turns", "4", "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip


def trace_lines(out: Path) -> list[bytes]:
    path = out / "trace.jsonl"
    return path.read_bytes().splitlines() if path.exists() else []


def records(out: Path) -> list[dict]:
    """Every parseable record of a trace, in order (torn fragments left out)."""
    found = []
    for raw in trace_lines(out):
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        if isinstance(d, dict):
            found.append(d)
    return found


def kill_at_random(
    argv: list[str], env: dict, out: Path, episodes: int, kills: int, rng: random.Random
) -> list[dict]:
    """Run `argv` and SIGKILL it at `kills` random moments: each time once the trace holds a random number
    of records (0 — during start-up — up to all of them — during the summary), after a random pause; the
    next run resumes. Returns what each kill hit."""
    hits = []
    targets = sorted(rng.randint(0, episodes) for _ in range(kills))
    for target in targets:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        before = len(records(out))
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if len(records(out)) >= min(target, episodes):
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.4))
        alive = proc.poll() is None
        if alive:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        hits.append({"target": target, "killed": alive, "records_before": before, "after": len(records(out))})
    return hits


def check_once(out: Path, keys: int) -> dict:
    """The trace after a resume that finished: every job exactly once, nothing lost. Returns tallies."""
    recs = records(out)
    latest = {d["key"]: d for d in recs}
    clean = Counter(d["key"] for d in recs if not d.get("error_class"))
    return {
        "lines": len(trace_lines(out)),
        "records": len(recs),
        "torn": len(trace_lines(out)) - len(recs),
        "keys": len(latest),
        "duplicated": sum(1 for n in clean.values() if n > 1),
        "lost": keys - len(latest),
        "unscored": sum(1 for d in latest.values() if d.get("reward") is None),
        "usage": {k: sum(d["usage"].get(k, 0) for d in latest.values()) for k in CALL_USAGE},
    }


class EnvProcess:
    """`evalkit serve canvas` in a child process, on a fixed port so that a restart is the same server."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def launch(self) -> EnvProcess:
        argv = [sys.executable, "-m", "evalkit.cli", "serve", "canvas", "--port", str(self.port)]
        self.proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        return self

    def ready(self) -> EnvProcess:
        from evalkit.serving import wait_healthy

        wait_healthy(self.url, timeout=120)
        return self

    def start(self) -> EnvProcess:
        return self.launch().ready()

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


def wait_for_records(out: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(records(out)) < n:
        assert proc.poll() is None, "the batch ended before the fault"
        assert time.monotonic() < deadline, "the batch wrote too little"
        time.sleep(0.02)


def children(pid: int) -> set[int]:
    """The processes `pid` started that are still its children (an env server in its own session
    included)."""
    found: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found |= {int(c) for c in f.read().split()}
    except OSError:
        pass
    return found


def running(pid: int) -> bool:
    """`pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


HELD = """
import json, os, sys, threading, time
import evalkit

def held():
    # What this process holds: open files (sockets among them) and threads, once the threads a batch ends
    # have had a moment to go.
    for _ in range(50):
        if threading.active_count() == 1:
            break
        time.sleep(0.05)
    fds = os.listdir("/proc/self/fd")
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    return {"fds": len(fds), "sockets": sum(x.startswith("socket:") for x in links),
            "threads": threading.active_count(), "names": names}

print(json.dumps(held()), flush=True)
for i, concurrency in enumerate(json.loads(sys.argv[2])):
    run = evalkit.run_batch(sys.argv[1], "canvas", out=f"{sys.argv[3]}/r{i}", tasks=int(sys.argv[4]),
                            max_turns=4, concurrency=concurrency, progress=False)
    print(json.dumps({**held(), "ran": run.ran, "errors": run.errors}), flush=True)
"""
"""A child's script: `HELD MODEL CONCURRENCIES OUT TASKS` runs a batch of TASKS canvas tasks at each
concurrency (a JSON list) in one process and prints, before the first and after each, what the process
holds (one JSON line each)."""


def held_over_batches(model: StandIn, concurrencies: list[int], out: Path, tasks: int = 8) -> list[dict]:
    """What a process holds before and after each of its batches (`HELD`), run in a child of its own so
    that nothing of this process's counts."""
    argv = [sys.executable, "-c", HELD, MODEL, json.dumps(concurrencies), str(out), str(tasks)]
    done = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
