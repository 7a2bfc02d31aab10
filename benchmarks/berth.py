"""The berth env's figures, measured in one run on this machine.

1. The offline baselines through the real pipeline: `baseline:greedy` and `baseline:random` in a batch on the
   embedded berth server over the frozen evalset; mean reward per tier (rewards are relative to the best
   known plans, so 1.0 means "as good as the best we know").
2. The searches: on each evalset task the heuristic (cheapest insertion, local search, `--rounds` of
   iterated local search) and the exact integer program (HiGHS, `--exact-seconds` limit); the heuristic's
   gap to the optimum where the exact search proves it (mean, worst), and the time each takes per task
   (median and 90th percentile per tier). Also the gap of the construction alone and after one descent,
   to show what each stage adds. Every plan is checked by the grader.
3. The cost of making a task (generation) and of the frozen evalset's plans holding for all tasks.

    python benchmarks/berth.py [--tasks 150] [--rounds 150] [--exact-seconds 120] [--skip-batch]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from evalkit.envs.embedded.berth import exact
from evalkit.envs.embedded.berth.grade import check
from evalkit.envs.embedded.berth.reference import EVALSET_PATH, from_row, verify
from evalkit.envs.embedded.berth.search import ORDERS, Tables, construct, descend, heuristic
from evalkit.envs.embedded.berth.tasks import TIERS, seed_for, task_from_id
from evalkit.envs.evalsets import load_evalset
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def baselines(tasks: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_batch(
            ["baseline:greedy", "baseline:random"], "berth", evalset=EVALSET_PATH, limit=tasks,
            out=Path(tmp) / "r", concurrency=concurrency, max_turns=10, progress=False,
        )  # fmt: skip
        wall = time.perf_counter() - t
        recs = list(read_records(Path(tmp) / "r"))
    print(f"baselines: {len(recs)} episodes in {wall:.0f} s (concurrency {concurrency})")
    for model in ("baseline:greedy", "baseline:random"):
        mine = [r for r in recs if r.model == model]
        cells = []
        for tier in TIERS:
            rewards = [r.reward for r in mine if r.tier == tier and r.reward is not None]
            feasible = sum(bool((r.grade or {}).get("feasible")) for r in mine if r.tier == tier)
            cells.append(f"{tier} {statistics.mean(rewards):.3f} (n={len(rewards)}, {feasible} feasible)")
        scored = [r.reward for r in mine if r.reward is not None]
        unscored = sum(r.reward is None for r in mine)
        print(f"  {model}: " + "; ".join(cells) + f"; all {statistics.mean(scored):.3f}, unscored {unscored}")


def searches(rows: list[dict], rounds: int, exact_seconds: float) -> None:
    per: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        task = task_from_id(row["task_id"])
        inst, tier = task.instance, task.tier
        t0 = time.perf_counter()
        t = Tables(inst)
        rng = random.Random(seed_for(task.split, task.index))
        starts = [s for s in (construct(t, o) for o in ORDERS) if s is not None]
        built = min(s.total for s in starts)
        descended = min(descend(t, s, rng).total for s in starts)
        t1 = time.perf_counter()
        sol = heuristic(inst, rounds=rounds, seed=seed_for(task.split, task.index), tables=t)
        t2 = time.perf_counter()
        ex = exact.solve(inst, exact_seconds, tables=t)
        t3 = time.perf_counter()
        for plan in (t.plan(sol.seqs), ex.plan if ex else None):
            if plan is not None:
                c = check(inst, [{"vessel": v, "berth": b, "start": s} for v, b, s in plan])
                assert c.feasible, (row["task_id"], c.violations[:2])
        p = per[tier]
        p["construct_s"].append(t1 - t0)
        p["heuristic_s"].append(t2 - t1)
        p["exact_s"].append(t3 - t2)
        p["proven"].append(bool(ex and ex.optimal))
        if ex and ex.optimal:
            opt = max(ex.objective, 1)
            p["gap"].append((sol.total - ex.objective) / opt)
            p["gap_descent"].append((descended - ex.objective) / opt)
            p["gap_construct"].append((built - ex.objective) / opt)
    every = defaultdict(list)
    print(f"searches: heuristic with {rounds} rounds, exact with a {exact_seconds:.0f} s limit")
    for tier in TIERS:
        p = per[tier]
        for k, v in p.items():
            every[k] += v
        line = [f"  {tier}: {sum(p['proven'])}/{len(p['proven'])} proven optimal"]
        for k in ("gap_construct", "gap_descent", "gap"):
            if p[k]:
                line.append(f"{k} mean {statistics.mean(p[k]):.2%} worst {max(p[k]):.2%}")
        for k in ("heuristic_s", "exact_s"):
            line.append(f"{k} median {statistics.median(p[k]):.2f} p90 {pct(p[k], 0.9):.2f}")
        print("; ".join(line))
    n, gaps = len(every["gap"]), every["gap"]
    hit = sum(g == 0 for g in gaps)
    mean = statistics.mean
    print(
        f"  all: heuristic gap to the proven optimum over {n} tasks: mean {mean(gaps):.3%}, worst "
        f"{max(gaps):.3%}, optimum found on {hit}/{n}; construction alone mean "
        f"{mean(every['gap_construct']):.2%}, after one descent {mean(every['gap_descent']):.2%}"
    )
    h, e = statistics.median(every["heuristic_s"]), statistics.median(every["exact_s"])
    print(f"  median seconds per task: heuristic {h:.2f}, exact {e:.2f} (exact / heuristic {e / h:.2f}x)")


def generation(rows: list[dict]) -> None:
    times = []
    for row in rows:
        t = time.perf_counter()
        task = task_from_id(row["task_id"])
        times.append(time.perf_counter() - t)
        verify(task.instance, from_row(row))
    med, p90 = statistics.median(times) * 1e3, pct(times, 0.9) * 1e3
    print(
        f"generation: median {med:.0f} ms per task, p90 {p90:.0f} ms; frozen best plans hold for {len(rows)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=150, help="evalset tasks to use (balanced across tiers)")
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--exact-seconds", type=float, default=120.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-search", action="store_true")
    a = ap.parse_args()
    rows = load_evalset(EVALSET_PATH).select(limit=a.tasks)
    generation(rows)
    if not a.skip_batch:
        baselines(a.tasks, a.concurrency)
    if not a.skip_search:
        searches(rows, a.rounds, a.exact_seconds)


if __name__ == "__main__":
    main()
