"""The canvas server: OpenEnv's app (WebSocket, MCP, /health) plus read-only HTTP routes for pictures.

The extra routes let a loop or a viewer fetch an episode's document, its current render and its target without
going through the agent's tool budget, and let a person try the gui surface's editor in a browser.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.responses import HTMLResponse, JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from starlette.requests import Request
from starlette.routing import Match, Route

from ..recycle import recycling
from .env import CanvasEnv
from .episode import Episode, registry
from .gui_surface import SKINS, editor_html
from .render import encode, png_of, render_doc
from .tasks import task_from_id

SizeQuery = Query(None, ge=16, le=4096, description="Longest side in pixels; default is the canvas size.")


def _episode(episode_id: str) -> Episode:
    ep = registry.get(episode_id)
    if ep is None:
        raise HTTPException(status_code=404, detail=f"unknown episode {episode_id!r}")
    return ep


def _document(episode_id: str) -> JSONResponse:
    """The episode's current document in pixels, with its task id and grade once it is over."""
    ep = _episode(episode_id)
    return JSONResponse({
        "episode_id": ep.episode_id,
        "task_id": ep.task.task_id,
        "done": ep.done,
        "steps": ep.steps,
        "grade": ep.grade,
        **ep.snapshot().to_dict(),
    })  # fmt: skip


def _render(episode_id: str, size: int | None) -> Response:
    return Response(png_of(_episode(episode_id).snapshot(), size), media_type="image/png")


class PlainGet(Route):
    """A route a loop reads after every step, taken before the app's other routes and without FastAPI's
    request handling when it is a plain GET (no query): in a batch these GETs were a third of the env's
    messages, and FastAPI's part of each (trying the ~20 routes before it in turn, then solving the
    route's parameters from the request) about as much CPU as the answer. Anything else (a `size`, HEAD,
    another method) goes on to the FastAPI route of the same path, which answers and refuses as before
    and documents it (`/docs`); the answer is the same object either way."""

    def __init__(self, path: str, answer: Any):
        async def endpoint(request: Request) -> Response:
            return answer(request.path_params["episode_id"])

        super().__init__(path, endpoint, methods=["GET"], include_in_schema=False)

    def matches(self, scope: Any) -> tuple[Match, dict]:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("query_string"):
            return Match.NONE, {}
        return super().matches(scope)


STOCK = 32
"""Env instances `warm` makes ahead of the first sessions: a batch's episodes per env process
(`evalkit.run.batch.EPISODES_PER_PROCESS`)."""


def warm(app: FastAPI) -> None:
    """Make what `app`'s first episodes would otherwise make while the others wait on the server's loop:
    env instances for the first sessions (`recycle`: the first one builds what every later one reuses, ~60
    ms, in the first reset), the image encoders' plugins, which Pillow imports at its first save (its
    reference JPEG), and the grader's matching (`grade.matcher`). A server in a process of its own calls
    this in a thread as it starts taking sessions (`evalkit.envs.embedded.process`); one in a thread of the
    harness (a small batch) makes them on use."""
    # start-up: these are what warming makes, in a thread beside the first sessions rather than before them
    from PIL import Image

    from .grade import matcher

    app.state.env_factory.stock(STOCK)
    Image.preinit()
    matcher()


def build_app(max_concurrent_envs: int = 64) -> FastAPI:
    """The FastAPI app serving the canvas env; run it with uvicorn or `evalkit serve canvas`."""
    factory = recycling(CanvasEnv)
    app = create_app(
        factory,
        CallToolAction,
        CallToolObservation,
        env_name="canvas",
        max_concurrent_envs=max_concurrent_envs,
    )

    # The routes a loop reads after every step run on the event loop (`async`), as the tools do, rather
    # than each in a worker thread of their own; the document goes out as built, unchecked by a model.
    @app.get("/api/episodes/{episode_id}", response_class=JSONResponse)
    async def episode_document(episode_id: str) -> JSONResponse:
        """The episode's current document in pixels, with its task id and grade once it is over."""
        return _document(episode_id)

    @app.get("/api/episodes/{episode_id}/render.png")
    async def episode_render(episode_id: str, size: int | None = SizeQuery) -> Response:
        return _render(episode_id, size)

    @app.get("/api/episodes/{episode_id}/reference.jpg")
    def episode_reference(episode_id: str, size: int | None = SizeQuery) -> Response:
        ep = _episode(episode_id)
        return Response(encode(render_doc(ep.task.doc, size), "JPEG"), media_type="image/jpeg")

    @app.get("/api/tasks/{task_id}/target.png")
    def task_target(task_id: str, size: int | None = SizeQuery) -> Response:
        try:
            task = task_from_id(task_id)
        except ValueError as e:
            raise HTTPException(status_code=404, detail=str(e)) from None
        return Response(encode(render_doc(task.doc, size)), media_type="image/png")

    @app.get("/editor/{skin}", response_class=HTMLResponse)
    def editor(
        skin: str, width: int = Query(800, ge=16, le=4096), height: int = Query(600, ge=16, le=4096)
    ) -> HTMLResponse:
        """The gui surface's editor in `skin`, empty, as a model sees it (nothing is saved)."""
        if skin not in SKINS:
            known = ", ".join(SKINS)
            raise HTTPException(status_code=404, detail=f"unknown skin {skin!r}: use one of {known}")
        return HTMLResponse(editor_html(skin, width, height))

    app.router.routes[:0] = [
        PlainGet("/api/episodes/{episode_id}", _document),
        PlainGet("/api/episodes/{episode_id}/render.png", lambda episode_id: _render(episode_id, None)),
    ]
    app.state.env_factory = factory  # (for `warm`)
    return app
