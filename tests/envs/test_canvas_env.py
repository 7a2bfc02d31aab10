"""The canvas env's tool set, without a server: the browser surfaces' tools are registered on first use."""

import asyncio
import types

from evalkit.envs.embedded.server import import_openenv_server

import_openenv_server()

from evalkit.envs.embedded.canvas.env import COMPUTER, TOOLS, CanvasEnv, add_surface_tools  # noqa: E402


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


def test_envs_share_their_tools_and_each_call_acts_on_its_own_env():
    from openenv.core.env_server.mcp_types import CallToolAction

    async def play(env: CanvasEnv, index: int, n: int) -> list:
        await env.reset_async(index=index, mode="description")
        async with env.mcp_session():
            for i in range(n):
                args = {"kind": "rect", "x": 10 * i, "y": 5, "width": 20, "height": 20, "fill": "#112233"}
                obs = await env.step_async(CallToolAction(tool_name="add_element", arguments=args))
                assert obs.error is None, obs.error
        return env.ep.doc.elements

    async def both() -> tuple[list, list]:
        return await asyncio.gather(play(a, 1, 2), play(b, 2, 3))

    a, b = CanvasEnv(), CanvasEnv()
    shared = {t.name: t for t in asyncio.run(a.mcp_server.list_tools())}
    assert all(shared[t.name] is t for t in asyncio.run(b.mcp_server.list_tools()) if t.name in shared)
    elements_a, elements_b = asyncio.run(both())
    assert [e.x for e in elements_a] == [0, 10]
    assert [e.x for e in elements_b] == [0, 10, 20]


def test_served_sessions_never_open_an_mcp_client_session(canvas_server, monkeypatch):
    """Sessions, one after another, list and call tools (OpenEnv's JSON-RPC `tools/list` over the WebSocket
    and its steps) through the env's direct client: no fastmcp client session (server task, initialize
    handshake) is ever opened."""
    from fastmcp.client.transports import memory

    from evalkit.envs.client.openenv import OpenEnvSession

    connects = []
    connect = memory.FastMCPTransport.connect_session

    def counted(self, *a, **kw):
        connects.append(self)
        return connect(self, *a, **kw)

    monkeypatch.setattr(memory.FastMCPTransport, "connect_session", counted)
    grades = []
    for index in range(4):
        with OpenEnvSession(canvas_server.base_url) as session:
            session.reset(index=index, mode="description")
            assert {t.name for t in session.tools()} >= {"add_element", "submit"}
            assert session.call("add_element", {"kind": "rect"}).is_error
            grades.append(session.call("submit", {}).grade["n_gt"])
    assert connects == []
    assert len(grades) == 4


def test_an_env_that_is_not_kept_is_torn_down():
    from evalkit.envs.embedded.episodic import DirectClient
    from evalkit.envs.embedded.recycle import recycling

    kept = recycling(CanvasEnv)()
    assert isinstance(kept.mcp_client, DirectClient)
    kept.close()
    assert kept.mcp_client is not None  # back in the pool, for the next session
    env = recycling(CanvasEnv, keep=0)()  # keeps nothing: every closed instance is torn down
    env.close()
    assert env.mcp_client is None and env.mcp_server is None


def test_editing_tools_run_on_the_event_loop():
    """The editing tools are plain functions that take microseconds: run where the call arrives, not handed to
    a worker thread and back (which cost more than the tools)."""
    import threading

    from openenv.core.env_server.mcp_types import CallToolAction

    from evalkit.envs.embedded.canvas import tools_surface
    from evalkit.envs.embedded.canvas.env import shared_tools

    assert all(t.run_in_thread is False for t in shared_tools())
    ran_in = []
    real = tools_surface.document_view

    def watched(ep):
        ran_in.append(threading.current_thread())
        return real(ep)

    async def play(env: CanvasEnv) -> None:
        await env.reset_async(index=1)
        obs = await env.step_async(CallToolAction(tool_name="get_document", arguments={}))
        assert obs.error is None and ran_in == [threading.current_thread()]

    tools_surface.document_view = watched
    try:
        asyncio.run(play(CanvasEnv()))
    finally:
        tools_surface.document_view = real


def test_the_target_is_prepared_for_the_grade_while_the_model_thinks(monkeypatch):
    """A moment after its reset an episode works out what its grade needs of the target, on the loop; the
    grade is the one worked out from scratch, and a submit that comes sooner grades all the same."""
    from openenv.core.env_server.mcp_types import CallToolAction

    from evalkit.envs.embedded.canvas import env as canvas_env
    from evalkit.envs.embedded.canvas import grade

    rect = {"kind": "rect", "x": 30, "y": 40, "width": 200, "height": 100, "fill": "#336699"}

    async def play(index: int, think: float, after: float) -> tuple:
        monkeypatch.setattr(canvas_env, "PREPARE_AFTER_S", after)
        env = CanvasEnv()
        await env.reset_async(index=index, mode="description")
        ep = env.ep
        async with env.mcp_session():
            await env.step_async(CallToolAction(tool_name="add_element", arguments=rect))
            await asyncio.sleep(think)
            ready = ep.prepared is not None
            await env.step_async(CallToolAction(tool_name="submit", arguments={}))
            await asyncio.sleep(after + 0.05)  # past the moment it would have been prepared (if it was)
        return ep, ready

    async def both() -> list:
        return [await play(811, 0.2, 0.05), await play(812, 0.0, 0.5)]

    made = []
    real = grade._target_pixels
    monkeypatch.setattr(grade, "_target_pixels", lambda doc: made.append(doc) or real(doc))
    grade._targets.clear()
    (slow, ready), (fast, early) = asyncio.run(both())
    assert ready and not early
    assert made == [slow.task.doc, fast.task.doc]  # each target worked out once: ahead, or by the grade
    for ep in (slow, fast):
        assert ep.prepared is None  # dropped by the grade (and never made after it)
        grade._targets.clear()
        assert ep.grade == grade.grade_doc(ep.task.doc, ep.doc)
