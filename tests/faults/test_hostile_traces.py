"""The hostile run (`tests/faults/corpus.py`) through every reader: `load_runs` and the frames it feeds,
`evalkit summarise`, `evalkit report`, the viewer and `evalkit bundle`. Nothing raises; sound records are
analysed, malformed ones are left out and named, each warning is said once; no injected markup comes out
live, and no path trick reads the file beside the run."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from streamlit.testing.v1 import AppTest

from evalkit import analysis
from evalkit.analysis import display
from evalkit.cli import main
from evalkit.records import index_cache, jsonl, rundir
from tests.faults.corpus import INJECTIONS, SCRIPT, SECRET, hostile_run
from tests.support.snapshot import snapshot
from tests.viewer.viewer_runs import APP


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return hostile_run(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(jsonl, "_said", set())


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_load_runs_reads_the_sound_and_names_the_malformed(hostile, caplog, fresh_warnings):
    run = hostile["run"]
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        df = analysis.load_runs(run)
        again = analysis.load_runs([run, run])  # read again, from the cached index: nothing said twice
    # A record whose one problem is its reward (NaN, −Infinity, an integer no float holds) is an episode with
    # no score, counted as "reward not a number" (docs/statistics.md); it never reaches a mean.
    kept = hostile["sound"] + hostile["reward_only"]
    assert df.height == kept and again.height == 2 * kept
    unscored = df.filter(~pl.col("scored"))
    assert unscored.height == hostile["reward_only"] and unscored["reward"].is_nan().all()
    said = warnings_of(caplog)
    assert len(said) == 2, said
    assert said[0].endswith(f"trace.jsonl: skipped {hostile['unreadable']} unreadable line(s)")
    assert (
        f"{hostile['malformed']} malformed record(s) left out of the analysis (first: turns is a string)"
        in said[1]
    )
    bad = analysis.malformed(run)
    assert bad.height == hostile["malformed"] and bad["problem"].null_count() == 0
    assert "turn 1: call 1 is a number" in " ".join(bad["problem"].to_list())
    # The fast index and the one-json.loads-a-line reference agree on every line of it.
    assert_frame_equal(index_cache.build(run), index_cache.build_reference(run), check_exact=True)
    turns, calls = analysis.turns(run), analysis.calls(run)
    assert set(turns["key"]) <= set(df["key"]) and set(calls["key"]) <= set(df["key"])


def test_records_never_raise_and_carry_their_problems(hostile):
    recs = list(rundir.read_records(hostile["run"]))
    assert len(recs) == hostile["sound"] + hostile["malformed"] + hostile["reward_only"]
    broken = [r for r in recs if r.problems]
    assert len(broken) == hostile["malformed"] + hostile["reward_only"]  # a bad reward is a problem too
    oops = next(r for r in broken if r.problems == ["turns is a string"])
    assert oops.turns == [] and oops.reward == 0.25 and "problems" not in oops.to_dict()
    page = display.run_html(hostile["run"], max_episodes=100)
    for text in (SCRIPT, "<img src=x onerror", SECRET):
        assert text not in page
    for rec in recs:
        html = display.record_html(rec, hostile["run"])
        assert SCRIPT not in html and SECRET not in html


def test_summarise_says_each_warning_once(hostile, capsys, tmp_path):
    out = tmp_path / "s"
    for _ in range(2):  # the second time over the cached index: the same warnings, once each
        assert main(["summarise", str(hostile["run"]), "--out", str(out)]) == 0
        printed, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert [ln.startswith("evalkit: warning: ") for ln in lines] == [True, True, False], err
        assert sum("unreadable line(s)" in ln for ln in lines) == 1
        assert sum("malformed record(s) left out" in ln for ln in lines) == 1
        assert f"summary.json and summary.md written to {out}" in lines[-1]
        assert len(printed) < 400_000  # a 100,000-character model name is printed once, not per table
    md = (out / "summary.md").read_text()
    for text in INJECTIONS:
        assert text not in md  # names are literal Markdown text, never a link, image or HTML


def test_a_run_of_only_invalid_lines_is_refused_alike_by_every_command(tmp_path, capsys):
    run = tmp_path / "garbage"
    run.mkdir()
    (run / "trace.jsonl").write_text('{"format_version": 1, "key": "k", "turns": "oops"}\nnot json\n[1]\n')
    before = snapshot(run)
    why = f"{run} holds no readable episode (2 unreadable line(s), 1 malformed record(s))"
    commands = [["summarise", str(run)], ["compare", str(run), "--a", "x", "--b", "y"], ["report", str(run)],
                ["bundle", str(run), "-o", str(tmp_path / "b")]]  # fmt: skip
    for argv in commands:
        assert main(argv) == 2
        printed, err = capsys.readouterr()
        assert (printed, err) == ("", f"evalkit: error: {argv[0]}: {why}\n")
    assert snapshot(run) == before and not (tmp_path / "b").exists()


def empty_run(root: Path) -> Path:
    """A run killed between the creation of its trace and its first line (or whose every key was refused)."""
    run = root / "empty"
    run.mkdir()
    (run / "run.json").write_text('{"models": ["m"], "env": "canvas", "evalkit_version": "0.1.0"}\n')
    (run / "trace.jsonl").write_bytes(b"")
    return run


def test_an_empty_trace_is_a_run_with_no_episodes_yet(tmp_path, capsys, monkeypatch):
    run = empty_run(tmp_path)
    df = analysis.load_runs(run)
    assert df.height == 0 and analysis.turns(run).height == 0 and analysis.calls(run).height == 0
    assert_frame_equal(index_cache.build(run), index_cache.build_reference(run))
    assert analysis.malformed(run).height == 0
    # Every command that makes something of episodes says so in one line, the same line.
    for argv in (["summarise", str(run)], ["compare", str(run), "--a", "m", "--b", "n"], ["report", str(run)],
                 ["bundle", str(run), "-o", str(tmp_path / "b")]):  # fmt: skip
        assert main(argv) == 2
        assert capsys.readouterr() == ("", f"evalkit: error: {argv[0]}: {run} has no episodes yet\n")
    # The viewer shows it (a run its batch has only begun: it fills in as episodes end).
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, at.exception


def test_glob_characters_in_a_run_path_use_the_cache(tmp_path, caplog, monkeypatch):
    from tests.fixtures.synth import make_run

    run = make_run(tmp_path / "runs [a]*?" / "r[1]", n_tasks=3, frames=False)
    first = analysis.load_runs(run)
    built = []
    monkeypatch.setattr(index_cache, "_index_native", lambda r: built.append(r))  # must not be needed
    with caplog.at_level(logging.DEBUG, logger="evalkit"):
        assert_frame_equal(analysis.load_runs(run), first)
    assert built == [] and not warnings_of(caplog)
    assert len(list((run / ".evalkit").glob("index-*"))) == 1


@pytest.mark.slow
def test_report_of_the_hostile_run(hostile, tmp_path, capsys):
    before = snapshot(hostile["run"].parent / "secret.txt")
    out = tmp_path / "report.html"
    assert main(["report", str(hostile["run"]), "-o", str(out)]) == 0, capsys.readouterr().err
    page = out.read_text()
    for text in (SCRIPT, "<img src=x onerror", SECRET, "Traceback"):
        assert text not in page
    assert "rebuilding" not in page  # the index of a path with glob characters is read, not rebuilt
    assert snapshot(hostile["run"].parent / "secret.txt") == before


def test_viewer_on_the_hostile_run(hostile, monkeypatch):
    from tests.viewer.viewer_runs import rows
    from viewer.table import TABLE_FIRST_ENV

    run = hostile["run"]
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    monkeypatch.setenv(TABLE_FIRST_ENV, "0")  # no browser to say the table is painted: the sidebar at once
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    notes = [str(w.value).replace("\\", "") for w in at.sidebar.warning]  # shown as escaped Markdown
    assert any(f"{hostile['malformed']} malformed record(s) left out" in n for n in notes), notes
    assert rows(at).shape[0] == hostile["sound"] + hostile["reward_only"]
    df = analysis.load_runs(run)
    for key in df["key"].to_list()[6:]:  # the injected, huge and path-trick records
        at.query_params.update({"view": "episode", "run": str(run), "episode": key})
        at.run()
        assert not at.exception, (key, at.exception)
        shown = " ".join(
            str(e.value) for kind in ("markdown", "text", "code", "caption") for e in getattr(at, kind)
        )
        assert SECRET not in shown


def test_bundle_of_the_hostile_run(hostile, tmp_path):
    out = tmp_path / "bundle"
    assert main(["bundle", str(hostile["run"]), "-o", str(out)]) == 0
    for f in out.rglob("*"):
        assert not f.is_symlink() and f.resolve().is_relative_to(out.resolve())
        if f.is_file():
            data = f.read_bytes()
            assert SECRET.encode() not in data
            if f.suffix in (".html", ".htm"):
                assert SCRIPT.encode() not in data


def test_hostile_records_are_no_input_error(hostile):
    """The run is read, never written: derived files go to its own .evalkit folder only."""
    files = {p.relative_to(hostile["run"]).parts[0] for p in Path(hostile["run"]).rglob("*") if p.is_file()}
    assert files <= {"run.json", "trace.jsonl", "frames", ".evalkit", "summary.json", "summary.md"}
