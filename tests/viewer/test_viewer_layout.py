"""The episode page at 1280 × 720 in headless Chromium, as a user first sees it: the step's picture (the
target beside it, at the same size) and its first tool call on screen without scrolling, on a canvas tools
episode, a GUI episode, an own-loop episode (seed 001's files) and a berth episode (text: no picture box at
all); the click of an own-loop step drawn inside the element it clicked, on the screen it was taken on; and
`evalkit view` given a relative path from another folder, or a run a batch has not created yet."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import time

import pytest
from PIL import Image

from evalkit.records.viewer_marks import COLOUR
from evalkit.view import support as vs
from tests.viewer.viewer_runs import (
    BLUE,
    BUTTON,
    SAMPLE_RUN,
    SCREEN,
    write_gui_run,
    write_ownloop_run,
)

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1280, "height": 720}
FRAME = '[class*="st-key-enlarge_frame_ep"] img >> visible=true'  # the steps around it are drawn, hidden
TARGET = '[class*="st-key-enlarge_target_ep"] img >> visible=true'


@pytest.fixture(scope="module")
def layout_runs(tmp_path_factory, synth_run, berth_server) -> dict:
    from evalkit.run.episode import run_episode

    root = tmp_path_factory.mktemp("layout")
    berth = root / "berth"
    run_episode("baseline:greedy", berth_server, "berth-test-0002", out=berth)
    runs = {
        "tools": synth_run,
        "gui": write_gui_run(root / "gui"),
        "ownloop": write_ownloop_run(root / "ownloop"),
        "berth": berth,
    }
    keys = {}
    for kind, run in runs.items():
        table = vs.episode_table(run)
        keys[kind] = table["key"][0]
    return {"runs": runs, "keys": keys}


@pytest.fixture(scope="module")
def layout_served(layout_runs, tmp_path_factory):
    log = tmp_path_factory.mktemp("layout-log") / "streamlit.log"
    with vs.running_app(list(layout_runs["runs"].values()), log=log) as url:
        yield url


def on_screen(box: dict | None) -> bool:
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= 1280
        and (box["y"] + box["height"] <= 720)
    )


CASES = {  # kind: (first call's name, steps, a picture of the step, a target beside it)
    "tools": ("add_element", "Step 1 of 3", True, True),
    "gui": ("click", "Step 1 of 3", True, True),
    "ownloop": ("click", "Step 1 of 3", True, False),
    "berth": ("check_plan", "Step 1 of", False, False),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_step_is_in_view_at_1280_by_720(browser, layout_runs, layout_served, kind):
    call, steps, picture, target = CASES[kind]
    run, key = layout_runs["runs"][kind], layout_runs["keys"][kind]
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{layout_served}/?view=episode&run={run.name}&episode={key}")
    page.get_by_text(steps).wait_for(timeout=30_000)  # it opens at the first step the model acted in
    calls = page.locator('[data-testid="stExpander"] summary >> visible=true')  # of the step on screen
    first_call = calls.filter(has_text=f"{call}(").first
    first_call.wait_for(timeout=15_000)
    assert on_screen(first_call.bounding_box()), first_call.bounding_box()
    if picture:
        frame = page.locator(FRAME)
        frame.wait_for(timeout=15_000)
        page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=frame.element_handle())
        box = frame.bounding_box()
        assert on_screen(box), box
        if target:
            tbox = page.locator(TARGET).bounding_box()
            assert on_screen(tbox) and abs(tbox["y"] - box["y"]) < 3
            assert abs(tbox["width"] - box["width"]) < 3  # the target at the frame's size, not a thumbnail
    else:  # a text env: what the model sent beside the env's answer, and no empty picture box
        page.locator("text=What the environment answered >> visible=true").wait_for()
        verdict = page.get_by_text(re.compile(r"^Plan 1 \(\w+\): (in)?feasible, objective")).first
        assert on_screen(verdict.bounding_box())  # the env's verdict in a line, above its raw reply
        assert page.locator('[data-testid="stImage"]').count() == 0
        captions = page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
        assert not any(c.endswith(": none") or c == "no picture" for c in captions), captions
    main = "[...document.querySelectorAll('[data-testid=\"stMain\"]')].map(e => e.scrollTop)"
    scrolled = page.evaluate(f"[window.scrollY, ...{main}]")
    assert not any(scrolled), scrolled
    page.close()


def test_an_own_loop_click_is_drawn_inside_the_element_it_clicked(browser, layout_runs, layout_served):
    """UI-TARS clicked the blue button of screens/step_01.png, which opened a page with nothing there
    (step_02.png): the mark must be on the first, inside the button, drawn by the page over the picture
    as the run keeps it (no picture decoded and encoded again to draw it)."""
    run, key = layout_runs["runs"]["ownloop"], layout_runs["keys"]["ownloop"]
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{layout_served}/?view=episode&run={run.name}&episode={key}&step=1")
    page.get_by_text("Step 1: the screen it acted on · actions marked").wait_for(timeout=30_000)
    img = page.locator(FRAME)
    sent = page.request.get(img.evaluate("i => i.src")).body()
    task = next(p for p in run.iterdir() if p.is_dir())
    assert sent == (task / "screens" / "step_01.png").read_bytes()  # the plain screen, as stored
    page.locator("svg.ek-marks >> visible=true").first.wait_for()
    shown = Image.open(io.BytesIO(img.screenshot())).convert("RGB")  # what the user sees: picture and marks
    box = img.bounding_box()
    k = max(SCREEN[0] / box["width"], SCREEN[1] / box["height"])  # screen pixels a page pixel (contain)
    ox, oy = (box["width"] - SCREEN[0] / k) / 2, (box["height"] - SCREEN[1] / k) / 2
    px = shown.load()
    near = lambda c: sum(abs(a - b) for a, b in zip(c, COLOUR, strict=True)) < 60  # noqa: E731
    mark = [
        ((x - ox) * k, (y - oy) * k)
        for x in range(shown.width)
        for y in range(shown.height)
        if near(px[x, y])
    ]
    assert mark, "no mark drawn"
    xs, ys = [x for x, _ in mark], [y for _, y in mark]
    x1, y1, x2, y2 = BUTTON
    assert x1 <= min(xs) and max(xs) <= x2 and y1 <= min(ys) and max(ys) <= y2, (
        min(xs),
        min(ys),
        max(xs),
        max(ys),
    )
    pic = Image.open(io.BytesIO(sent)).convert("RGB").load()
    inside = [pic[x, y] for x in range(x1, x2) for y in range(y1, y2)]
    assert sum(p == BLUE for p in inside) > len(inside) / 2  # the element is there, under the mark
    page.close()


def _view(args: list[str], cwd, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "evalkit.cli", "view", *args, "--port", str(port)]
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_evalkit_view_with_a_relative_path_from_another_folder(browser, tmp_path):
    from evalkit.serving import free_port
    from evalkit.view.serve import stop, wait_healthy

    here = tmp_path / "work"
    shutil.copytree(SAMPLE_RUN, here / "runs" / "demo", ignore=shutil.ignore_patterns(".evalkit"))
    port = free_port()
    proc = _view(["runs/demo"], here, port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, 60)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"http://127.0.0.1:{port}")
        page.get_by_text("36 of 36 episodes").wait_for(timeout=30_000)
        assert page.get_by_text("No runs").count() == 0
        page.close()
    finally:
        stop(proc)


def test_evalkit_view_waits_for_a_run_being_created(browser, tmp_path):
    """A folder with the live marker of a running batch is waited for; the run appears and is shown."""
    import json
    import os
    import socket

    from evalkit.serving import free_port
    from evalkit.view.serve import stop, wait_healthy

    later = tmp_path / "later"
    (later / ".live").mkdir(parents=True)
    marker = {"version": 2, "pid": os.getpid(), "host": socket.gethostname(), "updated": time.time(),
              "episodes": [{"key": "k1", "model": "baseline:tracer", "turn": 0}]}  # fmt: skip
    (later / ".live" / f"{os.getpid()}@{socket.gethostname()}.json").write_text(json.dumps(marker))
    port = free_port()
    proc = _view(["later"], tmp_path, port)
    try:
        line = proc.stderr.readline()
        assert line.startswith("evalkit view: waiting up to 600 s for ") and "later" in line
        time.sleep(1.0)
        assert proc.poll() is None  # still waiting, not refused
        shutil.copytree(SAMPLE_RUN, later, ignore=shutil.ignore_patterns(".evalkit"), dirs_exist_ok=True)
        wait_healthy(f"http://127.0.0.1:{port}", proc, 60)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"http://127.0.0.1:{port}")
        page.get_by_text("36 of 36 episodes").wait_for(timeout=30_000)
        page.close()
    finally:
        stop(proc)


def test_evalkit_view_refuses_a_typo_at_once(tmp_path):
    """A path no batch is creating exits 2 with one line, without waiting; asked with --wait, it waits."""
    from evalkit.serving import free_port
    from evalkit.view.serve import stop

    (tmp_path / "runs").mkdir()
    started = time.monotonic()
    proc = _view(["runs/typo"], tmp_path, free_port())
    try:
        assert proc.wait(30) == 2 and time.monotonic() - started < 30
        err = proc.stderr.read()
        assert "runs/typo" in err and "waiting" not in err and len(err.strip().splitlines()) == 1, err
    finally:
        stop(proc)
    proc = _view(["runs/typo", "--wait", "30"], tmp_path, free_port())
    try:
        assert proc.stderr.readline().startswith("evalkit view: waiting up to 30 s for runs/typo")
        assert proc.poll() is None
    finally:
        stop(proc)
