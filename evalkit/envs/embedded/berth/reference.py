"""Best known plans: found by search, frozen into the evalset, looked up when a task is reset.

For each task the heuristic (construction + iterated local search) and the exact integer program both run;
the best plan wins, and it is marked optimal when the exact search proved that no plan costs less. The plan is
checked by the grader before it is kept, so a reference can never be infeasible or mis-costed.

The frozen evalset (`data/evalsets/berth-test-150.json`) holds every test task's best plan: reward 1.0 then
means "as good as the best we know", the same on every machine. A task outside it (the train split, or a test
index past the evalset) gets a reference searched when it is first reset, with smaller budgets, and cached
for the life of the process.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

from tqdm.auto import tqdm

from evalkit.envs.evalsets import evalset_hash, tier_subsets

from . import exact
from .grade import BestKnown, check
from .model import Instance
from .search import Tables, heuristic
from .tasks import Task, generate_task, seed_for

EVALSET_SIZE = 150
EVALSET_PATH = Path(__file__).resolve().parents[4] / "data" / "evalsets" / f"berth-test-{EVALSET_SIZE}.json"
OFFLINE = {"rounds": 150, "exact_seconds": 120.0, "exact_max_vessels": None}
ONLINE = {"rounds": 30, "exact_seconds": 20.0, "exact_max_vessels": 20}

_lock = threading.Lock()


def search_best(
    inst: Instance,
    seed: int = 0,
    rounds: int = 150,
    exact_seconds: float = 120.0,
    exact_max_vessels: int | None = None,
) -> tuple[BestKnown, dict]:
    """The best plan the searches find, and what each found in how long (for the evalset and benchmarks)."""
    t = Tables(inst)
    t0 = time.perf_counter()
    sol = heuristic(inst, rounds=rounds, seed=seed, tables=t)
    info: dict = {"heuristic": sol.total, "heuristic_s": round(time.perf_counter() - t0, 3)}
    best = BestKnown(sol.total, tuple(t.plan(sol.seqs)), False, "search")
    method, bound = "heuristic", None
    if exact_max_vessels is None or len(inst.vessels) <= exact_max_vessels:
        t0 = time.perf_counter()
        ex = exact.solve(inst, exact_seconds, tables=t)
        info.update(exact=ex and ex.objective, exact_optimal=bool(ex and ex.optimal))
        info["exact_s"] = round(time.perf_counter() - t0, 3)
        if ex is not None:
            if ex.optimal and ex.objective > best.objective:  # the searches disagree: a bug, not a reference
                raise RuntimeError(f"{inst.task_id}: {ex.objective} proven optimal, {best.objective} found")
            bound = ex.bound if not ex.optimal else ex.objective
            if ex.objective < best.objective:
                best, method = BestKnown(ex.objective, tuple(ex.plan), ex.optimal, "search"), "exact"
            elif ex.optimal:
                best, method = BestKnown(best.objective, best.plan, True, "search"), "both"
    verify(inst, best)
    info.update(method=method, bound=bound)
    return best, info


def verify(inst: Instance, best: BestKnown) -> None:
    """Raise ValueError unless `best` is a feasible plan of `inst` with the objective it claims."""
    c = check(inst, best.plan_list())
    if not c.feasible or c.objective != best.objective:
        kinds = ", ".join(sorted(c.kinds())) or "none"
        raise ValueError(
            f"the best known plan of {inst.task_id} does not hold for the task as generated now (violations: "
            f"{kinds}; objective {c.objective}, recorded {best.objective}): regenerate the evalset with "
            "`python -m evalkit.envs.embedded.berth --write-evalset`"
        )


@lru_cache(maxsize=4)
def _frozen(path: str, mtime_ns: int) -> dict[str, dict]:
    data = json.loads(Path(path).read_text())
    return {row["task_id"]: row for row in data.get("tasks", [])}


def frozen_row(task_id: str, path: Path = EVALSET_PATH) -> dict | None:
    """The evalset row of `task_id`, or None when the task (or the evalset file) is not there."""
    try:
        return _frozen(str(path), path.stat().st_mtime_ns).get(task_id)
    except OSError:
        return None


def from_row(row: dict) -> BestKnown:
    plan = tuple((str(v), str(b), int(s)) for v, b, s in row["best_plan"])
    return BestKnown(int(row["best_objective"]), plan, bool(row["best_optimal"]), "evalset")


_verified: set[str] = set()


def best_known(task: Task) -> BestKnown:
    """The reference plan of `task`: frozen in the evalset, or searched now (once per process)."""
    row = frozen_row(task.task_id)
    if row is None:
        return _searched(task.task_id, task)
    best = from_row(row)
    if task.task_id not in _verified:
        verify(task.instance, best)
        _verified.add(task.task_id)
    return best


_cache: dict[str, BestKnown] = {}
_locks: dict[str, threading.Lock] = {}


def _searched(task_id: str, task: Task) -> BestKnown:
    with _lock:
        lock = _locks.setdefault(task_id, threading.Lock())
    with lock:  # one search per task, while other tasks' searches go on
        if task_id not in _cache:
            _cache[task_id] = search_best(task.instance, seed_for(task.split, task.index), **ONLINE)[0]
        return _cache[task_id]


# ---------------------------------------------------------------- the frozen evalset


def _disruptions(inst: Instance) -> list[str]:
    kinds = [("closure", inst.closures), ("delay", inst.delays), ("breakdown", inst.breakdowns)]
    return [k for k, items in kinds for _ in items]


def evalset_row(index: int) -> dict:
    """One test task with its best known plan (plan entries as [vessel, berth, start])."""
    task = generate_task("test", index)
    inst = task.instance
    best, info = search_best(inst, seed_for("test", index), **OFFLINE)
    return {
        **task.describe(),
        "disruptions": _disruptions(inst),
        "best_objective": best.objective,
        "best_optimal": best.optimal,
        "best_lower_bound": info["bound"],
        "best_method": info["method"],
        "best_plan": [list(e) for e in best.plan],
    }


def evalset(n: int = EVALSET_SIZE, workers: int | None = None) -> dict:
    """The frozen test evalset: `n` tasks with best known plans, `lite` (20 per tier) and `core30` subsets."""
    with ProcessPoolExecutor(workers) as pool:
        rows = list(tqdm(pool.map(evalset_row, range(n)), total=n, desc="berth evalset", unit="task"))
    subsets = tier_subsets(rows, {"lite": 20, "core30": 10})
    return {
        "evalset_id": evalset_hash(rows, subsets),
        "name": f"berth-test-{n}",
        "env": "berth",
        "split": "test",
        "subsets": subsets,
        "tasks": rows,
    }


def write_evalset(path: str | Path = EVALSET_PATH, n: int = EVALSET_SIZE, workers: int | None = None) -> dict:
    """Write the evalset to `path`, one task per line (plans make rows long; diffs stay readable)."""
    data = evalset(n, workers)
    head = {k: v for k, v in data.items() if k != "tasks"}
    body = ",\n".join("  " + json.dumps(row, separators=(", ", ": ")) for row in data["tasks"])
    text = json.dumps(head, indent=1)[:-2] + ',\n "tasks": [\n' + body + "\n ]\n}\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return data
