"""The episode view shows each plan an episode sent as tables: its entries with the env's end and waiting
times and problems, and its violations. Records from real berth episodes (greedy and random baselines)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from evalkit.records.plans import violation_rows
from evalkit.run.episode import run_episode
from tests.viewer.viewer_runs import APP

TASK = "berth-test-0002"


@pytest.fixture(scope="module")
def berth_run(berth_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("berth") / "run"
    recs = {m: run_episode(f"baseline:{m}", berth_server, TASK, out=out) for m in ("greedy", "random")}
    return out, recs


def open_step(monkeypatch, run, key, step) -> AppTest:
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(view="episode", run=run.name, episode=key, step=str(step))
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_checked_plan_as_a_table(monkeypatch, berth_run):
    run, recs = berth_run
    rec = recs["greedy"]
    at = open_step(monkeypatch, run, rec.key, 1)
    text = "\n".join(str(m.value) for m in at.markdown).replace("\\", "")
    assert "Plan 1" in text and "check_plan" in text and "feasible" in text
    (table,) = [d.value for d in at.dataframe if "problems" in d.value.columns]
    assert not [d for d in at.dataframe if "message" in d.value.columns]  # a feasible plan: no violations
    assert list(table["vessel"]) == [e["vessel"] for e in rec.plans[0].plan]
    assert list(table["start"]) == [str(e["start"]) for e in rec.plans[0].plan]
    assert all(int(e) > int(s) for s, e in zip(table["start"], table["end"], strict=True))


def test_violations_of_a_random_plan_as_a_table(monkeypatch, berth_run):
    run, recs = berth_run
    rec = recs["random"]
    last = rec.plans[-1]
    at = open_step(monkeypatch, run, rec.key, last.turn)
    tables = [d.value for d in at.dataframe]
    violations = next(t for t in tables if "message" in t.columns)
    assert list(violations["kind"]) == [v["kind"] for v in violation_rows(last)] and len(violations) > 0
    entries = next(t for t in tables if "vessel" in t.columns and "problems" in t.columns)
    assert any(entries["problems"]), "the entries that break a rule say which"
