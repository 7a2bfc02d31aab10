"""Every driver takes the one Settings with keyword overrides: run_episode, EpisodeStepper, run_batch and the
own-loop runner; the own-loop run's outcome settings come from its knobs, as the batch's do."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evalkit.errors import ConfigError
from evalkit.run.episode import run_episode
from evalkit.run.settings import Settings
from evalkit.run.stepper import EpisodeStepper
from evalkit.types import Image, ToolOutcome, ToolSpec, Turn
from tests.support.scripted import call, factory

PNG = Image(b"\x89PNG\r\n\x1a\nnot-really", "image/png")


class Board:
    """An in-process env with no render: its `look` answers with a picture, `done` ends the episode."""

    def reset(self, **kw):
        return {"task_id": "b", "instructions": "Look, then call done."}

    def tools(self):
        return [ToolSpec("look"), ToolSpec("done")]

    def call(self, name, args):
        if name == "look":
            return ToolOutcome("the board", images=[PNG])
        return ToolOutcome("over", done=True, reward=1.0)

    def close(self):
        pass


def looks(n: int) -> list[Turn]:
    return [Turn(calls=[call("look")]) for _ in range(n)]


def test_run_episode_takes_settings_and_keywords_override_them():
    s = Settings(max_turns=2, frames=False)
    rec = run_episode(factory(looks(5)), Board, None, s)
    assert rec.n_turns == 2 and rec.end_reason == "turn_limit" and rec.auto_submitted
    rec = run_episode(factory(looks(5)), Board, None, s, max_turns=3)  # a keyword overrides the object
    assert rec.n_turns == 3
    with pytest.raises(ConfigError, match=r"run_episode\(\) got unknown setting\(s\) max_turn "):
        run_episode(factory([]), Board, max_turn=3)
    with pytest.raises(ConfigError, match="--episode-timeout must be a finite number > 0"):
        run_episode(factory([]), Board, episode_timeout=float("nan"))


def test_the_image_budgets_are_checked_where_the_settings_are_made():
    # Two budgets at once is a mistake in the settings, whichever driver: said when the settings are made.
    with pytest.raises(ConfigError, match="give only one"):
        Settings(keep_images=2, image_window=(6, 2))
    with pytest.raises(ConfigError, match="give only one"):
        dataclasses.replace(Settings(keep_images=2), image_window=(6, 2))
    assert Settings(image_window=(6, 2)).options.image_window == (6, 2)


def test_the_stepper_takes_settings_like_run_episode():
    with EpisodeStepper(factory(looks(5)), Board, None, Settings(max_turns=2), hide_fields=["x"]) as st:
        st.reset()
        assert st.max_turns == 2 and st.settings.hide_fields == ["x"]
        st.run()
        assert st.ended and st.record.n_turns == 2
    with pytest.raises(ConfigError, match=r"EpisodeStepper\(\) got unknown setting\(s\) colour"):
        EpisodeStepper(factory([]), Board, colour="red")


def test_a_step_shows_the_frame_the_record_keeps():
    """One rule for frames: an env with no render shows the last picture a tool gave, in the step as in the
    record (the stepper kept a rule of its own, which showed nothing)."""
    with EpisodeStepper(factory(looks(1)), Board, max_turns=3) as st:
        st.reset()
        step = st.step()
        assert step.frame is not None and step.frame.data == PNG.data
        assert st.call("look", tell_model=False).frame.data == PNG.data


def test_the_stepper_touches_the_episode_only_through_its_door():
    """What EpisodeStepper reads of the episode it drives is the operator's API: public members of
    OperatedEpisode, never an attribute of the loop's state."""
    import ast
    import inspect

    from evalkit.run import stepper
    from evalkit.run.operator import OperatedEpisode

    door = {n for n in dir(OperatedEpisode) if not n.startswith("_")}
    assert {"open", "think", "act", "finish", "close", "over", "record", "edit", "discard", "inject",
            "submit", "frame_now", "ended", "turns"} <= door  # fmt: skip
    used = set()
    for node in ast.walk(ast.parse(inspect.getsource(stepper))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ep":
            used.add(node.attr)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "episode"):  # fmt: skip
            used.add(node.attr)
    assert used and used <= door, sorted(used - door)


def test_the_ownloop_outcome_settings_are_its_knobs(tmp_path):
    from evalkit.ownloop import Settings as Ownloop
    from evalkit.records.settings import OWNLOOP_SETTINGS, outcome_settings

    s = Ownloop(agent="dom", max_steps=5)
    assert set(s.outcome()) == set(OWNLOOP_SETTINGS)  # the run.json of runs written before says as much
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"kind": "ownloop", "outcome": s.outcome(), "max_steps": 9}))
    assert outcome_settings(run)["max_steps"] == 5  # what the run declared wins
    with pytest.raises(ConfigError, match="--max-steps must be a whole number > 0, got 0"):
        dataclasses.replace(s, max_steps=0)
    with pytest.raises(ConfigError, match="--ports wants port numbers, got '80x'"):
        Ownloop.make(None, agent="dom", ports="80,80x")
    with pytest.raises(ConfigError, match=r"run_ownloop\(\) needs agent"):
        Ownloop.make(None, workers=2)
    assert Ownloop.make(s, workers=3).workers == 3 and Ownloop.make(s, workers=3).max_steps == 5
