"""The canvas environment as an OpenEnv MCPEnvironment: reset picks a task, MCP tools edit the document.

OpenEnv's WebSocket server drives the env through `step_async`, so that is where steps are counted and
where an episode that ended (submit, or the step budget running out) gets `done`, `reward` and the grade.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError as FastMCPToolError
from fastmcp.utilities.types import Image as MCPImage
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ToolError, ToolErrorType
from openenv.core.env_server.types import EnvironmentMetadata, Observation, State
from pydantic import Field

from evalkit import envs

from . import model
from .episode import Episode, registry
from .model import DocError, build_element, normalize_color, scale_element
from .prompts import OPENING, PROMPT_VERSIONS, instructions, scale_to
from .render import encode, jpeg_b64, render_doc
from .tasks import generate_task, task_from_id

SURFACES = ("tools", "html", "gui")
SUPPORTED_SURFACES = envs.SURFACES["canvas"]
MODES = envs.MODES["canvas"]
COORDINATES = ("pixels", "normalized")
DEFAULT_MAX_STEPS = 60

# fastmcp logs every failed call; a model's bad arguments are routine here, not server faults.
logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)

Kind = Annotated[Literal["rect", "ellipse", "line", "text"], Field(description="Element kind.")]
X = Annotated[float, Field(description="Left edge (a line's start x), in the episode's coordinate space.")]
Y = Annotated[float, Field(description="Top edge (a line's start y), in the episode's coordinate space.")]
W = Annotated[float, Field(description="Width (a line's x extent, may be negative), same space as x.")]
H = Annotated[float, Field(description="Height (a line's y extent, may be negative), same space as y.")]
OptNum = Annotated[
    float | None, Field(description="A number in the episode's coordinate space; omit to keep.")
]
Colour = Annotated[str | None, Field(description="Colour as '#rrggbb', '#rgb' or a CSS name.")]
Pixels = Annotated[float | None, Field(description="In pixels in every coordinate space.")]


def _fail(message: str) -> FastMCPToolError:
    return FastMCPToolError(message, log_level=logging.DEBUG)


def build_server(env: CanvasEnv) -> FastMCP:
    """The MCP tools, bound to `env` so they always act on its current episode."""
    mcp = FastMCP("canvas")

    def episode() -> Episode:
        ep = env.ep
        if ep is None:
            raise _fail("no episode: call reset first")
        if ep.done:
            raise _fail("episode is over")
        return ep

    def to_pixels(ep: Episode, values: dict) -> dict:
        sx, sy = scale_to(ep.doc, ep.coordinates)
        out = dict(values)
        for key, s in (("x", sx), ("y", sy), ("width", sx), ("height", sy)):
            if isinstance(out.get(key), (int, float)):
                out[key] = out[key] / s
        return out

    @mcp.tool
    def get_document() -> str:
        """Return the current document as JSON: width, height, background and elements (bottom to top)."""
        ep = episode()
        return json.dumps(env.document_view(ep))

    @mcp.tool
    def add_element(
        kind: Kind,
        x: X,
        y: Y,
        width: W,
        height: H,
        fill: Colour = None,
        stroke: Colour = None,
        stroke_width: Pixels = None,
        radius: Pixels = None,
        text: Annotated[str | None, Field(description="The text of a text element.")] = None,
        font_size: Pixels = None,
    ) -> str:
        """Add an element on top of the others and return its id as JSON, e.g. {"id": "e3"}.

        A line runs from (x, y) to (x + width, y + height); width/height may be negative only for lines.
        fill colours shapes and text (default black); stroke with stroke_width outlines shapes or colours
        a line."""
        ep = episode()
        values = dict(fill=fill, stroke=stroke, stroke_width=stroke_width, radius=radius, text=text,
                      font_size=font_size, x=x, y=y, width=width, height=height)  # fmt: skip
        with ep.lock:
            try:
                el = build_element(ep.doc.next_id(), kind, **to_pixels(ep, values))
            except DocError as e:
                raise _fail(str(e)) from None
            ep.doc.elements.append(el)
        return json.dumps({"id": el.id})

    @mcp.tool
    def update_element(
        id: Annotated[str, Field(description="The element id, e.g. 'e2'.")],
        kind: Kind | None = None,
        x: OptNum = None,
        y: OptNum = None,
        width: OptNum = None,
        height: OptNum = None,
        fill: Colour = None,
        stroke: Colour = None,
        stroke_width: Pixels = None,
        radius: Pixels = None,
        text: Annotated[str | None, Field(description="New text for a text element.")] = None,
        font_size: Pixels = None,
    ) -> str:
        """Change the given fields of an element (omitted fields stay as they are) and return it as JSON."""
        ep = episode()
        changes = dict(kind=kind, x=x, y=y, width=width, height=height, fill=fill, stroke=stroke,
                       stroke_width=stroke_width, radius=radius, text=text, font_size=font_size)  # fmt: skip
        with ep.lock:
            try:
                i = ep.doc.find(id)
                ep.doc.elements[i] = model.update_element(ep.doc.elements[i], **to_pixels(ep, changes))
            except DocError as e:
                raise _fail(str(e)) from None
            el = ep.doc.elements[i]
        return json.dumps(env.element_view(ep, el))

    @mcp.tool
    def delete_element(id: Annotated[str, Field(description="The element id, e.g. 'e2'.")]) -> str:
        """Remove an element from the canvas."""
        ep = episode()
        with ep.lock:
            try:
                del ep.doc.elements[ep.doc.find(id)]
            except DocError as e:
                raise _fail(str(e)) from None
        return json.dumps({"deleted": id})

    @mcp.tool
    def set_background(
        color: Annotated[str, Field(description="'#rrggbb', '#rgb' or a CSS colour name.")],
    ) -> str:
        """Set the canvas background colour."""
        ep = episode()
        try:
            colour = normalize_color(color, "color")
        except DocError as e:
            raise _fail(str(e)) from None
        with ep.lock:
            ep.doc.background = colour
        return json.dumps({"background": colour})

    @mcp.tool
    def view_canvas() -> MCPImage:
        """Return a PNG image of the canvas as it is now, at its full pixel size."""
        ep = episode()
        return MCPImage(data=encode(render_doc(ep.snapshot())), format="png")

    @mcp.tool
    def submit() -> str:
        """Finish the episode: grade the canvas against the target and return the grade as JSON."""
        return json.dumps(episode().finish())

    return mcp


class CanvasEnv(MCPEnvironment):
    """One WebSocket session; each reset starts a new episode on a task."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self.ep: Episode | None = None
        super().__init__(build_server(self))

    def reset(
        self,
        task_id: str | None = None,
        split: str = "test",
        index: int = 0,
        surface: str = "tools",
        mode: str = "reference",
        skin: str | None = None,
        coordinates: str = "pixels",
        max_steps: int | None = None,
        seed: int | None = None,
        episode_id: str | None = None,
    ) -> Observation:
        """Start an episode; ValueError (sent to the client as an error frame) for any bad argument."""
        if surface not in SURFACES:
            raise ValueError(f"unknown surface {surface!r}: use one of {', '.join(SURFACES)}")
        if surface not in SUPPORTED_SURFACES:
            raise ValueError(
                f"surface {surface!r} is not supported yet; supported: {', '.join(SUPPORTED_SURFACES)}"
            )
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
        if coordinates not in COORDINATES:
            raise ValueError(f"unknown coordinates {coordinates!r}: use one of {', '.join(COORDINATES)}")
        steps = DEFAULT_MAX_STEPS if max_steps is None else max_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        task = task_from_id(task_id) if task_id else generate_task(split, _index(index))
        ep = Episode(
            episode_id=episode_id or uuid.uuid4().hex,
            task=task,
            surface=surface,
            mode=mode,
            coordinates=coordinates,
            max_steps=steps,
            doc=type(task.doc)(task.doc.width, task.doc.height),
        )
        if self.ep is not None:
            registry.drop(self.ep)
        self.ep = ep
        registry.add(ep)
        meta: dict[str, Any] = {
            "task_id": task.task_id,
            "episode_id": ep.episode_id,
            "split": task.split,
            "index": task.index,
            "instructions": instructions(task.doc, surface, mode, coordinates, steps),
            "prompt": OPENING[mode],
            "surface": surface,
            "mode": mode,
            "skin": skin,
            "seed": seed,
            "tier": task.tier,
            "difficulty_score": task.difficulty_score,
            "n_elements": task.n_elements,
            "prompt_version": PROMPT_VERSIONS[surface],
            "coordinates": coordinates,
            "canvas": {"width": task.doc.width, "height": task.doc.height},
            "max_steps": steps,
        }
        if mode == "reference":
            meta["reference_jpeg_b64"] = jpeg_b64(render_doc(task.doc))
        return Observation(done=False, reward=None, metadata=meta)

    def document_view(self, ep: Episode) -> dict:
        """The document in the episode's coordinate space (what get_document returns)."""
        doc = ep.snapshot()
        out = doc.to_dict()
        out["elements"] = [self.element_view(ep, el) for el in doc.elements]
        return out

    @staticmethod
    def element_view(ep: Episode, el) -> dict:
        sx, sy = scale_to(ep.doc, ep.coordinates)
        return scale_element(el, sx, sy).to_dict()

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(
            done=False,
            reward=None,
            metadata={"error": "canvas only takes MCP actions: list tools or call a tool"},
        )

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if not isinstance(action, CallToolAction):
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)
        ep = self.ep
        if ep is None or ep.done:
            message = "no episode: call reset first" if ep is None else "episode is over"
            obs = CallToolObservation(
                tool_name=action.tool_name,
                result=None,
                error=ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message=message),
            )
            return self._ended(obs, ep) if ep else obs
        ep.steps += 1
        obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if not ep.done and ep.steps >= ep.max_steps:
            ep.finish(auto=True)
        return self._ended(obs, ep) if ep.done else obs

    @staticmethod
    def _ended(obs: Observation, ep: Episode) -> Observation:
        obs.done = True
        obs.reward = ep.grade["total"]
        obs.metadata = {
            "grade": ep.grade,
            "task_id": ep.task.task_id,
            "episode_id": ep.episode_id,
            "auto_submitted": ep.auto_submitted,
            "steps": ep.steps,
        }
        return obs

    def get_metadata(self) -> EnvironmentMetadata:
        """Named as evalkit names it, so `--base-url` to a served canvas and `--env canvas` share keys."""
        return EnvironmentMetadata(name="canvas", description="Recreate a target design on a canvas.",
                                   version=PROMPT_VERSIONS["tools"])  # fmt: skip

    @property
    def state(self) -> State:
        ep = self.ep
        if ep is None:
            return State(episode_id=None, step_count=0)
        return State(episode_id=ep.episode_id, step_count=ep.steps, task_id=ep.task.task_id, done=ep.done)

    def close(self) -> None:
        if self.ep is not None:
            registry.drop(self.ep)
        super().close()


def _index(index: Any) -> int:
    try:
        value = int(index)
    except (TypeError, ValueError):
        raise ValueError(f"index must be a non-negative integer, got {index!r}") from None
    if value < 0 or str(value) != str(index).strip():
        raise ValueError(f"index must be a non-negative integer, got {index!r}")
    return value
