"""The viewer driven through Streamlit's AppTest on the committed `data/sample-run` (two offline models, two
modes, six canvas tasks): table, filters, search, stepping, A vs B, deep links, summary. Synthetic runs only
where the sample lacks something: an unscored episode, repeats, own-loop and tool-planning imports."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from evalkit.records import importers
from evalkit.types import episode_key
from evalkit.view import search
from evalkit.view import support as vs
from tests.viewer.viewer_runs import APP, MODELS, SAMPLE_RUN, open_row, rows, sort_by

TRACER, RANDOM = MODELS
STANDIN = "anthropic:evalkit-standin@low"
"""The sample's model run: the stand-in (evalkit/providers/standin.py), on the same tasks as the two
baselines."""
LABEL = SAMPLE_RUN.name
TASKS = ["canvas-test-0003", "canvas-test-0010", "canvas-test-0012", "canvas-test-0024", "canvas-test-0061"]
TASKS += ["canvas-test-0109"]


def key(model: str, mode: str, task: str, repeat: int = 0) -> str:
    return episode_key(model, "canvas", "tools", mode, task, None, repeat)


def page(at: AppTest) -> str:
    """Everything the page shows as text, in one string (expander labels with their Markdown escapes
    taken out)."""
    parts = []
    for kind in ("text", "caption", "code", "warning", "error", "info", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    parts += [str(e.value).replace("\\", "") for e in at.markdown]
    parts += [e.label.replace("\\", "") for e in at.expander]
    return "\n".join(parts)


def healthy(at: AppTest) -> AppTest:
    """No exception, and no error or warning element: the app reports its own failures that way."""
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert not at.warning, [w.value for w in at.warning]
    return at


def captions(at: AppTest) -> list[str]:
    """Captions of the captioned images (the filmstrip's thumbnails have none)."""
    return [c for img in at.image for c in img.captions if c]


def table(at: AppTest):
    return rows(at, "table")


def pick_pair(at: AppTest, task: str, mode: str) -> None:
    row = {"env": "canvas", "surface": "tools", "mode": mode, "task_id": task, "skin": None}
    at.selectbox(key="ab_task").set_value(vs.pair_id(row, vs.PAIR_KEYS)).run()


@pytest.fixture
def app(monkeypatch):
    def make(*runs, **query) -> AppTest:
        monkeypatch.setenv("EVALKIT_RUNS", ":".join(str(r) for r in (runs or (SAMPLE_RUN,))))
        at = AppTest.from_file(str(APP), default_timeout=60)
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        assert not at.exception, at.exception
        return at

    return make


def test_table_lists_every_episode(app):
    at = healthy(app())
    df = table(at)
    assert len(df) == 36
    assert {"model", "mode", "task_id", "tier", "reward", "end_reason", "n_turns"} <= set(df.columns)
    assert "surface" not in df.columns  # one value in every episode
    assert set(df["model"]) == {*MODELS, STANDIN} and set(df["mode"]) == {"reference", "description"}
    assert sorted(set(df["task_id"])) == TASKS
    assert "36 of 36 episodes" in page(at)


def test_filters_narrow_the_table(app):
    at = app()
    at.multiselect(key="f_model").set_value([RANDOM]).run()
    assert len(table(at)) == 12 and set(table(at)["model"]) == {RANDOM}
    at.multiselect(key="f_mode").set_value(["description"]).run()
    assert len(table(at)) == 6 and set(table(at)["mode"]) == {"description"}
    at.multiselect(key="f_tier").set_value(["easy"]).run()
    assert sorted(table(at)["task_id"]) == ["canvas-test-0010", "canvas-test-0012"]
    for col in ("model", "mode", "tier"):
        at.multiselect(key=f"f_{col}").set_value([]).run()
    at.slider(key="f_reward").set_value((0.99, 1.0)).run()
    df = table(at)  # the six descriptions and the 0.998 on canvas-test-0012 by reference of the tracer, and
    # the same of the stand-in but the description an endpoint error left unscored
    assert len(df) == 13 and set(df["model"]) == {TRACER, STANDIN}
    assert "13 of 36 episodes" in page(at)
    healthy(at)


def test_unscored_episodes_under_a_reward_range(app, synth_run):
    at = app(synth_run)  # the committed sample has no unscored episode
    at.multiselect(key="f_error_class").set_value(["env_error"]).run()
    assert list(table(at)["task_id"]) == ["canvas-test-0004"]
    at.multiselect(key="f_error_class").set_value([]).run()
    at.slider(key="f_reward").set_value((0.5, 0.93)).run()
    assert sorted(table(at)["reward"]) == ["0.880", "0.930"]  # the unscored one is left out with a range set
    at.checkbox(key="f_unscored").check().run()
    assert len(table(at)) == 3
    k = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0004", None, 0)
    at = app(synth_run, view="episode", run=synth_run.name, episode=k)
    assert "Reward unscored" in page(at) and "connection to the env was lost" in page(at)
    said = [e.label.replace("\\", "") for e in at.expander if "ended with an error" in e.label]
    assert said == [":red[The episode ended with an error and is unscored: connection to the env was lost]"]


def test_search_uses_a_cached_index(app, monkeypatch):
    at = app()
    reads = []
    real = search._complete_lines
    monkeypatch.setattr(
        search, "_complete_lines", lambda path, start: reads.append(start) or real(path, start)
    )
    at.text_input(key="f_search").set_value("(ROUND 2)").run()
    df = table(at)
    assert sorted(df["task_id"]) == ["canvas-test-0024", "canvas-test-0061", "canvas-test-0109"]
    assert set(df["model"]) == {TRACER} and set(df["mode"]) == {"reference"} and len(df) == 3
    at.text_input(key="f_search").set_value("brief").run()
    assert len(table(at)) == 12 and set(table(at)["mode"]) == {"description"}
    at.text_input(key="f_search").set_value("no such words anywhere").run()
    assert len(table(at)) == 0
    assert reads.count(0) <= 1  # one pass to build the index (none if an earlier test built it), then memory
    healthy(at)


def test_sort_by_any_column(app):
    """What a click on a column's name does (`viewer.table.sort_by`; the browser test clicks one)."""
    at = app()
    sort_by(at, "reward")
    assert list(table(at)["reward"])[:2] == ["0.011", "0.011"]
    sort_by(at, "reward")  # again: the other way
    rewards = list(table(at)["reward"])  # as the cells read: a missing reward says why, never "None"
    assert rewards[:13] == ["1.000"] * 11 + ["0.998"] * 2 and rewards[-2:] == ["unscored"] * 2
    assert not any(v in (None, "None") for c in table(at).columns for v in table(at)[c])
    sort_by(at, "task_id")
    assert list(table(at)["task_id"])[:4] == ["canvas-test-0003"] * 4
    assert list(table(at)["#"])[:3] == ["1", "2", "3"]  # the row numbers follow the order shown
    sort_by(at, "#")  # the order of the trace
    assert list(table(at)["task_id"])[:2] == ["canvas-test-0010"] * 2
    healthy(at)


def test_a_click_names_the_table_it_was_made_on():
    """A row is asked for by its position in the table the browser had: a table sorted or grown since is
    another table, and the click opens nothing (`viewer.rows`)."""
    import polars as pl

    from viewer.rows import identity

    shown = pl.DataFrame({"run": ["r", "r", "s"], "key": ["a", "b", "a"], "first_hit": [None, 2, None]})
    assert identity(shown) == identity(shown.clone())
    others = [shown.reverse(), shown.head(2), shown.with_columns(first_hit=pl.lit(1)), shown.tail(0)]
    assert len({identity(shown), *map(identity, others)}) == 1 + len(others)


def test_open_an_episode_and_step_through_it(app):
    at = app()
    at.multiselect(key="f_model").set_value([TRACER]).run()
    at.multiselect(key="f_mode").set_value(["reference"]).run()
    at.multiselect(key="f_task_id").set_value(["canvas-test-0010"]).run()
    assert len(table(at)) == 1 and "Click a row to open its episode;" in page(at)
    open_row(at, 1)
    assert at.radio(key="view").value == "Episode"
    text = page(at)
    assert f"{TRACER} · canvas tools/reference · canvas-test-0010 · tier easy · repeat 0" in text
    assert "Reward 0.675 · ended submitted · 3 turns · 6 tool calls" in text
    # It opens at the first step the model acted in, the target beside the frame that step left.
    assert "Step 1 of 3" in text and captions(at)[:3] == ["Target", "After step 1", "Final render"]
    assert "adding 3 shapes (3/3 found in the reference)" in text
    assert '"kind": "rect"' in text and '{"id": "e1"}' in text  # a tool call with JSON args and its result
    assert 'add_element("kind": "rect", "x": ' in text  # and the call on one line
    grade = at.dataframe[0].value  # the grade components, in the details popover
    assert {"structure", "visual", "total"} <= set(grade["component"])
    at.button(key="step_next").click().run()
    assert "Step 2 of 3" in page(at) and "Returned image 1" in captions(at)  # view_canvas returned a picture
    at.slider(key="step").set_value(3).run()
    assert "Step 3 of 3" in page(at) and at.button(key="step_next").disabled
    at.button(key="step_prev").click().run()
    assert "Step 2 of 3" in page(at)
    assert at.query_params["episode"] == key(TRACER, "reference", "canvas-test-0010")
    assert at.query_params["step"] == "2" and at.query_params["view"] == "episode"
    at.slider(key="step").set_value(0).run()
    assert "Step 0 of 3" in page(at) and "Start" in captions(at) and at.button(key="step_prev").disabled
    healthy(at)


def test_deep_link_opens_a_step(app):
    k = key(RANDOM, "reference", "canvas-test-0010")
    at = healthy(app(view="episode", run=LABEL, episode=k, step="2"))
    text = page(at)
    assert "Step 2 of 6" in text and "random turn 2/5: delete_element, add_element, add_element" in text
    at = healthy(app(run=str(SAMPLE_RUN), episode=k, step="99"))  # a path works too; the step is clamped
    assert "Step 6 of 6" in page(at)


def test_deep_link_cannot_open_another_directory(app, sample_copy):
    k = key(TRACER, "reference", "canvas-test-0010")
    at = app(view="episode", run=str(sample_copy), episode=k, step="1")  # a copy that was not offered
    assert "Pick an episode" in page(at)
    at = app(view="episode", run=LABEL, episode="no-such-key")
    assert "No episode" in page(at)


def test_a_vs_b_pairs_task_surface_and_mode(app):
    at = app()
    at.radio(key="view").set_value("A vs B").run()
    at.selectbox(key="ab_a").set_value(f"{TRACER} · {LABEL}").run()
    at.selectbox(key="ab_b").set_value(f"{RANDOM} · {LABEL}").run()
    at.number_input(key="ab_thr").set_value(0.7).run()
    df = rows(at, "ab_pairs")
    assert {"task_id", "surface", "mode", "outcome", "a_best", "b_best"} <= set(df.columns)
    outcome = {(t, m): o for t, m, o in zip(df["task_id"], df["mode"], df["outcome"], strict=True)}
    assert len(outcome) == 12  # six tasks by two modes, never one mode of A against another of B
    # The tracer scores 1.0 on every description but 0.675 and 0.603 on two references: by task alone these
    # rows would all read "A solved, B failed".
    assert outcome[("canvas-test-0010", "description")] == "A solved, B failed"
    assert outcome[("canvas-test-0010", "reference")] == "both failed"
    assert outcome[("canvas-test-0109", "reference")] == "both failed"
    assert "A solved, B failed: 10" in page(at) and "both failed: 2" in page(at)
    at.toggle(key="ab_only").set_value(True).run()
    assert len(rows(at, "ab_pairs")) == 10
    at.toggle(key="ab_only").set_value(False).run()

    pick_pair(at, "canvas-test-0010", "reference")
    text = page(at)
    assert text.count("canvas-test-0010 · tools/reference · repeat 0") == 2  # A and B on the same pair
    assert "reward **0.675**" in text and "reward **0.017**" in text
    pick_pair(at, "canvas-test-0010", "description")
    assert page(at).count("canvas-test-0010 · tools/description · repeat 0") == 2
    assert "reward **1.000**" in page(at) and "reward **0.016**" in page(at)
    text = page(at)  # a pair opens at the first step both sides acted in, with a picture of each
    assert "building 4 elements from the brief" in text
    assert "random turn 1/7: get_document, add_element, add_element" in text
    assert at.query_params["view"] == "ab" and at.query_params["step"] == "1"
    assert at.query_params["b"] == key(RANDOM, "description", "canvas-test-0010")
    assert "A: After step 1" in captions(at) and "B: After step 1" in captions(at)
    at.button(key="ab_step_next").click().run()
    assert at.query_params["step"] == "2"
    healthy(at)


def test_a_vs_b_b_follows_a_to_the_same_repeat(app, repeats_run):
    at = app(repeats_run)
    at.radio(key="view").set_value("A vs B").run()
    at.selectbox(key="ab_a").set_value(f"{TRACER} · repeats").run()
    at.selectbox(key="ab_b").set_value(f"{RANDOM} · repeats").run()
    pick_pair(at, "canvas-test-0024", "reference")
    assert page(at).count("canvas-test-0024 · tools/reference · repeat 0") == 2
    at.selectbox(key="ab_ep_a").set_value(1).run()  # A's second repeat: B follows
    assert at.selectbox(key="ab_ep_b").value == 1
    assert page(at).count("canvas-test-0024 · tools/reference · repeat 1") == 2
    at.selectbox(key="ab_ep_b").set_value(0).run()  # a B the user picks stays
    text = page(at)
    assert "canvas-test-0024 · tools/reference · repeat 1" in text and "tools/reference · repeat 0" in text
    pick_pair(at, "canvas-test-0024", "description")  # a new pair: B matches A again
    assert page(at).count("canvas-test-0024 · tools/description · repeat 1") == 2
    healthy(at)


def test_a_vs_b_starts_from_the_open_episode(app):
    at = app(view="episode", run=LABEL, episode=key(RANDOM, "description", "canvas-test-0061"))
    at.radio(key="view").set_value("A vs B").run()
    assert at.selectbox(key="ab_a").value == f"{RANDOM} · {LABEL}"
    assert at.selectbox(key="ab_b").value == f"{STANDIN} · {LABEL}"
    assert page(at).count("canvas-test-0061 · tools/description · repeat 0") == 2
    healthy(at)


def test_a_vs_b_across_runs_by_deep_link(app, sample_copy):
    ka, kb = key(TRACER, "reference", "canvas-test-0010"), key(RANDOM, "reference", "canvas-test-0010")
    at = app(SAMPLE_RUN, sample_copy, view="ab", run=LABEL, episode=ka, brun="again", b=kb, step="5")
    assert at.selectbox(key="ab_a").value == f"{TRACER} · {LABEL}"
    assert at.selectbox(key="ab_b").value == f"{RANDOM} · again"
    pair = at.selectbox(key="ab_task").value
    assert vs.pair_label(pair, vs.PAIR_KEYS) == "canvas-test-0010 · canvas tools/reference"
    text = page(at)
    assert "random turn 5/5: set_background" in text and "(this episode has ended)" in text
    healthy(at)


def test_summary_tab(app, sample_copy):
    at = app(SAMPLE_RUN, sample_copy)
    at.radio(key="view").set_value("Summary").run()
    healthy(at)  # a table or chart that fails says so in a warning
    assert [s.value for s in at.subheader] == ["Summary", "By tier", "Charts", "Paired comparison"]
    assert len(at.dataframe) == 4 and len(at.get("vega_lite_chart")) == 5  # the summary is two tables
    # One row per model and run, and the page says so; pooled, runs with the same settings are one row.
    models = list(at.dataframe[0].value["model"])  # three models in two runs, in two modes
    assert len(models) == 12 and f"{TRACER} · again" in models and f"{TRACER} · {LABEL}" in models
    assert any(c.value.startswith("One row per model and run") for c in at.caption)
    assert not any("None" == v for v in at.dataframe[0].value.astype(str).values.ravel())
    at.toggle(key="sum_pool").set_value(True).run()
    healthy(at)
    assert sorted(set(at.dataframe[0].value["model"])) == sorted([TRACER, RANDOM, STANDIN])
    assert list(at.dataframe[0].value["n"]) == [12] * 6  # six tasks in each of the two runs
    assert any(c.value.startswith("Pooled: the runs of") for c in at.caption)


def test_summary_keeps_runs_with_other_settings_apart(app, sample_copy, tmp_path):
    """The issue's case: one model in two runs, one of them with another turn budget."""
    import json
    import shutil

    other = tmp_path / "turns20"
    shutil.copytree(sample_copy, other, ignore=shutil.ignore_patterns(".evalkit"))
    meta = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps(meta | {"max_turns": 20}))
    at = app(SAMPLE_RUN, other)
    at.radio(key="view").set_value("Summary").run()
    at.toggle(key="sum_pool").set_value(True).run()
    healthy(at)
    models = list(at.dataframe[0].value["model"])
    assert f"{TRACER} · max_turns 12" in models and f"{TRACER} · max_turns 20" in models and len(models) == 12
    assert any("apart where they differ (max_turns 12; max_turns 20)" in c.value for c in at.caption)


def test_summary_tab_reports_a_failing_chart(app, monkeypatch):
    from evalkit.analysis import plots

    def broken(df):
        raise KeyError("no such column")

    monkeypatch.setattr(plots, "end_reasons", broken)
    at = app()
    at.radio(key="view").set_value("Summary").run()
    assert not at.exception and len(at.get("vega_lite_chart")) == 4
    assert [w.value for w in at.warning] == [
        vs.md_escape("Chart end_reasons could not be computed: KeyError: 'no such column'", 500)
    ]


def test_ownloop_episode_shows_screenshot_raw_output_and_action(app, seed_runs):
    at = app(seed_runs["uitars"])  # the own-loop runner's files, as seed 001 writes them
    assert len(table(at)) == 9
    open_row(at, 5)
    assert "Reward no reward" in page(at)  # ungraded: neither 0 nor unscored
    text = page(at)
    assert "u-finish" in text and "Raw model output" in text and "Parsed action" in text
    # The click drawn on the screen it was taken on (screens/step_01.png), not on the one after it.
    assert "Step 1: the screen it acted on · actions marked" in captions(at)
    healthy(at)


def test_opening_another_imported_episode_reads_nothing(app, monkeypatch, seed_runs):
    at = app(seed_runs["uitars"])
    open_row(at, 1)  # episode 1: the import is cached, if an earlier test did not
    reads = []
    real = importers.read_foreign
    monkeypatch.setattr(importers, "read_foreign", lambda path: reads.append(path) or real(path))
    at.radio(key="view").set_value("Episodes").run()
    open_row(at, 4)
    assert "u-endpoint" in page(at) and "Reward no reward" in page(at)
    assert reads == []
    healthy(at)


def test_a_run_given_as_one_file(app, seed_runs):
    run = seed_runs["planning_jsonl"]  # seed 003's rollout records in one .jsonl file
    at = healthy(app(run))
    df = table(at)
    assert len(df) == 9 and at.multiselect(key="runs_sel").value == [str(run)]
    assert "rollouts.jsonl" in at.multiselect(key="runs_sel").format_func(str(run))
    assert sorted(set(zip(df["model"], df["task_id"], strict=True)))[:2] == [
        ("anthropic:claude-sonnet-5@low", "berth-000"),
        ("anthropic:claude-sonnet-5@low", "berth-001"),
    ]
    open_row(at, 1)
    assert "berth-000" in page(at) and "Reward 0.900" in page(at)
    text = page(at)  # opens at the first step the model acted in; no picture to show, none drawn
    assert "Checking." in text and "check_plan(" in text and "conflicts" in text
    assert "What the model sent" in text and "What the environment answered" in text
    assert captions(at) == [] and not any(c.value.endswith(": none") for c in at.caption)
    assert "tier" not in text.split("\n")[1]  # an episode without a tier does not say "tier"
    healthy(at)
    at.radio(key="view").set_value("A vs B").run()
    assert len(rows(at, "ab_pairs")) == 3 and "**A** · reward" in page(at)
    healthy(at)


def test_no_runs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALKIT_RUNS", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception and "No runs" in page(at)


def test_viewing_foreign_runs_writes_nothing_into_them(app, seed_runs):
    """What `evalkit view` does with runs other harnesses wrote: table, search, an episode, A vs B."""
    from tests.support.snapshot import snapshot

    runs = [seed_runs[k] for k in ("canvas", "fara7b", "planning_dir")]
    before = [snapshot(r) for r in runs]
    at = app(*runs)
    assert len(table(at)) == 24 + 6 + 9
    at.text_input(key="f_search").set_value("Submitting").run()
    assert len(table(at)) == 1
    open_row(at, 1)
    assert "berth-000" in page(at) and "Reward 0.900" in page(at)
    at.radio(key="view").set_value("A vs B").run()
    healthy(at)
    assert [snapshot(r) for r in runs] == before


def test_a_debugged_episode_saved_into_a_run_is_shown(app, canvas_server, tmp_path):
    """`EpisodeStepper.save` writes what a batch writes: the viewer lists the episode and opens it."""
    from evalkit.run.stepper import EpisodeStepper

    with EpisodeStepper("baseline:tracer", canvas_server, task="canvas-test-0007", max_turns=3) as st:
        st.reset()
        st.run()
        st.save(tmp_path / "debugged")
    at = healthy(app(tmp_path / "debugged"))
    assert len(table(at)) == 1
    open_row(at, 1)
    assert "canvas-test-0007" in page(at) and "Reward " in page(at)


def test_a_cold_open_of_a_long_episode_reads_the_turns_it_shows(app, monkeypatch, tmp_path):
    """Opened at step 100 of 130, the page decodes the turns of the step and of its transcript page (and
    the turn before, whose screen the step acted on), not the 130 turns of the record; the step, its click
    and its messages are the record's."""
    from evalkit import types
    from tests.viewer.viewer_runs import click_at, write_long_run

    run = write_long_run(tmp_path / "long", 130)
    k = episode_key("scripted", "webapp", "gui", "", "long-task", None, 0)
    app(run)  # the run's index, made before counting
    decoded = []
    real = types._turn
    monkeypatch.setattr(types, "_turn", lambda fields: decoded.append(fields.get("turn")) or real(fields))
    at = healthy(app(run, view="episode", run="long", episode=k, step="100"))
    text = page(at)
    assert "Step 100 of 131" in text and "turn 100 of the long episode" in text
    assert f'click("x": {click_at(100)[0]}, "y": {click_at(100)[1]}) → clicked 100' in text
    assert "clicked 101" in text and "clicked 99" not in text  # the transcript's page: turns 100 to 103
    assert len(decoded) <= 8 and 100 in decoded, decoded


def test_first_run_of_a_page_draws_the_table_and_no_markdown(monkeypatch):
    """A page's first run on the Episodes view (the browser then says the rows are painted) draws the table
    and no Markdown: the views' radio (its options are Markdown), titles and captions come with the
    sidebar's widgets in the next run, the radio's room kept. The browser built its Markdown renderer for
    the first such element, 25-120 ms of its main thread before the rows were on screen (Chrome's CPU
    profile of the table's first paint)."""
    from viewer.table import TABLE_FIRST_ENV

    monkeypatch.setenv(TABLE_FIRST_ENV, "1")
    monkeypatch.setenv("EVALKIT_RUNS", str(SAMPLE_RUN))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert [e for e in at.get("bidi_component") if e.proto.component_name == "evalkit_rows"]
    assert not at.radio and not at.title and not at.caption and not at.markdown
    assert [t.value for t in at.sidebar.text] == ["evalkit viewer"]
    at.session_state["_painted"] = True  # what the table's script says once its rows are on screen
    at.run()
    assert at.radio(key="view").value == "Episodes"
    assert [t.value for t in at.sidebar.title] == ["evalkit viewer"]
    assert any(c.value.startswith("Click a row to open its episode") for c in at.caption)
    at.radio(key="view").set_value("Summary").run()
    assert not at.exception and at.radio(key="view").value == "Summary" and at.sidebar.title


def test_a_new_page_takes_the_table_as_drawn_by_the_one_before(monkeypatch):
    """A new page of the same runs, filters and sort takes the table as the page before drew it (its cells'
    text made once for every page): each new page made it again, and its first run took 12-14 ms rather
    than 5-8 (the table's first paint waits for that run). Another sort makes its own."""
    from viewer import table

    made = []
    real = table.no_none
    monkeypatch.setattr(table, "no_none", lambda *a, **k: made.append(1) or real(*a, **k))
    if hasattr(table, "_shared_layout"):
        table._shared_layout.clear()
    monkeypatch.setenv("EVALKIT_RUNS", str(SAMPLE_RUN))
    pages = [AppTest.from_file(str(APP), default_timeout=60).run() for _ in range(2)]
    assert len(made) == 1
    assert rows(pages[0]).equals(rows(pages[1]))
    by_reward = sort_by(pages[1], "reward")
    assert len(made) == 2 and not rows(by_reward).equals(rows(pages[0]))


def _table_data(at: AppTest) -> str:
    """The Episodes table's data as the run sent it to the browser (JSON text)."""
    (table,) = [e for e in at.get("bidi_component") if e.proto.component_name == "evalkit_rows"]
    return table.proto.json


def test_the_run_after_the_paint_sends_the_table_as_it_was(monkeypatch):
    """The run the browser starts once the table's rows are painted (it draws the sidebar's widgets) sends
    the table's data byte for byte as the first run did, with the request to say so: Streamlit then sends
    and draws nothing of the table again. A `painted` flag that changed made the browser parse the 120 KB of
    cells again and draw the rows again (a Chrome trace of the page, after the paint); and a table drawn
    again after another view does not ask again."""
    from viewer.table import TABLE_FIRST_ENV

    monkeypatch.setenv(TABLE_FIRST_ENV, "1")
    monkeypatch.setenv("EVALKIT_RUNS", str(SAMPLE_RUN))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    first = _table_data(at)
    at.session_state["_painted"] = True  # what the table's script says once its rows are on screen
    at.run()
    assert at.radio(key="view").value == "Episodes" and at.sidebar.text_input
    assert _table_data(at) == first
    asked = json.loads(first)["painted"]
    assert isinstance(asked, str) and asked
    at.radio(key="view").set_value("Summary").run()
    at.radio(key="view").set_value("Episodes").run()
    assert json.loads(_table_data(at))["painted"] == asked  # the page's script answered it: it does not again
