"""What a dead first provider costs a batch: `hf:org/vlm:bad|good@off` against `hf:org/vlm:good@off`.

A batch of canvas episodes (add a shape, submit) through the real SDK against the tests' local server, where
`bad` answers every request with a 500 carrying no retry-after (as a dead upstream does) and `good` serves,
honouring `reasoning_effort=none` for the thinking-off probe. Real waits, no shortcuts. Prints the requests
the dead provider got, and medians over repeats of the batch and first-episode times with their ratio to
the all-healthy batch.

    PYTHONPATH=. python benchmarks/fallback.py [--episodes 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' stand-in server

from evalkit.envs.embedded.server import serve  # noqa: E402
from evalkit.providers import thinking_off  # noqa: E402
from evalkit.records.rundir import read_records  # noqa: E402
from evalkit.run.batch import run_batch  # noqa: E402
from evalkit.types import AgentOptions  # noqa: E402
from tests.providers.fakes import FakeModelServer, Reply  # noqa: E402

RECT = {"kind": "rect", "x": 10, "y": 10, "width": 50, "height": 40, "fill": "#ff0000"}


def script(body: dict) -> Reply:
    if body["model"].endswith(":bad"):
        return Reply(status=500, retry_after=None)
    if [t.get("function", {}).get("name") for t in body.get("tools", [])] == ["record"]:
        off = body.get("reasoning_effort") == "none"
        return Reply(reasoning="" if off else "thinking", calls=[("record", {"n": 7})])
    turns = sum(m["role"] == "assistant" for m in body["messages"])
    return Reply(calls=[("add_element", RECT)] if turns == 0 else [("submit", {})])


def batch(server: FakeModelServer, env, spec: str, episodes: int) -> dict:
    server.reset(default=script)
    thinking_off.clear_cache()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_batch([spec], env, out=Path(tmp) / "r", tasks=episodes, max_turns=3, concurrency=1,
                  progress=False, options=AgentOptions(max_retries=4))  # fmt: skip
        wall = time.perf_counter() - t
        recs = sorted(read_records(Path(tmp) / "r"), key=lambda r: r.started or "")
    return {
        "wall": wall,
        "first": recs[0].seconds,
        "dead": sum(b["model"].endswith(":bad") for b in server.bodies()),
        "errors": sum(r.error_class is not None for r in recs),
        "method": {r.info.get("thinking_off_method") for r in recs},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    server = FakeModelServer().start()
    os.environ.update(HF_TOKEN="-", HF_ROUTER_URL=server.url + "/v1")
    try:
        with serve("canvas") as env:
            batch(server, env, "hf:org/vlm:good@off", 2)  # warm-up: imports, connections, the env's caches
            rows = {}
            for spec in ("hf:org/vlm:good@off", "hf:org/vlm:bad|good@off"):
                runs = [batch(server, env, spec, a.episodes) for _ in range(a.repeats)]
                rows[spec] = runs
    finally:
        server.stop()
    healthy, dead = rows.values()
    med = {k: statistics.median(r[k] for r in dead) for k in ("wall", "first")}
    base = {k: statistics.median(r[k] for r in healthy) for k in ("wall", "first")}
    print(f"{a.episodes} episodes, concurrency 1, {a.repeats} repeats (medians)")
    print(f"requests to the dead provider per batch: {[r['dead'] for r in dead]}")
    print(f"errors: {sum(r['errors'] for r in dead)}; thinking-off method recorded: {dead[0]['method']}")
    print(f"batch {med['wall']:.2f}s vs {base['wall']:.2f}s all healthy: ×{med['wall'] / base['wall']:.2f}")
    print(f"first episode {med['first']:.2f}s vs {base['first']:.2f}s: ×{med['first'] / base['first']:.2f}")


if __name__ == "__main__":
    main()
