"""replay:<run>#<key> plays a recorded episode's calls back, turn by turn."""

from __future__ import annotations

import json

import pytest

from evalkit.errors import ConfigError
from evalkit.providers import make_agent, parse_spec
from evalkit.providers.replay import EXHAUSTED
from evalkit.types import EpisodeRecord, ToolOutcome


def _record(key: str, turns: list[dict]) -> dict:
    rec = EpisodeRecord(key=key, model="anthropic:claude-sonnet-5", env="canvas", task_id="canvas-test-0001")
    d = rec.to_dict()
    d["turns"] = turns
    return d


TURNS = [
    {
        "turn": 1,
        "text": "adding a rect",
        "reasoning": "the target has one rect",
        "stop": "tool_use",
        "calls": [
            {"id": "t1", "name": "set_background", "args": {"color": "#ffffff"}},
            {
                "id": "t2",
                "name": "add_element",
                "args": {"kind": "rect", "x": 1, "y": 2, "width": 3, "height": 4},
            },
            {"id": "t3", "name": "add_element", "args": "{not json", "ok": False, "parse_error": True},
        ],
    },
    {"turn": 2, "text": "I think it's done.", "stop": "end_turn", "calls": []},
    {"turn": 3, "text": "", "stop": "tool_use", "calls": [{"id": "t4", "name": "submit", "args": {}}]},
]


@pytest.fixture
def run_dir(tmp_path):
    lines = [json.dumps(_record("aaaa", TURNS[:1])), json.dumps(_record("bbbb", TURNS))]
    (tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n" + '{"key": "torn", "tur')
    return tmp_path


def test_replays_recorded_turns_then_stops(run_dir):
    agent = make_agent(f"replay:{run_dir}#bbbb", system="whatever the env says now", tools=[])
    assert agent.model == f"replay:{run_dir}#bbbb"
    agent.user("opening", [])
    t1 = agent.step()
    assert (t1.text, t1.reasoning) == ("adding a rect", "the target has one rect")
    assert [(c.name, c.args) for c in t1.calls] == [
        ("set_background", {"color": "#ffffff"}),
        ("add_element", {"kind": "rect", "x": 1, "y": 2, "width": 3, "height": 4}),
    ]
    assert t1.usage.input == 0 and t1.usage.output == 0
    agent.results([(c, ToolOutcome("ok")) for c in t1.calls])
    t2 = agent.step()
    assert t2.calls == [] and t2.text == "I think it's done."
    agent.user("please call a tool")
    t3 = agent.step()
    assert [c.name for c in t3.calls] == ["submit"]
    for _ in range(2):
        end = agent.step()
        assert end.calls == [] and end.stop == EXHAUSTED


def test_missing_key_or_run_is_a_config_error(run_dir, tmp_path):
    with pytest.raises(ConfigError, match="zzzz"):
        make_agent(f"replay:{run_dir}#zzzz", system="", tools=[])
    with pytest.raises(ConfigError):
        make_agent(f"replay:{tmp_path / 'nope'}#bbbb", system="", tools=[])
    with pytest.raises(ConfigError):
        parse_spec("replay:just-a-dir")


def test_replay_redrives_the_real_env(canvas_server, tmp_path):
    """A recorded tracer episode replayed against the env scores exactly what it scored."""
    from evalkit.run.episode import run_episode

    rec = run_episode("baseline:tracer", canvas_server, task="canvas-test-0003", out=tmp_path, frames=False)
    again = run_episode(f"replay:{tmp_path}#{rec.key}", canvas_server, task="canvas-test-0003", frames=False)
    assert again.error is None and again.end_reason == "submitted"
    assert again.reward == rec.reward
    assert [[c.name for c in t.calls] for t in again.turns] == [[c.name for c in t.calls] for t in rec.turns]
