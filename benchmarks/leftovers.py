"""What batches leave behind in the process that ran them: open files (sockets among them) and threads,
before the first and after each of several batches run one after the other in one process, as a notebook
runs them (`tests/faults/drivers.py`: the stand-in model served from this process over the real
chat-completions wire, the batches in a child process of their own, the canvas env embedded).

A batch should leave what the process held before it, but for what the first one makes once for the
process's life (Polars's runtime: three files).

    PYTHONPATH=. python benchmarks/leftovers.py [--concurrency 4,8,16,4,8] [--tasks 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fault suite's drivers

from tests.faults.drivers import StandIn, held_over_batches  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="4,8,16,4,8", help="one batch per number, in this order")
    ap.add_argument("--tasks", type=int, default=8, help="tasks per batch")
    a = ap.parse_args()
    concurrencies = [int(c) for c in a.concurrency.split(",")]
    model = StandIn()
    try:
        with tempfile.TemporaryDirectory() as out:
            held = held_over_batches(model, concurrencies, Path(out), a.tasks)
    finally:
        model.stop()
    print(f"{'':>24} {'files':>6} {'sockets':>8} {'threads':>8}  threads by name")
    for i, h in enumerate(held):
        when = "before" if i == 0 else f"after batch {i} (at {concurrencies[i - 1]})"
        names = Counter(n.rstrip("0123456789_") for n in h["names"])
        print(f"{when:>24} {h['fds']:>6} {h['sockets']:>8} {h['threads']:>8}  {dict(names) or ''}")


if __name__ == "__main__":
    main()
