"""`ek.scan` over a run of planted failures made through the real env: every built-in fires where its failure
was planted, at the planted turn, and nowhere else; the light records the rules read say what whole records
say; a user's own scanner; exactly a frame's episodes; each key once (its latest record); rows kept beside the
run."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

import evalkit as ek
from evalkit.records import rundir
from evalkit.records import scans as store
from evalkit.scanners.base import Scanner
from evalkit.scanners.engine import SCAN_COLUMNS
from evalkit.scanners.rules import BUILTIN
from tests.support import planted


def test_every_builtin_fires_where_it_was_planted_at_the_planted_turn(planted_run):
    run, truth = planted_run
    rows = ek.scan(run)
    at = list(SCAN_COLUMNS).index("env") + 1  # the episodes' env configuration follows their env
    assert rows.columns == [*list(SCAN_COLUMNS)[:at], "env_config", *list(SCAN_COLUMNS)[at:]]
    assert rows.height == len(truth) * len(BUILTIN)
    wrong = []
    for key, name, fired, steps, evidence in rows.select(
        "key", "scanner", "fired", "steps", "evidence"
    ).rows():
        kind, step = truth[key]
        want = planted.TRUTH[kind] == name
        if fired != want or (want and steps[0] != step) or (fired and not evidence):
            wrong.append((kind, name, fired, steps, step))
    assert not wrong
    assert set(rows["kind"]) == {"model", "infra"} and rows["judge"].is_null().all()


def test_the_light_records_read_as_whole_ones(planted_run):
    """Each built-in, given whole `EpisodeRecord`s (as a user's scanner is), finds exactly what it finds
    in the records the fast reader decodes."""
    run, _ = planted_run
    fast = ek.scan(run)
    slow = ek.scan(run, [Scanner(s.name, s.fn, s.phrase, s.kind) for s in BUILTIN.values()])
    cols = ["key", "scanner", "fired", "steps", "evidence"]
    assert fast.select(cols).equals(slow.select(cols))


def test_a_users_scanner_and_exactly_a_frames_episodes(planted_run):
    run, truth = planted_run
    df = ek.load_runs(run).filter(pl.col("model") == "planted:loop")

    def looks(rec):
        """Looks at the document."""
        turns = [t.turn for t in rec.turns if any(c.name == "get_document" for c in t.calls)]
        return bool(turns), turns, f"get_document at {len(turns)} turns"

    rows = ek.scan(df, ["repeated_call", looks])
    assert rows.height == 2 * df.height and set(rows["key"]) == set(df["key"])
    mine = rows.filter(pl.col("scanner") == "looks")
    assert mine["fired"].all() and mine["phrase"][0] == "trips looks"
    assert mine["steps"].to_list() == rows.filter(pl.col("scanner") == "repeated_call")["steps"].to_list()

    def broken(rec):
        raise KeyError("oops")

    with pytest.raises(RuntimeError, match="scanner 'broken' raised on episode"):
        ek.scan(df, [broken])
    with pytest.raises(ValueError, match="two scanners are named"):
        ek.scan(df, ["refusal", "refusal"])


def test_each_key_counts_once_and_bad_lines_are_skipped(planted_run, tmp_path):
    run, truth = planted_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".evalkit"))
    lines = (copy / rundir.TRACE).read_text().splitlines()
    loop = next(json.loads(x) for x in lines if json.loads(x)["model"] == "planted:loop")
    again = {**loop, "turns": loop["turns"][:1] + loop["turns"][-1:], "n_turns": 2}  # a resume's rerun
    with open(copy / rundir.TRACE, "a") as f:
        f.write("not json\n" + json.dumps(again) + '\n{"format_version": 1, "key": "torn", "tur')
    rows = ek.scan(copy, ["repeated_call"])
    assert rows.height == len(truth)
    latest = rows.filter(pl.col("key") == loop["key"])
    assert latest.height == 1 and not latest["fired"][0]


def test_save_keeps_the_rows_beside_the_run_and_a_later_scan_replaces_only_its_scanners(
    planted_run, tmp_path
):
    run, _ = planted_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".evalkit"))
    first = ek.scan(copy, save=True)
    path = store.scan_dir(copy) / store.SCAN_FILE
    assert path.parent == copy / ".evalkit" / "scans" and store.read_scan(copy).equals(first)

    def never(rec):
        return False

    bare = ek.load_runs(copy).drop("offset")  # a frame without offsets: its episodes found by key
    assert ek.scan(bare, ["refusal", never], save=True).height == 2 * bare.height
    kept = store.read_scan(copy)
    assert sorted(kept["scanner"].unique()) == sorted([*BUILTIN, "never"])
    assert kept.height == first.height + first.height // len(BUILTIN)
    assert store.read_scans([copy, tmp_path / "elsewhere"]).equals(kept)


def test_the_envs_configuration_travels_with_the_rows(planted_run):
    run, truth = planted_run
    df = ek.load_runs(run).with_columns(pl.lit('{"seed": 1}').alias("env_config"))
    rows = ek.scan(df, ["refusal"])
    assert rows.columns[rows.columns.index("env") + 1] == "env_config"
    assert set(rows["env_config"]) == {'{"seed": 1}'} and rows.height == len(truth)
