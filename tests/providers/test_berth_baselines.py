"""The berth baselines: greedy reads the situation the model reads and plans feasibly (checked by the env's
grader, an independent implementation of the rules); random plans have the right shape; both in a batch."""

from __future__ import annotations

import statistics

import pytest

from evalkit.envs.embedded.berth.grade import check
from evalkit.envs.embedded.berth.model import berthed_end
from evalkit.envs.embedded.berth.prompts import opening
from evalkit.envs.embedded.berth.tasks import generate_task, task_from_id
from evalkit.envs.evalsets import load_evalset
from evalkit.providers.baseline import create
from evalkit.providers.baseline.greedy import greedy_plan, parse_port
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch

EVALSET = "data/evalsets/berth-test-150.json"


@pytest.mark.parametrize("index", [0, 4, 7, 19])
def test_greedy_reads_the_situation_tables(index):
    inst = generate_task("test", index).instance
    port = parse_port(opening(inst))
    assert port.horizon == inst.horizon and port.gap == inst.gap
    assert port.berths == [b.id for b in inst.berths]
    assert [(s.id, s.arrival, s.weight, s.hours, s.current) for s in port.ships] == [
        (v.id, v.arrival, v.weight, v.hours, inst.current[v.id][0]) for v in inst.vessels
    ]
    assert port.free_from == {b.berth: berthed_end(inst, b) + inst.gap for b in inst.berthed}
    assert port.closures == [(c.berth, c.start, c.end) for c in inst.closures]
    assert port.slow == [(d.berth, d.start, d.end) for d in inst.breakdowns]
    assert parse_port("no port here") is None


def test_greedy_plans_are_feasible():
    """Greedy knows the rules only from the instructions; the grader must agree its plans keep them."""
    for row in load_evalset(EVALSET).select(subset="core30"):
        inst = task_from_id(row["task_id"]).instance
        c = check(inst, greedy_plan(parse_port(opening(inst))))
        assert c.feasible, (row["task_id"], c.violations[:3])
        assert c.objective >= row["best_objective"]


def test_greedy_outside_a_berth_situation_does_nothing():
    agent = create("greedy", system="", tools=[])
    agent.user("Recreate the target.")
    assert agent.step().calls == []


def test_greedy_and_random_in_a_batch(berth_server, tmp_path):
    run = run_batch(
        ["baseline:greedy", "baseline:random"], berth_server, out=tmp_path / "run", evalset=EVALSET,
        subset="lite", limit=6, concurrency=3, max_turns=10, progress=False,
    )  # fmt: skip
    assert run.ran == 12 and run.errors == 0
    recs = list(read_records(tmp_path / "run"))
    by = {m: [r for r in recs if r.model == m] for m in ("baseline:greedy", "baseline:random")}
    for rec in recs:
        assert rec.mode == "text" and rec.end_reason == "submitted" and rec.error_class is None, rec.error
        n = len(task_from_id(rec.task_id).instance.vessels)
        assert rec.plans and rec.plans[-1].final and rec.plans[-1].tool == "submit_plan"
        assert all(isinstance(p.plan, list) and len(p.plan) == n for p in rec.plans)
        assert all({"vessel", "berth", "start"} == set(e) for p in rec.plans for e in p.plan)
        assert rec.drafts == sum(p.tool == "check_plan" for p in rec.plans)
        assert rec.final_doc == rec.plans[-1].plan and rec.reward == rec.plans[-1].answer["reward"]
    assert all(r.drafts == 1 and 0 < r.reward <= 1 and r.grade["feasible"] for r in by["baseline:greedy"])
    greedy = statistics.mean(r.reward for r in by["baseline:greedy"])
    assert greedy > statistics.mean(r.reward for r in by["baseline:random"])
