"""Plans kept in a record (`EpisodeRecord.plans`) as rows a table can show: one row per plan, per entry of a
plan, per violation the environment reported.

The answer is read the way berth answers (`feasible`, `objective`, `violations`, `schedule`, and on submit
`reward`); any other environment's plans still give their entries, with whatever of those the answer has.
"""

from __future__ import annotations

from typing import Any

from evalkit.types import EpisodeRecord, PlanRecord


def _answer(p: PlanRecord) -> dict:
    return p.answer if isinstance(p.answer, dict) else {}


def _violations(p: PlanRecord) -> list[dict]:
    found = _answer(p).get("violations")
    return [v for v in found if isinstance(v, dict)] if isinstance(found, list) else []


def plan_summary(rec: EpisodeRecord) -> list[dict]:
    """One row per plan sent: turn, tool, how many entries, feasible, objective, violations, reward."""
    rows = []
    for i, p in enumerate(rec.plans, 1):
        a = _answer(p)
        rows.append(
            {
                "#": i,
                "turn": p.turn,
                "tool": p.tool,
                "entries": len(p.plan) if isinstance(p.plan, list) else None,
                "feasible": a.get("feasible") if p.ok else None,
                "objective": a.get("objective"),
                "violations": len(_violations(p)) if p.ok else None,
                "reward": a.get("reward"),
                "answer": None if p.ok or isinstance(p.answer, dict) else str(p.answer),
            }
        )
    return rows


def _number(x: Any) -> Any:
    return x if isinstance(x, int | float) and not isinstance(x, bool) else None


def plan_rows(p: PlanRecord) -> list[dict]:
    """One row per entry of the plan, in the order sent: vessel, berth, start, and from the answer the end,
    the waiting and the kinds of violation that name the vessel."""
    schedule = _answer(p).get("schedule")
    by_vessel = {
        s.get("vessel"): s for s in (schedule if isinstance(schedule, list) else []) if isinstance(s, dict)
    }
    kinds: dict[Any, list[str]] = {}
    for v in _violations(p):
        for vessel in v.get("vessels") or []:
            if isinstance(vessel, str):
                kinds.setdefault(vessel, []).append(str(v.get("kind")))
    rows = []
    for entry in p.plan if isinstance(p.plan, list) else []:
        e = entry if isinstance(entry, dict) else {}
        vessel = e.get("vessel")
        known = by_vessel.get(vessel) if isinstance(vessel, str) else None
        rows.append(
            {
                "vessel": None if vessel is None else str(vessel),
                "berth": None if e.get("berth") is None else str(e.get("berth")),
                "start": _number(e.get("start")),
                "end": _number((known or {}).get("end")),
                "waiting": _number((known or {}).get("waiting")),
                "problems": ", ".join(sorted(set(kinds.get(vessel, [])))) if isinstance(vessel, str) else "",
                "entry": None if isinstance(entry, dict) else str(entry),
            }
        )
    return rows


def violation_rows(p: PlanRecord) -> list[dict]:
    """One row per violation: kind, vessels, berth, hours [from, to) and the message."""
    rows = []
    for v in _violations(p):
        hours = v.get("hours")
        span = f"{hours[0]}–{hours[1]}" if isinstance(hours, list) and len(hours) == 2 else ""
        vessels = v.get("vessels")
        rows.append(
            {
                "kind": str(v.get("kind") or ""),
                "vessels": ", ".join(map(str, vessels)) if isinstance(vessels, list) else "",
                "berth": "" if v.get("berth") is None else str(v.get("berth")),
                "hours": span,
                "message": str(v.get("message") or ""),
            }
        )
    return rows
