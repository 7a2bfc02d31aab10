"""The episode view laid out for stepping, its transcript, A vs B's paired difference and the Summary's
paired comparison, through AppTest on the synthetic run (two models, four tasks, three turns, a failing call
at turn 2, an unscored episode)."""

from __future__ import annotations

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from evalkit import analysis
from evalkit.types import episode_key
from evalkit.view import support as vs
from tests.viewer.viewer_runs import APP, MODELS, rows

TRACER, RANDOM = MODELS


def open_app(monkeypatch, path, **query) -> AppTest:
    monkeypatch.setenv("EVALKIT_RUNS", str(path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def episode(monkeypatch, run, task="canvas-test-0001", model=TRACER, step=1) -> AppTest:
    k = episode_key(model, "canvas", "tools", "reference", task, None, 0)
    return open_app(monkeypatch, run, view="episode", run=run.name, episode=k, step=str(step))


def styles(at: AppTest) -> str:
    """The page's own style elements (the stepper marks the current step with one)."""
    return " ".join(str(h.proto.body) for h in at.get("html"))


def captions(at: AppTest) -> list[str]:
    return [c for img in at.image for c in img.captions if c]


def test_target_and_step_at_the_same_size_beside_the_step(monkeypatch, synth_run):
    at = episode(monkeypatch, synth_run)
    assert captions(at)[:2] == ["Target", "After step 1"] and "Final render" in captions(at)
    row = at.get("flex_container")  # the first row of three columns holds the target, the step, its calls
    first = next(
        b for b in row if len(b.children) == 3 and all(c.type == "column" for c in b.children.values())
    )
    weights = [c.weight for c in first.children.values()]
    assert weights[0] == weights[1] < weights[2]  # target and picture the same size, the panel beside
    panel = list(first.children.values())[2]
    calls = [e.label for e in _walk(panel) if getattr(e, "type", "") == "expander"]
    assert calls[0].startswith("add\\_element\\(") and calls[0].endswith("→ added element e1")  # in the panel
    film = [b for b in at.button if b.key and b.key.startswith("step_film_")]
    assert [b.label for b in film] == ["0", "1", "2", "3"]
    assert ".st-key-step_film_1 button" in styles(at)  # the current step's thumbnail is marked
    assert sum(1 for img in at.image if not any(img.captions)) == 4  # a thumbnail of every frame
    at.button(key="step_film_3").click().run()
    assert at.slider(key="step").value == 3 and "After step 3" in captions(at)
    assert (
        at.button(key="step_next").disabled and at.button(key="step_next").proto.shortcut.lower() == "right"
    )
    assert at.button(key="step_prev").proto.shortcut.lower() == "left"


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def test_filmstrip_pages():
    assert vs.filmstrip(5, 3) == range(5)
    assert vs.filmstrip(30, 0) == vs.filmstrip(30, 11) == range(0, 12)  # stepping within a page keeps it
    assert vs.filmstrip(30, 13) == range(12, 24) and vs.filmstrip(30, 29) == range(18, 30)


def test_each_call_one_line_errors_in_red_text_and_reasoning_collapsible(monkeypatch, synth_run):
    at = episode(monkeypatch, synth_run, step=2)
    labels = [e.label for e in at.expander]
    calls = [x for x in labels if "add" in x or "view" in x]
    assert len(calls) == 2
    bad, ok = calls
    assert bad.startswith(":red[") and "bad colour" in bad and "add\\_element" in bad
    assert vs.md_escape(vs.call_line("view_canvas", {}, ""), 400) == ok == "view\\_canvas\\(\\)"
    assert "Model text" in [c.value for c in at.caption]  # shown, not behind a click
    assert f"{TRACER} turn 2 on canvas-test-0001: placing a rectangle" in [t.value for t in at.text]
    assert not any(e.label == "Model text" for e in at.expander)
    reasoning = next(e for e in at.expander if e.label.startswith("Reasoning"))
    assert reasoning.proto.expanded is False
    assert "thinking about step 2 with a plain idea" in [t.value for t in reasoning.text]
    bad_call = next(e for e in at.expander if e.label == bad)  # the whole call inside its line
    whole = [t.value for t in bad_call.text]
    assert len(whole) == 1 and whole[0].startswith("Arguments:\n{")
    assert whole[0].endswith("Result (error):\nerror: bad colour")


def test_call_line():
    assert vs.call_line("add", {"x": 1, "y": "a"}, '{"id": "e1"}') == 'add("x": 1, "y": "a") → {"id": "e1"}'
    line = vs.call_line("type_text", {"text": "word " * 100}, "typed\nit " * 50, limit=80)
    assert len(line) <= 82 and "\n" not in line and line.count("…") == 2
    assert vs.call_line(None, None, None) == "?()"


def test_the_reset_arguments_and_who_answered_each_turn_are_shown(monkeypatch, tmp_path):
    from evalkit.records.rundir import TraceWriter, write_run_json
    from evalkit.types import EpisodeRecord, TurnRecord

    run = tmp_path / "walks"
    key = episode_key("hf:org/m:a|b", "walk", "tools", "", "walk-1a2b3c4d", None, 0)
    turn = TurnRecord(turn=1, text="Out.", stop="stop", provider="b", route="org/m:b")
    rec = EpisodeRecord(key=key, model="hf:org/m:a|b", env="walk", surface="tools", task_id="walk-1a2b3c4d",
                        reset={"seed": 7, "level": "hard"}, reward=None, end_reason="answered", n_turns=1,
                        turns=[turn])  # fmt: skip
    write_run_json(run, {"models": [rec.model], "env": "walk"})
    TraceWriter(run).append(rec)
    at = open_app(monkeypatch, run, view="episode", run=run.name, episode=key, step="1")
    assert any("answered by b" in c.value for c in at.caption)
    assert vs.as_json({"seed": 7, "level": "hard"}) in [c.value for c in at.code]


def test_the_transcript_below_the_step(monkeypatch, synth_run):
    at = episode(monkeypatch, synth_run, step=2)
    assert "Transcript" in [h.value for h in at.subheader]
    heads = [m.value for m in at.markdown if m.value.startswith("**")]
    assert heads[0].startswith("**User** · turn 0")
    assert any(h.startswith("**Assistant** · turn 2 · stop tool\\_use") for h in heads)
    assert "**Tool** · add\\_element · c2 · :red[error] · turn 2 · _reconstructed_" in heads
    assert '[class*="st-key-tr_turn_2_"]' in styles(at)  # the step's messages are marked
    assert "Image 1" in captions(at)  # the target in the opening, and what view_canvas returned
    assert any("Rebuilt from the record" in c.value for c in at.caption)
    texts = [t.value for t in at.text]  # a tool's result, and the calls under the model's text
    assert "error: bad colour" in texts
    assert any(
        t.startswith(f"{TRACER} turn 2 on canvas-test-0001") and "\n\n→ add_element(" in t for t in texts
    )


def test_a_vs_b_paired_difference_per_tier(monkeypatch, synth_run):
    at = open_app(monkeypatch, synth_run, view="ab")
    assert at.selectbox(key="ab_a").value == f"{TRACER} · synth"  # the better side against the runner-up
    assert at.selectbox(key="ab_b").value == f"{RANDOM} · synth"
    line = at.markdown[0].value.replace("\\", "")
    # Tracer − random per task: 0.81, 0.36, 0.58; canvas-test-0004 is unscored for the tracer: left out.
    # Three tasks all on one side: the exact sign-flip p is 2/2^3, and no interval is shown.
    assert line.startswith("**No conclusion: only 3 tasks. A − B = +0.583 (all tiers) · no CI · p = 0.250 · ")
    assert "wins / ties / losses 3 / 0 / 0 over 3 tasks · " in line and "detectable too few tasks" in line
    # and the tracer's unscored cell, which the random model scored, is said to be left out
    assert line.endswith(
        "Left out: A has no score in 1 cell(s) B scored (lost or never run); the difference "
        "compares only cells both scored.**"
    )
    assert any(c.value.startswith("Fewer than 6 tasks") for c in at.caption)
    r = vs.ab_difference(vs.with_labels(vs.episode_table(synth_run), {str(synth_run): "synth"}),
                         f"{TRACER} · synth", f"{RANDOM} · synth")  # fmt: skip
    assert r["n_tasks"] == 3 and r["ci_low"] is None and r["p_value"] == 0.25 and r["n_dropped"] == 1
    at.selectbox(key="ab_tier").set_value("easy").run()
    assert (
        at.markdown[0]
        .value.replace("\\", "")
        .startswith("**No conclusion: only 2 tasks. A − B = +0.585 (tier easy)")
    )
    assert len(rows(at, "ab_pairs")) == 2  # the pair table follows the tier
    at.selectbox(key="ab_tier").set_value("hard").run()
    assert "no paired difference" in at.markdown[0].value


def test_summary_paired_comparison(monkeypatch, synth_run):
    at = open_app(monkeypatch, synth_run, view="summary")
    assert not at.warning and not at.error
    assert at.selectbox(key="sum_ref").value == f"{RANDOM} · synth"
    paired = at.dataframe[3].value  # after the summary's two tables and the one by tier
    # B, the side chosen, is on every row: left out, so that the table fits 1280 px; with one other side
    # there is nothing for Holm to adjust
    assert list(paired.columns) == [c for c in vs.COMPARE_NAMES.values() if c not in ("B", "p (Holm)")]
    assert list(paired["tier"]) == ["easy", "medium", "all"]  # no task of "hard" was scored on both sides
    df = analysis.load_runs([str(synth_run)])
    want = analysis.compare(df, TRACER, RANDOM).filter(pl.col("group") == "all").row(0, named=True)
    assert paired["A − B"].iloc[-1] == pytest.approx(want["diff"])
    assert paired["wins / ties / losses"].iloc[-1] == "3 / 0 / 0"
    tiers = at.dataframe[2].value  # by tier, with each CI as text
    easy = tiers[(tiers["model"] == TRACER) & (tiers["tier"] == "easy")].iloc[0]
    assert easy["ci"] == "too few tasks" and easy["mean_reward"] == f"{(0.93 + 0.41) / 2:.3f}"


def test_summary_holm_with_more_than_one_other_side(monkeypatch):
    """Three models: each of the two others against the reference, with p adjusted for the two comparisons."""
    from tests.viewer.viewer_runs import SAMPLE_RUN

    at = open_app(monkeypatch, SAMPLE_RUN, view="summary")
    assert not at.warning and not at.error
    ref = at.selectbox(key="sum_ref").value
    paired = at.dataframe[3].value
    cols = list(paired.columns)
    assert cols.index("p (Holm)") == cols.index("p") + 1
    assert any("p (Holm): p adjusted" in c.value for c in at.caption)
    raw = analysis.compare_many(analysis.load_runs([str(SAMPLE_RUN)]), ref.rsplit(" · ", 1)[0], by="tier")
    raw = raw.filter(pl.col("group") == "all")
    (p1, h1), (p2, h2) = sorted(raw.select("p_value", "p_holm").rows())  # Holm by hand for two p-values
    assert h1 == pytest.approx(min(1.0, 2 * p1)) and h2 == pytest.approx(max(h1, p2))
    got = paired[paired["tier"] == "all"]
    assert sorted(got["p (Holm)"]) == sorted(analysis.tables.p_text(h, True) for h in (h1, h2))


def test_summary_pass_k_with_repeats(monkeypatch, repeats_run):
    """Two repeats of every task: pass@2 and pass^2 per side, the numbers of `pass_k_table`."""
    from evalkit.analysis.repeats import pass_k_table

    at = open_app(monkeypatch, repeats_run, view="summary")
    assert not at.warning and not at.error
    assert "Repeats" in [s.value for s in at.subheader]
    table = at.dataframe[3].value  # after the summary's two tables and the one by tier
    assert list(table["k"].unique()) == [2]
    labelled = vs.with_labels(vs.episode_table(repeats_run), {str(repeats_run): "repeats"})
    rows = vs.summary_rows(labelled, False)[0]
    want = pass_k_table(rows).sort("model", "surface", "mode")
    assert sorted(table["pass_at_k"].round(3)) == sorted(round(v, 3) for v in want["pass_at_k"])
    # repeat 1 has half of repeat 0's reward: a task with a 1.0 succeeds once in two, pass@2 = 1, pass^2 = 0
    assert set(table["pass_hat_k"].round(3)) == {0.0}
