"""Analysis speed: vectorised summaries and tier CIs against plain Python, and trace load time.

    python benchmarks/analysis.py [--episodes 30000] [--load 100000] [--repeat 3] [--reference]

1. 30,000 synthetic episodes, 3 models × 3 tiers (tasks repeated 4 times, 2% unscored): `summarise` +
   `by_tier` (2,000 task-clustered bootstrap resamples, both reward means) against the same summary written
   here in plain Python (dict grouping, `random.choices` resampling). Prints the ratio (goal ≥ 10×).
2. A 100,000-episode trace.jsonl: `load_runs` cold (parse + write the index) and with the cached index
   (goals ≤ 3 s and ≤ 0.3 s on the development machine). Prints the ratio and the seconds; with
   `--reference`, also the reference reader (`json.loads` per line) against the fast one.

Times are medians of `--repeat` runs (the plain-Python summary runs once): the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from evalkit import analysis
from evalkit.types import episode_key

MODELS = ("model-a", "model-b", "model-c")
TIERS = ("easy", "medium", "hard")


def synthetic_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    per_model = n // len(MODELS)
    n_tasks = max(1, per_model // 4)
    rows = []
    for mi, model in enumerate(MODELS):
        for i in range(per_model):
            task, rep = i % n_tasks, i // n_tasks
            tier = TIERS[task % 3]
            unscored = rng.random() < 0.02
            reward = (
                None
                if unscored
                else min(1.0, max(0.0, rng.gauss(0.7 - 0.2 * TIERS.index(tier) + 0.05 * mi, 0.2)))
            )
            turns = rng.randint(1, 12)
            rows.append(
                {
                    "format_version": 1,
                    "key": episode_key(model, "canvas", "tools", "reference", f"t{task}", None, rep),
                    "model": model,
                    "env": "canvas",
                    "surface": "tools",
                    "mode": "reference",
                    "task_id": f"t{task}",
                    "tier": tier,
                    "repeat": rep,
                    "reward": reward,
                    "grade": None if reward is None else {"total": reward},
                    "end_reason": "error" if unscored else "submitted",
                    "error_class": "endpoint_error" if unscored else None,
                    "usage": {"input": 900 * turns, "output": 200 * turns, "reasoning_tokens": 50 * turns},
                    "cost_usd": 0.002 * turns,
                    "n_turns": turns,
                    "tool_calls": turns + 1,
                    "tool_errors": rng.randint(0, 2),
                    "parse_errors": 0,
                    "seconds": 3.0 * turns,
                    "turns": [
                        {
                            "turn": k,
                            "text": "ok",
                            "stop": "tool_use",
                            "calls": [{"name": "add_element", "args": {"x": k}}],
                        }
                        for k in range(2)
                    ],
                }
            )
    return rows


def python_summary(rows: list[dict], n_boot: int = 2000, seed: int = 0) -> dict:
    """The same numbers as summarise + by_tier, the way one writes them without a dataframe library."""
    rng = random.Random(seed)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        g = (r["model"], r["env"], r["surface"], r["mode"])
        groups[g].append(r)
        groups[g + (r["tier"],)].append(r)
        groups[g + ("all",)].append(r)
    out = {}
    for g, rs in groups.items():
        scored = [r["reward"] for r in rs if r["error_class"] is None and r["reward"] is not None]
        n_turns = sum(r["n_turns"] for r in rs)
        row = {
            "n": len(rs),
            "scored": len(scored),
            "unscored": len(rs) - len(scored),
            "mean_reward": statistics.fmean(scored) if scored else None,
            "mean_reward_unscored_as_0": sum(scored) / len(rs),
            "min": min(scored, default=None),
            "max": max(scored, default=None),
            "turns": statistics.fmean(r["n_turns"] for r in rs),
            "calls": statistics.fmean(r["tool_calls"] for r in rs),
            "tool_errors": statistics.fmean(r["tool_errors"] for r in rs),
            "tokens": statistics.fmean(sum(r["usage"].values()) - r["usage"]["reasoning_tokens"] for r in rs),
            "reasoning_per_turn": sum(r["usage"]["reasoning_tokens"] for r in rs) / n_turns,
            "cost": sum(r["cost_usd"] for r in rs),
        }
        if len(g) == 5:  # per tier: task-clustered bootstrap of both means
            per_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
            for r in rs:
                t = per_task[r["task_id"]]
                ok = r["error_class"] is None and r["reward"] is not None
                t[0] += r["reward"] if ok else 0.0
                t[1] += ok
                t[2] += 1
            tasks = list(per_task.values())
            boots, boots0 = [], []
            for _ in range(n_boot):
                sample = rng.choices(tasks, k=len(tasks))
                s = sum(t[0] for t in sample)
                c = sum(t[1] for t in sample)
                boots.append(s / c if c else float("nan"))
                boots0.append(s / sum(t[2] for t in sample))
            boots.sort()
            boots0.sort()
            lo, hi = int(0.025 * n_boot), int(0.975 * n_boot) - 1
            row |= {"ci": (boots[lo], boots[hi]), "ci0": (boots0[lo], boots0[hi])}
        out[g] = row
    return out


def median_of(fn, repeat: int = 3, before=None) -> float:
    times = []
    for _ in range(repeat):
        if before:
            before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=30_000)
    ap.add_argument("--load", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time the json.loads-per-line reader")
    a = ap.parse_args()

    rows = synthetic_rows(a.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "summary-run"
        run.mkdir()
        (run / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        df = analysis.load_runs(run)
    assert df.height == len(rows), df.height

    t_vec = median_of(lambda: (analysis.summarise(df), analysis.by_tier(df)), a.repeat)
    t_py = median_of(lambda: python_summary(rows), repeat=1)
    print(f"summarise + by_tier, {a.episodes:,} episodes, 3 models x 3 tiers, 2,000 resamples:")
    print(f"  plain Python / evalkit.analysis = {t_py / t_vec:.1f}x   ({t_py:.2f} s vs {t_vec:.3f} s)")

    big = synthetic_rows(a.load, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "load-run"
        run.mkdir()
        with open(run / "trace.jsonl", "w") as f:
            for r in big:
                f.write(json.dumps(r) + "\n")
        size = (run / "trace.jsonl").stat().st_size

        def uncached() -> None:
            shutil.rmtree(run / ".evalkit", ignore_errors=True)

        t_cold = median_of(lambda: analysis.load_runs(run), a.repeat, before=uncached)
        cold = analysis.load_runs(run)
        t_warm = median_of(lambda: analysis.load_runs(run), a.repeat)
        t_nocache = median_of(lambda: analysis.load_runs(run, cache=False), a.repeat)
        t_ref = median_of(lambda: analysis._build_index_reference(run), 1) if a.reference else None
    assert cold.height == len(big)
    print(f"load_runs, {a.load:,} episodes ({size / 1e6:.0f} MB trace):")
    print(
        f"  cold (parse + write index) / cached index = {t_cold / t_warm:.0f}x   "
        f"({t_cold:.2f} s vs {t_warm:.3f} s; goals 3 s and 0.3 s)"
    )
    print(f"  parse without writing the index: {t_nocache:.2f} s")
    if t_ref is not None:
        ratio = t_ref / t_nocache
        print(f"  reference reader (json.loads per line) / fast reader = {ratio:.1f}x   ({t_ref:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
