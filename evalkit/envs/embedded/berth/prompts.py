"""What the model reads: the rules (the system prompt) and the situation (the opening message).

The situation is a set of Markdown tables a model can work from; `baseline:greedy` reads the same tables,
so a change of layout here is a change of what that baseline parses (its tests cover both).
"""

from __future__ import annotations

from .model import Instance, berthed_end

PROMPT_VERSION = "berth-v1"

INSTRUCTIONS = """\
You are the berth planner of a port. A disruption has broken the current berth plan; make a new one.

Rules: a plan must satisfy every one of them.
1. Plan every vessel listed under "Vessels to plan" exactly once. Vessels already alongside stay \
where they are until they leave: leave them out of the plan (or list them at their berth with their \
start).
2. A vessel fits a berth only if the berth handles its type, the vessel is no longer than the quay \
and its draft is no deeper than the water. The vessel table gives handling hours only at the berths \
a vessel fits ("—" elsewhere).
3. A vessel starts at or after its arrival hour. Hours are whole numbers; hour 0 is now.
4. A stay occupies its berth from its start to its end, [start, end): the vessel's handling hours at \
that berth. During a crane breakdown the berth works at half speed: each hour inside the breakdown \
window does half an hour of work, so a stay that crosses the window lasts longer. The end is the \
first whole hour by which the work is done.
5. At each berth the next vessel may start no earlier than the clearance after the previous vessel \
(or a vessel alongside) leaves: start >= previous end + clearance.
6. No vessel may be at a berth during a closure of that berth.
7. Every vessel must have left by the horizon: end <= horizon.

Objective (lower is better): the sum over the vessels you plan of priority weight x waiting hours \
(start - arrival), plus the move cost for each vessel the disruption did not affect that you put at \
another berth than the current plan does. Vessels the disruption affected may move freely.

A plan is a JSON list with one object per vessel, for example
[{"vessel": "V01", "berth": "B2", "start": 14}, {"vessel": "V02", "berth": "B1", "start": 3}]

Tools
- check_plan(plan): checks a draft and answers in JSON: whether it is feasible, every violation (its \
kind, the vessels, berth and hours involved, and a message), the objective, and each vessel's start, \
end and waiting. Check as many drafts as you like.
- submit_plan(plan): submits your final plan and ends the episode. Whenever you are asked to submit, \
this is the tool to call.

Scoring: a submitted plan that breaks any rule scores 0. A feasible plan scores 1 / (1 + gap), where \
gap = (your objective - best known objective) / max(best known objective, total priority weight of \
the vessels to plan); a plan as good as the best known one scores 1. An episode that ends without \
submit_plan scores 0."""

OPENING = (
    "Make the new berth plan. Use check_plan to test drafts, then call submit_plan with your final plan."
)


def _table(head: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def situation(inst: Instance) -> str:
    """The port, the vessels, the current plan and the disruption, as tables and short lines."""
    berth_ids = [b.id for b in inst.berths]
    parts = [
        f"Port situation at hour 0 ({inst.task_id}). Horizon: hour {inst.horizon}. Clearance between vessels "
        f"at a berth: {inst.gap} h. Move cost: {inst.move_cost} per unaffected vessel that changes berth.",
        "Berths\n"
        + _table(
            ["berth", "quay m", "depth m", "handles"],
            [[b.id, b.length, f"{b.depth:g}", ", ".join(b.types)] for b in inst.berths],
        ),
    ]
    if inst.berthed:
        rows = [[b.id, b.berth, b.since, berthed_end(inst, b)] for b in inst.berthed]
        parts.append(
            "Already alongside (they stay until they leave)\n"
            + _table(["vessel", "berth", "since hour", "leaves at hour"], rows)
        )
    rows = []
    for v in inst.vessels:
        berth, start = inst.current[v.id]
        hours = [v.hours.get(b, "—") for b in berth_ids]
        rows.append(
            [v.id, v.type, v.length, f"{v.draft:g}", v.arrival, v.weight, *hours, f"{berth} at {start}"]
        )
    parts.append(
        "Vessels to plan (handling hours at each berth; — where the vessel does not fit)\n"
        + _table(
            ["vessel", "type", "length m", "draft m", "arrival", "weight", *berth_ids, "current plan"], rows
        )
    )
    lines = [
        f"- {c.berth} is closed for {c.reason} from hour {c.start} to hour {c.end}." for c in inst.closures
    ]
    lines += [f"- {d.vessel} is delayed: it now arrives at hour {d.now} (was {d.was})." for d in inst.delays]
    lines += [
        f"- Crane breakdown at {d.berth} from hour {d.start} to hour {d.end}: {d.berth} works at half speed."
        for d in inst.breakdowns
    ]
    parts.append("Disruption\n" + "\n".join(lines))
    parts.append(
        f"The current plan no longer works for: {', '.join(sorted(inst.affected))} (moving these to another "
        "berth costs nothing)."
    )
    return "\n\n".join(parts)


def opening(inst: Instance) -> str:
    return f"{situation(inst)}\n\n{OPENING}"
