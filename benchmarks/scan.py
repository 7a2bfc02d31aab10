"""The keyless scanners against planted failures: precision and recall of each, of the turn it points to, and
the time to scan 10,000 episodes.

Real episodes first: scripted agents (`tests/support/planted.py`) on the embedded canvas env (tools surface,
a 16-turn budget) that loop on one call, retry a failing call unchanged, run into three errors in a row, call
a tool that does not exist, give up (text where a call was expected), submit at once, are cut by the output
limit, refuse, fill their context window, or lose their endpoint, each at a known turn; and clean ones, which
plant near misses (a call sent twice, a failing call then a corrected one, two errors in a row). Each
scanner is scored on every episode: it must fire where its failure was planted, at the planted turn (the
first of `steps`), and nowhere else.

Then scale: the real records copied, with new keys, into one run of `--scale` episodes, scanned keyless
cold (no cached index) and warm (the index cached, as a second `evalkit scan` finds it), medians of
`--repeat`; beside them, `load_runs` of the same run alone, for the ratio.

    PYTHONPATH=. python benchmarks/scan.py [--episodes 440] [--scale 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl  # noqa: E402

import evalkit as ek  # noqa: E402
from evalkit.records import rundir  # noqa: E402
from evalkit.scanners.rules import BUILTIN  # noqa: E402
from tests.support import planted  # noqa: E402


def run_real(out: Path, n: int, concurrency: int) -> dict[str, tuple[str, int | None]]:
    """`n` planted episodes into `out`, the kinds in turn; the truth by key: (kind, planted turn)."""
    jobs = []
    for i in range(n):
        kind = planted.KINDS[i % len(planted.KINDS)]
        make, p = planted.factory(kind, i)
        jobs.append((make, p, f"canvas-test-{i % 300 + 1:04d}", i // 300))
    with ek.serve("canvas") as env:

        def one(job: tuple) -> tuple:
            make, p, task, repeat = job
            rec = ek.run_episode(make, env, task=task, out=out, max_turns=planted.MAX_TURNS, frames=False,
                                 repeat=repeat)  # fmt: skip
            return rec.key, (p.kind, p.step)

        with ThreadPoolExecutor(concurrency) as pool:
            return dict(pool.map(one, jobs))


def score(scans: pl.DataFrame, truth: dict[str, tuple[str, int | None]]) -> pl.DataFrame:
    """Per scanner: where it was planted, where it fired, precision, recall, and the share of its true
    positives whose first step is the planted turn."""
    rows = []
    for name in BUILTIN:
        sub = scans.filter(pl.col("scanner") == name)
        tp = fp = fn = tn = step_ok = 0
        for key, fired, steps in sub.select("key", "fired", "steps").iter_rows():
            kind, step = truth[key]
            want = planted.TRUTH[kind] == name
            if fired and want:
                tp += 1
                step_ok += bool(steps) and steps[0] == step
            elif fired:
                fp += 1
            elif want:
                fn += 1
            else:
                tn += 1
        rows.append({"scanner": name, "planted": tp + fn, "fired": tp + fp, "tp": tp, "fp": fp, "fn": fn,
                     "precision": tp / (tp + fp) if tp + fp else None,
                     "recall": tp / (tp + fn) if tp + fn else None,
                     "step_right": step_ok / tp if tp else None})  # fmt: skip
    return pl.DataFrame(rows)


def scale(src: Path, dst: Path, n: int, truth: dict) -> dict:
    """A run of `n` episodes made of `src`'s records with new keys (its shared texts copied along)."""
    lines = (src / rundir.TRACE).read_text().splitlines()
    dst.mkdir(parents=True)
    shutil.copytree(src / "texts", dst / "texts")
    shutil.copy(src / rundir.RUN_JSON, dst / rundir.RUN_JSON)
    out_truth = {}
    with open(dst / rundir.TRACE, "w") as f:
        for i in range(n):
            d = json.loads(lines[i % len(lines)])
            old = d["key"]
            d["key"] = f"s{i:07d}{old[:8]}"
            d["repeat"] = i
            f.write(json.dumps(d, separators=(",", ":")) + "\n")
            out_truth[d["key"]] = truth[old]
    return out_truth


def timed(fn, repeat: int, before=None) -> tuple[float, object]:
    times, got = [], None
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=440, help="real planted episodes (the kinds in turn)")
    ap.add_argument("--scale", type=int, default=10_000, help="episodes of the run scanned for time")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    pl.Config.set_tbl_rows(40)
    pl.Config.set_tbl_width_chars(200)
    pl.Config.set_tbl_cols(-1)
    with tempfile.TemporaryDirectory(prefix="evalkit-scan-bench-") as tmp:
        real = Path(tmp) / "real"
        t = time.perf_counter()
        truth = run_real(real, args.episodes, args.concurrency)
        ran = time.perf_counter() - t
        scans = ek.scan(real)
        print(f"{len(truth)} real episodes on canvas ({ran:.0f} s), {len(planted.KINDS) - 1} failure kinds "
              "and clean ones:")  # fmt: skip
        print(score(scans, truth))

        big = Path(tmp) / "big"
        big_truth = scale(real, big, args.scale, truth)

        def cold() -> None:
            shutil.rmtree(big / ".evalkit", ignore_errors=True)

        t_cold, got = timed(lambda: ek.scan(big), args.repeat, before=cold)
        t_warm, got = timed(lambda: ek.scan(big), args.repeat)
        t_index, _ = timed(lambda: ek.load_runs(big), args.repeat, before=cold)
        mb = (big / rundir.TRACE).stat().st_size / 1e6
        n_scan = len(BUILTIN)
        print(f"\n{args.scale:,} episodes ({mb:.0f} MB of trace), {n_scan} keyless scanners, medians of "
              f"{args.repeat}:")  # fmt: skip
        print(f"  scan, cold (index built):   {t_cold:.2f} s  ({t_cold / t_index:.1f}x load_runs cold, "
              f"{t_index:.2f} s)")  # fmt: skip
        print(f"  scan, warm (index cached):  {t_warm:.2f} s")
        s = score(got, big_truth)
        worst = s.select(pl.min("precision"), pl.min("recall"), pl.min("step_right")).row(0)
        print(f"  on them: lowest precision {worst[0]:.3f}, recall {worst[1]:.3f}, step right {worst[2]:.3f}")


if __name__ == "__main__":
    main()
