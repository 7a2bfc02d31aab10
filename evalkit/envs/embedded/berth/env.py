"""The berth environment as an OpenEnv MCPEnvironment: reset picks a task, `check_plan` and `submit_plan`.

OpenEnv's WebSocket server drives the env through `step_async`, so that is where steps are counted and where
an episode that ended (a submitted plan, or the step budget running out) gets `done`, `reward` and its grade.
A plan argument that is not a list (nor a JSON string of one) is a tool error that says what is expected; the
episode goes on. An episode that ends without `submit_plan` scores 0 (`unfinished_reward` in the reset
metadata tells a client so).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastmcp import FastMCP
from openenv.core.env_server.types import EnvironmentMetadata, Observation
from pydantic import Field

from evalkit import envs
from evalkit.envs.embedded.episodic import EpisodeEnv, Reset, one_of, step_limit, task_index
from evalkit.envs.embedded.episodic import tool_error as _fail

from .grade import BestKnown, PlanFormatError, check, grade, parse_plan
from .prompts import INSTRUCTIONS, PROMPT_VERSION, opening, situation
from .reference import best_known
from .tasks import Task, generate_task, task_from_id

SURFACES = envs.SURFACES["berth"]
MODES = envs.MODES["berth"]

logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)

_ENTRY = {
    "type": "object",
    "properties": {
        "vessel": {"type": "string", "description": "Vessel id, e.g. V03."},
        "berth": {"type": "string", "description": "Berth id, e.g. B2."},
        "start": {"type": "integer", "description": "Start hour (hour 0 is now)."},
    },
    "required": ["vessel", "berth", "start"],
}
PlanArg = Annotated[
    Any,
    Field(
        description='The plan: a list of {"vessel", "berth", "start"} objects, one per vessel to plan (or '
        "that list as a JSON string).",
        json_schema_extra={"anyOf": [{"type": "array", "items": _ENTRY}, {"type": "string"}]},
    ),
]


@dataclass
class Episode:
    episode_id: str
    task: Task
    best: BestKnown
    max_steps: int | None
    steps: int = 0
    grade: dict | None = None
    auto_submitted: bool = False

    @property
    def done(self) -> bool:
        return self.grade is not None


def build_server(env: BerthEnv) -> FastMCP:
    mcp = FastMCP("berth")

    episode = env.episode

    def entries(plan: Any) -> list:
        try:
            return parse_plan(plan)
        except PlanFormatError as e:
            raise _fail(str(e)) from None

    @mcp.tool
    def check_plan(plan: PlanArg) -> str:
        """Check a draft plan without submitting it. Answers in JSON: `feasible`, `objective` (lower is
        better; null while some vessel is unplanned or listed wrongly), `violations` (kind, vessels, berth,
        hours [from, to), message) and the `schedule` (start, end and waiting of each planned vessel)."""
        ep = episode()
        return json.dumps(check(ep.task.instance, entries(plan)).to_dict())

    @mcp.tool
    def submit_plan(plan: PlanArg) -> str:
        """Submit the final plan and end the episode. Answers in JSON with the `reward` (0 for a plan that
        breaks a rule), the `rubric` and the plan's check (violations and schedule)."""
        ep = episode()
        items = entries(plan)
        inst = ep.task.instance
        ep.grade = grade(inst, items, ep.best)
        return json.dumps({"reward": ep.grade["total"], "rubric": ep.grade, **check(inst, items).to_dict()})

    return mcp


class BerthEnv(EpisodeEnv):
    """One WebSocket session; each reset starts a new episode on a task."""

    NAME = "berth"

    def __init__(self) -> None:
        self.ep: Episode | None = None
        super().__init__(build_server(self))

    def begin(self, asked: Reset) -> Observation:
        """`skin`, `coordinates` and `seed` are accepted for clients that send them to every env; a task is
        fully determined by its id."""
        surface, mode = asked.surface or "tools", asked.mode or "text"
        one_of("surface", surface, SURFACES)
        one_of("mode", mode, MODES)
        max_steps = step_limit(asked.max_steps, None)
        if asked.task_id:
            task = task_from_id(asked.task_id)
        else:
            task = generate_task(asked.split, task_index(asked.index))
        self.ep = Episode(asked.episode_id or uuid.uuid4().hex, task, best_known(task), max_steps)
        inst = task.instance
        meta: dict[str, Any] = {
            **task.describe(),
            "episode_id": self.ep.episode_id,
            "instructions": INSTRUCTIONS,
            "situation": situation(inst),
            "prompt": opening(inst),
            "surface": surface,
            "mode": mode,
            "prompt_version": PROMPT_VERSION,
            "max_steps": max_steps,
            "unfinished_reward": 0.0,
        }
        meta["hidden_keys"] = sorted(meta)  # its prompt and instructions say all the model needs
        return Observation(done=False, reward=None, metadata=meta)

    async def out_of_steps(self, ep: Episode) -> None:
        why = f"the step budget ({ep.max_steps} tool calls) ran out before submit_plan"
        ep.grade = {"total": 0.0, "feasible": False, "submitted": False, "reason": why}
        ep.auto_submitted = True

    def get_metadata(self) -> EnvironmentMetadata:
        """Named as evalkit names it, so `--base-url` to a served berth and `--env berth` share keys."""
        return EnvironmentMetadata(
            name="berth", description="Re-plan berths for vessels after a disruption.", version=PROMPT_VERSION
        )
