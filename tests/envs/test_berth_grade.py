"""The berth grader on a hand-made port: each violation kind, the objective, the plan argument's forms and
the reward's partial credit."""

from __future__ import annotations

import pytest

from evalkit.envs.embedded.berth.grade import (
    KINDS,
    BestKnown,
    PlanFormatError,
    check,
    grade,
    parse_plan,
    reward,
)
from evalkit.envs.embedded.berth.model import end_hour
from tests.envs.berth_ports import as_plan, tiny

# V09 is alongside B2 with 3 h of work at half speed (breakdown 0–6): it leaves at hour 6, so B2 is free
# from 7 (clearance 1). B1 is closed 5–9. V02 is the vessel the disruption hit. This plan is optimal.
GOOD = [("V01", "B1", 9), ("V02", "B2", 15), ("V03", "B2", 7)]
FIRST, SECOND, THIRD = GOOD


def test_a_feasible_plan_and_its_objective():
    c = check(tiny(), as_plan(GOOD))
    assert c.feasible and c.violations == []
    # waiting: V01 9 x 2, V02 13 x 1, V03 6 x 3; V02 left its current berth B1, but it was affected
    assert (c.waiting, c.moved, c.objective) == (49, [], 49)
    ends = {s.vessel: s.end for s in c.schedule}
    assert ends == {"V09": 6, "V01": 15, "V02": 21, "V03": 14}
    assert [s["vessel"] for s in c.to_dict()["schedule"]] == ["V01", "V03", "V02"]  # not the one alongside


def test_a_breakdown_slows_the_stays_that_cross_it():
    inst = tiny()
    assert end_hour(inst, "B2", 2, 5) == 9  # hours 2–5 do half an hour each, then three full hours
    assert end_hour(inst, "B2", 6, 5) == 11 and end_hour(inst, "B1", 2, 5) == 7


def test_moving_an_unaffected_vessel_costs_the_move_cost():
    c = check(tiny(), as_plan([("V01", "B2", 15), ("V02", "B1", 9), THIRD]))
    # V01 waits 15 x 2 at B2 instead of its current B1: 3 more; V02 waits 7; V03 6 x 3
    assert c.feasible and c.moved == ["V01"] and c.objective == 30 + 7 + 18 + 3


@pytest.mark.parametrize(
    ("plan", "kind", "vessels"),
    [
        (["V01 at B1"], "bad_entry", []),
        ([{"vessel": "V01", "berth": "B1"}], "bad_entry", ["V01"]),
        ([{"vessel": "V01", "berth": "B1", "start": 2.5}], "bad_entry", ["V01"]),
        ([{"vessel": "V01", "berth": "B1", "start": "3"}], "bad_entry", ["V01"]),
        ([{"vessel": "V01", "berth": "B1", "start": True}], "bad_entry", ["V01"]),
        ([{"vessel": ["V01"], "berth": "B1", "start": 0}], "bad_entry", []),
        (as_plan([*GOOD, ("V77", "B1", 20)]), "unknown_vessel", []),
        (as_plan([("V01", "B9", 0), SECOND, THIRD]), "unknown_berth", ["V01"]),
        (as_plan([*GOOD, ("V01", "B1", 20)]), "duplicate_vessel", ["V01"]),
        (as_plan([FIRST, SECOND]), "missing_vessel", ["V03"]),
        (as_plan([*GOOD, ("V09", "B1", 20)]), "berthed_moved", ["V09"]),
        (as_plan([FIRST, SECOND, ("V03", "B1", 20)]), "does_not_fit", ["V03"]),
        (as_plan([FIRST, ("V02", "B1", 1), THIRD]), "before_arrival", ["V02"]),
        (as_plan([FIRST, ("V02", "B2", 33), THIRD]), "after_horizon", ["V02"]),
        (as_plan([("V01", "B1", 3), SECOND, THIRD]), "berth_closed", ["V01"]),
        (as_plan([FIRST, SECOND, ("V03", "B2", 5)]), "overlap", ["V09", "V03"]),
        (as_plan([FIRST, ("V02", "B2", 14), THIRD]), "overlap", ["V03", "V02"]),
    ],
)
def test_each_violation_kind(plan, kind, vessels):
    found = check(tiny(), plan).violations
    (v,) = [v for v in found if v.kind == kind]
    assert v.vessels == vessels and v.message
    if len(plan) >= 3:  # a whole plan with one fault shows only that one
        assert [x.kind for x in found] == [kind]


def test_every_kind_is_tested_and_ordered():
    tested = {kind for _plan, kind, _v in test_each_violation_kind.pytestmark[0].args[1]}
    assert tested == set(KINDS)
    found = [v.kind for v in check(tiny(), as_plan([("V01", "B1", 3), ("V02", "B9", 0)])).violations]
    assert found == ["unknown_berth", "missing_vessel", "berth_closed"]


def test_violations_name_the_hours_involved():
    (v,) = check(tiny(), as_plan([("V01", "B1", 3), SECOND, THIRD])).violations
    assert (v.berth, v.hours) == ("B1", [5, 9]) and "closure" in v.message
    (v,) = check(tiny(), as_plan([FIRST, SECOND, ("V03", "B2", 5)])).violations
    assert (
        v.hours == [5, 7] and "alongside until hour 6" in v.message and "hour 7 at the earliest" in v.message
    )
    (v,) = check(tiny(), as_plan([FIRST, ("V02", "B2", 14), THIRD])).violations
    assert v.hours == [14, 15] and "hour 15 at the earliest" in v.message
    (v,) = check(tiny(), as_plan([FIRST, SECOND, ("V03", "B1", 20)])).violations
    assert "does not handle bulk" in v.message


def test_a_vessel_alongside_may_be_listed_where_it_is():
    c = check(tiny(), as_plan([*GOOD, ("V09", "B2", -3)]))
    assert c.feasible and c.objective == 49


def test_no_objective_while_the_plan_does_not_place_every_vessel():
    assert check(tiny(), as_plan(GOOD[:2])).objective is None
    timing_only = check(tiny(), as_plan([("V01", "B1", 3), SECOND, THIRD]))
    assert not timing_only.feasible and timing_only.objective == 2 * 3 + 13 + 18


def test_the_plan_argument_forms():
    listed = as_plan(GOOD)
    assert parse_plan(listed) == listed
    assert parse_plan('[{"vessel": "V01", "berth": "B1", "start": 9}]') == listed[:1]
    for bad in ({"plan": listed}, '{"plan": []}', "V01 at B1", 7, None):
        with pytest.raises(PlanFormatError, match="list"):
            parse_plan(bad)


BEST = BestKnown(49, tuple(GOOD), True, "evalset")


def test_reward_is_one_at_the_best_known_plan_and_less_for_a_worse_one():
    inst = tiny()
    assert grade(inst, as_plan(GOOD), BEST)["total"] == 1.0
    worse = grade(inst, as_plan([("V01", "B2", 15), ("V02", "B1", 9), THIRD]), BEST)
    # objective 58 against 49: gap 9 / max(49, total weight 6)
    assert worse["feasible"] and worse["objective"] == 58 and worse["moved_unaffected"] == 1
    assert worse["move_penalty"] == 3 and worse["gap"] == pytest.approx(9 / 49, abs=1e-6)
    assert worse["total"] == pytest.approx(49 / 58, abs=1e-6)
    bad = grade(inst, as_plan([("V01", "B1", 3), SECOND, THIRD]), BEST)
    assert bad["total"] == 0.0 and not bad["feasible"] and bad["violation_kinds"] == {"berth_closed": 1}


def test_reward_of_a_plan_better_than_the_best_known():
    rubric = grade(tiny(), as_plan(GOOD), BestKnown(60, (), False, "search"))
    assert rubric["total"] == 1.0 and rubric["beats_best_known"] and rubric["gap"] == 0.0


def test_partial_credit_scale():
    assert reward(10, 10, 6) == (1.0, 0.0)
    assert reward(20, 10, 6) == (0.5, 1.0)  # excess equal to the best known cost: half
    assert reward(3, 0, 6) == (pytest.approx(1 / 1.5), 0.5)  # best 0: the excess is read against W = 6
    assert 0 < reward(10**6, 10, 6)[0] < 0.001
