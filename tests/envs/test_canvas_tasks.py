"""Task generation, difficulty tiers, documents and the committed evalset."""

import json
from pathlib import Path

import pytest

from evalkit.envs.embedded.canvas.model import Doc, DocError, build_element, normalize_color, update_element
from evalkit.envs.embedded.canvas.render import render_doc
from evalkit.envs.embedded.canvas.tasks import (
    SIZES,
    TIERS,
    evalset,
    generate_task,
    parse_task_id,
    task_from_id,
    write_evalset,
)

EVALSET = Path(__file__).resolve().parents[2] / "data" / "evalsets" / "canvas-test-300.json"


def test_generation_is_deterministic_and_split_dependent():
    a, b = generate_task("test", 7), generate_task("test", 7)
    assert a.doc.to_dict() == b.doc.to_dict()
    assert a.task_id == "canvas-test-0007"
    assert generate_task("train", 7).doc.to_dict() != a.doc.to_dict()
    assert task_from_id("canvas-test-0007").doc.to_dict() == a.doc.to_dict()


@pytest.mark.parametrize("split", ["train", "test"])
def test_generated_values_are_in_range(split):
    for i in range(60):
        t = generate_task(split, i)
        d = t.doc
        assert (d.width, d.height) in SIZES
        assert 1 <= len(d.elements) <= 15
        assert 0 <= t.difficulty_score <= 1 and t.tier in TIERS
        assert len({e.id for e in d.elements}) == len(d.elements)
        for e in d.elements:
            assert e.kind in ("rect", "ellipse", "line", "text")
            assert 0 <= e.x <= d.width and 0 <= e.y <= d.height
            if e.kind != "line":
                assert e.width >= 0 and e.height >= 0
            if e.kind == "text":
                assert e.text
        assert Doc.from_dict(json.loads(json.dumps(d.to_dict()))).to_dict() == d.to_dict()


def test_bad_task_ids_and_splits_raise():
    assert parse_task_id("canvas-train-0042") == ("train", 42)
    for bad in ("canvas-test-7", "nope", "canvas-valid-0001", ""):
        with pytest.raises(ValueError):
            task_from_id(bad)
    with pytest.raises(ValueError):
        generate_task("valid", 0)


def test_colours_normalise_and_bad_values_explain_themselves():
    assert normalize_color("red") == "#ff0000"
    assert normalize_color("#ABC") == "#aabbcc"
    with pytest.raises(DocError, match="not a colour"):
        normalize_color("blurple")
    with pytest.raises(DocError, match="unknown kind"):
        build_element("e1", "star", x=0, y=0, width=1, height=1)
    with pytest.raises(DocError, match="only lines"):
        build_element("e1", "rect", x=0, y=0, width=-1, height=1)
    line = build_element("e1", "line", x=10, y=10, width=-5, height=20)
    assert line.stroke == "#000000" and line.stroke_width == 2
    moved = update_element(line, x=3, stroke="blue")
    assert (moved.x, moved.stroke, moved.height) == (3, "#0000ff", 20)


def test_render_is_deterministic_and_sized():
    doc = generate_task("test", 3).doc
    a, b = render_doc(doc), render_doc(doc)
    assert a.size == (doc.width, doc.height) and a.tobytes() == b.tobytes()
    assert max(render_doc(doc, 200).size) == 200


def test_evalset_tiers_subsets_and_committed_file(tmp_path):
    data = write_evalset(tmp_path / "es.json")
    assert json.loads((tmp_path / "es.json").read_text()) == data
    rows = data["tasks"]
    assert len(rows) == 300 and [r["index"] for r in rows] == list(range(300))
    counts = {t: sum(r["tier"] == t for r in rows) for t in TIERS}
    assert all(80 <= n <= 120 for n in counts.values()), counts
    tiers = {r["task_id"]: r["tier"] for r in rows}
    for name, per_tier in (("lite", 20), ("core30", 10)):
        ids = data["subsets"][name]
        assert len(set(ids)) == 3 * per_tier
        assert all(sum(tiers[i] == t for i in ids) == per_tier for t in TIERS)
    assert set(data["subsets"]["core30"]) <= set(data["subsets"]["lite"])
    assert len(data["evalset_id"]) == 12
    assert json.loads(EVALSET.read_text()) == evalset(), "regenerate the committed evalset"
