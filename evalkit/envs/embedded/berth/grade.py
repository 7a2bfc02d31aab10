"""The grader: what a plan is, whether it is feasible, what it costs, and the reward it earns.

A plan is a list of `{"vessel", "berth", "start"}` objects, sent as a list or as a JSON string of one. It is
feasible when it has no violation:

- `bad_entry`        an entry that is not such an object, or whose start is not a whole hour
- `unknown_vessel`   a vessel id that is not in the port
- `unknown_berth`    a berth id that is not in the port
- `duplicate_vessel` a vessel listed more than once
- `missing_vessel`   a vessel to plan that is not listed (vessels already alongside may be left out)
- `berthed_moved`    a vessel already alongside listed anywhere but its berth and start
- `does_not_fit`     too long for the quay, too deep for the water, or a type the berth cannot handle
- `before_arrival`   a start before the vessel's arrival
- `after_horizon`    a stay that ends after the horizon
- `berth_closed`     a stay that overlaps a closure of its berth
- `overlap`          two stays at a berth less than the clearance apart (vessels alongside included)

The objective is the total weighted waiting time, sum of weight × (start − arrival), plus `move_cost` for
each vessel the disruption did not affect that the plan puts at another berth than the current plan did.

Reward (partial credit). An infeasible plan earns 0. A feasible plan with objective J, against the best
known objective J* of the task, earns 1 / (1 + gap) with gap = (J − J*) / max(J*, W), W being the total
priority weight (one hour of waiting for every vessel): 1.0 at the best known plan (or better), 0.5 at a
plan whose excess cost equals the best known cost, never 0 for a feasible plan.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from .model import Instance, berthed_end, end_hour, misfit

KINDS = (
    "bad_entry", "unknown_vessel", "unknown_berth", "duplicate_vessel", "missing_vessel", "berthed_moved",
    "does_not_fit", "before_arrival", "after_horizon", "berth_closed", "overlap",
)  # fmt: skip
# Without these, the plan does not say where and when every vessel goes: its objective is undefined.
STRUCTURAL = {"bad_entry", "unknown_vessel", "unknown_berth", "duplicate_vessel", "missing_vessel"}
EXAMPLE = '[{"vessel": "V01", "berth": "B2", "start": 14}, ...]'


class PlanFormatError(ValueError):
    """The plan argument is not a list (nor a JSON string of one): a tool error, not a graded plan."""


def parse_plan(plan: Any) -> list:
    """The plan argument as a list of entries; PlanFormatError saying what is expected otherwise."""
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except ValueError as e:
            raise PlanFormatError(
                f"plan is a string but not valid JSON ({e}); send a list like {EXAMPLE}"
            ) from None
        if not isinstance(plan, list):
            raise PlanFormatError(f"plan is JSON for a {type(plan).__name__}, not a list; send {EXAMPLE}")
    if not isinstance(plan, list):
        raise PlanFormatError(f"plan must be a list like {EXAMPLE} (or a JSON string of one)")
    return plan


@dataclass
class Violation:
    kind: str
    message: str
    vessels: list[str] = field(default_factory=list)
    berth: str | None = None
    hours: list[int] | None = None
    """The hours involved, as a half-open [from, to)."""


@dataclass
class Stay:
    vessel: str
    berth: str
    start: int
    end: int | None
    """None when the vessel does not fit the berth (it has no handling time there)."""
    waiting: int
    alongside: bool = False
    """A vessel that was already alongside (not planned, only kept)."""


@dataclass
class Check:
    violations: list[Violation]
    schedule: list[Stay]
    waiting: int | None
    moved: list[str]
    objective: int | None

    @property
    def feasible(self) -> bool:
        return not self.violations

    def kinds(self) -> dict[str, int]:
        return dict(Counter(v.kind for v in self.violations))

    def to_dict(self) -> dict:
        """What `check_plan` answers."""
        return {
            "feasible": self.feasible,
            "objective": self.objective,
            "weighted_waiting": self.waiting,
            "moved_unaffected": self.moved,
            "violations": [asdict(v) for v in self.violations],
            "schedule": [
                {k: v for k, v in asdict(s).items() if k != "alongside"}
                for s in self.schedule
                if not s.alongside
            ],
        }


def _whole(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return None


def _entries(inst: Instance, plan: list, out: list[Violation]) -> dict[str, tuple[str, int]]:
    """Vessel → (berth, start) of the well-formed entries that name a planned vessel and a known berth."""
    planned = {v.id for v in inst.vessels}
    alongside = {b.id: b for b in inst.berthed}
    berths = {b.id for b in inst.berths}
    seen: Counter[str] = Counter()
    chosen: dict[str, tuple[str, int]] = {}
    for i, e in enumerate(plan, 1):
        if not isinstance(e, dict):
            out.append(Violation("bad_entry", f"entry {i} is not an object like {EXAMPLE[1:-6]}"))
            continue
        vid, bid, start = e.get("vessel"), e.get("berth"), _whole(e.get("start"))
        ok = {"vessel": isinstance(vid, str), "berth": isinstance(bid, str), "start": start is not None}
        wrong = [k for k, good in ok.items() if not good]
        if wrong:
            known = [vid] if isinstance(vid, str) and vid in planned else []
            seen.update(known)  # the vessel is listed, badly: not also reported missing
            msg = f"entry {i}: {', '.join(wrong)} missing or malformed (ids are strings, start a whole hour)"
            out.append(Violation("bad_entry", msg, known))
            continue
        if vid in alongside:
            b = alongside[vid]
            if (bid, start) != (b.berth, b.since):
                msg = (
                    f"{vid} is alongside {b.berth} since hour {b.since} and cannot move: list it there "
                    f"with start {b.since}, or leave it out"
                )
                out.append(Violation("berthed_moved", msg, [vid], b.berth))
            continue
        if vid not in planned:
            msg = f"entry {i} names vessel {vid!r}, which is not one to plan ({', '.join(sorted(planned))})"
            out.append(Violation("unknown_vessel", msg))
            continue
        seen[vid] += 1
        if bid not in berths:
            msg = f"entry {i} puts {vid} at berth {bid!r}, which does not exist ({', '.join(sorted(berths))})"
            out.append(Violation("unknown_berth", msg, [vid]))
        elif seen[vid] == 1:
            chosen[vid] = (bid, start)
    for vid, n in sorted(seen.items()):
        if n > 1:
            msg = f"{vid} is listed {n} times: list each vessel once"
            out.append(Violation("duplicate_vessel", msg, [vid]))
    for v in inst.vessels:
        if not seen[v.id]:
            msg = f"{v.id} is not in the plan: every vessel that is not already alongside must be planned"
            out.append(Violation("missing_vessel", msg, [v.id]))
    return chosen


def check(inst: Instance, plan: list) -> Check:
    """Every violation of `plan` (a list of entries), its schedule and its objective."""
    out: list[Violation] = []
    chosen = _entries(inst, plan, out)
    stays = [Stay(b.id, b.berth, b.since, berthed_end(inst, b), 0, alongside=True) for b in inst.berthed]
    for v in inst.vessels:
        if v.id not in chosen:
            continue
        bid, start = chosen[v.id]
        why = misfit(v, inst.berth(bid))
        end = None if why else end_hour(inst, bid, start, v.hours[bid])
        stays.append(Stay(v.id, bid, start, end, start - v.arrival))
        if why:
            out.append(Violation("does_not_fit", f"{v.id} does not fit {bid}: {why}", [v.id], bid))
        if start < v.arrival:
            msg = f"{v.id} starts at hour {start} but arrives at hour {v.arrival}"
            out.append(Violation("before_arrival", msg, [v.id], bid, [start, v.arrival]))
        if end is None:
            continue
        if end > inst.horizon:
            msg = f"{v.id} at {bid} ends at hour {end}, after the horizon (hour {inst.horizon})"
            out.append(Violation("after_horizon", msg, [v.id], bid, [inst.horizon, end]))
        for c in inst.closures:
            lo, hi = max(start, c.start), min(end, c.end)
            if c.berth == bid and lo < hi:
                msg = f"{v.id} at {bid} (hours {start}–{end}) overlaps its closure (hours {c.start}–{c.end})"
                out.append(Violation("berth_closed", msg, [v.id], bid, [lo, hi]))
    out += _overlaps(inst, [s for s in stays if s.end is not None])
    weights = {v.id: v.weight for v in inst.vessels}
    waiting = None
    if not any(x.kind in STRUCTURAL for x in out):
        waiting = sum(weights[s.vessel] * s.waiting for s in stays if not s.alongside)
    moved = sorted(v for v, (b, _) in chosen.items() if v not in inst.affected and inst.current[v][0] != b)
    objective = None if waiting is None else waiting + inst.move_cost * len(moved)
    out.sort(key=lambda x: KINDS.index(x.kind))
    return Check(out, sorted(stays, key=lambda s: (s.berth, s.start, s.vessel)), waiting, moved, objective)


def _overlaps(inst: Instance, stays: list[Stay]) -> list[Violation]:
    """Every pair of stays at one berth closer than the clearance, vessels alongside included."""
    out = []
    by_berth: dict[str, list[Stay]] = {}
    for s in stays:
        by_berth.setdefault(s.berth, []).append(s)
    for bid, group in sorted(by_berth.items()):
        group.sort(key=lambda s: (s.start, s.vessel))
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if b.start >= a.end + inst.gap:
                    continue
                first = f"alongside until hour {a.end}" if a.alongside else f"hours {a.start}–{a.end}"
                msg = (
                    f"{a.vessel} ({first}) and {b.vessel} (hours {b.start}–{b.end}) at {bid} are less "
                    f"than the {inst.gap} h clearance apart: {b.vessel} may start there at hour "
                    f"{a.end + inst.gap} at the earliest"
                )
                out.append(Violation("overlap", msg, [a.vessel, b.vessel], bid, [b.start, a.end + inst.gap]))
    return out


@dataclass(frozen=True)
class BestKnown:
    """The best plan known for a task, and where that knowledge comes from."""

    objective: int
    plan: tuple[tuple[str, str, int], ...]
    optimal: bool
    """Proven optimal by the exact search."""
    source: str
    """`evalset` (frozen with the task set) or `search` (computed when the task was first reset)."""

    def plan_list(self) -> list[dict]:
        return [{"vessel": v, "berth": b, "start": s} for v, b, s in self.plan]


def reward(objective: int, best: int, total_weight: int) -> tuple[float, float]:
    """(reward, gap) of a feasible plan's objective against the best known one."""
    if objective <= best:
        return 1.0, 0.0
    gap = (objective - best) / max(best, total_weight, 1)
    return round(1.0 / (1.0 + gap), 6), round(gap, 6)


def grade(inst: Instance, plan: list, best: BestKnown) -> dict:
    """The rubric of a submitted plan; `total` is the reward."""
    c = check(inst, plan)
    total, gap = reward(c.objective, best.objective, inst.total_weight) if c.feasible else (0.0, None)
    return {
        "total": total,
        "feasible": c.feasible,
        "violations": len(c.violations),
        "violation_kinds": c.kinds(),
        "objective": c.objective,
        "weighted_waiting": c.waiting,
        "moved_unaffected": len(c.moved),
        "move_penalty": None if c.objective is None else inst.move_cost * len(c.moved),
        "best_known": best.objective,
        "best_known_optimal": best.optimal,
        "gap": gap,
        "beats_best_known": bool(c.feasible and c.objective < best.objective),
    }
