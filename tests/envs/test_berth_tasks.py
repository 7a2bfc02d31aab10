"""Berth tasks: deterministic from their id, disrupted for real, tiered; the frozen evalset agrees with the
generator and its best plans hold."""

from __future__ import annotations

import pytest

from evalkit.envs.embedded.berth import reference
from evalkit.envs.embedded.berth.__main__ import main
from evalkit.envs.embedded.berth.grade import check
from evalkit.envs.embedded.berth.prompts import situation
from evalkit.envs.embedded.berth.tasks import TIERS, generate_task, parse_task_id, task_from_id
from evalkit.envs.evalsets import load_evalset

EVALSET = "data/evalsets/berth-test-150.json"


def test_a_task_id_names_the_same_instance_every_time():
    a, b = task_from_id("berth-test-0013"), generate_task("test", 13)
    assert a == b and a.instance.task_id == "berth-test-0013"
    assert generate_task("train", 13).instance != a.instance
    for bad in ("berth-test-13x", "canvas-test-0001", ""):
        with pytest.raises(ValueError, match="berth task id"):
            parse_task_id(bad)
    with pytest.raises(ValueError, match="split"):
        generate_task("dev", 1)


@pytest.mark.parametrize("index", range(0, 60, 7))
def test_the_disruption_breaks_the_current_plan(index):
    inst = generate_task("test", index).instance
    current = [{"vessel": v, "berth": b, "start": s} for v, (b, s) in inst.current.items()]
    c = check(inst, current)
    assert not c.feasible and inst.affected
    assert inst.affected == {v for x in c.violations for v in x.vessels} - {b.id for b in inst.berthed}
    assert inst.closures or inst.delays or inst.breakdowns
    text = situation(inst)
    assert all(f"| {v.id} |" in text for v in inst.vessels) and f"hour {inst.horizon}" in text
    assert all(v.hours and all(b in {x.id for x in inst.berths} for b in v.hours) for v in inst.vessels)


def test_the_frozen_evalset():
    es = load_evalset(EVALSET)
    assert es.env == "berth" and len(es.tasks) == reference.EVALSET_SIZE
    counts = {t: sum(r["tier"] == t for r in es.tasks) for t in TIERS}
    assert min(counts.values()) >= 40, counts
    assert len(es.select(subset="lite")) == 60 and len(es.select(subset="core30")) == 30
    assert set(es.subsets["core30"]) < set(es.subsets["lite"])
    assert {r["tier"] for r in es.select(subset="core30")} == set(TIERS)
    sizes = {t: [r["n_vessels"] for r in es.tasks if r["tier"] == t] for t in TIERS}
    assert max(sizes["easy"]) < min(sizes["hard"]) and sum(sizes["easy"]) < sum(sizes["medium"])
    for r in es.tasks:
        assert r["best_lower_bound"] is None or r["best_lower_bound"] <= r["best_objective"]
        assert r["best_optimal"] == (r["best_lower_bound"] == r["best_objective"])


def test_the_frozen_best_plans_hold_for_the_generated_tasks():
    """Generating all 150 takes ~20 s: the core30 subset stands for them (the benchmark checks all)."""
    es = load_evalset(EVALSET)
    for row in es.select(subset="core30"):
        task = task_from_id(row["task_id"])
        for field in ("tier", "difficulty_score", "conflict_density", "n_vessels"):
            assert row[field] == getattr(task, field), (row["task_id"], field)
        reference.verify(task.instance, reference.from_row(row))
        best = reference.best_known(task)
        assert best.source == "evalset" and best.objective == row["best_objective"]


def test_a_frozen_plan_that_no_longer_holds_is_refused():
    row = dict(reference.frozen_row("berth-test-0000"))
    task = task_from_id("berth-test-0000")
    row["best_objective"] -= 1
    with pytest.raises(ValueError, match="regenerate the evalset"):
        reference.verify(task.instance, reference.from_row(row))


def test_show_prints_the_situation(capsys):
    assert main(["--show", "berth-test-0004"]) == 0
    out = capsys.readouterr().out
    assert "Vessels to plan" in out and "Disruption" in out and "check_plan" in out


def test_a_task_outside_the_evalset_gets_a_searched_reference():
    task = min((generate_task("train", i) for i in range(6)), key=lambda t: t.n_vessels)
    assert reference.frozen_row(task.task_id) is None
    best = reference.best_known(task)
    assert best.source == "search" and reference.best_known(task) is best
    reference.verify(task.instance, best)
