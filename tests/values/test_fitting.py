"""Values that fit a JSON schema (`evalkit.values.fitting`): the probe's example and the random baseline's
draws keep every limit the schema states, checked by jsonschema's own verdict."""

from __future__ import annotations

import random

from evalkit.values import fitting as jv

MINES = {
    "type": "object",
    "properties": {
        "cell": {"type": "string", "pattern": "^[A-D][1-4]$"},
        "mode": {"enum": ["reveal", "flag"]},
        "count": {"type": "integer", "exclusiveMinimum": 2, "maximum": 5},
        "weight": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.2},
        "step": {"type": "number", "minimum": 1, "multipleOf": 0.5},
        "torques": {"type": "array", "items": {"type": "number", "minimum": -1, "maximum": 1},
                    "minItems": 3, "maxItems": 3},
        "code": {"type": "string", "pattern": "^[a-z]{2}-[0-9]{3}$", "maxLength": 6},
        "note": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 2}]},
    },
    "required": ["cell", "mode", "count", "weight", "step", "torques", "code", "note"],
}  # fmt: skip


def test_an_example_keeps_every_limit_and_is_the_same_each_time():
    got = jv.example(MINES)
    assert jv.fits(got, MINES) and got == jv.example(MINES)
    assert (got["mode"], got["count"], got["step"], got["torques"]) == ("reveal", 3, 1, [-1, -1, -1])
    assert 0 < got["weight"] < 0.2 and got["note"] == "aa"


def test_draws_keep_every_limit_and_vary():
    rng = random.Random(7)
    drawn = [jv.draw(MINES, rng) for _ in range(40)]
    assert all(jv.fits(d, MINES) for d in drawn)
    assert len({d["cell"] for d in drawn}) > 5 and {d["mode"] for d in drawn} == {"reveal", "flag"}


def test_what_no_value_fits_is_none_and_fits_is_jsonschemas_verdict():
    assert jv.example({"type": "integer", "minimum": 3, "maximum": 2}) is jv.NONE
    assert jv.example({"type": "madeup"}) is jv.NONE and not jv.fits(1, {"type": "madeup"})
    assert jv.fits(2.0, {"type": "integer"}) and not jv.fits(True, {"type": "integer"})
    refs = {"$defs": {"M": {"enum": ["up", "down"]}}, "properties": {"m": {"$ref": "#/$defs/M"}}}
    assert jv.fits("down", refs["properties"]["m"], refs) and not jv.fits(
        "left", refs["properties"]["m"], refs
    )
    assert jv.example(refs["properties"]["m"], refs) == "up"


def test_legal_actions_in_dicts_and_in_the_text_a_model_reads():
    assert jv.legal_actions({"turn": 1}, {"legal_actions": [], "valid_moves": ["e4"]}) == ["e4"]
    text = 'board: ..x\nlegal_actions: [2, 5, 6]\nscores: [1, 2]\nlegal moves: ["e2e4"]'
    assert jv.legal_in_text(text) == ["e2e4"]  # the last list the text names legal
    assert jv.legal_in_text("legal_actions: [2, 5\nnothing") == [] and jv.legal_in_text("") == []
