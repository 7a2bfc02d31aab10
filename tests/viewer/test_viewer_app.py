"""The viewer driven through Streamlit's AppTest: table, filters, search, stepping, A vs B, deep links."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from evalkit import traces
from evalkit.types import episode_key
from tests.viewer.viewer_runs import APP, MODELS, SAMPLE_RUN

TRACER, RANDOM = MODELS


def page(at: AppTest) -> str:
    """Everything the page shows as text, in one string."""
    parts = []
    for kind in ("text", "caption", "code", "markdown", "warning", "error", "info", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    return "\n".join(parts)


def captions(at: AppTest) -> list[str]:
    return [c for img in at.image for c in img.captions]


def table(at: AppTest):
    return at.dataframe[0].value


@pytest.fixture
def app(monkeypatch, sample_run):
    def make(*runs, **query) -> AppTest:
        monkeypatch.setenv("EVALKIT_RUNS", ":".join(str(r) for r in (runs or (sample_run,))))
        at = AppTest.from_file(str(APP), default_timeout=60)
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        assert not at.exception, at.exception
        return at

    return make


def test_table_lists_every_episode(app):
    at = app()
    df = table(at)
    assert len(df) == 8
    assert {"model", "task_id", "tier", "reward", "end_reason", "error_class", "n_turns", "cost_usd"} <= set(
        df.columns
    )
    assert "8 of 8 episodes" in page(at)


def test_filters_narrow_the_table(app):
    at = app()
    at.multiselect(key="f_model").set_value([RANDOM]).run()
    assert len(table(at)) == 4 and set(table(at)["model"]) == {RANDOM}
    at.multiselect(key="f_tier").set_value(["easy"]).run()
    assert len(table(at)) == 2
    at.multiselect(key="f_model").set_value([]).run()
    at.multiselect(key="f_tier").set_value([]).run()
    at.multiselect(key="f_error_class").set_value(["env_error"]).run()
    assert list(table(at)["task_id"]) == ["canvas-test-0004"]
    at.multiselect(key="f_error_class").set_value([]).run()
    at.slider(key="f_reward").set_value((0.5, 0.93)).run()
    assert sorted(table(at)["reward"]) == [0.88, 0.93]  # the unscored episode is left out with a range set
    at.checkbox(key="f_unscored").check().run()
    assert len(table(at)) == 3


def test_search_uses_a_cached_index(app, monkeypatch):
    at = app()
    reads = []
    real = traces.iter_offsets
    monkeypatch.setattr(traces, "iter_offsets", lambda run: reads.append(run) or real(run))
    at.text_input(key="f_search").set_value("Zebra idea").run()
    df = table(at)
    assert list(df["task_id"]) == ["canvas-test-0003"] and list(df["model"]) == [TRACER]
    at.text_input(key="f_search").set_value("plain").run()
    assert len(table(at)) == 7
    at.text_input(key="f_search").set_value("no such words anywhere").run()
    assert len(table(at)) == 0
    assert len(reads) <= 1  # one pass to build the index (none if an earlier test built it), then memory


def test_sort_by_any_column(app):
    at = app()
    at.selectbox(key="sort_by").set_value("reward").run()
    at.toggle(key="sort_desc").set_value(True).run()
    rewards = list(table(at)["reward"])
    assert rewards[:3] == [0.93, 0.88, 0.41]
    at.selectbox(key="sort_by").set_value("task_id").run()
    assert list(table(at)["task_id"])[0].endswith("0004")


def test_open_an_episode_and_step_through_it(app):
    at = app()
    at.selectbox(key="sort_by").set_value("reward").run()
    at.toggle(key="sort_desc").set_value(True).run()
    at.number_input(key="open_row").set_value(1).run()
    at.button(key="open_btn").click().run()
    assert at.radio(key="view").value == "Episode"
    text = page(at)
    assert "canvas-test-0001" in text and "Reward 0.930" in text and "Step 0 of 3" in text
    assert captions(at) == ["Frame at step 0", "Target", "Final render"]
    at.button(key="step_next").click().run()
    text = page(at)
    assert "Step 1 of 3" in text and f"{TRACER} turn 1 on canvas-test-0001" in text
    assert (
        '"kind": "rect"' in text and "added element e1" in text
    )  # a tool call with JSON args and its result
    assert "Returned image 1" in captions(at) and "Frame at step 1" in captions(at)
    at.button(key="step_next").click().run()
    assert "Step 2 of 3" in page(at) and "error: bad colour" in page(at)
    at.slider(key="step").set_value(3).run()
    assert "Step 3 of 3" in page(at) and at.button(key="step_next").disabled
    at.button(key="step_prev").click().run()
    assert "Step 2 of 3" in page(at)
    key = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0001", None, 0)
    assert at.query_params["episode"] == key and at.query_params["step"] == "2"
    assert at.query_params["view"] == "episode"


def test_deep_link_opens_a_step(app, sample_run):
    key = episode_key(RANDOM, "canvas", "tools", "reference", "canvas-test-0002", None, 0)
    at = app(view="episode", run=sample_run.name, episode=key, step="2")
    text = page(at)
    assert "Step 2 of 3" in text and f"{RANDOM} turn 2 on canvas-test-0002" in text
    at = app(run=str(sample_run), episode=key, step="99")  # a path works too; the step is clamped
    assert "Step 3 of 3" in page(at)


def test_deep_link_cannot_open_another_directory(app, tmp_path):
    from tests.viewer.viewer_runs import write_sample_run

    other = write_sample_run(tmp_path / "not-offered")
    key = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0001", None, 0)
    at = app(view="episode", run=str(other), episode=key, step="1")
    assert "Pick an episode" in page(at)
    at = app(view="episode", run="sample", episode="no-such-key")
    assert "No episode" in page(at)


def test_a_vs_b_lists_what_a_solved_and_steps_both(app):
    at = app()
    at.radio(key="view").set_value("A vs B").run()
    at.selectbox(key="ab_a").set_value(f"{TRACER} · sample").run()
    at.selectbox(key="ab_b").set_value(f"{RANDOM} · sample").run()
    at.toggle(key="ab_only").set_value(True).run()
    solved = at.dataframe[0].value
    assert list(solved["task_id"]) == ["canvas-test-0001", "canvas-test-0003"]
    assert "A solved, B failed: 2" in page(at) and "unscored: 1" in page(at)
    at.selectbox(key="ab_task").set_value("canvas-test-0003").run()
    text = page(at)
    assert "Reward 0.880" in text and "Reward 0.300" in text
    at.button(key="ab_step_next").click().run()
    text = page(at)
    assert f"{TRACER} turn 1 on canvas-test-0003" in text and f"{RANDOM} turn 1 on canvas-test-0003" in text
    assert at.query_params["view"] == "ab" and at.query_params["step"] == "1" and "b" in at.query_params


def test_a_vs_b_across_runs_by_deep_link(app, sample_run, second_run):
    ka = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0002", None, 0)
    at = app(sample_run, second_run, view="ab", run="sample", episode=ka, brun="again", b=ka, step="3")
    text = page(at)
    assert at.selectbox(key="ab_a").value == f"{TRACER} · sample"
    assert at.selectbox(key="ab_b").value == f"{TRACER} · again"
    assert at.selectbox(key="ab_task").value == "canvas-test-0002"
    assert f"{TRACER} turn 3 on canvas-test-0002" in text and "(this episode has ended)" in text


def test_summary_tab(app, sample_run, second_run):
    at = app(sample_run, second_run)
    at.radio(key="view").set_value("Summary").run()
    assert not at.exception
    assert len(at.dataframe) >= 1
    assert "failed:" not in page(at)


def test_ownloop_episode_shows_screenshot_raw_output_and_action(app):
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "fixtures" / "ownloop_run"
    if not run.is_dir():
        pytest.skip("no own-loop fixture")
    at = app(run)
    assert len(table(at)) >= 1
    at.button(key="open_btn").click().run()
    at.button(key="step_next").click().run()
    assert not at.exception
    text = page(at)
    assert "Raw model output" in text and "Parsed action" in text
    assert "Screenshot at step 1" in captions(at)


@pytest.mark.skipif(not SAMPLE_RUN.is_dir(), reason="data/sample-run is not committed yet")
def test_committed_sample_run(app):
    at = app(SAMPLE_RUN)
    assert len(table(at)) > 0
    at.button(key="open_btn").click().run()
    at.button(key="step_next").click().run()
    assert not at.exception and "Step 1 of" in page(at)
    at.radio(key="view").set_value("A vs B").run()
    assert not at.exception


def test_no_runs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALKIT_RUNS", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception and "No runs" in page(at)
