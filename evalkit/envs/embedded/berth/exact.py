"""Exact search: a time-indexed integer program solved to proven optimality by HiGHS (through SciPy).

One binary per (vessel, fitting berth, feasible start hour): feasible means after arrival, clear of the
berth's closures and of vessels alongside, ending by the horizon, so those rules need no rows. One row per
vessel (exactly one start), and one per berth and hour: the stays padded by the clearance, [start, end +
clearance), that cover the hour add up to at most one — two padded stays are disjoint exactly when the
later one starts at least the clearance after the earlier one ends. Cost: weight × waiting, plus the move
cost where it applies. Small instances solve in a fraction of a second; large ones hit the time limit and
keep the best plan found with no proof.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Instance
from .search import Tables


@dataclass
class Exact:
    plan: list[tuple[str, str, int]]
    objective: int
    optimal: bool
    """HiGHS proved no plan costs less."""
    bound: float
    """The best lower bound HiGHS proved (equal to the objective when optimal)."""
    variables: int


def solve(inst: Instance, time_limit: float = 60.0, tables: Tables | None = None) -> Exact | None:
    """The optimum of `inst` (or the best plan found within `time_limit` seconds); None if none found."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # start-up: scipy for the exact search alone
    from scipy.sparse import coo_matrix

    t = tables or Tables(inst)
    cols: list[tuple[int, int, int]] = []
    cost: list[int] = []
    for vi, opts in enumerate(t.options):
        for bi in opts:
            first = t.earliest[vi, bi]
            for s in range(t.arrival[vi], t.H + 1):
                if first[s] == s:
                    cols.append((vi, bi, s))
                    cost.append(t.weight[vi] * (s - t.arrival[vi]) + t.penalty[vi, bi])
    n = len(t.vids)
    if any(not any(c[0] == vi for c in cols) for vi in range(n)):
        return None
    span = t.H + t.gap + 1
    rows, idx = [], []
    for j, (vi, bi, s) in enumerate(cols):
        rows.append(vi)
        idx.append(j)
        stop = t.end[vi, bi][s] + t.gap
        rows.extend(n + bi * span + h for h in range(s, stop))
        idx.extend([j] * (stop - s))
    used = np.unique(np.array(rows))
    remap = np.full(n + len(t.bids) * span, -1)
    remap[used] = np.arange(len(used))
    a = coo_matrix((np.ones(len(rows)), (remap[rows], idx)), shape=(len(used), len(cols))).tocsr()
    lo = np.where(used < n, 1.0, -np.inf)
    res = milp(
        np.array(cost, float),
        constraints=LinearConstraint(a, lo, np.ones(len(used))),
        integrality=np.ones(len(cols)),
        bounds=Bounds(0, 1),
        options={"time_limit": time_limit, "mip_rel_gap": 0.0, "disp": False},
    )
    if res.x is None:
        return None
    chosen = [cols[j] for j in np.flatnonzero(res.x > 0.5)]
    plan = sorted(((t.vids[vi], t.bids[bi], s) for vi, bi, s in chosen), key=lambda e: (e[1], e[2], e[0]))
    objective = int(round(sum(cost[j] for j in np.flatnonzero(res.x > 0.5))))
    bound = float(getattr(res, "mip_dual_bound", None) or objective)
    # Costs are whole numbers, so a bound within half a unit of the plan proves it optimal.
    optimal = res.status == 0 or bound > objective - 0.5
    return Exact(plan, objective, optimal, bound, len(cols))
