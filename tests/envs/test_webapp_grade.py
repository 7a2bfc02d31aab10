"""The grader's predicates and answer checks, and the task file they grade."""

from __future__ import annotations

import pytest

from evalkit.envs.embedded.webapp.grade import check_answer, check_predicate, grade, matches
from evalkit.envs.embedded.webapp.tasks import fill, instruction, load_tasks
from evalkit.envs.evalsets import load_evalset
from evalkit.errors import ConfigError

ORDER = {"type": "order_placed", "items": {"P20": 2}, "shipping": "standard", "name": "Alex Morgan",
         "address": "12 Quay Street, Harbourton", "total": 28.0}  # fmt: skip


def test_matching():
    assert matches(ORDER, {"type": "order_placed", "items": {"P20": 2}, "name": " alex  MORGAN"})
    assert not matches(ORDER, {"items": {"P20": 2, "P01": 1}})
    assert matches(ORDER, {"address~": "quay street"}) and not matches(ORDER, {"address~": "harbour road"})
    assert matches(ORDER, {"address~": ["nowhere", "Harbourton"]})
    assert matches(ORDER, {"total": 28.001}) and not matches(ORDER, {"total": 28.5})
    assert not matches(ORDER, {"missing": 1})
    assert not matches({"flag": True}, {"flag": 1})


def test_predicates():
    entries = [ORDER, {"type": "cart_add", "product": "P20"}, {"type": "cart_add", "product": "P01"}]
    assert check_predicate({"has": {"type": "cart_add", "product": "P01"}}, entries)
    assert not check_predicate({"none": {"type": "cart_add"}}, entries)
    assert check_predicate({"count": {"type": "cart_add"}, "n": 2}, entries)
    assert not check_predicate({"count": {"type": "order_placed"}, "n": 2}, entries)
    with pytest.raises(ValueError):
        check_predicate({"some": {}}, entries)


@pytest.mark.parametrize(
    ("spec", "answer", "ok"),
    [({"number": 91.99}, "The total was $91.99.", True), ({"number": 1240}, "1,240.00 EUR", True),
     ({"number": 45}, "It costs 54 dollars", False), ({"any": ["HD-4471"]}, "ticket hd-4471", True),
     ({"any": ["thursday"]}, "Friday", False), ({"number": 3}, None, False), ({"any": ["x"]}, "", False)],
)  # fmt: skip
def test_answers(spec, answer, ok):
    assert check_answer(spec, answer) is ok


def test_grade_is_all_or_nothing():
    task = {"check": {"answer": {"any": ["1002"]}, "record": [{"none": {"type": "order_placed"}}]}}
    assert grade(task, [], "order 1002")["total"] == 1.0
    g = grade(task, [ORDER], "order 1002")
    assert g["total"] == 0.0 and g["passed"] == 1 and g["n_checks"] == 2
    assert grade({"check": {}}, [], "x")["total"] == 0.0  # a task with nothing to check passes nothing


def test_the_task_file():
    tasks = load_tasks()
    es = load_evalset("data/evalsets/webapp-v1.json")  # an evalset too: run_batch and --limit work on it
    assert es.env == "webapp" and len(es.tasks) == len(tasks) >= 18
    assert {t["tier"] for t in tasks} == {"easy", "medium", "hard"}
    assert {t["app"] for t in tasks} == {"shop", "mail"}
    for t in tasks:
        assert t["check"] and t["solution"] and "{BASE}" in t["start"]
        assert grade(t, [], None)["total"] == 0.0  # doing nothing never passes
    login = [t for t in tasks if t["needs_login"]]
    assert login and all("password" in t["prompt"] for t in login)
    t = fill(tasks[-1], "http://127.0.0.1:9")
    assert "{BASE}" not in t["prompt"] + t["start"]
    assert (
        instruction("Do x.", "http://h/")
        == "You are interacting with a web application at http://h/. Your task: Do x."
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [("[", "not readable JSON"), ("[]", "no task list"), ('[{"task_id": "a"}]', "has no prompt, start"),
     ('[{"task_id": "a", "prompt": "p", "start": "http://x/"}]', "no {BASE}"),
     ('{"tasks": [{"task_id": "a", "prompt": "p", "start": "{BASE}/"}, {"task_id": "a", "prompt": "p", '
      '"start": "{BASE}/"}]}', "appears twice")],
)  # fmt: skip
def test_bad_task_files(tmp_path, content, says):
    path = tmp_path / "tasks.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=says.replace("{", "\\{")):
        load_tasks(path)
    with pytest.raises(ConfigError, match="not found"):
        load_tasks(tmp_path / "missing.json")
