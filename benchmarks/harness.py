"""How much the harness costs on top of the environment.

Measures, in one run on this machine: the canvas env's bare tool-call time through the OpenEnv client
(no harness), then turns and tool calls per second of a batch of `baseline:random` (a policy with zero model
latency) with frames on and off. Prints medians and ratios; absolute times on a shared machine are noise.

    python benchmarks/harness.py [--episodes 24] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from evalkit.envs.client.openenv import OpenEnvSession
from evalkit.envs.embedded.server import serve
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch


def bare_call_seconds(base_url: str, n: int = 200) -> float:
    """Median seconds of one tool call straight through the OpenEnv client."""
    s = OpenEnvSession(base_url)
    try:
        s.reset(task_id="canvas-test-0000", max_steps=10 * n)
        times = []
        for i in range(n):
            name, args = (
                (
                    "add_element",
                    {"kind": "rect", "x": i % 700, "y": 10, "width": 20, "height": 20, "fill": "#336699"},
                )
                if i % 2
                else ("get_document", {})
            )
            t = time.perf_counter()
            s.call(name, args)
            times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        s.close()


def bare_render_seconds(base_url: str, n: int = 50) -> float:
    s = OpenEnvSession(base_url)
    try:
        s.reset(task_id="canvas-test-0000")
        times = []
        for _ in range(n):
            t = time.perf_counter()
            s.render()
            times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        s.close()


def batch_rate(env, episodes: int, concurrency: int, frames: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_batch(
            ["baseline:random"],
            env,
            split="test",
            tasks=episodes,
            out=Path(tmp) / "r",
            concurrency=concurrency,
            max_turns=12,
            frames=frames,
            progress=False,
        )
        wall = time.perf_counter() - t
        recs = list(read_records(Path(tmp) / "r"))
    turns = sum(r.n_turns for r in recs)
    calls = sum(r.tool_calls for r in recs) + sum(r.auto_submitted for r in recs)
    env_s = sum(r.env_seconds for r in recs)
    return {
        "turns_per_s": turns / wall,
        "calls_per_s": calls / wall,
        "s_per_call": wall * concurrency / calls,
        "env_share": env_s / (wall * concurrency),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with serve("canvas") as env:
        bare_call_seconds(env.base_url, 20)  # warm-up
        bare = statistics.median(bare_call_seconds(env.base_url) for _ in range(a.repeats))
        render = statistics.median(bare_render_seconds(env.base_url) for _ in range(a.repeats))
        rows = {}
        for frames in (False, True):
            runs = [batch_rate(env, a.episodes, a.concurrency, frames) for _ in range(a.repeats)]
            rows[frames] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"bare env tool call (median): {bare * 1e3:.2f} ms; render.png: {render * 1e3:.2f} ms")
    for frames, r in rows.items():
        print(
            f"frames {'on ' if frames else 'off'}: {r['turns_per_s']:.1f} turns/s, "
            f"{r['calls_per_s']:.1f} calls/s; "
            f"harness time per call = {r['s_per_call'] / bare:.2f}x the bare call; "
            f"env share of episode time {r['env_share']:.0%}"
        )
    print(f"frames on / off throughput ratio: {rows[True]['turns_per_s'] / rows[False]['turns_per_s']:.2f}")


if __name__ == "__main__":
    main()
