"""What reading an env as its authors meant costs (issue 50), in one run on this machine:

- a session's reset, which now reads the env's state every time (so that a failed step can tell a refused
  action from a broken session): the state request alone, next to the reset's other work, on the embedded
  berth server, interleaved round by round;
- a tool result read with the Task API's records to withhold (each metadata value's digest compared) next
  to one read without, on a result with a 20 × 20 grid and a few fields in its metadata.

Prints medians and ratios.

    python benchmarks/reading.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalkit.envs.client import observation  # noqa: E402
from evalkit.envs.client.openenv import connect, tool_outcome  # noqa: E402
from evalkit.envs.embedded.server import serve  # noqa: E402


def timed(fn, *args, **kw) -> float:
    t = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - t


def resets(rounds: int) -> None:
    with serve("berth") as env:
        session = connect(env)
        session.reset()
        state, reset = [], []
        for _ in range(rounds):
            reset.append(timed(session._conn.reset))
            state.append(timed(session._conn.request, "state"))
        session.close()
    s, r = statistics.median(state), statistics.median(reset)
    print(f"berth: reset {r * 1e3:.3f} ms, its state {s * 1e3:.3f} ms (median of {rounds}): "
          f"a reset with its state costs {1 + s / r:.2f}× one without")  # fmt: skip


def results(rounds: int) -> None:
    meta = {"grid": [[(i * j) % 3 for j in range(20)] for i in range(20)], "turn": 3, "player": "x",
            "scores": {"x": 1, "o": 2}, "legal_actions": list(range(40))}  # fmt: skip
    payload = {"observation": {"result": {"content": [{"type": "text", "text": "moved"}]}, "metadata": meta}}
    records = frozenset(observation.digest({"id": f"t-{i}", "a": i}) for i in range(500))
    plain, withheld = [], []
    for _ in range(rounds):
        plain.append(timed(tool_outcome, payload))
        withheld.append(timed(tool_outcome, payload, records=records))
    p, w = statistics.median(plain), statistics.median(withheld)
    print(f"a tool result: {p * 1e6:.0f} µs read, {w * 1e6:.0f} µs with 500 task records to withhold "
          f"(median of {rounds}): {w / p:.2f}×")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    resets(args.rounds)
    results(args.rounds)


if __name__ == "__main__":
    main()
