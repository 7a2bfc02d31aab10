"""EpisodeStepper against the real embedded canvas env with the offline tracer."""

from __future__ import annotations

import pytest

from evalkit.run.stepper import EpisodeStepper
from evalkit.types import ToolOutcome, ToolSpec, Turn
from tests.support.scripted import call, factory


def test_step_edit_inject_and_finish(canvas_server):
    st = EpisodeStepper("baseline:tracer", canvas_server, task="canvas-test-0007", max_turns=8)
    meta = st.reset()
    assert meta["task_id"] == "canvas-test-0007" and st.system and st.target is not None
    assert st.sent[0]["kind"] == "user" and st.sent[0]["images"]
    with pytest.raises(RuntimeError):
        st.execute()
    s = st.step(execute=False)
    assert s.turn.calls and not s.pairs and st.pending is not None
    first = s.turn.calls[0]
    args = dict(first.args)
    if "color" in args:
        args["color"] = "#123456"
    st.edit(0, args=args)
    with pytest.raises(RuntimeError):
        st.step()
    s = st.execute()
    assert len(s.pairs) == len(s.turn.calls) and s.frame is not None
    assert st.sent[-1]["kind"] == "results"
    op = st.call("get_document")
    assert op.operator and "#123456" in op.pairs[0][1].text or "color" not in args
    assert st.sent[-1]["kind"] == "user" and st.sent[-1]["text"].startswith("[operator]")
    assert "<img" in s._repr_html_()
    st.run()
    if st.reward is None:
        st.submit()
    assert st.reward is not None and 0 <= st.reward <= 1 and "total" in st.grade
    assert st.frame.size == (800, 600)
    st.close()


def test_calls_after_the_ending_one_are_not_run(canvas_server):
    sink: list = []
    rect = dict(kind="rect", x=10, y=10, width=50, height=40, fill="#ff0000")
    turns = [
        Turn(calls=[call("submit"), call("add_element", **rect)]),
        Turn(calls=[call("add_element", **rect)]),
    ]
    st = EpisodeStepper(factory(turns, sink), canvas_server, task="canvas-test-0007", max_turns=5)
    st.reset()
    s = st.step()
    assert s.done and st.ended and st.reward is not None
    (_, submitted), (_, after) = s.pairs
    assert submitted.done and after.is_error and after.text == "not executed: the episode had already ended"
    assert st.run() == []  # ended: no more model calls
    assert len(sink[0].turns) == 1 and len(st.steps) == 1


class NoRewardEnv:
    """An env session whose `finish` ends the episode without a reward or grade (in-process: the stepper
    only needs the session protocol, and no served env ends an episode this way)."""

    def __init__(self):
        self.calls: list[str] = []

    def reset(self, **kw):
        return {"task_id": "t", "instructions": "Call note, then finish."}

    def tools(self):
        return [ToolSpec("note"), ToolSpec("finish")]

    def call(self, name, args):
        self.calls.append(name)
        return ToolOutcome("finished" if name == "finish" else "noted", done=name == "finish")

    def close(self):
        pass


def test_run_stops_when_the_env_ends_the_episode_without_a_reward():
    env = NoRewardEnv()
    turns = [
        Turn(calls=[call("note")]),
        Turn(calls=[call("finish"), call("note")]),
        Turn(calls=[call("note")]),
    ]
    st = EpisodeStepper(factory(turns), lambda: env, max_turns=10)
    st.reset()
    steps = st.run()
    assert len(steps) == 2 and st.ended and st.reward is None
    assert env.calls == ["note", "finish"]
    assert steps[-1].pairs[1][1].text.startswith("not executed")


def test_keys_at_once_and_the_model_endpoint_at_reset(tmp_path, monkeypatch):
    from evalkit.errors import ConfigError, MissingKeyError
    from evalkit.serving import free_port

    monkeypatch.chdir(tmp_path)  # no .env up the tree supplies a key
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        EpisodeStepper("anthropic:claude-sonnet-5", "http://127.0.0.1:9")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("VLLM_BASE_URL", dead)
    st = EpisodeStepper("vllm:m", "http://127.0.0.1:9")
    with pytest.raises(ConfigError, match=f"cannot reach the model endpoint {dead}"):
        st.reset()
    assert st.session is None and st.agent is None


def test_the_stepper_speaks_the_envs_language(quiz_server, sketch_server):
    from tests.support.foreign_envs import GOAL, QUIZ_INSTRUCTIONS

    with EpisodeStepper(factory([Turn(text="thinking")]), quiz_server.base_url, max_turns=4) as st:
        st.reset()
        assert st.system == QUIZ_INSTRUCTIONS and st.finish == "answer" and st.meta["question"]
        st.step()
        assert st.sent[-1]["text"].endswith("when you are done, call answer.\n[3 turns left]")
        out = st.submit(text="42")  # the finishing tool, with the arguments it needs
        assert out.done and st.ended and st.reward == 1.0
    answer = factory([Turn(text="A circle and a square.")])
    with EpisodeStepper(answer, sketch_server.base_url, max_turns=4) as st:
        st.reset()
        assert st.sent[0]["text"].startswith(GOAL) and "final answer in text" in st.system
        with pytest.raises(RuntimeError, match="no finishing tool"):
            st.submit()
        assert len(st.run()) == 1 and st.ended and st.answered  # the reply in text was the answer
        assert not any(m["text"].startswith("You did not call a tool") for m in st.sent if "text" in m)


def test_a_screen_env_shows_the_model_its_screen(canvas_server):
    """The gui surface: a screenshot opens the episode, a fresh one follows each turn in which the model took
    none (on its last result), and the screenshots are the frames — as in `run_episode`."""
    st = EpisodeStepper("baseline:tracer", canvas_server, task="canvas-test-0007", surface="gui", max_turns=6)
    st.reset()
    assert st.shot_tool == "screenshot"
    assert len(st.sent[0]["images"]) == 2  # the target, then the screen
    s = st.step()
    took = any(c.name == st.shot_tool for c in s.turn.calls)
    last = s.pairs[-1][1]
    assert st.sent[-1]["kind"] == "results" and s.frame is not None
    assert st.sent[-1]["results"][-1]["images"] == len(last.images) + (0 if took or s.done else 1)
    screen = st.call(st.shot_tool, tell_model=False).pairs[0][1].images[-1].to_pil().size
    canvas = st.episode.camera.picture("render").to_pil().size
    assert s.frame.to_pil().size == screen != canvas  # the editor's screen, not the canvas
    st.close()


def _calls(rec):
    return [[(c.name, c.args, c.ok) for c in t.calls] for t in rec.turns]


@pytest.mark.parametrize("agent", ["baseline:tracer", "baseline:random"])
@pytest.mark.parametrize("budget", [None, 2, 3])
def test_the_stepper_plays_the_batchs_episode(canvas_server, tmp_path, agent, budget):
    """The stepper drives the loop's own episode: the env's budget (60 turns on canvas tools, not a budget
    of its own), nudges, auto-submit and scoring as `run_episode` does them; what it ends with is the record
    the batch would have written, and saved, the viewer's and the report's loaders read it."""
    import polars as pl

    from evalkit.errors import EpisodeOver
    from evalkit.records import rundir, transcripts
    from evalkit.records.loading import load_runs
    from evalkit.run.episode import run_episode

    task = "canvas-test-0007"
    rec = run_episode(agent, canvas_server, task, max_turns=budget, out=tmp_path / "batch")
    st = EpisodeStepper(agent, canvas_server, task=task, max_turns=budget)
    st.reset()
    assert st.max_turns == (budget or 60)
    assert f"You have {budget or 60} turns" in st.sent[0]["text"]
    st.run()
    got = st.record
    assert st.ended and got.n_turns == rec.n_turns and _calls(got) == _calls(rec)
    outcome = ("end_reason", "reward", "auto_submitted", "grade", "key")
    assert [getattr(got, k) for k in outcome] == [getattr(rec, k) for k in outcome]
    # Out of turns, both submit on the model's behalf (the tracer submits by itself in its third turn).
    runs_out = budget == 2 or (budget == 3 and agent == "baseline:random")
    assert (rec.end_reason == "turn_limit" and rec.auto_submitted) == runs_out
    assert rec.reward is not None
    with pytest.raises(EpisodeOver, match=f"the episode is over \\({rec.end_reason} after {rec.n_turns}"):
        st.step()
    saved = st.save(tmp_path / "debugged")
    st.close()
    (back,) = rundir.read_records(tmp_path / "debugged")
    assert back.key == rec.key and back.reward == saved.reward == rec.reward
    assert back.render and (tmp_path / "debugged" / back.render).is_file()
    assert all((tmp_path / "debugged" / t.frame).is_file() for t in back.turns if t.frame)
    said = transcripts.messages(back, tmp_path / "debugged")
    asked = transcripts.messages(rec, tmp_path / "batch")
    assert [(m.role, m.text) for m in said[:2]] == [(m.role, m.text) for m in asked[:2]]
    df = load_runs([tmp_path / "debugged"])
    assert df.height == 1 and df.select(pl.col("reward")).item() == rec.reward


def test_edits_are_marked_in_the_saved_record(canvas_server, tmp_path):
    st = EpisodeStepper("baseline:tracer", canvas_server, task="canvas-test-0007", max_turns=4)
    st.reset()
    st.step(execute=False)
    first = st.pending.calls[0]
    st.edit(0, args={**first.args, "x": 1})
    st.execute()
    st.call("get_document")
    st.step(execute=False)
    st.discard()
    with pytest.raises(RuntimeError, match="not over yet"):
        st.save(tmp_path / "early")
    st.submit()
    assert st.ended and st.reward is not None
    rec = st.save(tmp_path / "edited")
    kinds = [e["kind"] for e in rec.info["operator"]]
    assert kinds == ["edit", "call", "discard", "submit"]
    assert rec.info["operator"][0]["was"]["args"] == first.args
    assert rec.turns[1].calls and all(not c.ok for c in rec.turns[1].calls)
    assert rec.tool_calls == len(rec.turns[0].calls) and rec.parse_errors == 0
    assert rec.end_reason == "auto_submitted" and rec.auto_submitted
    st.close()


def test_run_batch_takes_a_settings_object_and_its_keywords(tmp_path):
    import inspect

    import evalkit as ek
    from evalkit.run.settings import Settings
    from evalkit.types import AgentOptions

    assert len(inspect.signature(ek.run_batch).parameters) <= 8
    with pytest.raises(ek.ConfigError, match="unknown setting"):
        ek.run_batch(["baseline:random"], "canvas", out=tmp_path / "x", max_turn=3)
    with pytest.raises(ek.ConfigError, match="--max-turns must be a whole number"):
        ek.run_batch(["baseline:random"], "canvas", Settings(), out=tmp_path / "x", max_turns=0)
    import dataclasses

    from evalkit.run.settings import _agent_names

    assert set(_agent_names()) == {f.name for f in dataclasses.fields(AgentOptions)}  # every model knob
    s = Settings(max_turns=5)
    assert s.outcome()["max_turns"] == 5 and "concurrency" not in s.outcome()
    assert Settings.make(s, options=AgentOptions(max_tokens=99)).max_tokens == 99
    assert not (tmp_path / "x").exists()
