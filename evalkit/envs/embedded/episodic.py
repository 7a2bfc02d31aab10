"""What the embedded MCP envs (canvas, berth, webapp) share: one episode at a time in `self.ep`, started by
each reset, whose arguments are the same for every env (`Reset`; each env says its defaults and starts the
episode in `begin` or `begin_async`); the checks of those arguments; a tool call with no episode running, or
after it ended, answered as an error; the step budget (each env says what counts as a step and how an
episode out of steps ends); the observation that ends an episode (done, the grade's total as reward, the
grade in its metadata); the OpenEnv `state`.

An env's episode has `episode_id`, `task`, `steps`, `grade` (None until graded), `auto_submitted` and `done`,
and may have `broken` (why its surface no longer works: its state then fails).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import mcp.types
from fastmcp.exceptions import ToolError as FastMCPToolError
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ToolError, ToolErrorType
from openenv.core.env_server.types import Observation, State

try:  # how fastmcp's client reads a tool's result (`DirectClient` answers as that client does)
    from fastmcp.client.mixins.tools import _parse_call_tool_result
except ImportError:  # a fastmcp that reads it elsewhere: tools are called through its in-process client
    _parse_call_tool_result = None


def tool_error(message: str) -> FastMCPToolError:
    """A tool's error, for the agent to read (not an error of the server's: logged only at debug)."""
    return FastMCPToolError(message, log_level=logging.DEBUG)


_LISTED: dict[tuple[Hashable, Hashable], list[mcp.types.Tool]] = {}
"""Tool listings shared by the env instances of a class whose instances all list alike (`LISTS_ALIKE`), by
(class, what the listing depends on): each new instance's first listing through fastmcp cost ~1 ms of
the server's CPU, and a batch's first sessions each get a new instance."""


class DirectClient:
    """Stands in for the fastmcp client of an embedded env (`EpisodeEnv.mcp_client`, through which OpenEnv
    lists and calls tools): asks the env's MCP server's own request handlers directly. The client's session
    (its tasks, the streams between them, the initialize handshake of each new env, a check of every result
    against the tool's output schema that the server has made already) cost more than the tools: ~1.3 ms of a
    canvas tool call's ~1.9 ms. Each answer is the client's, every error text a model reads included
    (tested call for call): the reply goes through the JSON that the client's messages carry, and is read by
    fastmcp's own reading of a tool's result."""

    def __init__(
        self, server: Any, listing: Callable[[], Hashable] | None = None, shared_as: Hashable | None = None
    ):
        self._handlers = server._mcp_server.request_handlers
        self._known = getattr(server._mcp_server, "_tool_cache", None)
        """The MCP server's own record of the tools it listed, by name, which its tool calls read (and which
        a call of a tool not in it fills by listing them all: a shared listing is entered there too)."""
        self._schemas: dict[str, Any] = {}
        """Each listed tool's output schema (how a result is read), by name."""
        self._listing = listing
        """What the server's tool list depends on (`EpisodeEnv.tools_listed`); None: ask every time."""
        self._listed: dict[Hashable, list[mcp.types.Tool]] = {}
        self._shared_as = shared_as
        """Where every client of servers that list alike keeps their listings (`EpisodeEnv.LISTS_ALIKE`)."""

    def is_connected(self) -> bool:
        return True

    async def __aenter__(self) -> DirectClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        pass

    async def _ask(self, request: Any, result_type: type) -> Any:
        answer = await self._handlers[type(request)](request)
        return result_type.model_validate(
            answer.root.model_dump(by_alias=True, mode="json", exclude_none=True)
        )

    async def list_tools(self) -> list[mcp.types.Tool]:
        """The server's tools, asked once per state of what they depend on (listing them through fastmcp's
        transforms and middleware cost a tenth of a served canvas episode's CPU). Each call gets its own
        copies of the tools, their schemas shared: whoever lists them (OpenEnv, once per episode) reads the
        schemas and never writes them, and copying those deep was most of what a cached listing cost."""
        key = self._listing() if self._listing is not None else None
        if key is not None and key not in self._listed and (self._shared_as, key) in _LISTED:
            self._listed[key] = _LISTED[self._shared_as, key]
            self._schemas.update((t.name, t.outputSchema) for t in self._listed[key])
            if isinstance(self._known, dict):
                self._known.update((t.name, t) for t in self._listed[key])
        if key is None or key not in self._listed:
            request = mcp.types.ListToolsRequest(method="tools/list")
            listed = await self._ask(request, mcp.types.ListToolsResult)
            self._schemas.update((t.name, t.outputSchema) for t in listed.tools)
            if key is None:
                return listed.tools
            self._listed[key] = listed.tools
            if self._shared_as is not None:
                _LISTED[self._shared_as, key] = listed.tools
        return [t.model_copy() for t in self._listed[key]]

    async def call_tool(
        self, name: str, arguments: dict | None = None, *, raise_on_error: bool = True
    ) -> Any:
        """The tool's result as the client's `call_tool` gives it: a failed call raises its ToolError. A tool
        not listed yet lists the tools first, as the client does."""
        params = mcp.types.CallToolRequestParams(name=name, arguments=arguments or {})
        request = mcp.types.CallToolRequest(method="tools/call", params=params)
        result = await self._ask(request, mcp.types.CallToolResult)
        return await _parse_call_tool_result(
            name, result, self._schemas, self.list_tools, raise_on_error=raise_on_error
        )


@dataclass(frozen=True)
class Reset:
    """What a reset asked for: the arguments every embedded env takes (a client may send them all to any
    env). None where the client left the env's own default: each env says its defaults of `surface`,
    `mode`, `coordinates` and `max_steps`."""

    task_id: str | None
    split: str
    index: Any
    """As the client sent it (an int, or digits in a string); `task_index` reads it."""
    surface: str | None
    mode: str | None
    skin: str | None
    coordinates: str | None
    max_steps: Any
    seed: int | None
    episode_id: str | None


def one_of(what: str, value: Any, allowed: Any) -> None:
    """ValueError (the client's error frame) unless `value` is one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}: use one of {', '.join(allowed)}")


def step_limit(max_steps: Any, default: int | None) -> int | None:
    """An episode's tool-call budget: `max_steps` as the client sent it, else `default`; ValueError unless
    a positive integer (or None where the env's default is none)."""
    steps = default if max_steps is None else max_steps
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    return steps


def task_index(index: Any) -> int:
    """A task index as a client may send it: an int, or digits in a string."""
    if isinstance(index, str) and index.strip().isdigit():
        return int(index)
    if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
        return index
    raise ValueError(f"index must be a non-negative integer, got {index!r}")


class EpisodeEnv(MCPEnvironment):
    NAME = ""
    """The env's name, in its answer to a non-MCP action."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    ep: Any = None

    LISTS_ALIKE = False
    """Whether every instance of this class lists the same tools whenever their `tools_listed` is the same
    (their tools are registered alike): then a listing is made once per process and state, not once per
    instance (`DirectClient`)."""

    _names_checked: bool = False
    """Whether OpenEnv has checked this class's tool names (see `_validate_tool_names`)."""

    def __init__(self, mcp_server: Any) -> None:
        super().__init__(mcp_server)
        if _parse_call_tool_result is not None:
            shared = type(self) if type(self).LISTS_ALIKE else None
            self.mcp_client = DirectClient(mcp_server, self.tools_listed, shared)

    def _validate_tool_names(self, mcp_server: Any) -> None:
        """OpenEnv's check that no tool takes a reserved name (reset, step, …), once per class: every
        instance of an embedded env registers the same tools as it is built. The check lists the tools with
        `asyncio.run` in a thread of its own, and a server building envs for fifty new sessions at once spent
        half of each construction on it."""
        cls = type(self)
        if cls.__dict__.get("_names_checked"):
            return
        super()._validate_tool_names(mcp_server)
        cls._names_checked = True

    def tools_listed(self) -> Hashable:
        """What this env's tool list depends on: it is listed again only when this changes. The envs whose
        tools are all registered at construction list one set for good; an env that shows or adds tools later
        (the canvas, per surface) says what they depend on."""
        return ()

    async def reset_async(
        self,
        task_id: str | None = None,
        split: str = "test",
        index: int = 0,
        surface: str | None = None,
        mode: str | None = None,
        skin: str | None = None,
        coordinates: str | None = None,
        max_steps: int | None = None,
        seed: int | None = None,
        episode_id: str | None = None,
    ) -> Observation:
        """Start an episode; ValueError (sent to the client as an error frame) for any bad argument. The
        arguments are written out because OpenEnv passes a reset only those its signature names."""
        asked = Reset(task_id, split, index, surface, mode, skin, coordinates, max_steps, seed, episode_id)
        return await self.begin_async(asked)

    def reset(self, **kwargs: Any) -> Observation:
        """Blocking reset, for a caller outside an event loop (OpenEnv's servers await `reset_async`)."""
        return asyncio.run(self.reset_async(**kwargs))

    async def begin_async(self, asked: Reset) -> Observation:
        """The env's start of an episode; by default its blocking `begin`, off the server's event loop."""
        return await asyncio.to_thread(self.begin, asked)

    def begin(self, asked: Reset) -> Observation:
        raise NotImplementedError

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """A tool call of the running episode: counted against its step budget (`counts`), looked at
        (`after_call`), the episode ended once the budget is spent (`out_of_steps`), and its end observed."""
        if not isinstance(action, CallToolAction):
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if (answer := self.refused(action)) is not None:
            return answer
        ep = self.ep
        if self.counts(ep, action):
            ep.steps += 1
        obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        self.after_call(ep, obs)
        if not ep.done and ep.max_steps is not None and ep.steps >= ep.max_steps:
            await self.out_of_steps(ep)
        return self.ended(obs, ep) if ep.done else obs

    def counts(self, ep: Any, action: CallToolAction) -> bool:
        """Whether this call counts as one of the episode's steps (before it runs)."""
        return True

    def after_call(self, ep: Any, obs: Observation) -> None:
        """A look at a call's observation before the budget is checked (raise to fail the episode)."""

    async def out_of_steps(self, ep: Any) -> None:
        """End `ep`, whose step budget ran out before it was submitted."""
        raise NotImplementedError

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
        obs.metadata["hidden_keys"] = ["steps"]
        return obs

    @property
    def state(self) -> State:
        """The episode's id, steps and task; raises once the episode's surface broke (`ep.broken`): a
        client that reads it after a failed step knows the session no longer works."""
        ep = self.ep
        if ep is None:
            return State(episode_id=None, step_count=0)
        if getattr(ep, "broken", None):
            raise RuntimeError(ep.broken)
        return State(episode_id=ep.episode_id, step_count=ep.steps, task_id=self.task_id_of(ep), done=ep.done)
