"""The viewer's Why view through AppTest on the committed sample run: the scanners' rates per model with
their intervals (as `ek.why` computes them), the paired differences sorted by size, a scanner's episodes
opened at the step it points to with a mark there, and a label written to the run's labels file (never into
a foreign run), after which precision and recall are shown."""

from __future__ import annotations

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

import evalkit as ek
from evalkit.records import scans as store
from tests.viewer.test_viewer_app import RANDOM, STANDIN, healthy, key, page, rows
from tests.viewer.viewer_runs import APP, SAMPLE_RUN, copy_sample_run

EARLY = key(RANDOM, "description", "canvas-test-0061")
"""The sample's one early finish: the random policy submits at turn 3 of 12 with reward 0.0948."""


@pytest.fixture
def app(monkeypatch):
    def make(*runs) -> AppTest:
        monkeypatch.setenv("EVALKIT_RUNS", ":".join(str(r) for r in (runs or (SAMPLE_RUN,))))
        return AppTest.from_file(str(APP), default_timeout=60).run()

    return make


def frame(at, column: str):
    """The table on the page with `column` (the rates: "what"; the differences: "A − B (points)")."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def why_view(at):
    at.radio(key="view").set_value("Why").run()
    return healthy(at)


def test_the_why_view_lists_rates_with_intervals_and_what_separates_two_models(app):
    at = why_view(app())
    assert at.query_params["view"] == "why"
    rates = frame(at, "what")
    assert list(rates["scanner"]) == [*ek.scanners.BUILTIN]  # every keyless one, the infrastructure's last
    df = ek.load_runs(SAMPLE_RUN)
    want = ek.why(df, ek.scan(df))
    cell = {(r["scanner"], r["model"]): r for r in want.iter_rows(named=True)}
    infra = rates.set_index("scanner").loc["infra_error"]
    r = cell[("infra_error", STANDIN)]
    assert infra[STANDIN] == "17% [4.2%, 47%] 2/6"
    assert (round(r["rate"], 3), round(r["ci_low"], 3), round(r["ci_high"], 3)) == (0.167, 0.042, 0.469)
    assert rates.set_index("scanner").loc["early_finish"][RANDOM].startswith("8.3% [")
    assert "Bayesian bootstrap over tasks" in page(at)
    # Two models: the paired differences, largest first, Holm-adjusted
    diffs = frame(at, "A − B (points)")
    sizes = [abs(float(x)) for x in diffs["A − B (points)"]]
    assert sizes == sorted(sizes, reverse=True) and "p (Holm)" in diffs.columns
    a, b = at.selectbox(key="why_a").value, at.selectbox(key="why_b").value
    ref = ek.why(df, ek.scan(df), a=a, b=b)
    assert list(diffs["scanner"]) == ref["scanner"].to_list()


def test_a_scanner_opens_its_episode_at_the_step_it_points_to(app):
    at = why_view(app())
    at.selectbox(key="why_scanner").set_value("early_finish").run()
    fired = rows(at, "why_fired")
    assert list(fired["model"]) == [RANDOM] and list(fired["steps"]) == ["3"]
    at.session_state["_why_click"] = 0  # what a click on the row does (AppTest cannot click our table)
    at.run()
    assert at.radio(key="view").value == "Episode"
    assert at.query_params["episode"] == EARLY and at.query_params["step"] == "3"
    text = page(at)
    assert "Step 3 of" in text and "Turn 3 · stop" in text  # that step in view
    assert "early_finish** fired at this step" in text.replace("\\", "")  # and a mark on it
    assert "submit at turn 3 of 12 with reward 0.0948" in text.replace("\\", "")
    at.button(key="step_prev").click().run()  # the mark is the step's, not the episode's
    assert "fired at this step" not in page(at).replace("\\", "")
    at.button(key="mark_3").click().run()
    assert "Step 3 of" in page(at)


def test_labelling_an_episode_writes_the_labels_file_and_shows_precision_and_recall(app, tmp_path):
    run = copy_sample_run(tmp_path / "labelled")
    at = why_view(app(run))
    at.selectbox(key="why_scanner").set_value("early_finish").run()
    at.session_state["_why_click"] = 0
    at.run()
    at.button(key="label_yes").click().run()
    healthy(at)
    path = store.labels_path(str(run))
    assert path.is_file() and path.is_relative_to(run / ".evalkit")
    got = store.read_labels(str(run))
    assert got.select("key", "scanner", "label").rows() == [(EARLY, "early_finish", True)]
    assert "Labelled yes in" in page(at)
    at.button(key="label_no").click().run()  # a later label replaces the earlier one
    assert store.read_labels(str(run)).select("key", "label").rows() == [(EARLY, False)]
    at.button(key="label_yes").click().run()
    at = why_view(at)
    rates = frame(at, "what")
    assert rates.set_index("scanner").loc["early_finish"]["precision / recall"] == "100% / 100%"
    assert "Against your labels" in page(at) and "1/0/0/0" in page(at)
    assert rows(at, "why_fired")["label"].tolist() == ["yes"]


def test_an_episode_where_it_did_not_fire_is_labelled_too(app, tmp_path):
    """Recall needs labels of episodes a scanner stayed quiet on: they are listed, in a random order."""
    run = copy_sample_run(tmp_path / "quiet")
    at = why_view(app(run))
    at.selectbox(key="why_scanner").set_value("early_finish").run()
    at.toggle(key="why_quiet").set_value(True).run()
    quiet = rows(at, "why_fired")
    assert len(quiet) == 35 and set(quiet["steps"]) == {""}  # the sample's 36 but the one it fired on
    at.session_state["_why_click"] = 0
    at.run()
    assert at.radio(key="view").value == "Episode" and "did not fire here" in page(at).replace("\\", "")
    at.button(key="label_no").click().run()
    got = store.read_labels(str(run)).select("scanner", "label").rows()
    assert got == [("early_finish", False)] and at.query_params["episode"] != EARLY


def test_a_foreign_run_is_scanned_and_labelled_without_a_write_into_it(app, seed_runs):
    from tests.support.snapshot import snapshot

    run = seed_runs["canvas"]
    before = snapshot(run)
    at = why_view(app(run))
    scanner = at.selectbox(key="why_scanner").value
    assert len(rows(at, "why_fired")), "a scanner fires somewhere in the seed's every-status run"
    at.session_state["_why_click"] = 0
    at.run()
    at.button(key="label_yes").click().run()
    healthy(at)
    path = store.labels_path(str(run))
    assert path.is_file() and not path.is_relative_to(run)  # evalkit's per-user cache, as load_runs's index
    assert store.read_labels(str(run)).filter(pl.col("scanner") == scanner).height == 1
    assert snapshot(run) == before


def _leaves(node, out: list) -> list:
    """The page's elements in the order they are drawn."""
    children = getattr(node, "children", None)
    if children:
        for c in children.values():
            _leaves(c, out)
    else:
        out.append(node)
    return out


def test_a_vs_b_pictures_before_the_tasks_sorted_by_the_difference_and_where_they_part(app):
    from tests.viewer.test_viewer_app import LABEL, TRACER

    at = app()
    at.radio(key="view").set_value("A vs B").run()
    at.selectbox(key="ab_a").set_value(f"{TRACER} · {LABEL}").run()
    at.selectbox(key="ab_b").set_value(f"{RANDOM} · {LABEL}").run()
    healthy(at)
    order = _leaves(at.main, [])
    picture = next(i for i, e in enumerate(order) if e.type == "image" and any(
        str(c).startswith("A: ") for c in e.captions))  # fmt: skip
    table = next(
        i for i, e in enumerate(order) if e.type == "bidi_component" and e.proto.id.endswith("ab_pairs")
    )
    assert picture < table  # the two pictures first, the sixty-row table below them
    df = rows(at, "ab_pairs")
    sizes = [abs(float(x)) for x in df["difference"]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
    # The task chosen is the first (the largest difference); where its two trajectories part, as partings says
    task, mode = df["task_id"][0], df["mode"][0]
    parts = ek.scanners.partings(ek.load_runs(SAMPLE_RUN), TRACER, RANDOM)
    want = parts.filter((pl.col("task_id") == task) & (pl.col("mode") == mode)).row(0, named=True)
    text = page(at).replace("\\", "")
    assert f"They part at step {want['step']}**: A " in text
    at.button(key="ab_to_parting").click().run()
    assert at.query_params["step"] == str(want["step"]) and f"Step {want['step']} of" in page(at)
