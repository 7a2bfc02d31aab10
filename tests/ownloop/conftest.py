"""Shared for own-loop tests: the DOM solver's plans for a few short tasks, made once per viewport, which the
fake endpoint replays in each agent's output format."""

from __future__ import annotations

import pytest

from evalkit.browser import chromium_executable

TASKS = ["webapp-shop-skillet-price", "webapp-mail-star-lunch", "webapp-mail-login-ticket"]
"""An answer read off a page, a record entry after a click, and a login with typing: 14 steps in all."""
FAST = {"wait_s": 0.2, "settle_s": 0.05, "retry_wait": 0.05}
"""No 5 s pauses in tests."""


def pytest_collection_modifyitems(items):
    if chromium_executable() is None:
        skip = pytest.mark.skip(reason="no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
        for item in items:
            if "ownloop" in str(item.fspath) and "browser" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def plans(tmp_path_factory):
    """plans(width, height) → {task prompt: generic actions}, from one DOM-solver run per viewport."""
    from evalkit.envs.webapp.tasks import load_tasks
    from evalkit.ownloop import Settings, run_ownloop
    from evalkit.ownloop.baselines import plan_of

    prompts = {t["task_id"]: t["prompt"] for t in load_tasks()}
    made: dict[tuple[int, int], dict] = {}

    def get(width: int, height: int, task_ids: list[str] = TASKS) -> dict:
        key = (width, height)
        if key not in made:
            out = tmp_path_factory.mktemp(f"plan{width}x{height}")
            run = run_ownloop(Settings(agent="dom", width=width, height=height), out, task_ids=TASKS, workers=2,
                              log=lambda _: None)  # fmt: skip
            assert all(r.reward == 1.0 for r in run.records), "the DOM solver must solve the test tasks"
            made[key] = {prompts[t]: plan_of(out / t) for t in TASKS}
        return {p: v for p, v in made[key].items() if any(prompts[t] == p for t in task_ids)}

    return get
