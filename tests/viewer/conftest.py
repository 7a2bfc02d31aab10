"""Session fixtures of the viewer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.viewer.viewer_runs import write_hostile_run, write_sample_run


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory) -> Path:
    return write_sample_run(tmp_path_factory.mktemp("viewer") / "sample")


@pytest.fixture(scope="session")
def second_run(tmp_path_factory) -> Path:
    """A second run with the same models and tasks, so runs can be compared too."""
    return write_sample_run(tmp_path_factory.mktemp("viewer2") / "again", n_turns=2)


@pytest.fixture(scope="session")
def hostile_run(tmp_path_factory) -> Path:
    return write_hostile_run(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session (Debian's, or EVALKIT_CHROMIUM)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from evalkit.viewer_support import CHROMIUM_ARGS, chromium_executable

    exe = chromium_executable()
    if exe is None:
        pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def served(sample_run, hostile_run, tmp_path_factory):
    """The viewer under `streamlit run` on a free port, over the sample run and the hostile one."""
    from evalkit.viewer_support import running_app

    log = tmp_path_factory.mktemp("served") / "streamlit.log"
    with running_app([sample_run, hostile_run], log=log) as url:
        yield url
