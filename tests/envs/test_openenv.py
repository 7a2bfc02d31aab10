"""Foreign-style OpenEnv envs driven end to end over real uvicorn by a stand-in model on the real
chat-completions wire: what the model was sent (system prompt, opening message, tools, nudges, notes), how
the episode ended, its reward, its frames."""

from __future__ import annotations

import threading
import time

import pytest

from evalkit.envs.client.openenv import TypedSession, connect
from evalkit.envs.client.wire import Connection
from evalkit.errors import EnvError
from evalkit.records.rundir import safe_path
from evalkit.run.episode import run_episode
from tests.providers.fakes import Reply
from tests.support.foreign_envs import GOAL, QUESTION, QUIZ_INSTRUCTIONS
from tests.support.standin import (
    MODEL,
    bisect_guess,
    calls_and_results,
    images,
    tool_names,
    turns_taken,
    user_texts,
)


def test_mcp_env_without_a_finishing_tool_speaks_its_own_language(standin, sketch_server, tmp_path):
    def policy(body):
        n = turns_taken(body)
        if n == 0:
            return Reply(calls=[("draw", {"shape": "circle", "x": 5, "y": 5})])
        if n == 1:
            return Reply(calls=[("draw", {"shape": "square", "x": 20, "y": 5}), ("draw", {"shape": "star"})])
        return Reply(text="I drew a circle and a square.")

    standin.play(policy)
    rec = run_episode(MODEL, sketch_server.base_url, out=tmp_path, max_turns=6)
    first, *_, last = standin.bodies
    system = first["messages"][0]
    assert system["role"] == "system" and "draw, clear" in system["content"]
    assert "final answer in text" in system["content"] and "submit" not in system["content"]
    assert user_texts(first) == [f"{GOAL}\nYou have 6 turns; each turn may call several tools."]
    assert images(first["messages"][1]) == 0
    assert tool_names(first) == ["draw", "clear"]
    # with no finishing tool, the third turn's reply in text is the answer: no nudge, no fourth call
    assert len(standin.bodies) == 3 and rec.n_turns == 3
    assert not any(t.startswith("You did not call a tool") for t in user_texts(last))
    assert rec.end_reason == "answered" and not rec.auto_submitted
    assert rec.turns[-1].text == "I drew a circle and a square."
    assert rec.reward is None and rec.error_class is None and rec.mode == ""
    assert rec.tool_calls == 3 and rec.tool_errors == 1 and "star" in rec.turns[1].calls[1].result
    assert rec.env == "SketchEnv"  # the name its server reports
    # a render route without a target: frames every turn, no target
    assert rec.target is None and rec.frame0 and rec.render
    frames = [t.frame for t in rec.turns]
    assert all(frames) and len({frames[0], frames[1]}) == 2 and frames[1] == frames[-1]
    assert all(safe_path(tmp_path, p) for p in [rec.frame0, rec.render, *frames])


def test_reset_gets_only_what_the_env_has(sketch_server):
    s = connect(sketch_server.base_url)
    try:
        assert s.kind == "mcp"
        from evalkit.envs.client.sessions import reset_kwargs

        meta = s.reset(**reset_kwargs({"seed": 3}, "SketchEnv", "tools", ""))
        assert meta["got"] == []  # seed is OpenEnv's own; no surface, no mode
        meta = s.reset(**reset_kwargs("t-1", "SketchEnv", "tools", "hard"))
        assert meta["got"] == ["mode", "task_id"]
    finally:
        s.close()


def test_question_in_metadata_and_answer_tool_ends_with_a_reward(standin, quiz_server, tmp_path):
    def policy(body):
        if turns_taken(body) == 0:
            return Reply(calls=[("lookup", {"term": "six"}), ("lookup", {"term": "seven"})])
        return Reply(calls=[("answer", {"text": "42"})])

    standin.play(policy)
    rec = run_episode(MODEL, quiz_server.base_url, "quiz-7", out=tmp_path, max_turns=2)
    first, second = standin.bodies
    assert first["messages"][0] == {"role": "system", "content": QUIZ_INSTRUCTIONS}
    assert user_texts(first)[0] == f"{QUESTION}\nYou have 2 turns; each turn may call several tools."
    assert tool_names(first) == ["lookup", "answer"]
    results = calls_and_results(second)
    assert results[0][2] == "six is 6"
    assert results[1][2].endswith("[1 turn left: your next turn is the last — finish and call answer in it]")
    assert images(second["messages"][-1]) == 2  # lookup's pictures reach the model
    assert (
        rec.end_reason == "submitted" and rec.reward == 1.0 and rec.grade == {"correct": True, "total": 1.0}
    )
    assert rec.task_id == "quiz-7" and rec.tool_calls == 3 and not rec.auto_submitted
    # no picture routes: the frame of a turn is the last image its tools returned
    assert rec.frame0 is None and rec.target is None and rec.render is None
    assert rec.turns[0].frame == rec.turns[0].calls[1].images[0] and rec.turns[1].frame is None


def test_a_finishing_tool_that_needs_arguments_is_never_called_for_the_model(standin, quiz_server):
    def policy(body):
        if turns_taken(body) == 0:
            return Reply(text="Let me think.")
        return Reply(calls=[("lookup", {"term": "six"})])

    standin.play(policy)
    rec = run_episode(MODEL, quiz_server.base_url, max_turns=3)
    nudge = user_texts(standin.bodies[1])[-1]
    assert "when you are done, call answer." in nudge and nudge.endswith("[2 turns left]")
    assert rec.end_reason == "turn_limit" and not rec.auto_submitted and rec.reward is None
    assert rec.tool_calls == 2 and all(c.name == "lookup" for t in rec.turns for c in t.calls)
    finishing = [t for t in connect(quiz_server.base_url).tools() if t.finishes]
    assert [t.name for t in finishing] == ["answer"]  # the env's `finish` tag arrives


def test_typed_action_env_is_driven_through_one_step_tool(standin, guess_server, tmp_path):
    standin.play(bisect_guess)
    rec = run_episode(MODEL, guess_server.base_url, out=tmp_path, max_turns=8)
    first, second, *_ = standin.bodies
    [tool] = first["tools"]
    params = tool["function"]["parameters"]
    assert tool["function"]["name"] == "step" and set(params["properties"]) == {"guess", "note"}
    assert params["required"] == ["guess"] and "metadata" not in params["properties"]
    assert "A guess at the secret number." in tool["function"]["description"]
    assert "tools you are given: step" in first["messages"][0]["content"]
    opening = user_texts(first)[0]
    assert opening.startswith("The environment's first observation:\nhint: I am thinking of a number")
    assert "guesses_left: 6\nboard: [image 1]" in opening and images(first["messages"][1]) == 1
    refused, answered = calls_and_results(second)
    assert refused[2].startswith("Error: the environment refused the action: guess:")
    assert (
        "hint: lower" in answered[2]
        and "guesses_left: 5" in answered[2]
        and "board: [image 1]" in answered[2]
    )
    assert rec.end_reason == "done" and rec.reward == 1.0 and rec.error_class is None
    assert rec.tool_errors == 1 and rec.turns[-1].calls[-1].args["guess"] == 37
    # the board in the reset observation is frame 0; the boards steps return are the turns' frames
    assert rec.frame0 and all(t.frame for t in rec.turns) and len({t.frame for t in rec.turns}) == rec.n_turns
    from evalkit.types import Image

    board = Image(safe_path(tmp_path, rec.frame0).read_bytes()).to_pil()
    assert board.size == (16, 16) and board.getpixel((0, 0)) == (255, 255, 255)


def test_a_full_server_is_waited_for_not_scored(standin, guess_server):
    standin.play(bisect_guess)
    holder = Connection(guess_server.base_url)
    holder.reset()  # the server's one session is taken
    release = threading.Timer(0.8, holder.close)
    t = time.monotonic()
    release.start()
    try:
        rec = run_episode(MODEL, guess_server.base_url, max_turns=8)
    finally:
        release.join()
    assert rec.error_class is None and rec.end_reason == "done" and rec.reward == 1.0
    assert rec.info["capacity_wait_s"] >= 0.5 and time.monotonic() - t >= 0.8
    standin.play(bisect_guess)
    assert "capacity_wait_s" not in run_episode(MODEL, guess_server.base_url, max_turns=8).info  # no wait


def test_typed_session_reports_its_kind_and_refuses_other_tools(guess_server):
    s = connect(guess_server.base_url)
    try:
        assert isinstance(s, TypedSession) and s.kind == "typed"
        s.reset(seed=4)
        out = s.call("answer", {"text": "x"})
        assert out.is_error and "one tool, step" in out.text
        out = s.call("step", {"guess": 1})
        assert not out.is_error and "hint: higher" in out.text and len(out.images) == 1
    finally:
        s.close()


def test_an_mcp_step_that_breaks_the_env_is_an_env_error_not_the_models(tmp_path):
    """A failing tool comes back inside the MCP answer (the model reads it); a step that raises out of the
    env reaches the client as an EXECUTION_ERROR frame, and when the session no longer works after it (its
    state fails) the environment failed: the episode is unscored."""
    from fastmcp import FastMCP
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import Observation, State

    from evalkit.types import Turn
    from tests.support.foreign_envs import Served
    from tests.support.scripted import call, factory

    class Fragile(MCPEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            mcp = FastMCP("fragile")

            @mcp.tool
            def poke(hard: bool = False) -> str:
                """Poke the env; a bad poke is the tool's own error."""
                if not hard:
                    raise ValueError("too soft")
                return "poked"

            super().__init__(mcp)

        def reset(self, seed=None, episode_id=None, **kwargs):
            return Observation(metadata={"goal": "Poke it twice."})

        def _step_impl(self, action, timeout_s=None, **kwargs):
            return Observation()

        async def step_async(self, action, timeout_s=None, **kwargs):
            if isinstance(action, CallToolAction) and action.arguments.get("hard") == 2:
                self.dead = True  # its state fails from now on: the session is broken
                raise RuntimeError("the machine under the session died")
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)

        dead = False

        @property
        def state(self):
            if self.dead:
                raise RuntimeError("no machine")
            return State()

    app = create_app(Fragile, CallToolAction, CallToolObservation, env_name="fragile", max_concurrent_envs=2)
    with Served(app) as served:
        s = connect(served.base_url)
        try:
            s.reset()
            soft = s.call("poke", {})
            assert soft.is_error and "too soft" in soft.text
            with pytest.raises(EnvError, match="the machine under the session died"):
                s.call("poke", {"hard": 2})
        finally:
            s.close()
        sink: list = []
        turns = [Turn(calls=[call("poke", hard=True)]), Turn(calls=[call("poke", hard=2)])]
        rec = run_episode(factory(turns, sink), served.base_url, out=tmp_path, max_turns=4)
    assert rec.error_class == "env_error" and rec.reward is None and rec.end_reason == "error"
    assert rec.n_turns == 1 and "died" in rec.error


def test_a_finishing_tool_the_env_marks_for_it_is_called_empty_and_the_record_says_so(tmp_path):
    """A finishing tool whose arguments are all optional is called on the model's behalf only where the env
    marks it so (MCP meta `auto_submit`, as the webapp's `submit(answer=None)`, graded on what was done);
    the record says what was sent."""
    from fastmcp import FastMCP
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import Observation, State

    from evalkit.types import Turn
    from tests.support.foreign_envs import Served
    from tests.support.scripted import factory

    class Chores(MCPEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            mcp = FastMCP("chores")
            self.sent = None

            @mcp.tool(meta={"auto_submit": True})
            def submit(note: str | None = None) -> str:
                """Hand in the chores done so far."""
                self.sent = {"note": note}
                return "handed in"

            super().__init__(mcp)

        def reset(self, seed=None, episode_id=None, **kwargs):
            return Observation(metadata={"goal": "Do the chores, then hand them in."})

        def _step_impl(self, action, timeout_s=None, **kwargs):
            return Observation()

        async def step_async(self, action, timeout_s=None, **kwargs):
            obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
            if self.sent is not None:
                obs.done, obs.reward = True, 0.5
            return obs

        @property
        def state(self):
            return State()

    app = create_app(Chores, CallToolAction, CallToolObservation, env_name="chores", max_concurrent_envs=2)
    with Served(app) as served:
        with connect(served.base_url) as s:
            s.reset()
            [tool] = s.tools()
            assert tool.auto_submit and tool.finishes is False
        rec = run_episode(factory([Turn(text="thinking")] * 3), served.base_url, max_turns=2)
    assert (rec.end_reason, rec.reward, rec.auto_submitted) == ("turn_limit", 0.5, True)
    assert rec.info["auto_submit"] == {"tool": "submit", "args": {}}


def test_an_endpoint_resolved_once_opens_sessions_of_its_kind(guess_server, canvas_server):
    from evalkit.envs.client.openenv import Endpoint, OpenEnvSession

    typed = Endpoint.of(guess_server)
    assert typed.name == "guess" and typed.schema and "guess" in typed.schema["properties"]
    assert Endpoint.of(typed) is typed
    mcp = Endpoint.of(canvas_server, "canvas")
    assert mcp == Endpoint(canvas_server.base_url, "canvas", None)
    with connect(typed) as s:
        assert isinstance(s, TypedSession) and s.schema == typed.schema
    with connect(mcp) as s:
        assert type(s) is OpenEnvSession and s.reset(task_id="canvas-test-0001")["task_id"]
    # An endpoint's kind is taken as resolved: a session opens without asking the server again.
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    fake = Endpoint(guess_server.base_url, "guess", schema)
    with connect(fake) as s:
        assert s.tools()[0].parameters["properties"] == {"x": {"type": "integer"}}
