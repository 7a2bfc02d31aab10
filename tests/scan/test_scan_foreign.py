"""Runs other harnesses wrote scan like evalkit's own: the planted run written out as ATIF trajectories (a
Harbor job) and as Inspect logs finds the same failures at the same turns (the declared tools travel with
them); τ²-bench results, agent sessions and the seeds' formats scan, the infrastructure's failures apart;
and a foreign run is never written into: what a scan keeps goes to evalkit's per-user cache."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import evalkit as ek
from evalkit.cli import main
from evalkit.records import rundir
from evalkit.records import scans as store
from evalkit.scanners.rules import BUILTIN
from tests.records.importers import seed_sessions, seed_tau2


def _snapshot(root: Path) -> dict:
    root = Path(root)
    files = [root] if root.is_file() else [p for p in root.rglob("*")]
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


def _fired(rows: pl.DataFrame) -> list[tuple]:
    got = rows.filter(pl.col("fired")).select("model", "task_id", "repeat", "scanner", "steps")
    return sorted(got.rows())


@pytest.mark.parametrize("fmt", ["atif", "inspect"])
def test_the_planted_run_written_by_another_harness_scans_the_same(planted_run, tmp_path, fmt):
    run, _ = planted_run
    out = tmp_path / ("job" if fmt == "atif" else "log.eval")
    assert main(["convert", str(run), "--to", fmt, "-o", str(out)]) == 0
    written = [out] if fmt == "atif" else sorted(tmp_path.glob("log*.eval"))
    before = {p: _snapshot(p) for p in written}
    native, foreign = ek.scan(run), ek.scan(written, save=True)
    assert foreign.height == native.height
    assert _fired(foreign) == _fired(native)
    assert set(foreign["evidence"].drop_nulls()) == set(native["evidence"].drop_nulls())
    assert {p: _snapshot(p) for p in written} == before  # never written into
    kept = store.scan_dir(written[0])
    assert kept.is_relative_to(rundir.cache_home()) and (kept / store.SCAN_FILE).is_file()


def _foreign_runs(seed_runs, tmp_path) -> dict[str, Path]:
    return {
        **{k: Path(v) for k, v in seed_runs.items()},
        "tau2": seed_tau2.write_results(tmp_path / "tau2" / "gpt-4.1-mini_airline_2trials.json"),
        "sessions": seed_sessions.write_all(tmp_path / "sessions"),
    }


def test_every_format_scans_with_the_infrastructures_failures_apart(seed_runs, tmp_path):
    for name, run in _foreign_runs(seed_runs, tmp_path).items():
        paths = rundir.expand_runs([run])[0]
        before = _snapshot(run)
        df = ek.load_runs(paths)
        rows = ek.scan(df)
        assert rows.height == df.height * len(BUILTIN), name
        infra = rows.filter(pl.col("scanner") == "infra_error").join(
            df.select("run", "key", "error_class"), on=["run", "key"]
        )
        overflow = set(rows.filter((pl.col("scanner") == "context_overflow") & pl.col("fired"))["key"])
        ended = infra.filter(pl.col("error_class").is_not_null() & ~pl.col("key").is_in(list(overflow)))
        assert infra["fired"].sum() == ended.height, name
        assert ek.why(df, rows).height, name
        assert _snapshot(run) == before, name


def test_tau2_results_find_the_infrastructure_error_and_no_false_text_turns(tmp_path):
    path = seed_tau2.write_results(tmp_path / "sims" / "results.json")
    rows = ek.scan(path)
    fired = rows.filter(pl.col("fired"))
    # The agent's turns of talk with the user are no "missing tool calls": only the trial the
    # infrastructure broke fires, apart from the model's failures.
    assert fired.select("task_id", "repeat", "scanner").rows() == [("2", 1, "infra_error")]
    assert "RateLimitError" in fired["evidence"][0]


def test_evalkit_scan_on_a_foreign_run_writes_to_the_cache_only(tmp_path, capsys):
    path = seed_tau2.write_results(tmp_path / "sims" / "results.json")
    before = _snapshot(path.parent)
    assert main(["scan", str(path)]) == 0
    out = capsys.readouterr()
    assert "infra_error" in out.out and "gpt-4.1-mini" in out.out
    assert _snapshot(path.parent) == before
    kept = store.scan_dir(path) / store.SCAN_FILE
    assert kept.is_file() and str(kept).startswith(os.environ["XDG_CACHE_HOME"])
