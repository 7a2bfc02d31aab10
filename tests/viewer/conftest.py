"""Session fixtures of the viewer tests. Most tests use the committed `data/sample-run`; the synthetic runs
here exist for what it lacks (an unscored episode, repeats, hostile content)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.viewer.viewer_runs import copy_sample_run, write_hostile_run, write_repeats_run, write_sample_run


@pytest.fixture(scope="session")
def synth_run(tmp_path_factory) -> Path:
    """Two models on four tasks, one of them unscored (an env error), a returned image per turn."""
    return write_sample_run(tmp_path_factory.mktemp("viewer") / "synth")


@pytest.fixture(scope="session")
def sample_copy(tmp_path_factory) -> Path:
    """The committed sample run under another name, so two runs can be compared."""
    return copy_sample_run(tmp_path_factory.mktemp("viewer2") / "again")


@pytest.fixture(scope="session")
def repeats_run(tmp_path_factory) -> Path:
    """The committed sample run with a second repeat of every episode."""
    return write_repeats_run(tmp_path_factory.mktemp("viewer3") / "repeats")


@pytest.fixture(scope="session")
def hostile_run(tmp_path_factory) -> Path:
    return write_hostile_run(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="session")
def live_run(synth_run, tmp_path_factory) -> Path:
    """The synthetic run's first two episodes, for a test to append to while the viewer is open."""
    import shutil

    run = tmp_path_factory.mktemp("viewer5") / "growing"
    shutil.copytree(synth_run, run)
    lines = (run / "trace.jsonl").read_text().splitlines(keepends=True)
    (run / "trace.jsonl").write_text("".join(lines[:2]))
    return run


@pytest.fixture(scope="session")
def served(synth_run, hostile_run, live_run, tmp_path_factory):
    """The viewer under `streamlit run` on a free port, over the synthetic run, the hostile one and one that
    grows (11 episodes)."""
    from evalkit.view.support import running_app

    log = tmp_path_factory.mktemp("served") / "streamlit.log"
    with running_app([synth_run, hostile_run, live_run], log=log) as url:
        yield url


@pytest.fixture(scope="session")
def search_run(tmp_path_factory) -> Path:
    from tests.viewer.viewer_runs import write_search_run

    return write_search_run(tmp_path_factory.mktemp("viewer4") / "search")


@pytest.fixture(autouse=True)
def steps_one_at_a_time(request, monkeypatch):
    """Under AppTest (no browser, so no script of ours to step with or to say the table is painted), the
    Episode view draws the current step alone, as it does for a step the browser asks the server for, and
    the Episodes view draws its sidebar in the same run as its table; the browser tests keep the steps drawn
    around it (`viewer.stepping`) and the table drawn first (`viewer.table.table_first`)."""
    if "browser" not in request.fixturenames:
        from viewer.stepping import PREFETCH_ENV
        from viewer.table import TABLE_FIRST_ENV

        monkeypatch.setenv(PREFETCH_ENV, "0")
        monkeypatch.setenv(TABLE_FIRST_ENV, "0")
