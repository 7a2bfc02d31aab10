"""The web-app tasks as an OpenEnv MCP env, through the real OpenEnv client: reset metadata, the computer-use
tools on a real page, graded submits, the step budget, and a whole episode with an offline agent."""

from __future__ import annotations

import pytest

from evalkit.browser import chromium_executable
from evalkit.envs.client.openenv import OpenEnvSession
from evalkit.envs.embedded.webapp.tasks import task_by_id
from evalkit.errors import EnvError

pytestmark = pytest.mark.browser
if chromium_executable() is None:
    pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM", allow_module_level=True)

TASK = "webapp-shop-skillet-price"
TOOLS = {"screenshot", "click", "double_click", "drag", "type_text", "press_key", "scroll", "submit"}


@pytest.fixture(scope="module")
def webapp():
    from evalkit.envs.embedded.server import serve

    with serve("webapp") as env:
        yield env


@pytest.fixture
def skillet_click(plans):
    plan = plans(1280, 800)[task_by_id(TASK)["prompt"]]
    return {"x": plan[0]["x"], "y": plan[0]["y"]}


def test_reset_tools_and_a_graded_submit(webapp, skillet_click):
    s = OpenEnvSession(webapp.base_url)
    try:
        meta = s.reset(task_id=TASK)
        assert meta["screenshot_tool"] == "screenshot" and meta["tier"] == "easy"
        assert meta["prompt"].startswith("You are interacting with a web application at http://127.0.0.1:")
        assert "Cast Iron Skillet" in meta["prompt"] and "submit" in meta["instructions"]
        assert {t.name for t in s.tools()} == TOOLS
        shot = s.call("screenshot", {})
        assert shot.images and shot.images[0].to_pil().size == (1280, 800)
        assert not s.call("click", skillet_click).is_error
        page = s.render()
        assert page is not None and page.data != shot.images[0].data  # the product page, not the catalogue
        bad = s.call("click", {"x": 5000, "y": 1})
        assert bad.is_error and "off the screen" in bad.text
        out = s.call("submit", {"answer": "It costs $45.00"})
        assert out.done and out.reward == 1.0 and out.grade["passed"] == 1
        late = s.call("click", skillet_click)
        assert late.is_error and late.done
    finally:
        s.close()


def test_the_step_budget_ends_and_grades(webapp):
    s = OpenEnvSession(webapp.base_url)
    try:
        s.reset(task_id="webapp-mail-login-ticket", max_steps=2)
        assert not s.call("click", {"x": 640, "y": 700}).done
        out = s.call("press_key", {"keys": "Tab"})
        assert out.done and out.reward == 0.0 and out.metadata["auto_submitted"]
        with pytest.raises(EnvError, match="unknown webapp task"):
            s.reset(task_id="webapp-nosuch")
    finally:
        s.close()


def test_an_episode_with_an_offline_agent(webapp, skillet_click, tmp_path):
    from evalkit.run.episode import run_episode
    from evalkit.types import Turn
    from tests.support.scripted import call, factory

    agents: list = []
    turns = [Turn(calls=[call("click", **skillet_click)]), Turn(calls=[call("submit", answer="45.00")])]
    rec = run_episode(factory(turns, agents), webapp, TASK, out=tmp_path)  # the env's surface and mode
    assert rec.reward == 1.0 and rec.end_reason == "submitted" and rec.error_class is None
    assert (rec.surface, rec.mode) == ("gui", "task")
    assert rec.env == "webapp" and rec.tier == "easy" and rec.frame0 and all(t.frame for t in rec.turns)
    assert agents[0].system.startswith("You operate a web browser")
    text, images = agents[0].users[0]
    assert text.startswith("You are interacting with a web application") and len(images) == 1
    assert text.endswith("\nThe attached image is a screenshot of the screen as it is now.")
    assert "30 turns" in text  # the webapp gives no turn budget of its own
