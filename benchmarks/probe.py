"""How long `evalkit probe` takes, and what evalkit's own OpenEnv client costs next to OpenEnv's.

In one run on this machine: `evalkit probe URL` as a user runs it (a fresh process: start-up, imports, the
probe) and `probe()` in-process, against the embedded canvas and the three foreign-style test envs (MCP
without a finishing tool, MCP quiz, typed-action one-session); then, on the canvas, a session's open + reset +
close and one tool call through evalkit's WebSocket client and through OpenEnv's `MCPToolClient`, interleaved
round by round, and the import time of each client. Prints medians and ratios.

    python benchmarks/probe.py [--repeats 5] [--calls 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalkit.envs.client.openenv import OpenEnvSession  # noqa: E402
from evalkit.envs.embedded.server import serve  # noqa: E402
from evalkit.run.probe import probe  # noqa: E402
from tests.support.foreign_envs import Served, guess_app, quiz_app, sketch_app  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def cli_seconds(url: str) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "evalkit.cli", "probe", url], env=ENV, check=True, capture_output=True
    )
    return time.perf_counter() - t


def import_seconds(module: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], env=ENV, check=True)
    return time.perf_counter() - t


def evalkit_round(url: str, calls: int) -> tuple[float, list[float]]:
    t = time.perf_counter()
    s = OpenEnvSession(url)
    s.reset(task_id="canvas-test-0000", max_steps=10 * calls)
    times = []
    for _ in range(calls):
        c = time.perf_counter()
        s.call("get_document", {})
        times.append(time.perf_counter() - c)
    c = time.perf_counter()
    s.close()
    return time.perf_counter() - t - sum(times), times


def openenv_round(url: str, calls: int) -> tuple[float, list[float]]:
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    t = time.perf_counter()
    client = MCPToolClient(url, message_timeout_s=60).sync()
    client.connect()
    client.reset(task_id="canvas-test-0000", max_steps=10 * calls)
    times = []
    for _ in range(calls):
        c = time.perf_counter()
        client.step(CallToolAction(tool_name="get_document", arguments={}))
        times.append(time.perf_counter() - c)
    client.close()
    return time.perf_counter() - t - sum(times), times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100)
    a = ap.parse_args()
    med = statistics.median
    with (
        serve("canvas") as canvas,
        Served(sketch_app()) as sk,
        Served(quiz_app()) as qz,
        Served(guess_app()) as gs,
    ):
        targets = {"canvas": canvas.base_url, "sketch (MCP)": sk.base_url, "quiz (MCP)": qz.base_url,
                   "guess (typed, 1 session)": gs.base_url}  # fmt: skip
        for name, url in targets.items():
            probe(url)  # warm-up
            inproc = med(probe(url).seconds for _ in range(a.repeats))
            cli = med(cli_seconds(url) for _ in range(a.repeats))
            print(f"evalkit probe {name}: {cli:.2f} s as a command (probe itself {inproc:.2f} s)")
        openenv_round(canvas.base_url, 5), evalkit_round(canvas.base_url, 5)  # warm-up
        opens = {"evalkit": [], "openenv": []}
        calls = {"evalkit": [], "openenv": []}
        for _ in range(a.repeats):
            for label, fn in (("evalkit", evalkit_round), ("openenv", openenv_round)):
                o, c = fn(canvas.base_url, a.calls)
                opens[label].append(o)
                calls[label] += c
    for label in ("evalkit", "openenv"):
        print(
            f"{label} client on canvas: session open+reset+close {med(opens[label]) * 1e3:.1f} ms, "
            f"tool call {med(calls[label]) * 1e3:.2f} ms (medians)"
        )
    print(
        f"evalkit / openenv: session {med(opens['evalkit']) / med(opens['openenv']):.2f}x, "
        f"tool call {med(calls['evalkit']) / med(calls['openenv']):.2f}x"
    )
    imports = {
        m: med(import_seconds(m) for _ in range(3))
        for m in ("evalkit.envs.client.openenv", "openenv.core.mcp_client")
    }
    print("client import: " + ", ".join(f"{m} {s:.2f} s" for m, s in imports.items()))


if __name__ == "__main__":
    main()
