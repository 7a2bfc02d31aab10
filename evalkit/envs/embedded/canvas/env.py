"""The canvas environment as an OpenEnv MCPEnvironment: reset picks a task and a surface, tools act on it.

Three surfaces share one task, one document model and one grader: `tools` (structured editing tools,
`tools_surface`), `html` (the agent writes a page, `html_surface`) and `gui` (an editor driven by computer
use, `gui_surface`). This module only dispatches: it opens the surface's page on reset, shows each surface
its own tools, says what counts as a step and ends episodes. OpenEnv's servers drive the env through
`reset_async` and `step_async` (`evalkit.envs.embedded.episodic`, shared with the other embedded envs): an
episode that ended (submit, or the step budget running out) gets `done`, `reward` and the grade there, and
a browser that broke under a session (`after_call`) becomes an error the client sees as the environment's
failure rather than the agent's.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from collections.abc import Hashable, Sequence
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_server
from fastmcp.server.transforms import Transform
from fastmcp.tools import Tool
from fastmcp.utilities.types import Image as MCPImage
from openenv.core.env_server.mcp_types import CallToolAction, ToolErrorType
from openenv.core.env_server.types import EnvironmentMetadata, Observation

from evalkit import envs
from evalkit.browser import Browser, Screen, add_computer_tools
from evalkit.browser.computer import SCREENSHOT_TOOL
from evalkit.envs.embedded.episodic import EpisodeEnv, Reset, one_of, step_limit, task_index
from evalkit.envs.embedded.episodic import tool_error as _fail

from . import html_surface, tools_surface
from .episode import Episode, registry
from .gui_surface import SCREEN, SKINS, EditorPage, default_skin
from .html_surface import HtmlPage
from .model import Doc
from .prompts import PROMPT_VERSIONS, instructions, opening
from .render import jpeg_b64_of, png_of
from .tasks import generate_task, task_from_id

SURFACES = envs.SURFACES["canvas"]
MODES = envs.MODES["canvas"]
COORDINATES = ("pixels", "normalized")
TURNS = {"tools": 60, "html": 20, "gui": 200}
"""The turn budget a loop should give each surface unless told otherwise (reset metadata `max_turns`)."""
STEPS = {"tools": 60, "html": 40, "gui": 1000}
"""Tool calls before the env grades the canvas as it stands; gui screenshots are free."""
PREPARE_AFTER_S = 0.15
"""How long after its reset an episode works out what its grade needs of the target (`Episode.prepare`), on
the event loop: by then the burst of resets that starts a batch has been answered and the model is reading
the task. Worked out in the grade, it was half of each submit's CPU, at the moment fifty episodes of a batch
in step submitted together; in a thread beside the loop it held the sessions' messages up for the GIL. A
grade that comes sooner works it out itself."""
COMPUTER = ("screenshot", "click", "double_click", "drag", "type_text", "press_key", "scroll")
ORDER = ("get_document", "add_element", "update_element", "delete_element", "set_background", "set_html",
         *COMPUTER, "view_canvas", "submit")  # fmt: skip
"""The order a surface lists its tools in, whichever was registered first on a server."""
TOOLS = {
    "tools": {"get_document", "add_element", "update_element", "delete_element", "set_background",
              "view_canvas", "submit"},
    "html": {"set_html", "view_canvas", "submit"},
    "gui": {*COMPUTER, "submit"},
}  # fmt: skip

# fastmcp logs every failed call; a model's bad arguments are routine here, not server faults.
logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)
log = logging.getLogger(__name__)


class SurfaceBroken(RuntimeError):
    """The browser under a session crashed or stopped answering. Raised out of `step_async`, it reaches the
    client as an error frame: the episode ends as the environment's failure (unscored), not the agent's."""


class SurfaceTools(Transform):
    """Shows each episode only its surface's tools (listing and calling); the server holds them all."""

    def __init__(self, env: CanvasEnv):
        self.env = env

    async def list_tools(self, tools: Sequence[Any]) -> Sequence[Any]:
        allowed = TOOLS[self.env.surface]
        return sorted((t for t in tools if t.name in allowed), key=lambda t: ORDER.index(t.name))

    async def get_tool(self, name: str, call_next: Any, *, version: Any = None) -> Any:
        if name not in TOOLS[self.env.surface]:
            return None
        return await call_next(name, version=version)


class CanvasServer(FastMCP):
    """The FastMCP server of one CanvasEnv; tools shared by every env find theirs through it."""

    def __init__(self, env: CanvasEnv):
        super().__init__("canvas")
        self.env = env
        self.found: dict[tuple[str, str], Tool] = {}
        """The tools calls found, by (surface, name): emptied when tools are added (`add_surface_tools`)."""

    async def get_tool(self, name: str, version: Any = None) -> Tool | None:
        """The tool a call names, looked up once per surface: fastmcp's lookup (its provider in a task
        group, the surface's transform, visibility and auth checks) was about a third of the CPU of a
        canvas tool call through the server, and nothing it depends on changes between calls here: the
        tools registered (`found` is emptied when they are), the surface, and no auth or session
        transforms on this server. A name not found is asked again each time, so it fails as before."""
        if version is not None:
            return await super().get_tool(name, version)
        key = (self.env.surface, name)
        tool = self.found.get(key)
        if tool is None:
            tool = await super().get_tool(name)
            if tool is not None:
                self.found[key] = tool
        return tool


def _env() -> CanvasEnv:
    """The env whose server is running the current tool call."""
    return get_server().env


def _episode() -> Episode:
    return _env().episode()


class _Collector:
    """Stands in for a FastMCP server in a surface's `register`: keeps the tools it defines. The editing
    tools' bodies take microseconds and no lock held for longer, so they run on the event loop: fastmcp would
    hand each call of a plain function to a worker thread and back, which cost more than the tool."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def tool(self, fn: Any) -> Any:
        self.tools.append(Tool.from_function(fn, run_in_thread=False))
        return fn


@functools.cache
def shared_tools() -> tuple[Tool, ...]:
    """The tools surface's tools and the ones every surface shows, built once per process: building a tool
    (its schema) was most of the cost of a new env, and each env's own copies were validated by their own
    TypeAdapters, built on each copy's first call. Each finds its env at call time (`_env`)."""
    mcp = _Collector()
    tools_surface.register(mcp, _episode, _fail)

    @mcp.tool
    async def view_canvas() -> MCPImage:
        """Return a PNG image of the canvas as it is now, at its full pixel size."""
        ep = _episode()
        if ep.surface == "html":
            return MCPImage(data=await html_surface.screenshot(ep, _fail), format="png")
        return MCPImage(data=png_of(ep.snapshot()), format="png")

    @mcp.tool
    async def submit() -> str:
        """Finish the episode: grade the canvas against the target and return the grade as JSON."""
        env = _env()
        return json.dumps(await env.finish(env.episode()))

    return tuple(mcp.tools)


def build_server(env: CanvasEnv) -> FastMCP:
    """A server for `env` with the shared tools; the browser surfaces' tools, bound to `env`, are added by
    `add_surface_tools` on their first episode."""
    mcp = CanvasServer(env)
    for tool in shared_tools():
        mcp.add_tool(tool)
    mcp.add_transform(SurfaceTools(env))
    return mcp


def add_surface_tools(env: CanvasEnv, surface: str) -> None:
    """Register a browser surface's tools on `env`'s server before its first episode there. Building a tool
    (its schema) is most of the cost of a new env, and a batch on the tools surface never needs these."""
    if surface in env.surfaces_ready:
        return
    if surface == "html":
        html_surface.register(env.mcp_server, env.episode, _fail)
    elif surface == "gui":
        add_computer_tools(env.mcp_server, env.screen, _fail, after=env.after_action)
    env.surfaces_ready.add(surface)
    env.mcp_server.found.clear()


class CanvasEnv(EpisodeEnv):
    """One WebSocket session; each reset starts a new episode on a task, on one surface."""

    NAME = "canvas"
    LISTS_ALIKE = True  # every instance has the shared tools, and a browser surface's alike once added

    def __init__(self) -> None:
        self.ep: Episode | None = None
        self.surfaces_ready = {"tools"}
        """Surfaces whose tools are registered on this env's server (`add_surface_tools`)."""
        super().__init__(build_server(self))

    def tools_listed(self) -> Hashable:
        """Each surface shows its own tools, and a browser surface's are registered on its first episode."""
        return self.surface, frozenset(self.surfaces_ready)

    @property
    def surface(self) -> str:
        return self.ep.surface if self.ep is not None else "tools"

    def screen(self) -> Screen:
        page = self.episode().page
        if not isinstance(page, EditorPage):
            raise _fail("there is no screen on this surface")
        return page.screen

    async def after_action(self) -> None:
        """Mirror the editor's document after every computer-use action (a broken page is caught by
        `step_async`, so a failed read here only keeps the last document)."""
        ep = self.ep
        if ep is not None and isinstance(ep.page, EditorPage):
            try:
                ep.set_doc(await ep.page.read())
            except Exception as e:
                log.debug("reading the editor back failed: %s", e)

    async def finish(self, ep: Episode, auto: bool = False) -> dict:
        """Grade what the surface shows now (read back from its page on the browser surfaces)."""
        if ep.grade is None and isinstance(ep.page, HtmlPage):
            await html_surface.read(ep)
        elif ep.grade is None and isinstance(ep.page, EditorPage):
            ep.set_doc(await ep.page.read())
        return ep.finish(auto=auto)

    def reset(self, **kwargs: Any) -> Observation:
        """Blocking reset (a caller outside an event loop), on the browser's loop."""
        return Browser.get().run(self.reset_async(**kwargs))

    async def begin_async(self, asked: Reset) -> Observation:
        surface, mode = asked.surface or "tools", asked.mode or "reference"
        coordinates, skin, seed = asked.coordinates or "pixels", asked.skin, asked.seed
        steps = _steps(surface, mode, coordinates, skin, asked.max_steps)
        if asked.task_id:
            task = task_from_id(asked.task_id)
        else:
            task = generate_task(asked.split, task_index(asked.index))
        if surface == "html":
            coordinates = "pixels"  # CSS pixels: the page has no other
        skin = (skin or default_skin(task.index)) if surface == "gui" else None
        w, h = task.doc.width, task.doc.height
        ep = Episode(
            episode_id=asked.episode_id or uuid.uuid4().hex,
            task=task,
            surface=surface,
            mode=mode,
            coordinates=coordinates,
            max_steps=steps,
            doc=Doc(w, h),
            skin=skin,
        )
        await self._drop()
        add_surface_tools(self, surface)
        if surface == "html":
            ep.page = await HtmlPage.open(w, h)
        elif surface == "gui":
            ep.page = await EditorPage.open(skin, w, h, coordinates)
        self.ep = ep
        registry.add(ep)
        asyncio.get_running_loop().call_later(PREPARE_AFTER_S, ep.prepare)
        return Observation(done=False, reward=None, metadata=_metadata(ep, seed))

    async def _drop(self) -> None:
        """Forget the current episode and close its page (a reset or the session's end)."""
        old, self.ep = self.ep, None
        if old is None:
            return
        registry.drop(old)
        if old.page is not None:
            try:
                await old.page.close()
            except Exception as e:  # a page of a crashed browser is already gone
                log.debug("closing a page failed: %s", e)

    def counts(self, ep: Episode, action: CallToolAction) -> bool:
        return not (ep.surface == "gui" and action.tool_name == SCREENSHOT_TOOL)  # looking is not a step

    async def out_of_steps(self, ep: Episode) -> None:
        await self.finish(ep, auto=True)

    def after_call(self, ep: Episode, obs: Any) -> None:
        """A page whose browser died, or a browser call that hung to the MCP timeout (the surfaces time the
        agent's own page out much sooner), is the infrastructure's failure."""
        if ep.page is None:
            return
        error = getattr(obs, "error", None)
        hung = error is not None and error.error_type == ToolErrorType.TIMEOUT
        if hung or not ep.page.session.alive:
            what = "stopped answering" if hung else "crashed or closed"
            ep.broken = f"the browser page of episode {ep.episode_id} {what}"  # its state fails from now on
            raise SurfaceBroken(ep.broken)

    def get_metadata(self) -> EnvironmentMetadata:
        """Named as evalkit names it, so `--base-url` to a served canvas and `--env canvas` share keys."""
        return EnvironmentMetadata(name="canvas", description="Recreate a target design on a canvas.",
                                   version=PROMPT_VERSIONS["tools"])  # fmt: skip

    def close(self) -> None:
        """The session ended (OpenEnv calls this from the thread that makes and closes every session's env):
        forget the episode and close its page, without waiting for it (a page that would not close must
        not hold up the other sessions); then hand the instance to the next session when it came from
        `recycling` (`evalkit.envs.embedded.recycle`), or else tear it down."""
        if self.ep is not None:
            page = self.ep.page
            registry.drop(self.ep)
            self.ep = None
            if page is not None:
                Browser.get().start(asyncio.wait_for(page.close(), 15), "closing a page")
        recycle = getattr(self, "recycle", None)
        if recycle is None or not recycle():
            super().close()


def _steps(surface: str, mode: str, coordinates: str, skin: str | None, max_steps: Any) -> int:
    """The episode's step limit, once every argument of a reset is one the canvas has (else ValueError)."""
    one_of("surface", surface, SURFACES)
    one_of("mode", mode, MODES)
    one_of("coordinates", coordinates, COORDINATES)
    steps = step_limit(max_steps, STEPS[surface])
    if surface == "gui" and skin is not None:
        one_of("skin", skin, SKINS)
    return steps


def _metadata(ep: Episode, seed: int | None) -> dict[str, Any]:
    """What the reset's observation tells the client of the episode `ep` opened."""
    task, surface, mode = ep.task, ep.surface, ep.mode
    meta: dict[str, Any] = {
        "task_id": task.task_id,
        "episode_id": ep.episode_id,
        "split": task.split,
        "index": task.index,
        "instructions": instructions(task.doc, surface, mode, ep.coordinates, ep.max_steps, SCREEN),
        "prompt": opening(surface, mode),
        "surface": surface,
        "mode": mode,
        "skin": ep.skin,
        "seed": seed,
        "tier": task.tier,
        "difficulty_score": task.difficulty_score,
        "n_elements": task.n_elements,
        "prompt_version": PROMPT_VERSIONS[surface],
        "coordinates": ep.coordinates,
        "canvas": {"width": task.doc.width, "height": task.doc.height},
        "max_steps": ep.max_steps,
        "max_turns": TURNS[surface],
    }
    if surface == "gui":
        meta["screenshot_tool"] = SCREENSHOT_TOOL
        meta["screen"] = {"width": SCREEN[0], "height": SCREEN[1]}
    if mode == "reference":
        meta["reference_jpeg_b64"] = jpeg_b64_of(task.doc)
    meta["hidden_keys"] = sorted(meta)  # its prompt and instructions say all the model needs
    return meta
