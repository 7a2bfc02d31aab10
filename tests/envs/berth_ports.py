"""Tiny hand-made ports for the berth grader and search tests: every rule has something to bite on."""

from __future__ import annotations

from evalkit.envs.embedded.berth.model import Berth, Berthed, Breakdown, Closure, Instance, Vessel

B = (
    Berth("B1", 250, 12.0, ("container", "general")),
    Berth("B2", 300, 14.0, ("container", "bulk")),
)


def vessel(vid, vtype, arrival, weight, hours, length=200, draft=10.0) -> Vessel:
    return Vessel(vid, vtype, length, draft, arrival, weight, dict(hours))


def tiny(variant: int = 0) -> Instance:
    """Two berths; three or four vessels; a vessel alongside B2 (slowed by a breakdown at B2, so it leaves
    later than its remaining hours say); a closure of B1; a move cost; V02 the one the disruption hit."""
    vessels = (
        vessel("V01", "container", 0, 2, {"B1": 6, "B2": 5}),
        vessel("V02", "container", 2, 1, {"B1": 4, "B2": 6}),
        vessel("V03", "bulk", 1, 3, {"B2": 7}),
        vessel("V04", "general", 3, 1, {"B1": 5}, length=240),
    )[: 3 + variant % 2]
    current = {"V01": ("B1", 0), "V02": ("B1", 8), "V03": ("B2", 1), "V04": ("B1", 14)}
    return Instance(
        f"tiny-{variant}",
        horizon=36 - 3 * variant,
        gap=1 + variant % 2,
        move_cost=3,
        berths=B,
        vessels=vessels,
        berthed=(Berthed("V09", "container", 200, "B2", -3, 3 + variant),),
        closures=(Closure("B1", 5 + variant, 9 + variant),),
        breakdowns=(Breakdown("B2", 0, 6 + 2 * variant),),
        current={k: v for k, v in current.items() if k in {x.id for x in vessels}},
        affected=frozenset({"V02"}),
    )


def as_plan(entries) -> list[dict]:
    return [{"vessel": v, "berth": b, "start": s} for v, b, s in entries]
