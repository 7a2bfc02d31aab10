"""End to end in headless Chromium at 1280 px: the app under `streamlit run`, driven as a user would."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from tests.viewer.viewer_runs import MODELS

pytestmark = pytest.mark.browser
TRACER, RANDOM = MODELS
WIDTH = 1280


def boxes(page, keys: list[str]) -> list[dict]:
    """Bounding boxes of the images in the containers keyed `keys` (the viewer's enlargeable pictures)."""
    out = []
    for k in keys:
        img = page.locator(f'[class*="st-key-{k}"] img >> visible=true').first  # the step on screen
        img.wait_for(timeout=15_000)
        page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
        out.append(img.bounding_box())
    return out


COLUMN = """([key, label]) => {
  const box = document.querySelector('.st-key-' + key + ' .ek-rows');
  const at = [...box.querySelectorAll('th')].findIndex(th => th.dataset.column === label);
  return [...box.querySelectorAll('tbody tr.row')].map(tr => tr.children[at].textContent);
}"""
"""The cells of a column of a table (`viewer.rows`), in the rows drawn."""


def sort_on(page, column: str, mark: str) -> list[str]:
    """Click `column`'s name in the Episodes table; once it reads `mark` (▲ ▼), its cells."""
    page.locator(".st-key-table .ek-rows th", has_text=column).first.click()
    page.locator(".st-key-table .ek-rows th", has_text=f"{column} {mark}").wait_for(timeout=15_000)
    return page.evaluate(COLUMN, ["table", column])


def test_the_table_is_not_drawn_again_when_the_sidebar_comes(browser, served):
    """The table comes first; once its rows are painted the browser asks for the sidebar's widgets, and that
    run leaves the table as it is: its rows are the same elements after it (the run's data differed by its
    `painted` flag, so the browser parsed the cells again and drew new rows right after the paint)."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    page.goto(served)
    first = page.locator(".st-key-table .ek-rows tbody tr.row").first
    first.wait_for(timeout=30_000)
    first.evaluate("tr => { tr.__drawnFirst = true; }")
    page.get_by_text("Search what the model said and did").wait_for(timeout=15_000)
    page.wait_for_timeout(1_000)  # the run's messages handled, the table's script called if it is
    assert page.evaluate("() => !!document.querySelector('.st-key-table .ek-rows tbody tr.row').__drawnFirst")
    page.close()


def test_open_step_and_compare(browser, served, tmp_path):
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    page.goto(served)
    first = page.locator(".st-key-table .ek-rows tbody tr.row").first
    first.wait_for(timeout=30_000)
    page.get_by_text("11 of 11 episodes").wait_for()
    # The table comes first; the sidebar's filters follow once its rows are on screen.
    page.get_by_text("Search what the model said and did").wait_for(timeout=15_000)

    # A click on a column's name sorts by it, again the other way (a missing reward last, saying why);
    # on "#", the trace's order.
    up, down = sort_on(page, "reward", "▲"), sort_on(page, "reward", "▼")
    scored = [float(r) for r in up if r[0].isdigit()]
    assert len(scored) >= 8 and scored == sorted(scored) and not up[-1][0].isdigit()
    assert [float(r) for r in down if r[0].isdigit()] == sorted(scored, reverse=True)
    assert sort_on(page, "#", "▲")[:3] == ["1", "2", "3"]

    # A click on a row opens its episode.
    first.click()
    page.get_by_text("Step 1 of 3").wait_for(timeout=30_000)  # the first step the model acted in
    assert page.get_by_text("canvas-test-0001").first.is_visible()

    # The target and the step's picture: one row, the same size, inside 1280 px.
    target, frame = boxes(page, ["enlarge_target_ep", "enlarge_frame_ep"])
    assert abs(target["y"] - frame["y"]) < 3 and abs(target["height"] - frame["height"]) < 3
    assert target["x"] + target["width"] <= frame["x"] and frame["x"] + frame["width"] <= WIDTH

    # A click on the target shows it larger; Esc closes it.
    page.locator('[class*="st-key-enlarge_target_ep"] img >> visible=true').click()
    big = page.get_by_test_id("evalkit-lightbox").locator("img")
    big.wait_for(timeout=5_000)
    assert big.bounding_box()["width"] > target["width"]
    page.keyboard.press("Escape")
    page.get_by_test_id("evalkit-lightbox").wait_for(state="detached")

    # → and ← step (and the frame changes); the URL is a deep link to this moment.
    frame_img = '[class*="st-key-enlarge_frame_ep"] img >> visible=true'  # the others are drawn, hidden
    src = page.locator(frame_img).get_attribute("src")
    page.keyboard.press("ArrowRight")
    page.get_by_text("Step 2 of 3").wait_for(timeout=15_000)
    page.wait_for_function(
        "s => [...document.querySelectorAll('[class*=\"st-key-enlarge_frame_ep\"] img')]"
        ".find(i => i.offsetParent !== null)?.getAttribute('src') !== s",
        arg=src,
    )
    page.keyboard.press("ArrowLeft")
    page.get_by_text("Step 1 of 3").wait_for(timeout=15_000)
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Step 2 of 3").wait_for(timeout=15_000)
    page.wait_for_url("**episode=*step=2*")
    page.get_by_text("error: bad colour").first.wait_for(state="attached")  # in the failed call's line
    page.get_by_text("Assistant · turn 2 · stop tool_use").wait_for(timeout=15_000)  # the transcript, below

    page.get_by_text("A vs B", exact=True).click()
    page.get_by_text("A solved, B failed: 2").wait_for(timeout=15_000)
    page.locator(".st-key-ab_pairs .ek-rows tbody tr.row").first.wait_for(timeout=15_000)
    tasks = page.evaluate(COLUMN, ["ab_pairs", "task_id"])
    assert tasks[0] == "canvas-test-0001" and len(tasks) == len(set(tasks)) >= 2
    page.get_by_text("A − B = +0.583 (all tiers)").wait_for()
    page.get_by_text("Step 1 of 3").wait_for(timeout=15_000)  # the first step both have a picture of
    page.get_by_text(f"{TRACER} turn 1 on canvas-test-0001").wait_for()
    page.get_by_text(f"{RANDOM} turn 1 on canvas-test-0001").wait_for()
    target, a, b = boxes(page, ["enlarge_ab_target", "enlarge_ab_frame_a", "enlarge_ab_frame_b"])
    assert abs(a["y"] - b["y"]) < 3 and abs(target["y"] - a["y"]) < 3 and b["x"] + b["width"] <= WIDTH
    # The two pictures in the first screen at 1280 × 720, above the table of tasks (issue 54)
    page.set_viewport_size({"width": WIDTH, "height": 720})
    page.evaluate("window.scrollTo(0, 0)")
    target, a, b = boxes(page, ["enlarge_ab_target", "enlarge_ab_frame_a", "enlarge_ab_frame_b"])
    table = page.locator(".st-key-ab_pairs").bounding_box()
    assert max(a["y"] + a["height"], b["y"] + b["height"]) <= 720 < table["y"], (a, b, table)
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    shot = tmp_path / "a-vs-b.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.wait_for_url("**view=ab*")

    # The deep link reopens the same comparison in a fresh page.
    again = browser.new_page()
    again.goto(page.url)
    again.get_by_text(f"{RANDOM} turn 1 on canvas-test-0001").wait_for(timeout=30_000)
    again.close()
    # A click on another task's row in the pair table shows that task's pair.
    page.locator(".st-key-ab_pairs .ek-rows tbody tr.row").nth(1).click()
    page.get_by_text(f"{TRACER} turn 1 on {tasks[1]}").wait_for(timeout=15_000)
    page.close()


@pytest.fixture(scope="module")
def long_served(tmp_path_factory):
    """The viewer on a run of 30-step episodes, each step's picture of its own colour."""
    from evalkit.view.support import running_app
    from tests.viewer.viewer_runs import write_sample_run

    root = tmp_path_factory.mktemp("long")
    run = write_sample_run(root / "long", n_turns=30)
    with running_app([run], log=root / "streamlit.log") as url:
        yield url


SHOWN_RED = """() => {
  const img = [...document.querySelectorAll('[class*="st-key-enlarge_frame_ep"] img')]
    .find(i => i.offsetParent !== null);
  if (!img || !img.complete || !img.naturalWidth) return null;
  const c = document.createElement('canvas');
  c.width = img.naturalWidth;
  c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  return g.getImageData(c.width >> 1, c.height >> 1, 1, 1).data[0];
}"""
"""The red of the picture of the step on screen (a step's picture is one colour: its red is 30 × step)."""


def test_stepping_faster_than_the_server_answers(browser, long_served):
    """→ twenty times, faster than the server draws: the steps beyond those on the page are asked for while
    answers to older requests arrive; the page ends on the step pressed to, with its picture, and stays
    there. Steps taken in the browser alone are kept when the user leaves for another view and comes back."""
    from evalkit.types import episode_key

    key = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0001", None, 0)
    page = browser.new_page(viewport={"width": WIDTH, "height": 720})
    page.goto(f"{long_served}/?view=episode&run=long&episode={key}&step=1")
    page.locator("text=Step 1 of 30 >> visible=true").wait_for(timeout=30_000)
    for _ in range(20):
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(25)
    page.locator("text=Step 21 of 30 >> visible=true").wait_for(timeout=15_000)
    page.wait_for_function(f"({SHOWN_RED})() === {(30 * 21) % 256}", timeout=15_000)
    page.wait_for_timeout(2_500)  # every answer to an older request has come by now, and was not taken
    assert page.locator("text=Step 21 of 30 >> visible=true").count() == 1
    assert page.evaluate(SHOWN_RED) == (30 * 21) % 256 and "step=21" in page.url

    for _ in range(2):  # two steps back, among those drawn: the server is not asked
        page.keyboard.press("ArrowLeft")
    page.locator("text=Step 19 of 30 >> visible=true").wait_for(timeout=5_000)
    page.get_by_text("Episodes", exact=True).click()
    page.locator(".st-key-table .ek-rows tbody tr.row").first.wait_for(timeout=15_000)
    page.get_by_text("Episode", exact=True).click()
    page.locator("text=Step 19 of 30 >> visible=true").wait_for(timeout=15_000)
    page.wait_for_function(f"({SHOWN_RED})() === {(30 * 19) % 256}", timeout=15_000)
    page.close()


PICTURE_TOPS = """() => ['target', 'frame'].map(k => {
  const img = [...document.querySelectorAll('[class*="st-key-enlarge_' + k + '_ep"] img')]
    .find(i => i.offsetParent !== null);
  return img ? img.getBoundingClientRect().top : null;
})"""
"""The top of the target and of the step's picture on screen (null where none is shown)."""


def test_the_pictures_hold_still_over_thirty_steps(browser, long_served):
    """At 1280 × 720, with → and with Next, over every step of a 30-step episode (steps drawn by the browser
    and steps the server is asked for): the target and the step's picture stay where they were (±2 px).
    They went down 16 px a step: each step drawn hidden above the one on screen kept its gap."""
    from evalkit.types import episode_key

    key = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0001", None, 0)
    page = browser.new_page(viewport={"width": WIDTH, "height": 720})
    page.goto(f"{long_served}/?view=episode&run=long&episode={key}&step=1")
    page.locator("text=Step 1 of 30 >> visible=true").wait_for(timeout=30_000)
    page.wait_for_function(f"({SHOWN_RED})() === 30", timeout=15_000)
    first = page.evaluate(PICTURE_TOPS)
    assert None not in first and first[0] < 720 - 200, first
    for how in ("ArrowRight", "Next"):
        if how == "Next":  # back to the start, the server drawing it, then the other way of stepping
            page.goto(f"{long_served}/?view=episode&run=long&episode={key}&step=1")
            page.locator("text=Step 1 of 30 >> visible=true").wait_for(timeout=30_000)
        for step in range(2, 31):
            if how == "Next":
                page.locator(".st-key-step_next button >> visible=true").first.click()
            else:
                page.keyboard.press("ArrowRight")
            page.locator(f"text=Step {step} of 30 >> visible=true").wait_for(timeout=15_000)
            page.wait_for_function(f"({SHOWN_RED})() === {(30 * step) % 256}", timeout=15_000)
            tops = page.evaluate(PICTURE_TOPS)
            assert all(abs(t - f) <= 2 for t, f in zip(tops, first, strict=True)), (how, step, tops, first)
    page.close()


WATCH_SHEETS = """() => {
  window.__ekSheets = [];
  const seen = (n) => {
    const el = n.nodeType === 1 ? n : n.parentNode;
    if (el && el.tagName === 'STYLE') window.__ekSheets.push(el.textContent);
  };
  window.__ekWatch = new MutationObserver((ms) => ms.forEach((m) => {
    seen(m.target);
    m.addedNodes.forEach(seen);
  }));
  window.__ekWatch.observe(document.head, { subtree: true, childList: true, characterData: true });
}"""
"""Records the text of every style sheet in the page's head that changes from now on."""

TURN_MARKS = """() => [...document.querySelectorAll('[class*="st-key-tr_turn_"]')]
  .filter(e => e.offsetParent !== null)
  .map(e => [/st-key-tr_turn_(\\d+)_/.exec(e.className)[1], getComputedStyle(e).borderLeftColor])"""
"""Each transcript message on screen: its turn and the colour of its left border (orange: the step's turn)."""


def test_a_step_restyles_only_what_changes(browser, long_served):
    """A step taken in the browser (→, Next) shows the step and marks its turn's messages, rewriting only a
    style sheet of class selectors: the page holds ~17 steps and a transcript (~2,000 elements), and the
    sheet each step rewrote had attribute selectors, which made the browser check every element (Chromium's
    trace of a step in benchmarks/viewer.py's run: 15 of the click's 24 ms recomputing styles, 4 after)."""
    from evalkit.types import episode_key

    key = episode_key(TRACER, "canvas", "tools", "reference", "canvas-test-0001", None, 0)
    page = browser.new_page(viewport={"width": WIDTH, "height": 720})
    page.goto(f"{long_served}/?view=episode&run=long&episode={key}&step=1")
    page.locator("text=Step 1 of 30 >> visible=true").wait_for(timeout=30_000)
    page.wait_for_function(f"({SHOWN_RED})() === 30", timeout=15_000)
    page.wait_for_timeout(500)  # the stepper's script is in
    nxt = page.locator(".st-key-step_next button >> visible=true").first
    for step, act in ((2, lambda: page.keyboard.press("ArrowRight")), (3, nxt.click)):
        page.evaluate(WATCH_SHEETS)
        act()
        page.locator(f"text=Step {step} of 30 >> visible=true").wait_for(timeout=5_000)
        # The step's picture, once the browser has it on screen (under load it can still be decoding when
        # the step's text is in: `evaluate` then read no picture at all).
        page.wait_for_function(f"({SHOWN_RED})() === {(30 * step) % 256}", timeout=5_000)
        sheets = page.evaluate("window.__ekSheets")
        # The sheet a step rewrites selects by class alone: an attribute selector ([class*=…]) in it made the
        # browser check every element of the page on every step.
        assert sheets and not any("[" in css for css in sheets), sheets
        # the turn's messages are marked (orange on their left), the others not
        marks = page.evaluate(TURN_MARKS)
        orange = "rgb(240, 140, 0)"
        assert any(t == str(step) and c == orange for t, c in marks), marks
        assert all(c != orange for t, c in marks if t != str(step)), marks
    page.close()


def test_a_running_batch_shows_up_while_the_page_is_open(browser, served, live_run, synth_run):
    """No click, no reload: a progress file appears as a running episode, an appended record as a row."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    trace = live_run / "trace.jsonl"
    before = trace.read_bytes()
    live = live_run / ".live"
    try:
        page.goto(served)
        page.get_by_text("11 of 11 episodes").wait_for(timeout=30_000)
        frame = next((live_run / "frames").rglob("*.png")).relative_to(live_run).as_posix()
        live.mkdir(exist_ok=True)
        progress = {"version": 1, "key": "k-live", "model": "anthropic:claude-x", "turn": 2, "max_turns": 12,
                    "task_id": "canvas-test-0003", "surface": "tools", "mode": "reference", "frame": frame,
                    "updated": time.time(), "pid": os.getpid(), "host": socket.gethostname()}  # fmt: skip
        (live / "k-live.json").write_text(json.dumps(progress))
        page.get_by_text("Running now: 1 episode").wait_for(timeout=20_000)
        page.get_by_text("turn 2 of 12", exact=False).wait_for()
        page.get_by_text("anthropic:claude-x · canvas-test-0003 · tools/reference").wait_for()
        with open(trace, "ab") as f:  # the episode ends: its record, then its progress file goes
            f.write(synth_run.joinpath("trace.jsonl").read_bytes().splitlines(keepends=True)[2])
        (live / "k-live.json").unlink()
        page.get_by_text("12 of 12 episodes").wait_for(timeout=20_000)
        page.get_by_text("Running now").wait_for(state="detached", timeout=20_000)
    finally:
        trace.write_bytes(before)
        (live / "k-live.json").unlink(missing_ok=True)
        page.close()


def test_summary_charts_render(browser, served):
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    page.goto(f"{served}/?view=summary")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    charts.nth(4).wait_for(timeout=30_000)
    page.get_by_text("How episodes ended").wait_for()
    ended = charts.nth(1)
    ended.scroll_into_view_if_needed()
    # Collapsed, it was its title over a line; drawn, a band per model (three here) and an axis.
    assert ended.bounding_box()["height"] > 120
    page.get_by_text("Paired comparison").wait_for()
    page.close()


@pytest.fixture(scope="module")
def sample_served(tmp_path_factory):
    """The viewer on the committed sample run: three models, two modes, six series per tier."""
    from evalkit.view.support import running_app
    from tests.viewer.viewer_runs import SAMPLE_RUN

    with running_app([SAMPLE_RUN], log=tmp_path_factory.mktemp("sample") / "streamlit.log") as url:
        yield url


DRAWN = """el => {
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('svg.marks');
  if (!svg) return null;
  // The plot area: the extent of the grid lines (horizontal ones span its height from the first tick to
  // the last, vertical ones span it whole).
  const grids = [...svg.querySelectorAll('.role-axis-grid')].map(g => g.getBoundingClientRect().height);
  const labels = [...svg.querySelectorAll('.role-legend-label text')].map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, inside: r.height > 0 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1
      && r.left >= box.left - 1 && r.right <= box.right + 1};
  });
  return {plot: Math.max(0, ...grids), labels, width: box.width};
}"""
"""What a reader sees of a Summary chart, read from the SVG Vega drew: its plot area's height and each legend
entry, with whether it lies inside the chart's box on the page (not cut off)."""


def test_summary_charts_are_readable_at_1280(browser, sample_served):
    """Each chart's plot area at least 120 px tall, every series in its legend and in view. They were
    squashed: Streamlit fitted plot, axes and legend into the chart's height, leaving the plot ~25 px and
    the legend three entries of six."""
    import polars as pl

    from evalkit.records.loading import load_runs
    from tests.viewer.viewer_runs import SAMPLE_RUN

    df = load_runs([SAMPLE_RUN])
    series = {f"{m} · {s}/{mo}" for m, s, mo in df.select("model", "surface", "mode").unique().iter_rows()}
    models = set(df["model"].unique())
    priced = set(df.filter(pl.col("cost_usd").is_not_null())["model"].unique())
    tiers = set(df["tier"].drop_nulls().unique())
    reasons = set(df["end_reason"].unique()) - {"error"} | {
        f"error: {e}" for e in df["error_class"].drop_nulls()
    }
    expected = {
        "reward_by_tier": series, "end_reasons": reasons, "reward_vs_cost": priced | tiers,
        "reward_vs_turns": models | tiers, "grade_components": models,
    }  # fmt: skip
    page = browser.new_page(viewport={"width": WIDTH, "height": 720})
    page.goto(f"{sample_served}/?view=summary")
    for name, want in expected.items():
        chart = page.locator(f'.st-key-chart_{name} [data-testid="stVegaLiteChart"]')
        chart.wait_for(timeout=30_000)
        chart.scroll_into_view_if_needed()
        page.wait_for_function(
            "el => el.querySelector('svg.marks .role-legend-label')", arg=chart.element_handle()
        )
        drawn = chart.evaluate(DRAWN)
        assert drawn["plot"] >= 120, (name, drawn)
        shown = {label["text"] for label in drawn["labels"] if label["inside"]}
        assert shown >= want, (name, want - shown, drawn["labels"])
    # The tables beside them: no column runs past the page (the grid scrolls sideways when one does).
    for key in ("sum_outcome", "sum_effort", "sum_tiers", "sum_paired"):
        grid = page.locator(f'.st-key-{key} [data-testid="stDataFrame"] .dvn-scroller')
        grid.wait_for(timeout=15_000)
        wide, room = grid.evaluate("s => [s.scrollWidth, s.clientWidth]")
        assert wide <= room, (key, wide, room)
    page.close()
