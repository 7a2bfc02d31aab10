"""Session-wide fixtures: one embedded canvas server and one berth server shared by every test that needs a
live env, the DOM solver's plans for a few web-app tasks, which the fake endpoint and offline agents replay,
the small foreign-style OpenEnv servers, the stand-in model that drives them over the real chat-completions
wire, and runs written as the original harnesses write them."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def pytest_configure(config):
    # evalkit's per-user cache (where what it derives from foreign runs goes) is a folder of this session's
    # own, set before any test or child process starts: tests never write into the real user cache.
    config._evalkit_cache = tempfile.mkdtemp(prefix="evalkit-test-cache-")
    os.environ["XDG_CACHE_HOME"] = config._evalkit_cache
    # Tests import the embedded envs' modules directly too: OpenEnv's server package is imported once here
    # the way `evalkit.envs.embedded.server` imports it, without the Gradio interface no test uses (seconds of
    # CPU).
    from evalkit.envs.embedded.server import import_openenv_server

    import_openenv_server()


def pytest_unconfigure(config):
    cache = getattr(config, "_evalkit_cache", None)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """Tests that use the session's Playwright `browser` run after all others, in their order: once its sync
    API has started, the main thread counts as inside a running event loop for the rest of the session, and
    a later test's `asyncio.run` there would fail, whichever folder that test is in."""
    items.sort(key=lambda item: "browser" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.embedded.server import serve

    with serve("canvas") as env:
        yield env


OWNLOOP_TASKS = ["webapp-shop-skillet-price", "webapp-mail-star-lunch", "webapp-mail-login-ticket"]
"""An answer read off a page, a record entry after a click, and a login with typing: 14 steps in all."""


@pytest.fixture(scope="session")
def plans(tmp_path_factory):
    """plans(width, height) → {task prompt: generic actions}, from one DOM-solver run per viewport."""
    from evalkit.envs.embedded.webapp.tasks import load_tasks
    from evalkit.ownloop import Settings, run_ownloop
    from evalkit.ownloop.baselines import plan_of

    prompts = {t["task_id"]: t["prompt"] for t in load_tasks()}
    made: dict[tuple[int, int], dict] = {}

    def get(width: int, height: int, task_ids: list[str] = OWNLOOP_TASKS) -> dict:
        key = (width, height)
        if key not in made:
            out = tmp_path_factory.mktemp(f"plan{width}x{height}")
            dom = Settings(agent="dom", width=width, height=height)
            run = run_ownloop(dom, out, task_ids=OWNLOOP_TASKS, workers=2, log=lambda _: None)
            assert all(r.reward == 1.0 for r in run.records), "the DOM solver must solve the test tasks"
            made[key] = {prompts[t]: plan_of(out / t) for t in OWNLOOP_TASKS}
        return {p: v for p, v in made[key].items() if any(prompts[t] == p for t in task_ids)}

    return get


# Small foreign-style OpenEnv servers (tests/support/foreign_envs.py): one each per session, on first use.


@pytest.fixture(scope="session")
def sketch_server():
    from tests.support.foreign_envs import Served, sketch_app

    with Served(sketch_app()) as s:
        yield s


@pytest.fixture(scope="session")
def quiz_server():
    from tests.support.foreign_envs import Served, quiz_app

    with Served(quiz_app()) as s:
        yield s


@pytest.fixture(scope="session")
def guess_server():
    from tests.support.foreign_envs import Served, guess_app

    with Served(guess_app()) as s:
        yield s


@pytest.fixture(scope="session")
def catalog():
    """A typed env with openenv's Task API and ids of its own (`tests.support.kinds`)."""
    from tests.support import kinds
    from tests.support.foreign_envs import Served

    with Served(kinds.catalog_app()) as s:
        yield s


@pytest.fixture(scope="session")
def copycat():
    """A Task API env whose reset ignores its split and index (`tests.support.kinds`)."""
    from tests.support import kinds
    from tests.support.foreign_envs import Served

    with Served(kinds.copycat_app()) as s:
        yield s


@pytest.fixture(scope="session")
def quiz_import():
    """A Verifiers environment imported by `openenv import` (`tests.support.imported`)."""
    from tests.support import imported
    from tests.support.foreign_envs import Served

    with Served(imported.app("quiz")) as s:
        yield s


@pytest.fixture(scope="session")
def vault_import():
    """An OpenReward environment imported by `openenv import` (`tests.support.imported`)."""
    from tests.support import imported
    from tests.support.foreign_envs import Served

    with Served(imported.app("vault")) as s:
        yield s


@pytest.fixture(scope="session")
def walk_server():
    from tests.support.foreign_envs import Served, walk_app

    with Served(walk_app()) as s:
        yield s


@pytest.fixture(scope="session")
def _standin_server():
    from tests.support.standin import StandIn

    s = StandIn()
    yield s
    s.stop()


@pytest.fixture
def standin(_standin_server, monkeypatch):
    """The stand-in model (`vllm:standin`, no thinking switch, so no probe), its requests forgotten, the vllm
    provider pointed at it."""
    monkeypatch.setenv("VLLM_BASE_URL", _standin_server.server.url + "/v1")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    _standin_server.server.reset()
    return _standin_server


@pytest.fixture(scope="session")
def seed_runs(tmp_path_factory):
    """Runs written as the three original harnesses write them (tests/importers/seed_*.py), once per session:
    `canvas_issue`, `canvas`, `canvas_indexed`, `uitars`, `fara7b`, `molmoweb`, `opencua`, `planning_jsonl`,
    `planning_dir`. Read them only; copy one before changing it."""
    from tests.records.importers import seed_canvas, seed_ownloop, seed_planning

    root = tmp_path_factory.mktemp("seeds")
    runs = {
        "canvas_issue": seed_canvas.issue_run(root / "canvas-issue"),
        "canvas": seed_canvas.every_status_run(root / "canvas-every"),
        "canvas_indexed": seed_canvas.indexed_run(root / "canvas-indexed"),
        **seed_ownloop.write_runs(root / "ownloop"),
        "planning_jsonl": seed_planning.write_jsonl(root / "planning" / "rollouts.jsonl"),
        "planning_dir": seed_planning.write_folder(root / "planning" / "episodes"),
    }
    return runs


@pytest.fixture(scope="session")
def berth_server():
    from evalkit.envs.embedded.server import serve

    with serve("berth") as env:
        yield env


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium under Playwright's sync API for the whole session (Debian's, or
    EVALKIT_CHROMIUM): the sync API cannot be started twice in one thread while it runs."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from evalkit.browser import CHROMIUM_ARGS, chromium_executable

    exe = chromium_executable()
    if exe is None:
        pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the session (two CPUs, no dashboard); the Ray executor joins it."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def priced_standin(monkeypatch):
    """The stand-in model (`evalkit.providers.standin`: the Anthropic wire served on loopback) with its price
    file as the user's (`EVALKIT_PRICES`), so that its episodes have a cost."""
    # Imported here: evalkit is not imported before `pytest_configure` has set its per-user cache.
    from evalkit.providers import prices
    from evalkit.providers.standin import StandIn

    with StandIn() as s:
        for k, v in s.environ().items():
            monkeypatch.setenv(k, v)
        prices.price_table.cache_clear()
        yield s
    prices.price_table.cache_clear()
