"""A pure MCP environment with no submit tool, shaped like OpenEnv's own echo_env: a user's env may have
no way to end an episode, and the loop must still end sensibly."""

from __future__ import annotations

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State

from tests.support.foreign_envs import Served


class EchoEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("echo")

        @mcp.tool
        def echo_message(message: str) -> str:
            """Echo the message back."""
            return message

        super().__init__(mcp)
        self._state = State(episode_id="echo", step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        meta = {"task_id": kwargs.get("task_id") or "echo"}
        if kwargs.get("tools_only"):  # an env whose episodes only its tools end: a reply in text is not one
            meta["answer_ends_episode"] = False
        return Observation(done=False, reward=None, metadata=meta)

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(done=False, reward=None, metadata={"error": "unsupported action"})

    @property
    def state(self):
        return self._state


def build_app():
    return create_app(EchoEnv, CallToolAction, CallToolObservation, env_name="echo", max_concurrent_envs=8)


class EchoServer(Served):
    """Served on a free loopback port, as a user's own server would be at --base-url."""

    def __init__(self):
        super().__init__(build_app())
