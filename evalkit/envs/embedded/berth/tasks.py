"""Deterministic berth tasks: a port, its current plan and a disruption per (split, index), and tiers.

Seeds come from sha256 of the split and index (never Python's salted `hash()`), so a task id names the same
instance on every machine. A task is made in three steps: a port and its vessels; the plan made before the
disruption (cheapest insertion plus local search, as a planner would have had it); then one to three
disruptions chosen so that they break that plan. Tiers come from a difficulty score that weighs the number
of vessels to plan and the conflict density (berth-hours demanded per berth-hour available while they
arrive).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from functools import lru_cache

from evalkit.envs.embedded import TaskIds

from .grade import check
from .model import (
    TYPES,
    Berth,
    Berthed,
    Breakdown,
    Closure,
    Delay,
    Instance,
    Vessel,
    berthed_end,
    end_hour,
    fits,
)
from .search import Tables, construct, descend

SPLITS = ("train", "test")
TIERS = ("easy", "medium", "hard")
# Chosen from the test split's score tertiles (indices 0..149) so its tiers come out roughly balanced.
TIER_THRESHOLDS = (0.36, 0.62)
IDS = TaskIds("berth")
task_id_for, parse_task_id, seed_for = IDS.id_for, IDS.parse, IDS.seed
PROFILES = (
    ("container",), ("container",), ("container", "general"), ("bulk", "general"), ("bulk",),
    ("tanker",), ("general", "container", "bulk"), ("tanker", "bulk"),
)  # fmt: skip
TYPE_WEIGHTS = {"container": 5, "bulk": 2, "tanker": 1.5, "general": 2}
KINDS = ("breakdown", "delay", "closure")
REASONS = ("fender repair", "dredging", "quay inspection after a storm", "a spill clean-up", "bollard repair")


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    index: int
    instance: Instance
    difficulty_score: float
    tier: str
    conflict_density: float

    @property
    def n_vessels(self) -> int:
        return len(self.instance.vessels)

    def describe(self) -> dict:
        """What identifies and characterises the task: the evalset's row and the reset metadata start so."""
        return {
            "task_id": self.task_id,
            "split": self.split,
            "index": self.index,
            "tier": self.tier,
            "difficulty_score": self.difficulty_score,
            "conflict_density": self.conflict_density,
            "n_vessels": self.n_vessels,
            "n_berths": len(self.instance.berths),
        }


def _berths(rng: random.Random, k: int) -> tuple[list[Berth], list[float]]:
    berths, speeds = [], []
    for i in range(k):
        types = rng.choice(PROFILES)
        depth = rng.choice((10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5))
        berths.append(Berth(f"B{i + 1}", rng.randrange(200, 401, 10), depth, _ordered(types)))
        speeds.append(rng.choice((0.8, 0.9, 1.0, 1.0, 1.1, 1.25)))
    for t in TYPES:  # every type needs a home somewhere
        if not any(t in b.types for b in berths):
            i = rng.randrange(k)
            berths[i] = replace(berths[i], types=_ordered(berths[i].types + (t,)))
    return berths, speeds


def _ordered(types: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t for t in TYPES if t in types)


def _vessel(rng: random.Random, vid: str, berths: list[Berth], speeds: list[float]) -> Vessel:
    types = [t for t in TYPES if any(t in b.types for b in berths)]
    vtype = rng.choices(types, [TYPE_WEIGHTS[t] for t in types])[0]
    home = rng.choice([b for b in berths if vtype in b.types])
    length = rng.randrange(90, home.length + 1, 5)
    draft = round(min(home.depth, 5.0 + length / 40 + rng.uniform(-1.0, 1.5)), 1)
    work = 4 + length / 25 + rng.randint(0, 8)
    v = Vessel(vid, vtype, length, draft, 0, rng.choices((1, 2, 3), (0.55, 0.3, 0.15))[0])
    hours = {b.id: max(3, round(work / speeds[i])) for i, b in enumerate(berths) if fits(v, b)}
    return replace(v, hours=hours)


def _alongside(rng: random.Random, berths: list[Berth], first: int, k: int) -> list[Berthed]:
    out = []
    for j, b in enumerate(rng.sample(berths, k)):
        vtype = rng.choice(b.types)
        length = rng.randrange(90, b.length + 1, 5)
        out.append(Berthed(f"V{first + j:02d}", vtype, length, b.id, -rng.randint(1, 12), rng.randint(2, 14)))
    return out


def _disrupt(rng: random.Random, inst: Instance, kind: str) -> Instance:
    """One disruption of `kind` that hits the current plan."""
    cur = inst.current
    planned = sorted(cur)
    if kind == "delay":
        vid = rng.choice([v for v in planned if v not in {d.vessel for d in inst.delays}] or planned)
        v = inst.vessel(vid)
        now = max(v.arrival, cur[vid][1]) + rng.randint(3, 18)
        vessels = tuple(replace(x, arrival=now) if x.id == vid else x for x in inst.vessels)
        return replace(inst, vessels=vessels, delays=inst.delays + (Delay(vid, v.arrival, now),))
    busy = [b.id for b in inst.berths if any(cur[v][0] == b.id for v in planned)]
    bid = rng.choice(busy)
    victim = rng.choice([v for v in planned if cur[v][0] == bid])
    start = cur[victim][1]
    if kind == "breakdown":
        a = max(0, start - rng.randint(0, 6))
        return replace(inst, breakdowns=inst.breakdowns + (Breakdown(bid, a, a + rng.randint(12, 36)),))
    clear = max([berthed_end(inst, b) for b in inst.berthed if b.berth == bid] or [0])
    a = max(clear, start - rng.randint(0, 4))
    closure = Closure(bid, a, a + rng.randint(8, 30), rng.choice(REASONS))
    return replace(inst, closures=inst.closures + (closure,))


def _plan(inst: Instance, rng: random.Random) -> dict[str, tuple[str, int]]:
    """A good plan for `inst`: the best construction after local search."""
    t = Tables(inst)
    sols = [s for s in (construct(t, o) for o in ("arrival", "weighted")) if s is not None]
    best = min((descend(t, s, rng) for s in sols), key=lambda s: s.total)
    return {v: (b, s) for v, b, s in t.plan(best.seqs)}


def _affected(inst: Instance) -> frozenset[str]:
    plan = [{"vessel": v, "berth": b, "start": s} for v, (b, s) in inst.current.items()]
    planned = {v.id for v in inst.vessels}
    return frozenset(v for x in check(inst, plan).violations for v in x.vessels if v in planned)


def conflict_density(inst: Instance) -> float:
    """Berth-hours the vessels need (at their fastest berth) per berth-hour available over their arrivals."""
    need = [min(v.hours.values()) for v in inst.vessels]
    arrivals = [v.arrival for v in inst.vessels]
    window = max(arrivals) - min(arrivals) + sum(need) / len(need)
    return round(sum(need) / (len(inst.berths) * window), 4)


def difficulty(inst: Instance) -> float:
    n = len(inst.vessels)
    size = min(1.0, max(0.0, (n - 5) / 35))
    dense = min(1.0, max(0.0, (conflict_density(inst) - 0.4) / 1.0))
    return round(0.65 * size + 0.35 * dense, 4)


def tier_for(score: float) -> str:
    return TIERS[sum(score >= t for t in TIER_THRESHOLDS)]


def generate_task(split: str = "test", index: int = 0) -> Task:
    """The task at (split, index): the same port, plan and disruption on every run and machine."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"index must be a non-negative integer, got {index!r}")
    return _generate(split, index)


@lru_cache(maxsize=1024)
def _generate(split: str, index: int) -> Task:
    """Cached: making a task takes up to a second for the largest ports, and every reset needs it."""
    rng = random.Random(seed_for(split, index))
    n = rng.randint(5, 40)
    k = min(8, 3 + (n > 8) + (n > 14) + (n > 21) + (n > 30) + (rng.random() < 0.25))
    berths, speeds = _berths(rng, k)
    vessels = [_vessel(rng, f"V{i + 1:02d}", berths, speeds) for i in range(n)]
    load = rng.uniform(0.6, 1.5)
    span = max(6, round(sum(sum(v.hours.values()) / len(v.hours) for v in vessels) / (k * load)))
    vessels = [replace(v, arrival=rng.randint(0, span)) for v in vessels]
    alongside = _alongside(rng, berths, n + 1, rng.randint(1, min(3, k - 1)))
    task_id = task_id_for(split, index)
    # A horizon no plan made here comes near, until the real one is set from the plan after the disruption.
    big = span + 3 * sum(max(v.hours.values()) for v in vessels) // k + 120
    inst = Instance(task_id, big, rng.choice((1, 2)), rng.choice((4, 6, 8)), tuple(berths), tuple(vessels),
                    tuple(alongside))  # fmt: skip
    inst = replace(inst, current=_plan(inst, rng))
    n_disruptions = 1 + (rng.random() < 0.35 + n / 60) + (rng.random() < n / 60)
    # Breakdowns first: a closure then starts after the vessel alongside leaves, however long it now stays.
    for kind in sorted(rng.sample(KINDS, n_disruptions), key=KINDS.index):
        inst = _disrupt(rng, inst, kind)
    while not _affected(inst):
        inst = _disrupt(rng, inst, "delay")
    inst = replace(inst, horizon=_horizon(inst, rng))
    inst = replace(inst, affected=_affected(inst))
    score = difficulty(inst)
    return Task(task_id, split, index, inst, score, tier_for(score), conflict_density(inst))


def _horizon(inst: Instance, rng: random.Random) -> int:
    """Loose enough that a reasonable plan fits with room to spare, on a 12-hour grid."""
    latest = max(e for _, e in _ends(inst, _plan(inst, rng)))
    return 12 * math.ceil(1.3 * latest / 12)


def _ends(inst: Instance, plan: dict[str, tuple[str, int]]) -> list[tuple[str, int]]:
    return [(v.id, end_hour(inst, *plan[v.id], v.hours[plan[v.id][0]])) for v in inst.vessels]


def task_from_id(task_id: str) -> Task:
    split, index = parse_task_id(task_id)
    return generate_task(split, index)
