"""The viewer's pure helpers: run discovery, the table, links, escaping, paging, pairing."""

from __future__ import annotations

import os
import re

import polars as pl

from evalkit import viewer_support as vs
from tests.viewer.viewer_runs import MODELS

TRACER, RANDOM = MODELS


def test_discover_runs(tmp_path, sample_run):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "trace.jsonl").write_text("")
    (tmp_path / "runs" / "empty").mkdir()
    assert vs.discover_runs([], {}, tmp_path) == [(tmp_path / "runs" / "a").resolve()]
    env = {"EVALKIT_RUNS": os.pathsep.join([str(sample_run), str(tmp_path / "missing")])}
    assert vs.discover_runs([], env, tmp_path) == [sample_run.resolve()]
    assert vs.discover_runs([str(sample_run)], env, tmp_path) == [sample_run.resolve()]


def test_run_labels_are_short_and_unique():
    labels = vs.run_labels(["/x/a/run", "/y/b/run", "/z/other"])
    assert labels == {"/x/a/run": "a/run", "/y/b/run": "b/run", "/z/other": "other"}


def test_fallback_table_matches_the_analysis_table(sample_run):
    fast = vs.episode_table(sample_run)
    slow = vs._conform(vs.fallback_table(sample_run), str(sample_run))
    cols = list(vs.TABLE_COLUMNS)
    assert fast.select(cols).sort("key").equals(slow.select(cols).sort("key"))
    assert fast.height == 8 and fast.get_column("offset").null_count() == 0


def test_filters_and_search(sample_run):
    df = vs.with_labels(vs.episode_table(sample_run), vs.run_labels([str(sample_run)]))
    f = vs.Filters(include={"model": [TRACER], "error_class": [vs.NONE_LABEL]})
    assert vs.apply_filters(df, f).height == 3
    idx = vs.text_index(sample_run)
    hits = vs.search(idx, "ZEBRA")
    assert hits.height == 1
    assert vs.apply_filters(df, vs.Filters(), hits).get_column("task_id").to_list() == ["canvas-test-0003"]


def test_ab_tasks_labels_outcomes(sample_run):
    df = vs.with_labels(vs.episode_table(sample_run), {str(sample_run): "s"})
    t = vs.ab_tasks(df, f"{TRACER} · s", f"{RANDOM} · s", 0.5)
    assert dict(zip(t["task_id"], t["outcome"], strict=True)) == {
        "canvas-test-0001": "A solved, B failed",
        "canvas-test-0002": "both failed",
        "canvas-test-0003": "A solved, B failed",
        "canvas-test-0004": "unscored",
    }
    assert vs.best_opponent(df, f"{TRACER} · s") == f"{RANDOM} · s"


def test_steps_and_alignment(sample_run):
    df = vs.episode_table(sample_run)
    a, b = (vs.open_record(sample_run, r["key"], r["offset"]) for r in df.head(2).iter_rows(named=True))
    a.turns = a.turns[:2]
    pairs = vs.align_steps(a, b)
    assert [s.index for s in vs.steps_of(b)] == [0, 1, 2, 3]
    assert len(pairs) == 4 and pairs[3][0] is None and pairs[3][1].turn.turn == 3


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


def test_table_of_a_foreign_run_has_no_offsets(tmp_path):
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "fixtures" / "ownloop_run"
    if not run.is_dir():
        return
    df = vs.episode_table(run)
    assert df.height >= 1 and df.get_column("offset").null_count() == df.height
    row = df.row(0, named=True)
    rec = vs.open_record(run, row["key"], row["offset"])
    assert vs.is_ownloop(rec) and rec.key == row["key"]
    assert isinstance(vs.concat_tables([df, pl.DataFrame(schema=vs.TABLE_COLUMNS)]), pl.DataFrame)
