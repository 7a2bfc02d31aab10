"""The webapp server: OpenEnv's app (WebSocket, MCP, /health) plus a read-only route for the page on screen,
so a loop or a viewer gets a frame per turn without spending the agent's actions."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Response
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

from .env import WebAppEnv, registry


def build_app(max_concurrent_envs: int = 16) -> FastAPI:
    """The FastAPI app serving the webapp env; run it with uvicorn or `evalkit serve webapp`."""
    app = create_app(
        WebAppEnv,
        CallToolAction,
        CallToolObservation,
        env_name="webapp",
        max_concurrent_envs=max_concurrent_envs,
    )

    @app.get("/api/episodes/{episode_id}/render.png")
    async def episode_render(episode_id: str) -> Response:
        ep = registry.get(episode_id)
        if ep is None or ep.screen.session.closed:
            raise HTTPException(status_code=404, detail=f"unknown episode {episode_id!r}")
        return Response(await ep.screen.session.screenshot(), media_type="image/png")

    @app.get("/api/episodes/{episode_id}/reference.jpg")
    async def episode_reference(episode_id: str) -> Response:
        """No task here has a target picture: an empty answer (not a 404, which would tell a client that the
        server has no picture routes at all)."""
        return Response(status_code=204)

    return app
