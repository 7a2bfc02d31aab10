"""The embedded envs call their MCP server's handlers directly (`DirectClient`), not through a fastmcp client:
every observation (results, images, grades, each error text a model reads) and every tool listing is the one
a fastmcp client gives, call for call."""

from __future__ import annotations

import asyncio
import json

import fastmcp
import pytest

from evalkit.envs.embedded.server import import_openenv_server

import_openenv_server()

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction  # noqa: E402

from evalkit.envs.embedded import episodic  # noqa: E402
from evalkit.envs.embedded.berth.env import BerthEnv  # noqa: E402
from evalkit.envs.embedded.canvas.env import CanvasEnv  # noqa: E402

RECT = {"kind": "rect", "x": 10, "y": 5, "width": 200, "height": 120, "fill": "#112233"}
CANVAS = [
    ListToolsAction(),
    CallToolAction(tool_name="add_element", arguments=RECT),
    CallToolAction(tool_name="add_element", arguments={"kind": "rect"}),  # arguments missing
    CallToolAction(tool_name="add_element", arguments={**RECT, "kind": 3, "x": "left"}),  # wrong types
    CallToolAction(tool_name="add_element", arguments={**RECT, "colour": "red"}),  # an unknown argument
    CallToolAction(tool_name="update_element", arguments={"id": "e99", "x": 1}),  # no such element
    CallToolAction(tool_name="no_such_tool", arguments={}),
    CallToolAction(tool_name="click", arguments={"x": 1, "y": 1}),  # another surface's tool
    CallToolAction(tool_name="view_canvas", arguments={}),  # an image
    CallToolAction(tool_name="get_canvas", arguments={}),  # a name a model might guess
    CallToolAction(tool_name="submit", arguments={}),
    CallToolAction(tool_name="submit", arguments={}),  # after the end
]
BERTH = [
    ListToolsAction(),
    CallToolAction(tool_name="check_plan", arguments={"plan": "not a plan"}),
    CallToolAction(tool_name="check_plan", arguments={"plan": [{"vessel": "nobody"}]}),
    CallToolAction(tool_name="check_plan", arguments={}),
    CallToolAction(tool_name="submit_plan", arguments={"plan": []}),
]


async def step(env, action):
    return json.loads((await env.step_async(action)).model_dump_json())


@pytest.mark.parametrize(("make", "reset", "actions"), [
    (CanvasEnv, {"index": 3, "mode": "description", "episode_id": "e"}, CANVAS),
    (BerthEnv, {"index": 2, "episode_id": "e"}, BERTH),
])  # fmt: skip
def test_each_observation_is_the_one_a_fastmcp_client_gives(make, reset, actions):
    async def play() -> list:
        direct, client = make(), make()
        assert isinstance(direct.mcp_client, episodic.DirectClient)
        client.mcp_client = fastmcp.Client(client.mcp_server)  # what OpenEnv's MCPEnvironment gives an env
        for env in (direct, client):
            result = env.reset_async(**reset) if hasattr(env, "reset_async") else None
            await result if result is not None else env.reset(**reset)
        seen = []
        for action in actions:
            a, b = await step(direct, action), await step(client, action)
            assert a == b, action
            seen.append(a)
        # OpenEnv's JSON-RPC `tools/list` and `tools/call` ask the client itself
        async with client.mcp_client:
            listed = [t.model_dump() for t in await client.mcp_client.list_tools()]
            called = await client.mcp_client.call_tool("no_such_tool", {}, raise_on_error=False)
        assert [t.model_dump() for t in await direct.mcp_client.list_tools()] == listed
        assert await direct.mcp_client.call_tool("no_such_tool", {}, raise_on_error=False) == called
        return seen

    seen = asyncio.run(play())
    errors = [o["error"]["message"] for o in seen if o.get("error")]
    assert len(errors) >= (6 if make is CanvasEnv else 2)  # the error paths ran, not only the happy ones
    assert seen[-1]["done"] is True


def test_tools_are_listed_again_only_when_what_they_depend_on_changes(monkeypatch):
    import types

    from mcp.types import ListToolsRequest

    from evalkit.envs.embedded.canvas.env import add_surface_tools

    monkeypatch.setattr(episodic, "_LISTED", {})  # no listing another test's instances made
    env = CanvasEnv()
    handlers = env.mcp_server._mcp_server.request_handlers
    asked = []
    real = handlers[ListToolsRequest]

    async def counted(request):
        asked.append(env.surface)
        return await real(request)

    handlers[ListToolsRequest] = counted

    async def both(surface: str) -> list:
        env.ep = types.SimpleNamespace(surface=surface, done=False)
        direct = [t.model_dump() for t in await env.mcp_client.list_tools()]
        async with fastmcp.Client(env.mcp_server) as client:  # asks the handler itself, uncached
            assert direct == [t.model_dump() for t in await client.list_tools()]
        return [t["name"] for t in direct]

    async def play() -> None:
        tools = await both("tools")
        listed = await env.mcp_client.list_tools()
        listed[0].description, listed[1:] = "changed by whoever listed", []  # each listing is the caller's
        assert await both("tools") == tools
        assert await both("gui") == ["submit"]  # its tools are not registered yet
        add_surface_tools(env, "gui")
        gui = await both("gui")
        assert len(gui) > 1 and gui != tools
        assert await both("tools") == tools

    asyncio.run(play())
    # the direct client asked once per surface and registration; the fastmcp client asked every time
    assert asked.count("tools") == 2 + 3 and asked.count("gui") == 2 + 2


def test_instances_that_list_alike_share_their_listings(monkeypatch):
    """A batch's first sessions each get a new env instance: the canvas lists its tools once per process and
    state of what they depend on, not once per instance; an env class that does not say its instances list
    alike (the berth) still asks each instance's server."""
    from mcp.types import ListToolsRequest

    monkeypatch.setattr(episodic, "_LISTED", {})
    asked = []

    def counting(env):
        handlers = env.mcp_server._mcp_server.request_handlers
        real = handlers[ListToolsRequest]

        async def counted(request):
            asked.append(type(env).__name__)
            return await real(request)

        handlers[ListToolsRequest] = counted
        return env

    async def listed(env) -> list:
        direct = [t.model_dump() for t in await env.mcp_client.list_tools()]
        async with fastmcp.Client(env.mcp_server) as client:  # the instance's own server, asked directly
            assert direct == [t.model_dump() for t in await client.list_tools()]
        return direct

    async def play() -> None:
        first, second = counting(CanvasEnv()), counting(CanvasEnv())
        assert await listed(first) == await listed(second)
        assert asked.count("CanvasEnv") == 1 + 2  # once for both, and each fastmcp client's own
        # Nor does the server ask itself for them to check a call (as it does for a tool it never listed).
        third = counting(CanvasEnv())
        await third.reset_async(index=1)
        await third.mcp_client.list_tools()
        obs = await third.step_async(CallToolAction(tool_name="add_element", arguments=RECT))
        assert obs.error is None and asked.count("CanvasEnv") == 3
        for env in (counting(BerthEnv()), counting(BerthEnv())):
            await listed(env)
        assert asked.count("BerthEnv") == 2 + 2

    asyncio.run(play())


def test_reserved_tool_names_are_checked_once_per_class(monkeypatch):
    """OpenEnv's check that no tool is named `reset`, `step`, … runs for a class's first instance (a server
    builds one per new session, fifty at once at the start of a batch): a reserved name is still refused."""
    from fastmcp import FastMCP
    from openenv.core.env_server.mcp_environment import MCPEnvironment

    checked = []
    real = MCPEnvironment._validate_tool_names

    def counted(self, server):
        checked.append(type(self).__name__)
        return real(self, server)

    monkeypatch.setattr(MCPEnvironment, "_validate_tool_names", counted)

    def env_class(tool_name: str) -> type:
        class Env(episodic.EpisodeEnv):
            def __init__(self) -> None:
                mcp = FastMCP("t")
                mcp.tool(name=tool_name)(lambda: "ok")
                super().__init__(mcp)

            def reset(self, **kw):
                raise NotImplementedError

        return Env

    Fine, Bad = env_class("draw"), env_class("reset")
    for _ in range(3):
        Fine()
    assert checked == ["Env"]
    for _ in range(2):  # refused every time: a class that failed its check is never marked checked
        with pytest.raises(ValueError, match="reserved"):
            Bad()
    assert len(checked) == 3
