"""The berth server: OpenEnv's app (WebSocket, MCP, /health, /metadata) around `BerthEnv`."""

from __future__ import annotations

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

from .env import BerthEnv


def build_app(max_concurrent_envs: int = 64) -> FastAPI:
    """The FastAPI app serving the berth env; run it with uvicorn or `evalkit serve berth`."""
    return create_app(
        BerthEnv,
        CallToolAction,
        CallToolObservation,
        env_name="berth",
        max_concurrent_envs=max_concurrent_envs,
    )
