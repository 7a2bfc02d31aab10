"""Foreign folders: a folder holding several runs reads as each of them, and nothing is ever written under a
foreign root (what evalkit derives from a run another harness wrote goes to the per-user cache)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from evalkit import analysis as A
from evalkit.cli import main
from evalkit.errors import ConfigError
from evalkit.records import checks, index_cache, rundir
from evalkit.view import support as vs
from tests.support.snapshot import snapshot

AGENT_RUNS = ["fara-7b", "molmoweb-4b", "opencua-7b", "uitars15-7b"]


@pytest.fixture
def s001(seed_runs, tmp_path):
    """The own-loop harness's output root with its four runs, as `s001/` of the issue (a copy: tests here
    compare the tree before and after, and other tests read the session's runs)."""
    root = tmp_path / "s001"
    shutil.copytree(seed_runs["uitars"].parent, root)
    return root


def test_the_session_cache_is_not_the_users():
    home = Path(os.environ["XDG_CACHE_HOME"])
    assert rundir.cache_home() == home / "evalkit" and home != Path.home() / ".cache"


def test_load_runs_on_a_folder_of_runs_reads_each_and_says_which(s001, caplog):
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        df = A.load_runs(s001)
    assert sorted(df["run_name"].unique()) == AGENT_RUNS
    assert sorted(df["run"].unique()) == [os.path.join(s001, r) for r in AGENT_RUNS]
    said = [r.getMessage() for r in caplog.records if "folder of" in r.getMessage()]
    assert said == [f"{s001}: a folder of 4 run(s), read as each of them: {', '.join(AGENT_RUNS)}"]
    one = A.load_runs([s001 / "uitars15-7b"])
    assert one.height == df.filter(pl.col("run_name") == "uitars15-7b").height > 0


def test_every_command_resolves_a_folder_of_runs(s001, capsys):
    for command in ("summarise", "compare", "report", "view", "bundle"):
        assert checks.runs([str(s001)], command) == [os.path.join(s001, r) for r in AGENT_RUNS]
        assert capsys.readouterr().err.strip() == (
            f"evalkit: {s001}: a folder of 4 run(s), read as each of them: {', '.join(AGENT_RUNS)}"
        )
    assert vs.discover_runs([str(s001)]) == [(s001 / r).resolve() for r in AGENT_RUNS]
    assert main(["summarise", str(s001)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0].startswith(f"evalkit: {s001}: a folder of 4 run(s)")
    assert all(f"{m}:{r}" in out for m, r in zip(("fara7b", "molmoweb", "opencua", "uitars"), AGENT_RUNS,
                                                   strict=True))  # fmt: skip


def test_a_folder_of_nothing_is_still_refused_with_a_hint(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ConfigError, match="nor a folder of such runs"):
        checks.runs([str(tmp_path / "empty")], "summarise")


def test_nothing_is_written_under_a_foreign_root(s001, tmp_path, capsys):
    """Load, summarise and report a run that is one subfolder of another harness's output root: the whole
    root is byte for byte what it was, and the second read takes the index from the cache."""
    run = s001 / "uitars15-7b"
    before = snapshot(s001)
    first = A.load_runs(run)
    assert main(["summarise", str(run)]) == 0
    assert main(["report", str(run), "-o", str(tmp_path / "report.html")]) == 0, capsys.readouterr().err
    assert snapshot(s001) == before
    cached = index_cache.index_path(run)
    assert cached.is_file() and rundir.cache_home() in cached.parents
    assert (rundir.derived_dir(run) / "summary.json").is_file()

    def rebuilt(*_a, **_k):
        raise AssertionError("the cached index should have been read")

    mp = pytest.MonkeyPatch()
    mp.setattr(index_cache, "build", rebuilt)
    try:
        again = A.load_runs(run)
    finally:
        mp.undo()
    assert again.equals(first)


def test_a_changed_foreign_run_is_indexed_afresh(s001):
    run = s001 / "fara-7b"
    first = index_cache.index_path(run)
    A.load_runs(run)
    session = run / "f-terminate" / "session.json"
    session.write_text(session.read_text().replace('"status": "terminate"', '"status": "max_steps"'))
    assert index_cache.index_path(run) != first and index_cache.index_path(run).parent == first.parent
    df = A.load_runs(run)
    assert df.filter(pl.col("task_id") == "f-terminate")["end_reason"].to_list() == ["turn_limit"]
