"""The web-app tasks as an OpenEnv MCP environment: a model sees the app in a browser through the standard
computer-use tools (screenshot, click, double_click, drag, type_text, press_key, scroll) and ends with
`submit(answer)`, which the grader scores from the session's record.

Reset metadata carries the task text in `prompt`, the rules in `instructions` and `screenshot_tool:
"screenshot"` (the tool a loop calls after a turn in which the model took no screenshot). Every episode has
its own browser context, so sessions of one server never share a cart or a login. The web apps themselves
run once per server process, on a loopback port that only the env's browser contexts may reach.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastmcp import FastMCP
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import EnvironmentMetadata, Observation
from pydantic import Field

from evalkit.browser import Screen, SessionOptions, add_computer_tools, anew_session
from evalkit.browser.computer import SCREENSHOT_TOOL, describe
from evalkit.envs.embedded.episodic import EpisodeEnv, Reset, one_of, step_limit
from evalkit.envs.embedded.episodic import tool_error as _fail
from evalkit.envs.embedded.registry import Registry

from .grade import grade
from .serve import SiteServer
from .tasks import fill, instruction, load_tasks

DEFAULT_MAX_STEPS = 40
VIEWPORT = (1280, 800)
COORDINATES = ("pixels", "normalized")
PROMPT_VERSION = "webapp-v1"
logging.getLogger("fastmcp.server.server").setLevel(logging.ERROR)

_site_lock = threading.Lock()
_site: SiteServer | None = None


def site() -> SiteServer:
    """This process's web apps, started on first use."""
    global _site
    with _site_lock:
        if _site is None:
            _site = SiteServer()
        return _site


@dataclass
class Episode:
    episode_id: str
    task: dict
    screen: Screen
    max_steps: int
    steps: int = 0
    grade: dict | None = None
    answer: str | None = None
    auto_submitted: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def done(self) -> bool:
        return self.grade is not None

    async def finish(self, answer: str | None, auto: bool = False) -> dict:
        """Grade the session as it stands (once): its record, read with its own cookies, and the answer."""
        async with self.lock:
            if self.grade is None:
                s = site()
                status, body = await self.screen.session.fetch(
                    f"{s.base}/_admin/record", headers=s.admin_headers
                )
                if status != 200:
                    raise _fail(f"the web app did not give the session's record ({status})")
                self.answer, self.auto_submitted = answer, auto
                self.grade = grade(self.task, json.loads(body).get("entries", []), answer)
                registry.finished(self)
            return self.grade


registry = Registry(keep=64)  # for a final render just after submit


def rules(coordinates: str, width: int, height: int, max_steps: int) -> str:
    return (
        "You operate a web browser that shows a web application. You see the screen only through the "
        f"`{SCREENSHOT_TOOL}` tool and act on it with click, double_click, drag, type_text, press_key and "
        "scroll, as a person would with a mouse and a keyboard; there is no address bar, so move between "
        "pages "
        f"with the page's own links and buttons. {describe(coordinates, width, height)} You have {max_steps} "
        "actions (screenshots are free). When the task is done, call `submit`; if the task asks for "
        "information, give it as submit's `answer`. Do only what the task asks."
    )


def build_server(env: WebAppEnv) -> FastMCP:
    mcp = FastMCP("webapp")

    episode = env.episode

    def count() -> None:
        if env.ep is not None:
            env.ep.steps += 1

    add_computer_tools(mcp, lambda: episode().screen, _fail, after=count)

    @mcp.tool(meta={"auto_submit": True})  # graded by what was done: called with no answer when out of turns
    async def submit(
        answer: Annotated[str | None, Field(description="The information the task asks for, if any.")] = None,
    ) -> str:
        """Finish the task; the web app's record of what you did (and your answer) is graded."""
        return json.dumps(await episode().finish(answer))

    return mcp


class WebAppEnv(EpisodeEnv):
    """One WebSocket session; each reset opens a fresh browser context on a task's start page."""

    NAME = "webapp"

    def __init__(self) -> None:
        self.ep: Episode | None = None
        super().__init__(build_server(self))

    def begin(self, asked: Reset) -> Observation:
        # start-up: Playwright loads with the first episode, not with the server
        from evalkit.browser import Browser

        coordinates = asked.coordinates or "pixels"
        one_of("coordinates", coordinates, COORDINATES)
        steps = step_limit(asked.max_steps, DEFAULT_MAX_STEPS)
        task_id, index, episode_id = asked.task_id, asked.index, asked.episode_id
        tasks = load_tasks()
        if task_id:
            task = next((t for t in tasks if t["task_id"] == task_id), None)
            if task is None:
                raise ValueError(f"unknown webapp task {task_id!r}")
        else:
            if not isinstance(index, int) or not 0 <= index < len(tasks):
                raise ValueError(f"index must be 0 to {len(tasks) - 1}, got {index!r}")
            task = tasks[index]
        s = site()
        filled = fill(task, s.base)
        self._close_episode()
        session = Browser.get().run(self._open(filled, task.get("needs_login", False)), timeout=90)
        ep = Episode(episode_id or uuid.uuid4().hex, task, Screen(session, coordinates, settle_s=2.0), steps)
        self.ep = ep
        registry.add(ep)
        w, h = VIEWPORT
        meta = {
            "task_id": task["task_id"],
            "episode_id": ep.episode_id,
            "split": asked.split,
            "tier": task.get("tier"),
            "app": task.get("app"),
            "prompt": instruction(filled["prompt"], filled["start"]),
            "instructions": rules(coordinates, w, h, steps),
            "screenshot_tool": SCREENSHOT_TOOL,
            "prompt_version": PROMPT_VERSION,
            "coordinates": coordinates,
            "viewport": {"width": w, "height": h},
            "max_steps": steps,
            "surface": asked.surface or "gui",
            "mode": asked.mode or "task",
            "skin": asked.skin,
            "seed": asked.seed,
        }
        meta["hidden_keys"] = sorted(meta)  # its prompt and instructions say all the model needs
        return Observation(done=False, reward=None, metadata=meta)

    async def _open(self, task: dict, logged_out: bool) -> Any:
        s = site()
        w, h = VIEWPORT
        opts = SessionOptions(
            width=w, height=h, allow_origins=(s.base,), permissions=("clipboard-read", "clipboard-write")
        )
        session = await anew_session(opts)
        try:
            flags = f"{s.base}/_admin/session-flags" + ("?logout=1" if logged_out else "")
            status, _ = await session.fetch(flags, headers=s.admin_headers)
            if status != 200:
                raise RuntimeError(f"session flags answered {status}")
            await session.goto(task["start"], timeout=30)
            await session.settle(2.0)
        except BaseException:
            await session.close()
            raise
        return session

    def counts(self, ep: Episode, action: CallToolAction) -> bool:
        return False  # the computer tools count their actions (`count`); a screenshot or submit is not one

    async def out_of_steps(self, ep: Episode) -> None:
        await ep.finish(None, auto=True)

    @staticmethod
    def task_id_of(ep: Episode) -> str:
        return ep.task["task_id"]

    def ended(self, obs: Observation, ep: Episode) -> Observation:
        obs = super().ended(obs, ep)
        obs.metadata["answer"] = ep.answer
        obs.metadata["hidden_keys"].append("answer")
        return obs

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="webapp",
            description="Tasks on small local web apps through a browser.",
            version=PROMPT_VERSION,
        )

    def _close_episode(self) -> None:
        ep, self.ep = self.ep, None
        if ep is None:
            return
        registry.drop(ep)
        # Closing a context waits on the browser thread; the server's event loop must not wait with it.
        threading.Thread(target=ep.screen.session.sync.close, daemon=True).start()

    def close(self) -> None:
        self._close_episode()
        super().close()
