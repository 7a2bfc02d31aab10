"""The viewer on τ²-bench results (through Streamlit's AppTest): the table lists each simulation, and an
episode steps through the agent's turns with the conversation below, the scripted greeting and the user
simulator's messages in it."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from evalkit.types import episode_key
from tests.records.importers import seed_tau2
from tests.viewer.viewer_runs import APP, open_row, rows


def _page(at: AppTest) -> str:
    parts = [str(e.value) for kind in ("text", "caption", "code", "subheader") for e in getattr(at, kind)]
    parts += [str(e.value).replace("\\", "") for e in at.markdown]
    return "\n".join(parts)


def test_a_tau2_results_file_steps_through_its_conversation(monkeypatch, tmp_path):
    path = seed_tau2.write_results(tmp_path / "gpt-4.1-mini_airline_default_gpt-4.1_2trials.json")
    monkeypatch.setenv("EVALKIT_RUNS", str(path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert len(rows(at)) == 6
    key = episode_key(seed_tau2.AGENT_LLM, "airline", "", "", "0", None, 0)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(view="episode", run=path.name, episode=key, step="1")
    at.run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    text = _page(at)
    assert "Step 1 of 4" in text and "get_reservation_details" in text
    assert "Transcript" in [h.value for h in at.subheader]
    assert "Hi! How can I help you today?" in text and "scripted by the harness" in text
    assert "I want to cancel reservation ZFA04Y." in text and "# Airline agent policy" in text
    at.button(key="step_next").click().run()
    text = _page(at)
    assert "Step 2 of 4" in text and "It is a business reservation. Shall I cancel it?" in text
    at.button(key="step_next").click().run()
    assert "Step 3 of 4" in _page(at) and "cancel_reservation" in _page(at)
    assert not at.exception


def test_the_table_opens_a_tau2_episode(monkeypatch, tmp_path):
    path = seed_tau2.write_results(tmp_path / "r.json")
    monkeypatch.setenv("EVALKIT_RUNS", str(path))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    open_row(at, 1)
    assert not at.exception and "Reward 1.000" in _page(at)
