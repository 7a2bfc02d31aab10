"""Writes tool-planning rollout records exactly as seed 003's berth loop does.

The seed's `run_episode` is re-enacted statement by statement with a scripted agent (its turns) and a scripted
env session (its answers); the records go to a `.jsonl` file or a folder of `episode_NNN.json` files, the two
ways such records are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOTES_CHARS = 8000
OPENING = (
    "{situation}\n\nMake the new berth plan. Use check_plan to test drafts, then call submit_plan with your "
    "final plan."
)


class APIStatusError(Exception):
    """Named as the SDK's: the seed records an exception as "<class name>: <message>"."""


class ConnectionClosedError(Exception):
    """Named as the WebSocket library's."""


@dataclass
class C:
    """A tool call as the agent returns it; `raw` arguments as sent."""

    name: str
    plan: Any = None
    raw: str | None = None
    id: str = ""

    @property
    def arguments(self) -> dict:
        if self.raw is not None:
            try:
                v = json.loads(self.raw)
            except ValueError:
                return {}
            return v if isinstance(v, dict) else {}
        return {"plan": self.plan}

    @property
    def error(self) -> str | None:
        if self.raw is None:
            return None
        try:
            v = json.loads(self.raw)
        except ValueError as e:
            return f"arguments are not valid JSON: {e.msg}"
        return None if isinstance(v, dict) else "arguments must be a JSON object"


@dataclass
class T:
    """One turn of the scripted agent."""

    calls: list[C] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    stop: str = "tool_use"
    usage: dict = field(default_factory=lambda: {"input": 1200, "output": 300})


@dataclass
class Episode:
    turns: list  # T, or an exception the agent's step raises
    reward: float = 0.8
    conflicts: int = 1
    reset_fails: bool = False
    ends_on_check: bool = False
    """The server ends the episode on a check_plan (its own limit on drafts)."""
    wall_clock_at: int | None = None
    switches: list[str] = field(default_factory=list)
    max_turns: int = 6


class _Env:
    def __init__(self, e: Episode):
        self.e = e

    def call(self, name: str, arguments: dict) -> tuple[str, bool, float | None, dict]:
        if name == "check_plan":
            if self.e.ends_on_check:
                return (
                    json.dumps({"conflicts": 0}),
                    True,
                    0.25,
                    {"end_reason": "draft_limit", "grade": {"total": 0.25}},
                )
            return json.dumps({"feasible": False, "conflicts": self.e.conflicts}), False, None, {}
        if name == "submit_plan":
            grade = {"total": self.e.reward, "feasible": True, "delay": 3}
            return (
                json.dumps({"reward": self.e.reward}),
                True,
                self.e.reward,
                {"grade": grade, "rubric": {"delay": 0.5}},
            )
        return json.dumps({"error": f"unknown tool {name}"}), False, None, {}


def plan_value(plan: Any) -> Any:
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except json.JSONDecodeError:
            return plan
    if isinstance(plan, dict) and isinstance(plan.get("plan"), list):
        plan = plan["plan"]
    return plan


def run_episode(spec: str, task_id: str, e: Episode, n: int) -> dict:
    """The seed's `run_episode` with the agent and the env session scripted by `e`."""
    env = _Env(e)
    episode_id = f"{task_id[-3:]}{n:09d}"
    record: dict[str, Any] = {
        "model": spec,
        "task_id": task_id,
        "episode_id": episode_id,
        "started": f"2026-11-0{1 + n % 9}T10:00:00Z",
        "messages": [],
        "steps": [],
        "final": {"submitted": False, "plan": None, "grade": None},
        "reward": 0.0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "turns": 0,
        "end_reason": None,
        "errors": [],
    }
    max_turns = e.max_turns
    try:
        if e.reset_fails:
            raise ConnectionClosedError("received 1011 (internal error)")
        system = f"Berth rules for {task_id}."
        opening = OPENING.format(situation=f"Vessel V2 is late at {task_id}.")
        record["messages"] += [{"role": "system", "content": system}, {"role": "user", "content": opening}]
        empty = 0
        for turn in range(max_turns):
            if e.wall_clock_at is not None and turn >= e.wall_clock_at:
                record["end_reason"] = "wall_clock"
                break
            last = turn == max_turns - 1
            if last:
                note = "This is your last turn: call submit_plan now with your best plan."
                record["messages"].append({"role": "user", "content": note})
            t = e.turns[turn] if turn < len(e.turns) else T()
            if isinstance(t, Exception):
                raise t
            for k, c in enumerate(t.calls):
                c.id = c.id or f"toolu_{n}_{turn}_{k}"
            record["turns"] += 1
            record["usage"]["input_tokens"] += t.usage.get("input", 0)
            record["usage"]["output_tokens"] += t.usage.get("output", 0)
            record["messages"].append(
                {
                    "role": "assistant",
                    "content": t.text,
                    "reasoning": t.reasoning,
                    "stop": t.stop,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.raw or json.dumps(c.arguments)}
                        for c in t.calls
                    ],
                }
            )
            if not t.calls:
                empty += 1
                if empty >= 2 or last:
                    record["end_reason"] = "no_tool_call"
                    break
                if t.stop.startswith("length") and t.reasoning:
                    nudge = (
                        "Your last turn ran out of output tokens before calling a tool. "
                        "Your notes from it are above."
                    )
                else:
                    nudge = "No tool was called. Plans only count through the tools."
                record["messages"].append({"role": "user", "content": nudge})
                continue
            empty = 0
            done = False
            for c in t.calls:
                if done:
                    out = json.dumps({"error": "the episode is over"})
                elif c.error:
                    out = json.dumps({"error": c.error})
                else:
                    out, done, reward, meta = env.call(c.name, c.arguments)
                    if c.name in ("check_plan", "submit_plan"):
                        try:
                            res = json.loads(out)
                        except json.JSONDecodeError:
                            res = {"text": out}
                        record["steps"].append(
                            {
                                "turn": turn + 1,
                                "tool": c.name,
                                "plan": plan_value(c.arguments.get("plan")),
                                "result": res,
                            }
                        )
                    if done:
                        record["reward"] = float(reward or 0.0)
                        if c.name == "submit_plan":
                            record["final"] = {
                                "submitted": True,
                                "plan": plan_value(c.arguments.get("plan")),
                                "grade": meta.get("grade"),
                                "rubric": meta.get("rubric"),
                            }
                            record["end_reason"] = "submitted"
                        else:
                            record["end_reason"] = meta.get("end_reason", "server_ended")
                record["messages"].append(
                    {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": out}
                )
            if done:
                break
        else:
            record["end_reason"] = record["end_reason"] or "turn_limit"
        record["end_reason"] = record["end_reason"] or "turn_limit"
    except Exception as exc:
        record["errors"].append(f"{type(exc).__name__}: {str(exc)[:800]}")
        record["end_reason"] = record["end_reason"] or "error"
    if e.switches:
        record["provider_switches"] = e.switches
    record["seconds"] = round(4.0 + 1.5 * record["turns"], 1)
    return record


PLAN = [["V1", 1, 0], ["V2", 2, 5]]
A, B = "anthropic:claude-sonnet-5@low", "hf:Qwen/Qwen3.8-27B:novita|together"


def episodes() -> list[tuple[str, str, Episode]]:
    """Every way the seed's loop ends, over two models and three tasks (one task run twice by a model)."""
    check, submit = C("check_plan", PLAN), C("submit_plan", PLAN)
    return [
        (A, "berth-000", Episode([T([check], "Checking."), T([submit], "Submitting.")], reward=0.9)),
        (
            A,
            "berth-001",
            Episode([T([C("check_plan", json.dumps(PLAN))]), T(), T()]),
        ),  # two turns without a call
        (A, "berth-002", Episode([T([check])] * 3, max_turns=3)),  # calls every turn, never submits
        (A, "berth-000", Episode([T([check]), T([check, submit, check], "Both.")], reward=0.7)),  # a repeat
        (
            B,
            "berth-000",
            Episode(
                [T([check]), APIStatusError("Error code: 502 - bad gateway")],
                switches=["Qwen/Qwen3.8-27B:novita -> Qwen/Qwen3.8-27B:together (400: too long)"],
            ),
        ),
        (B, "berth-001", Episode([], reset_fails=True)),
        (
            B,
            "berth-002",
            Episode(
                [
                    T([C("check_plan", raw='{"plan": [["V1", 1')]),
                    T([], "thinking...", reasoning="long notes " * 50, stop="length"),
                    T([submit]),
                ],
                reward=0.55,
            ),
        ),
        (B, "berth-003", Episode([T([check])] * 4, wall_clock_at=2)),
        (B, "berth-004", Episode([T([check])], ends_on_check=True)),
    ]


def write_jsonl(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for n, (spec, task, e) in enumerate(episodes()):
            f.write(json.dumps(run_episode(spec, task, e, n)) + "\n")
    return path


def write_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n, (spec, task, e) in enumerate(episodes()):
        (folder / f"episode_{n:03d}.json").write_text(json.dumps(run_episode(spec, task, e, n), indent=1))
    return folder
