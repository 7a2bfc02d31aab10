"""Real `--until-decided` batches on the embedded canvas env with the offline agents (`make demo`'s models):
the tracer against random should stop early with "tracer better"; two equal models (the random policy under
two labels, `@low` and `@high`, which a baseline ignores: the same moves) should run on to the last planned
task and end undecided. Prints, for each, the looks, the verdict and the share of the fixed design's
episodes used.

    PYTHONPATH=. .venv/bin/python benchmarks/sequential_batch.py [--subset lite] [--limit N]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from evalkit.analysis.sequential import read_looks
from evalkit.envs.embedded.server import serve
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch

EVALSET = "data/evalsets/canvas-test-300.json"
PAIRS = {
    "tracer vs random": ("baseline:tracer", "baseline:random"),
    "equal models": ("baseline:random@low", "baseline:random@high"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", default="lite")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with serve("canvas") as env, tempfile.TemporaryDirectory() as tmp:
        for name, (a, b) in PAIRS.items():
            out = Path(tmp) / name.replace(" ", "-")
            t = time.monotonic()
            ask = dict(evalset=EVALSET, subset=args.subset, limit=args.limit, concurrency=args.concurrency)
            ask |= dict(until_decided=True, compare_a=a, compare_b=b, progress=False)
            run_batch([a, b], env, **ask, out=out)
            looks, episodes = read_looks(out), len(list(read_records(out)))
            last = looks[-1]
            planned = 2 * last.max_tasks
            print(f"{name}: {last.decision} after {last.look} look(s) at {last.n_tasks} of {last.max_tasks} "
                  f"tasks; {episodes} of {planned} episodes ({episodes / planned:.0%}, "
                  f"{1 - episodes / planned:.0%} fewer); A − B = {last.diff:+.3f}, repeated 95% CI "
                  f"[{last.ci_low:+.3f}, {last.ci_high:+.3f}]; {time.monotonic() - t:.0f}s")  # fmt: skip
            for x in looks:
                print(f"  look {x.look}: {x.n_tasks} tasks, diff {x.diff:+.3f}, CI [{x.ci_low:+.3f}, "
                      f"{x.ci_high:+.3f}], critical {x.critical}, {x.decision}")  # fmt: skip


if __name__ == "__main__":
    main()
