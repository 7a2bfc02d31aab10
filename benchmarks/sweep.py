"""What a batch's start pays to sweep the temporary files killed writers left (`outputs.sweep`, run by
`RunLock` over the whole run directory), as a run grows: runs of 1k, 10k and 100k episodes laid out
as evalkit lays them out (frames and texts by content under 256 folders each, `--frames` files an episode;
empty files: only their names are read), a few stray temporary files among them. Medians of `--repeat`
sweeps, warm (the folders just listed): the whole run (what a writer that takes over from one that died
holding the lock sweeps) and the run but its stores (what a writer sweeps after a clean end, `RunLock`), and
their ratios to the smallest run's.

    python benchmarks/sweep.py [--episodes 1000,10000,100000] [--frames 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.records.lock import STORES  # noqa: E402
from evalkit.records.outputs import sweep  # noqa: E402

DEAD_PID = 2**22 + 1
"""A process id above Linux's default maximum: no writer has it, so its files are stale."""


def lay_out(run: Path, episodes: int, frames: int) -> int:
    """The run's stores, `frames` files an episode; returns the number of files."""
    n = episodes * frames
    for store in ("frames", "texts"):
        for i in range(256):
            (run / store / f"{i:02x}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        store = "texts" if i % 10 == 9 else "frames"
        open(run / store / f"{i % 256:02x}" / f"{i:064x}.png", "wb").close()
    (run / "trace.jsonl").touch()
    return n


def plant(run: Path) -> None:
    """Three files a killed writer left: beside run.json, in a frames folder, and a bundle built halfway."""
    for rel in (".run.json.%d-0.tmp", "frames/0a/.ab.png.%d-1.tmp", ".bundle.%d-2.tmp"):
        (run / (rel % DEAD_PID)).touch()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", default="1000,10000,100000", help="run sizes, comma-separated")
    ap.add_argument("--frames", type=int, default=10, help="files an episode leaves in the stores")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    sizes = [int(x) for x in a.episodes.split(",")]
    print(f"{'episodes':>9} {'files':>10} {'whole run s':>12} {'µs a file':>10} {'× smallest':>11} "
          f"{'but stores s':>13} {'× smallest':>11}")  # fmt: skip
    first: list[float] = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="evalkit-sweep-") as tmp:
            run = Path(tmp) / "run"
            files = lay_out(run, size, a.frames)
            took: dict[tuple, list[float]] = {(): [], STORES: []}
            for _ in range(a.repeat):
                for skip in took:
                    plant(run)
                    start = time.perf_counter()
                    cleared = sweep(run, skip=skip)
                    took[skip].append(time.perf_counter() - start)
                    assert cleared == (3 if not skip else 2), cleared
            whole, lean = (statistics.median(v) for v in took.values())
            first = first or [whole, lean]
            each = whole / files * 1e6
            print(f"{size:>9,} {files:>10,} {whole:>12.3f} {each:>10.2f} {whole / first[0]:>11.1f} "
                  f"{lean:>13.4f} {lean / first[1]:>11.1f}")  # fmt: skip
    print(f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
