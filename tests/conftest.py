"""Session-wide fixtures: one embedded canvas server shared by every test that needs a live env, the DOM
solver's plans for a few web-app tasks, which the fake endpoint and offline agents replay, the small
foreign-style OpenEnv servers, and the stand-in model that drives them over the real chat-completions wire."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.server import serve

    with serve("canvas") as env:
        yield env


OWNLOOP_TASKS = ["webapp-shop-skillet-price", "webapp-mail-star-lunch", "webapp-mail-login-ticket"]
"""An answer read off a page, a record entry after a click, and a login with typing: 14 steps in all."""


@pytest.fixture(scope="session")
def plans(tmp_path_factory):
    """plans(width, height) → {task prompt: generic actions}, from one DOM-solver run per viewport."""
    from evalkit.envs.webapp.tasks import load_tasks
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
