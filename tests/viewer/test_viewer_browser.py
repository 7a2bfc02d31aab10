"""End to end in headless Chromium: the app under `streamlit run`, driven as a user would."""

from __future__ import annotations

import pytest

from tests.viewer.viewer_runs import MODELS

pytestmark = pytest.mark.browser
TRACER, RANDOM = MODELS


def test_open_step_and_compare(browser, served, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(served)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for(timeout=30_000)
    page.get_by_text("9 of 9 episodes").wait_for()

    # Click the first row's selection cell in the grid canvas: that opens the episode.
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 15, box["y"] + 35 + 17)
    page.get_by_text("Step 0 of 3").wait_for(timeout=30_000)
    assert page.get_by_text("canvas-test-0001").first.is_visible()
    page.get_by_text("Target", exact=True).wait_for()

    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 1 of 3").wait_for(timeout=15_000)
    page.get_by_text(f"{TRACER} turn 1 on canvas-test-0001").wait_for()
    page.get_by_text("added element e1").wait_for()
    page.get_by_text("Frame at step 1").wait_for()
    src = page.locator('[data-testid="stImage"] img').first.get_attribute("src")
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 2 of 3").wait_for(timeout=15_000)
    page.wait_for_function(
        "s => document.querySelector('[data-testid=\"stImage\"] img').getAttribute('src') !== s", arg=src
    )
    page.wait_for_url("**episode=*step=2*")  # the URL is a deep link to this moment

    page.get_by_text("A vs B", exact=True).click()
    page.get_by_text("A solved, B failed: 2").wait_for(timeout=15_000)
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 1 of 3").wait_for(timeout=15_000)
    page.get_by_text(f"{TRACER} turn 1 on canvas-test-0001").wait_for()
    page.get_by_text(f"{RANDOM} turn 1 on canvas-test-0001").wait_for()
    shot = tmp_path / "a-vs-b.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.wait_for_url("**view=ab*")

    # The deep link reopens the same comparison in a fresh page.
    again = browser.new_page()
    again.goto(page.url)
    again.get_by_text(f"{RANDOM} turn 1 on canvas-test-0001").wait_for(timeout=30_000)
    again.close()
    page.close()
