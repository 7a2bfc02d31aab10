"""The viewer's pure helpers: run discovery, the table, links, escaping, paging, pairing."""

from __future__ import annotations

import os
import re
import shutil

import polars as pl

from evalkit.records import importers
from evalkit.view import support as vs
from tests.viewer.viewer_runs import MODELS, SAMPLE_RUN

TRACER, RANDOM = MODELS


def test_discover_runs(tmp_path, synth_run):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "trace.jsonl").write_text("")
    (tmp_path / "runs" / "empty").mkdir()
    assert vs.discover_runs([], {}, tmp_path) == [(tmp_path / "runs" / "a").resolve()]
    env = {"EVALKIT_RUNS": os.pathsep.join([str(synth_run), str(tmp_path / "missing")])}
    assert vs.discover_runs([], env, tmp_path) == [synth_run.resolve()]
    assert vs.discover_runs([str(synth_run)], env, tmp_path) == [synth_run.resolve()]


def test_run_labels_are_short_and_unique():
    labels = vs.run_labels(["/x/a/run", "/y/b/run", "/z/other"])
    assert labels == {"/x/a/run": "a/run", "/y/b/run": "b/run", "/z/other": "other"}


def test_episode_table_from_the_index():
    df = vs.episode_table(SAMPLE_RUN)
    assert df.height == 36 and df.get_column("offset").null_count() == 0
    assert set(vs.TABLE_COLUMNS) <= set(df.columns)


def test_filters_and_search():
    df = vs.with_labels(vs.episode_table(SAMPLE_RUN), vs.run_labels([str(SAMPLE_RUN)]))
    f = vs.Filters(include={"model": [TRACER], "mode": ["reference"], "error_class": [vs.NONE_LABEL]})
    assert vs.apply_filters(df, f).height == 6
    hits = vs.search(vs.text_index(SAMPLE_RUN), "(ROUND 2)")
    assert hits.height == 3
    found = vs.apply_filters(df, vs.Filters(), hits)
    assert set(found["model"]) == {TRACER} and set(found["mode"]) == {"reference"}


def test_ab_tasks_pair_on_task_surface_and_mode():
    df = vs.with_labels(vs.episode_table(SAMPLE_RUN), {str(SAMPLE_RUN): "s"})
    t = vs.ab_tasks(df, f"{TRACER} · s", f"{RANDOM} · s", 0.7)
    assert t.height == 12 and t.select("task_id", "mode").n_unique() == 12
    rows = {(r["task_id"], r["mode"]): r for r in t.iter_rows(named=True)}
    assert rows[("canvas-test-0010", "reference")]["a_best"] == 0.6754  # not the 1.0 of its description
    assert rows[("canvas-test-0010", "reference")]["outcome"] == "both failed"
    assert rows[("canvas-test-0010", "description")]["outcome"] == "A solved, B failed"
    pid = rows[("canvas-test-0010", "reference")]["pair"]
    assert vs.pair_label(pid, vs.pair_columns(df)) == "canvas-test-0010 · canvas tools/reference"
    b = vs.pair_rows(df, f"{RANDOM} · s", pid)
    assert b.height == 1 and b.row(0, named=True)["mode"] == "reference"
    assert {"surface", "mode"} <= set(vs.ab_table(t).columns) and "skin" not in vs.ab_table(t).columns
    # every side shares all pairs with the tracer: the first by name
    assert vs.best_opponent(df, f"{TRACER} · s") == "anthropic:evalkit-standin@low · s"


def test_the_default_b_is_another_model(sample_copy):
    """The stand-in's copy in another run shares every task and ranks first: B is still another model."""
    labels = {str(SAMPLE_RUN): "s", str(sample_copy): "again"}
    both = vs.concat_tables([vs.episode_table(SAMPLE_RUN), vs.episode_table(sample_copy)])
    df = vs.with_labels(both, labels)
    standin = "anthropic:evalkit-standin@low"
    assert vs.ranked_sides(df)[:2] == [f"{standin} · again", f"{standin} · s"]
    assert not vs.best_opponent(df, f"{standin} · s").startswith(standin)
    only = df.filter(pl.col("model") == standin)  # no other model: the same model of the other run
    assert vs.best_opponent(only, f"{standin} · s") == f"{standin} · again"


def test_ab_tasks_labels_unscored(synth_run):
    df = vs.with_labels(vs.episode_table(synth_run), {str(synth_run): "s"})
    t = vs.ab_tasks(df, f"{TRACER} · s", f"{RANDOM} · s", 0.5)
    assert dict(zip(t["task_id"], t["outcome"], strict=True)) == {
        "canvas-test-0001": "A solved, B failed",
        "canvas-test-0002": "both failed",
        "canvas-test-0003": "A solved, B failed",
        "canvas-test-0004": "unscored",
    }


def test_matching_episode_takes_a_surface_mode_and_repeat():
    b = pl.DataFrame(
        {"surface": ["tools", "tools", "tools"], "mode": ["reference"] * 3, "repeat": [0, 1, 2]},
    )
    assert vs.matching_episode({"surface": "tools", "mode": "reference", "repeat": 2}, b) == 2
    assert vs.matching_episode({"surface": "tools", "mode": "reference", "repeat": 7}, b) == 0
    assert vs.matching_episode(None, b) == 0


def test_steps_and_alignment():
    df = vs.episode_table(SAMPLE_RUN).sort("n_turns")
    a, b = (vs.open_record(SAMPLE_RUN, r["key"], r["offset"]) for r in df.tail(2).iter_rows(named=True))
    a.turns = a.turns[:2]
    pairs = vs.align_steps(a, b)
    n = len(b.turns)
    assert [s.index for s in vs.steps_of(b)] == list(range(n + 1))
    assert len(pairs) == n + 1 and pairs[n][0] is None and pairs[n][1].turn.turn == b.turns[-1].turn


def test_clipping_and_field_rows():
    assert vs.clip("x" * 10, 5) == "xxxx…" and vs.clip(None) == "" and vs.clip("short") == "short"
    df = pl.DataFrame({"model": ["m" * 500, "ok"], "task_id": ["t" * 500, "t"], "n": [1, 2]})
    cut = vs.clip_columns(df, 50)
    assert cut["model"].str.len_chars().to_list() == [50, 2] and cut["model"][0].endswith("…")
    assert vs.clip_columns(df, 50, columns=["task_id"])["model"][0] == "m" * 500
    rows, long = vs.field_rows({"total": 0.123456, "note": "n" * 1000, "parts": [1, 2]}, 100)
    assert rows[0] == {"name": "total", "value": "0.1235"} and len(rows[1]["value"]) == 100
    assert rows[2]["value"] == "[1, 2]" and long == [("note", "n" * 1000)]
    assert vs.field_rows(None) == ([], [])


def test_links_round_trip_and_refuse_unknown_runs():
    runs = ["/r/one", "/r/two"]
    labels = vs.run_labels(runs)
    link = vs.DeepLink(view="A vs B", run="/r/one", episode="k1", step=4, brun="/r/two", bepisode="k2")
    q = vs.make_link(link, labels)
    assert q == {"view": "ab", "run": "one", "episode": "k1", "step": "4", "brun": "two", "b": "k2"}
    assert vs.parse_link(q, runs, labels) == link
    bad = vs.parse_link({"run": "/etc", "episode": "x", "step": "-3"}, runs, labels)
    assert bad.run is None and bad.episode is None and bad.step is None
    assert vs.parse_link({"run": ["one"], "episode": ["k"], "step": "nan"}, runs, labels).episode == "k"


def test_md_escape_neutralises_markdown():
    s = vs.md_escape("![x](http://h/x.png) <script>a</script> **b** :red[c]")
    for raw in ("![", "](", "**", ":red["):
        assert raw not in s
    assert not re.search(r"(?<!\\)[<>\[\]()*!:]", s)  # every special character comes escaped


def test_page_of_splits_long_text():
    text = "a" * 25 + "END"
    first, n = vs.page_of(text, 0, size=10)
    assert n == 3 and first == "a" * 10
    assert vs.page_of(text, 99, size=10)[0].endswith("END")


def test_table_of_a_foreign_run_has_no_offsets(seed_runs):
    run = seed_runs["uitars"]
    df = vs.episode_table(run)
    assert df.height == 9 and df.get_column("offset").null_count() == df.height
    row = df.row(0, named=True)
    rec = vs.open_record(run, row["key"], row["offset"])
    assert vs.is_ownloop(rec) and rec.key == row["key"]
    assert isinstance(vs.concat_tables([df, pl.DataFrame(schema=vs.TABLE_COLUMNS)]), pl.DataFrame)


def test_an_imported_run_is_read_once(monkeypatch, tmp_path, seed_runs):
    run = shutil.copytree(seed_runs["uitars"], tmp_path / "ownloop")
    reads = []
    real = importers.read_foreign
    monkeypatch.setattr(importers, "read_foreign", lambda path: reads.append(path) or real(path))
    keys = vs.episode_table(run).get_column("key").to_list()
    reads.clear()
    recs = [vs.open_record(run, k) for k in keys]
    assert [r.key for r in recs] == keys and len(
        reads
    ) == 1  # the first open imports, the others read nothing
    vs.text_index(run)
    assert len(reads) == 1
    with open(run / "u-finish" / "steps.jsonl", "a") as f:  # a changed run is imported again
        f.write("\n")
    vs.open_record(run, keys[0])
    assert len(reads) == 2


def test_a_record_opened_at_its_offset_decodes_a_turn_when_asked(tmp_path):
    """The steps of a long episode are laid out from each turn's number and frame alone; a turn is decoded
    when a step shows it, and reads as the whole record reads it. A line whose turns do not split is read
    the ordinary way, its problems named."""
    import json

    from evalkit.records import rundir
    from tests.viewer.viewer_runs import write_long_run

    run = write_long_run(tmp_path / "long", 60)
    row = vs.episode_table(run).row(0, named=True)
    lazy, whole = vs.open_record(run, row["key"], row["offset"]), rundir.read_at(run, row["offset"])
    steps, want = vs.steps_of(lazy), vs.steps_of(whole)
    assert [(s.index, s.frame, s.marked, s.end) for s in steps] == [
        (s.index, s.frame, s.marked, s.end) for s in want
    ]
    assert vs.has_pictures(lazy) and vs.first_step(steps) == 1
    assert not any(t.decoded for t in lazy.turns)  # nothing of the turns' text or calls yet
    assert steps[30].turn.calls == want[30].turn.calls and steps[30].turn.text == want[30].turn.text
    assert [t.decoded for t in lazy.turns].count(True) == 1
    assert lazy.key == whole.key and lazy.transcript == whole.transcript and lazy.run_dir == whole.run_dir
    line = json.loads((run / "trace.jsonl").read_text())
    line["turns"][3]["calls"] = "not a list"  # malformed: read as a whole, the problem named
    (run / "trace.jsonl").write_text(json.dumps(line) + "\n")
    rec = vs.open_record(run, row["key"], 0)
    assert rec.problems == ["turn 4: calls is a string"] and rec.turns[3].calls == []
