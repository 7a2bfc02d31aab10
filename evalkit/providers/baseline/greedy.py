"""`baseline:greedy` — first come, first served berth planning, read from the situation the model reads.

It parses the situation tables of the opening message (berths, vessels alongside, vessels to plan with their
handling hours, closures, crane breakdowns), takes the vessels in order of arrival and puts each at the
fitting berth where it can start soonest (its current berth on a tie, then the first in berth order), as
early as the rules allow there. It checks that plan once with `check_plan`, then submits it. It knows the
rules only as the instructions state them: it imports nothing from the environment.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from . import Plan, ScriptedAgent


@dataclass
class Ship:
    id: str
    arrival: int
    weight: int
    hours: dict[str, int]
    current: str | None


@dataclass
class Port:
    horizon: int
    gap: int
    berths: list[str]
    ships: list[Ship]
    free_from: dict[str, int] = field(default_factory=dict)
    """Per berth, the first hour a planned vessel may start after the vessel alongside leaves."""
    closures: list[tuple[str, int, int]] = field(default_factory=list)
    slow: list[tuple[str, int, int]] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _rows(text: str, first: str, having: str) -> list[dict[str, str]]:
    """The rows, as dicts by header, of the Markdown table whose header starts with `first` and has a
    column `having`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = _cells(line)
        if line.lstrip().startswith("|") and cells[0] == first and having in cells:
            head, out = cells, []
            for row in lines[i + 2 :]:
                if not row.lstrip().startswith("|"):
                    break
                out.append(dict(zip(head, _cells(row), strict=False)))
            return out
    return []


def parse_port(text: str) -> Port | None:
    """The port described in `text`, or None when it holds no berth situation."""
    horizon = re.search(r"Horizon: hour (\d+)", text)
    gap = re.search(r"Clearance between vessels at a berth: (\d+) h", text)
    berths = [r["berth"] for r in _rows(text, "berth", "handles")]
    if not (horizon and gap and berths):
        return None
    ships = []
    for r in _rows(text, "vessel", "arrival"):
        hours = {b: int(r[b]) for b in berths if r.get(b, "").isdigit()}
        current = (r.get("current plan") or "").split(" at ")[0] or None
        ships.append(Ship(r["vessel"], int(r["arrival"]), int(r["weight"]), hours, current))
    port = Port(int(horizon.group(1)), int(gap.group(1)), berths, ships)
    for r in _rows(text, "vessel", "leaves at hour"):
        port.free_from[r["berth"]] = int(r["leaves at hour"]) + port.gap
    for m in re.finditer(r"- (\S+) is closed for .*? from hour (-?\d+) to hour (-?\d+)", text):
        port.closures.append((m.group(1), int(m.group(2)), int(m.group(3))))
    for m in re.finditer(r"Crane breakdown at (\S+) from hour (-?\d+) to hour (-?\d+)", text):
        port.slow.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return port


def _finish(port: Port, berth: str, start: int, hours: int) -> int:
    """When a stay that starts at `start` is done: hours inside a breakdown count half."""
    slow = [(a, z) for b, a, z in port.slow if b == berth]
    done, t = 0.0, start
    while done < hours:
        done += 0.5 if any(a <= t < z for a, z in slow) else 1.0
        t += 1
    return t


def _first_start(port: Port, berth: str, ship: Ship, ready: int) -> tuple[int, int] | None:
    """The earliest (start, end) at `berth` from `ready` that misses its closures and ends by the horizon."""
    s = max(ready, ship.arrival, port.free_from.get(berth, 0))
    while True:
        end = _finish(port, berth, s, ship.hours[berth])
        if end > port.horizon:
            return None
        hit = [z for b, a, z in port.closures if b == berth and s < z and a < end]
        if not hit:
            return s, end
        s = max(hit)


def greedy_plan(port: Port) -> list[dict]:
    """Earliest arrival first, each vessel where it can start soonest."""
    ready = {b: 0 for b in port.berths}
    plan = []
    for ship in sorted(port.ships, key=lambda s: (s.arrival, s.id)):
        options = []
        for i, b in enumerate(port.berths):
            if b in ship.hours:
                slot = _first_start(port, b, ship, ready[b])
                if slot is not None:
                    options.append((slot[0], b != ship.current, i, b, slot[1]))
        if not options:  # nowhere before the horizon: leave it at its first berth and let the check say so
            b = next(iter(ship.hours), port.berths[0])
            plan.append({"vessel": ship.id, "berth": b, "start": max(ship.arrival, ready.get(b, 0))})
            continue
        start, _, _, b, end = min(options)
        ready[b] = end + port.gap
        plan.append({"vessel": ship.id, "berth": b, "start": start})
    return plan


class GreedyAgent(ScriptedAgent):
    name = "greedy"

    def policy(self) -> Plan:
        port = next((p for p in map(parse_port, self.messages) if p is not None), None)
        tools = self.tool_names
        if port is None or not {"check_plan", "submit_plan"} <= tools:
            yield "greedy plans berths only: this is not a berth situation", []
            return
        plan = greedy_plan(port)
        pairs = yield f"first come, first served: {len(plan)} vessels", [("check_plan", {"plan": plan})]
        verdict = "feasible" if _feasible(pairs) else "the check found violations"
        yield f"submitting it ({verdict})", [("submit_plan", {"plan": plan})]


def _feasible(pairs: list | None) -> bool:
    for _call, outcome in pairs or []:
        try:
            return bool(json.loads(outcome.text).get("feasible"))
        except (ValueError, AttributeError):
            return False
    return False
