"""What `evalkit convert` costs on a 1,000-episode run, against reading that run.

A synthetic native run (tests/fixtures/synth.py: 2 models × 100 tasks × 5 repeats, 1–4 turns each, a frame
per turn) is written out as ATIF (a Harbor job: a trial folder per episode), as Inspect logs (one `.eval`
per model) and as a Hugging Face dataset folder (a session file per episode, the Parquet table, the card),
then read back with `load_runs` (no cache). Each step is timed `--rounds` times; printed are the
medians as ratios to reading the native run's records once (`rundir.read_records`), per-episode medians in
ms, and the output's size against the run's. Importing inspect-ai is timed apart, in a fresh interpreter:
it is paid once per process that reads or writes a log.

    PYTHONPATH=. python benchmarks/convert.py [--tasks 100] [--repeats 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.records import rundir  # noqa: E402
from evalkit.records.exporters import convert  # noqa: E402
from evalkit.records.loading import load_runs  # noqa: E402
from tests.fixtures.synth import make_run  # noqa: E402


def _bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _median(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    code = "import time; t = time.perf_counter(); import inspect_ai.log; print(time.perf_counter() - t)"
    run_ = functools.partial(subprocess.run, capture_output=True, text=True, check=True)
    imports = [float(run_([sys.executable, "-c", code]).stdout) for _ in range(a.rounds)]
    import inspect_ai.log  # noqa: F401 — paid above, in its own process; not in the times below

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = make_run(tmp / "run", n_tasks=a.tasks, repeats=a.repeats)
        n = sum(1 for _ in rundir.read_records(run))
        read = _median(lambda: list(rundir.read_records(run)), a.rounds)
        job, log, hf = tmp / "job", tmp / "logs" / "run.eval", tmp / "hf"

        def to_atif() -> None:
            shutil.rmtree(job, ignore_errors=True)
            convert(run, "atif", job)

        def to_inspect() -> None:
            shutil.rmtree(log.parent, ignore_errors=True)
            convert(run, "inspect", log)

        def to_hf() -> None:
            shutil.rmtree(hf, ignore_errors=True)
            convert(run, "hf", hf)

        rows = [
            ("read the native run (records)", read),
            ("convert --to atif", _median(to_atif, a.rounds)),
            ("convert --to inspect", _median(to_inspect, a.rounds)),
            ("convert --to hf", _median(to_hf, a.rounds)),
            ("load_runs(native run)", _median(lambda: load_runs(run, cache=False), a.rounds)),
            ("load_runs(ATIF job)", _median(lambda: load_runs(job, cache=False), a.rounds)),
            ("load_runs(Inspect logs)", _median(lambda: load_runs(log.parent, cache=False), a.rounds)),
            ("load_runs(HF dataset)", _median(lambda: load_runs(hf, cache=False), a.rounds)),
        ]
        print(f"{n} episodes, {a.rounds} rounds; medians")
        print(f"{'step':32} {'× read':>8} {'ms/episode':>11}")
        for name, t in rows:
            print(f"{name:32} {t / read:8.1f} {1000 * t / n:11.2f}")
        size = _bytes(run)
        print(f"output size against the run's ({size / 1e6:.1f} MB): ATIF job {_bytes(job) / size:.2f}×, "
              f"Inspect logs {_bytes(log.parent) / size:.2f}×, "
              f"HF dataset {_bytes(hf) / size:.2f}×")  # fmt: skip
        print(f"import inspect_ai.log in a fresh interpreter: median {statistics.median(imports):.2f} s "
              f"({statistics.median(imports) / read:.0f}× reading the run)")  # fmt: skip


if __name__ == "__main__":
    main()
