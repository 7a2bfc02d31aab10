"""Sample actions typed from an action's JSON schema (what the probe sends to show a step)."""

from __future__ import annotations

from evalkit.envs.client.actions import fits, legal_actions, sample_action, sample_step


def test_a_legal_action_goes_only_to_a_field_it_fits():
    text = {"properties": {"message": {"type": "string"}}, "required": ["message"]}
    assert sample_action(text, [0, 1]) == {"message": ""}  # textarena: a number is no message
    spiel = {
        "properties": {
            "action_id": {"type": "integer"},
            "game_name": {"type": "string", "default": "catch"},
            "metadata": {"type": "object"},
        },
        "required": ["action_id", "metadata"],
    }
    assert sample_action(spiel, [3, 4]) == {
        "action_id": 3
    }  # OpenSpiel; OpenEnv's metadata is not the model's
    moves = {
        "properties": {"move": {"$ref": "#/$defs/M"}},
        "required": ["move"],
        "$defs": {"M": {"enum": ["up", "down"]}},
    }
    assert sample_action(moves, ["down"]) == {"move": "down"}
    assert sample_action(moves, ["jump"]) == {"move": "up"}  # not among its enum: the schema's own
    two = {
        "properties": {"why": {"type": "string"}, "n": {"type": "integer", "minimum": 2}},
        "required": ["why", "n"],
    }
    assert sample_action(two, [5]) == {"why": "", "n": 5}
    assert sample_action(two, [1]) == {"why": "", "n": 2}  # below its minimum


def test_values_of_every_type():
    schema = {
        "properties": {
            "flag": {"type": "boolean"},
            "x": {"type": "number", "exclusiveMinimum": 0},
            "k": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]},
            "values": {"type": "array", "items": {"type": "number"}, "minItems": 2},
            "where": {"type": "object", "properties": {"row": {"type": "integer"}}, "required": ["row"]},
            "optional": {"type": "string"},
        },
        "required": ["flag", "x", "k", "values", "where"],
    }
    assert sample_action(schema) == {"flag": False, "x": 0.5, "k": 1, "values": [0, 0], "where": {"row": 0}}
    assert sample_action({"properties": {"f": {"type": "madeup"}}, "required": ["f"]}) is None
    assert fits(True, {"type": "integer"}, {}) is False and fits(2.0, {"type": "integer"}, {}) is True
    assert legal_actions({"turn": 1}, {"legal_actions": [], "valid_moves": ["e4"]}) == ["e4"]


def test_a_sample_step_skips_the_finishing_tool_and_tools_it_cannot_fill():
    from evalkit.types import ToolSpec

    odd = ToolSpec("odd", parameters={"properties": {"f": {"type": "madeup"}}, "required": ["f"]})
    chat = ToolSpec(
        "say", parameters={"properties": {"message": {"type": "string"}}, "required": ["message"]}
    )
    submit = ToolSpec(
        "submit", parameters={"properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    )
    assert sample_step([submit, odd, chat], [3], skip="submit") == ("say", {"message": ""})
    assert sample_step([odd], [3]) is None and sample_step([]) is None
