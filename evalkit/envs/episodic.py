"""What the embedded MCP envs (canvas, berth, webapp) share: one episode at a time in `self.ep`, started by
each reset; a tool call with no episode running, or after it ended, answered as an error; the observation
that ends an episode (done, the grade's total as reward, the grade in its metadata); the OpenEnv `state`.

An env's episode has `episode_id`, `task`, `steps`, `grade` (None until graded), `auto_submitted` and `done`.
"""

from __future__ import annotations

import logging
from typing import Any

from fastmcp.exceptions import ToolError as FastMCPToolError
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolObservation, ToolError, ToolErrorType
from openenv.core.env_server.types import Observation, State


def tool_error(message: str) -> FastMCPToolError:
    """A tool's error, for the agent to read (not an error of the server's: logged only at debug)."""
    return FastMCPToolError(message, log_level=logging.DEBUG)


class EpisodeEnv(MCPEnvironment):
    NAME = ""
    """The env's name, in its answer to a non-MCP action."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    ep: Any = None

    @staticmethod
    def task_id_of(ep: Any) -> str:
        return ep.task.task_id

    def episode(self) -> Any:
        """The live episode, for a tool; else the tool error the agent reads."""
        ep = self.ep
        if ep is None:
            raise tool_error("no episode: call reset first")
        if ep.done:
            raise tool_error("episode is over")
        return ep

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(
            done=False,
            reward=None,
            metadata={"error": f"{self.NAME} only takes MCP actions: list tools or call a tool"},
        )

    def refused(self, action: Any) -> Observation | None:
        """The answer to a tool call when no episode runs or it has ended (the end again, with its grade);
        None when the call may run."""
        ep = self.ep
        if ep is not None and not ep.done:
            return None
        message = "no episode: call reset first" if ep is None else "episode is over"
        obs = CallToolObservation(
            tool_name=action.tool_name,
            result=None,
            error=ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message=message),
        )
        return self.ended(obs, ep) if ep is not None else obs

    def ended(self, obs: Observation, ep: Any) -> Observation:
        """`obs` as the observation that ends `ep`."""
        obs.done = True
        obs.reward = ep.grade["total"]
        obs.metadata = {
            "grade": ep.grade,
            "task_id": self.task_id_of(ep),
            "episode_id": ep.episode_id,
            "auto_submitted": ep.auto_submitted,
            "steps": ep.steps,
        }
        return obs

    @property
    def state(self) -> State:
        ep = self.ep
        if ep is None:
            return State(episode_id=None, step_count=0)
        return State(episode_id=ep.episode_id, step_count=ep.steps, task_id=self.task_id_of(ep), done=ep.done)
