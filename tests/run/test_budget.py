"""Budgets (`evalkit.run.budget`): a batch that stops at `--max-cost` within one episode's cost and says so, a
resume that raises it, an episode that ends as `cost_limit` at `--episode-max-cost`, and a budget refused for
a model evalkit cannot price. The model is the stand-in over real HTTP (the Anthropic SDK), priced by a user
price file."""

from __future__ import annotations

import json

import pytest

from evalkit.analysis import report
from evalkit.cli import main
from evalkit.errors import ConfigError
from evalkit.providers import prices
from evalkit.providers.standin import SPEC
from evalkit.records.loading import load_runs
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch
from tests.providers.fakes import Reply

EVALSET = "data/evalsets/canvas-test-300.json"
ASK = dict(evalset=EVALSET, modes=["description"], max_turns=6, max_retries=1, progress=False)


def _costs(out) -> list[float]:
    """Every episode the run recorded, re-run ones too (they were paid for)."""
    return [r.cost_usd for r in read_records(out, latest=False)]


def test_a_batch_stops_within_one_episode_of_its_budget_and_a_resume_raises_it(
    priced_standin, canvas_server, tmp_path
):
    out, budget = tmp_path / "run", 0.03
    run = run_batch([SPEC], canvas_server, **ASK, limit=12, concurrency=2, max_cost=budget, out=out)
    costs = _costs(out)
    assert all(c is not None and c > 0 for c in costs)
    assert run.not_run == 12 - len(costs) > 0 and run.budget_stop["max_cost"] == budget
    # Stopped when the next episode would pass it: within one episode's cost of the budget, either side.
    assert abs(sum(costs) - budget) <= max(costs)
    meta = json.loads((out / "run.json").read_text())
    assert meta["max_cost"] == budget and meta["budget_stop"]["spent"] <= sum(costs)
    assert "stopped at its budget" in (out / "summary.md").read_text()
    assert json.loads((out / "summary.json").read_text())["budget_stop"]["max_cost"] == budget
    shown = report.settings_html([str(out)], load_runs([out]))
    assert "budget (--max-cost)" in shown and "stopped at its budget" in shown

    again = run_batch([SPEC], canvas_server, **ASK, limit=12, concurrency=2, max_cost=budget, out=out)
    assert again.ran == 0 and again.budget_stop is not None  # what was spent counts: nothing starts

    # The command line raises it: the rest runs, and run.json no longer says the budget stopped it.
    argv = ["run", "--base-url", canvas_server.base_url, "--models", SPEC, "--evalset", EVALSET, "--limit",
            "12", "--modes", "description", "--max-turns", "6", "--max-retries", "1", "--no-progress",
            "--max-cost", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) in (0, 3)  # 3: the stand-in's endpoint goes down for good in some episodes
    assert len({r.task_id for r in read_records(out)}) == 12
    meta = json.loads((out / "run.json").read_text())
    assert meta["max_cost"] == 1 and meta["budget_stop"] is None
    assert "budget" not in (out / "summary.md").read_text()


def test_an_episode_past_its_cost_limit_ends_as_cost_limit_and_is_scored(
    priced_standin, canvas_server, tmp_path
):
    out, limit = tmp_path / "run", 0.004
    run_batch([SPEC], canvas_server, **ASK, limit=3, concurrency=1, episode_max_cost=limit, out=out)
    recs = list(read_records(out))
    assert len(recs) == 3
    for rec in recs:
        assert rec.end_reason == "cost_limit" and rec.error_class is None
        assert rec.reward is not None  # scored as the env scores an unfinished one (here: submitted for it)
        said = rec.info["cost_limit"]
        last = prices.turn_cost(SPEC, rec.turns[-1], rec.started)
        # It ended at the first look after passing the limit: within the last turn's cost of it.
        assert limit < said["spent"] <= limit + last and said["spent"] == pytest.approx(rec.cost_usd)
    meta = json.loads((out / "run.json").read_text())
    assert meta["episode_max_cost"] == limit and meta["outcome"]["episode_max_cost"] == limit
    with pytest.raises(ConfigError, match="episode_max_cost"):  # it changes what an episode is
        run_batch([SPEC], canvas_server, **ASK, limit=3, episode_max_cost=1.0, out=out)


def test_a_budget_for_a_model_without_a_price_is_refused_before_any_work(standin, canvas_server, tmp_path):
    out = tmp_path / "run"
    for kw in ({"max_cost": 1.0}, {"episode_max_cost": 0.1}):
        with pytest.raises(ConfigError, match="no price for vllm:standin.*EVALKIT_PRICES"):
            run_batch(["vllm:standin"], canvas_server, **ASK, limit=2, out=out, **kw)
    assert not out.exists() and not standin.bodies


def test_offline_agents_cost_nothing_and_a_budget_never_stops_them(canvas_server, tmp_path):
    out = tmp_path / "run"
    run = run_batch(["baseline:random"], canvas_server, **ASK, limit=3, max_cost=1e-9, out=out)
    assert run.ran == 3 and run.budget_stop is None
    assert [r.cost_usd for r in read_records(out)] == [None] * 3  # (no model: no price, and none needed)


def test_a_budget_over_a_run_holding_episodes_of_unknown_cost_is_refused(
    standin, priced_standin, canvas_server, tmp_path
):
    """What a run directory spent counts against its budget: episodes whose cost is unknown (a model without
    a price, here the vllm stand-in) make it uncountable, which is said before any work, not read as 0."""
    standin.play(lambda body: Reply(calls=[("submit", {})]))
    out = tmp_path / "run"
    run_batch(["vllm:standin"], canvas_server, **ASK, limit=2, out=out)
    before = (out / "trace.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="holds episodes of vllm:standin whose cost is unknown"):
        run_batch([SPEC], canvas_server, **ASK, limit=2, max_cost=1.0, out=out)
    assert (out / "trace.jsonl").read_bytes() == before
