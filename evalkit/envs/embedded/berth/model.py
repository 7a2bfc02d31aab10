"""The port: berths, vessels, vessels already alongside, the disruption, and how long a stay lasts.

Time is in whole hours from the moment of re-planning (hour 0, "now"). A vessel's stay at a berth is the
half-open interval [start, end). Handling hours are given per berth (berths differ in cranes); during a
crane breakdown a berth works at half speed, so each hour inside the window does half an hour of work and
a stay that crosses it ends later. A vessel's end is the first whole hour by which its work is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPES = ("container", "bulk", "tanker", "general")


@dataclass(frozen=True)
class Berth:
    id: str
    length: int
    """Quay length in metres: a vessel longer than this does not fit."""
    depth: float
    """Water depth in metres: a vessel whose draft is deeper does not fit."""
    types: tuple[str, ...]
    """Vessel types the berth's equipment can handle."""


@dataclass(frozen=True)
class Vessel:
    id: str
    type: str
    length: int
    draft: float
    arrival: int
    """Hour the vessel can be alongside at the earliest (its ETA, after any delay)."""
    weight: int
    """Priority weight: an hour of this vessel's waiting costs `weight`."""
    hours: dict[str, int] = field(default_factory=dict)
    """Handling hours at each berth it fits; a berth it does not fit is absent."""


@dataclass(frozen=True)
class Berthed:
    """A vessel already alongside and being worked: it stays where it is until its work is done."""

    id: str
    type: str
    length: int
    berth: str
    since: int
    """Hour it started (≤ 0)."""
    remaining: int
    """Handling hours of work left at hour 0."""


@dataclass(frozen=True)
class Closure:
    berth: str
    start: int
    end: int
    reason: str = "closed"


@dataclass(frozen=True)
class Breakdown:
    """A crane breakdown: the berth works at half speed during [start, end)."""

    berth: str
    start: int
    end: int


@dataclass(frozen=True)
class Delay:
    vessel: str
    was: int
    now: int


@dataclass(frozen=True)
class Instance:
    """One re-planning task: the port after the disruption, and the plan the disruption broke."""

    task_id: str
    horizon: int
    """Every vessel must have left by this hour."""
    gap: int
    """Clearance hours between one vessel leaving a berth and the next one starting there."""
    move_cost: int
    """Cost of moving an unaffected vessel to another berth than the current plan's."""
    berths: tuple[Berth, ...]
    vessels: tuple[Vessel, ...]
    berthed: tuple[Berthed, ...]
    closures: tuple[Closure, ...] = ()
    breakdowns: tuple[Breakdown, ...] = ()
    delays: tuple[Delay, ...] = ()
    current: dict[str, tuple[str, int]] = field(default_factory=dict)
    """The plan before the disruption: vessel → (berth, start)."""
    affected: frozenset[str] = frozenset()
    """Vessels the disruption made infeasible in the current plan: moving them costs nothing."""

    def berth(self, berth_id: str) -> Berth | None:
        return next((b for b in self.berths if b.id == berth_id), None)

    def vessel(self, vessel_id: str) -> Vessel | None:
        return next((v for v in self.vessels if v.id == vessel_id), None)

    @property
    def total_weight(self) -> int:
        return sum(v.weight for v in self.vessels)


def fits(v: Vessel, b: Berth) -> bool:
    return v.length <= b.length and v.draft <= b.depth and v.type in b.types


def misfit(v: Vessel, b: Berth) -> str | None:
    """Why `v` cannot lie at `b`, in words, or None when it fits."""
    why = []
    if v.length > b.length:
        why.append(f"{v.length} m long for a {b.length} m quay")
    if v.draft > b.depth:
        why.append(f"draft {v.draft:g} m in {b.depth:g} m of water")
    if v.type not in b.types:
        why.append(f"{b.id} does not handle {v.type} vessels")
    return "; ".join(why) or None


def work_units(inst: Instance, berth: str, hour: int) -> int:
    """Half-hours of work the berth does in `hour`: 2 normally, 1 during a crane breakdown."""
    for d in inst.breakdowns:
        if d.berth == berth and d.start <= hour < d.end:
            return 1
    return 2


def end_hour(inst: Instance, berth: str, start: int, hours: int) -> int:
    """The hour a stay at `berth` that starts at `start` with `hours` of handling work ends."""
    need, t = 2 * hours, start
    while need > 0:
        need -= work_units(inst, berth, t)
        t += 1
    return t


def berthed_end(inst: Instance, b: Berthed) -> int:
    return end_hour(inst, b.berth, 0, b.remaining)
