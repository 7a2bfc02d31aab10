"""A pure MCP environment with no submit tool, shaped like OpenEnv's own echo_env: a user's env may have
no way to end an episode, and the loop must still end sensibly."""

from __future__ import annotations

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State


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
        return Observation(
            done=False,
            reward=None,
            metadata={"task_id": kwargs.get("task_id") or "echo", "instructions": "Echo things."},
        )

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(done=False, reward=None, metadata={"error": "unsupported action"})

    @property
    def state(self):
        return self._state


def build_app():
    return create_app(EchoEnv, CallToolAction, CallToolObservation, env_name="echo", max_concurrent_envs=8)


class EchoServer:
    """Served on a free loopback port, as a user's own server would be at --base-url."""

    def __enter__(self):
        import threading

        import uvicorn

        from evalkit.envs.server import free_port, wait_healthy

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                build_app(), host="127.0.0.1", port=self.port, log_level="warning", ws="websockets-sansio"
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        wait_healthy(self.base_url)
        return self

    def __exit__(self, *exc):
        self._server.should_exit = True
        self._thread.join(10)
