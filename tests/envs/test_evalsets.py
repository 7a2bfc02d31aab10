from __future__ import annotations

import json

import pytest

from evalkit.envs.evalsets import load_evalset
from evalkit.errors import EvalsetError

CANVAS = "data/evalsets/canvas-test-300.json"


def test_the_frozen_canvas_evalset():
    es = load_evalset(CANVAS)
    assert len(es.tasks) == 300 and es.evalset_id
    lite = es.select(subset="lite")
    assert len(lite) == 60
    assert {t["tier"] for t in lite} == {"easy", "medium", "hard"}
    assert len(es.select(subset="core30")) == 30


def test_limit_is_balanced_across_tiers():
    es = load_evalset(CANVAS)
    picked = es.select(limit=7)
    tiers = [t["tier"] for t in picked]
    assert len(picked) == 7 and tiers[:3] == ["easy", "medium", "hard"]
    assert max(tiers.count(t) for t in set(tiers)) - min(tiers.count(t) for t in set(tiers)) <= 1


def test_filters_and_their_errors():
    es = load_evalset(CANVAS)
    assert {t["tier"] for t in es.select(tiers=["hard"])} == {"hard"}
    assert [t["task_id"] for t in es.select(task_ids=["canvas-test-0003"])] == ["canvas-test-0003"]
    for kw in [{"subset": "nope"}, {"tiers": ["impossible"]}, {"task_ids": ["canvas-test-9999"]}]:
        with pytest.raises(EvalsetError):
            es.select(**kw)


@pytest.mark.parametrize("content", ["not json", "[]", '{"tasks": []}', '{"tasks": [{"id": 1}]}'])
def test_malformed_evalsets_are_config_errors(tmp_path, content):
    path = tmp_path / "e.json"
    path.write_text(content)
    with pytest.raises(EvalsetError):
        load_evalset(path)
    with pytest.raises(EvalsetError):
        load_evalset(tmp_path / "missing.json")


def test_evalset_id_hashes_tasks_and_subsets_and_edits_are_caught(tmp_path):
    from evalkit.envs.evalsets import evalset_hash

    data = json.loads(open(CANVAS).read())
    expected = evalset_hash(data["tasks"], data["subsets"])
    assert load_evalset(CANVAS).evalset_id == data["evalset_id"] == expected
    for edit in (lambda d: d["tasks"][0].update(tier="hard"), lambda d: d["subsets"]["lite"].pop()):
        changed = json.loads(json.dumps(data))
        edit(changed)
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(changed))
        with pytest.raises(EvalsetError, match="edited after it was frozen"):
            load_evalset(path)
    del changed["evalset_id"]
    path.write_text(json.dumps(changed))
    assert load_evalset(path).evalset_id == evalset_hash(changed["tasks"], changed["subsets"])
