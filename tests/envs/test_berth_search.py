"""The searches against brute force: on tiny ports every plan is enumerated, so the optimum is known without
the search's own tables; the heuristic and the exact program must both reach it."""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from evalkit.envs.embedded.berth import exact
from evalkit.envs.embedded.berth.grade import check
from evalkit.envs.embedded.berth.model import Instance, end_hour
from evalkit.envs.embedded.berth.search import Tables, heuristic
from evalkit.envs.embedded.berth.tasks import generate_task
from tests.envs.berth_ports import as_plan, tiny


def brute_force(inst: Instance) -> int:
    """The least objective over every assignment and start, by direct interval arithmetic."""

    @cache
    def end(vid: str, bid: str, s: int) -> int:
        return end_hour(inst, bid, s, inst.vessel(vid).hours[bid])

    along = [(b.berth, b.since, end_hour(inst, b.berth, 0, b.remaining)) for b in inst.berthed]
    options = []
    for v in inst.vessels:
        opts = []
        for bid in v.hours:
            for s in range(v.arrival, inst.horizon + 1):
                e = end(v.id, bid, s)
                if e > inst.horizon or any(
                    c.berth == bid and s < c.end and c.start < e for c in inst.closures
                ):
                    continue
                if any(b == bid and s < z + inst.gap and a < e + inst.gap for b, a, z in along):
                    continue
                moved = v.id not in inst.affected and inst.current[v.id][0] != bid
                opts.append((bid, s, e, v.weight * (s - v.arrival) + inst.move_cost * moved))
        options.append(opts)
    best = None
    for combo in itertools.product(*options):
        cost = sum(o[3] for o in combo)
        if best is not None and cost >= best:
            continue
        clash = any(
            a[0] == b[0] and a[1] < b[2] + inst.gap and b[1] < a[2] + inst.gap
            for a, b in itertools.combinations(combo, 2)
        )
        if not clash:
            best = cost
    return best


@pytest.mark.parametrize("variant", [0, 1, 2, 3])
def test_heuristic_and_exact_reach_the_brute_force_optimum(variant):
    inst = tiny(variant)
    optimum = brute_force(inst)
    sol = heuristic(inst, rounds=20, seed=variant)
    ex = exact.solve(inst, time_limit=30)
    assert ex is not None and ex.optimal and ex.objective == optimum
    assert sol.total == optimum
    for plan in (Tables(inst).plan(sol.seqs), ex.plan):
        c = check(inst, as_plan(plan))
        assert c.feasible and c.objective == optimum, c.violations


@pytest.mark.parametrize("index", [0, 2, 8, 16])
def test_searched_plans_of_generated_tasks_hold(index):
    inst = generate_task("test", index).instance
    t = Tables(inst)
    sol = heuristic(inst, rounds=10, seed=index, tables=t)
    c = check(inst, as_plan(t.plan(sol.seqs)))
    assert c.feasible and c.objective == sol.total, c.violations
    ex = exact.solve(inst, time_limit=60, tables=t)
    assert ex.optimal and ex.objective <= sol.total
