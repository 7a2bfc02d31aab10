"""The canvas env's tool set, without a server: the browser surfaces' tools are registered on first use."""

import asyncio
import types

from evalkit.envs.server import import_openenv_server

import_openenv_server()

from evalkit.envs.canvas.env import COMPUTER, TOOLS, CanvasEnv, add_surface_tools  # noqa: E402


def listed(env: CanvasEnv, surface: str) -> list[str]:
    env.ep = types.SimpleNamespace(surface=surface)
    try:
        return [t.name for t in asyncio.run(env.mcp_server.list_tools())]
    finally:
        env.ep = None


def test_browser_surface_tools_are_added_on_first_use_and_listed_in_one_order():
    env = CanvasEnv()
    assert env.surfaces_ready == {"tools"}
    assert listed(env, "gui") == ["submit"]  # not registered yet
    tools = listed(env, "tools")
    # The gui surface's tools registered before the html surface's: each surface still lists its tools in the
    # order a server holding all of them from the start lists them.
    add_surface_tools(env, "gui")
    add_surface_tools(env, "html")
    add_surface_tools(env, "gui")  # a second time registers nothing
    assert env.surfaces_ready == {"tools", "gui", "html"}
    assert listed(env, "gui") == [*COMPUTER, "submit"]
    assert listed(env, "html") == ["set_html", "view_canvas", "submit"]
    assert listed(env, "tools") == tools
    assert set(tools) == TOOLS["tools"]
