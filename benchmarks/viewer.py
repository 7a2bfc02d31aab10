"""How fast the viewer opens a large run, measured in headless Chromium at 1280 × 720.

Generates a run of 10,000 episodes with 20 turns each (200,000 frame references into a content-addressed
store of a few hundred small PNGs), serves the viewer on it with `streamlit run`, and measures through
Playwright:
  - time to first paint of the episode table (from the navigation's start to the first animation frame
    with the table's first row and its count line in the page, timed by the page itself: a Playwright wait
    polls, and added up to 0.4 s), once on the run as evalkit's writer leaves it (its kept index beside
    the trace, no cached index: the first open of a run) and then again (a new browser page each time);
  - time from a click on "Next" to the new picture of the step on screen (its source changed, the step
    label moved), and the same by the → key, on the episode page laid out for stepping;
  - beside each, turn about, the floor: a one-line Streamlit page's first paint, and the smallest step
    Streamlit makes (a fragment whose button changes a picture). The machine is shared and noisy: each
    measure is also given as its median ratio to the floor measured just after it;
  - building the search index and searching it;
  - `evalkit bundle` of the run: build time and size, then from file:// (network blocked) the table's first
    paint, opening an episode and a step by the → key.
With --first N, only the first open of the run on a server just started, started as `evalkit view` does
and as a plain `streamlit run viewer/app.py` does, N rounds turn about with a one-line page's first open
(and with --first-against REV, the code of REV): issue 56's first open ≤ 1.5 s.
Prints medians and their ratio to the goals of issue 32 (first paint ≤ 1.5 s once the run has been opened
once, a step ≤ 0.2 s).

    .venv/bin/python benchmarks/viewer.py [--episodes 10000] [--turns 20] [--out DIR] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PIL import Image as PILImage  # noqa: E402

from evalkit.browser import CHROMIUM_ARGS, chromium_executable  # noqa: E402
from evalkit.records.rundir import FrameStore, write_run_json  # noqa: E402
from evalkit.serving import free_port  # noqa: E402
from evalkit.types import Image, episode_key  # noqa: E402
from evalkit.view import support as vs  # noqa: E402
from evalkit.view.serve import wait_healthy  # noqa: E402

GOAL_TABLE_S = 1.5
GOAL_NEXT_S = 0.2
N_FRAMES = 400


def make_run(run: Path, episodes: int, turns: int) -> None:
    """A synthetic run written straight as JSON lines (the writer's per-line fsync would dominate here)."""
    rng = random.Random(0)
    store = FrameStore(run)
    frames = []
    for i in range(N_FRAMES):
        buf = io.BytesIO()
        PILImage.new("RGB", (320, 240), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)).save(buf, "PNG")
        frames.append(store.put(Image(buf.getvalue())))
    models = [f"baseline:bench-{m}" for m in range(4)]
    tasks = [f"canvas-test-{i:04d}" for i in range(episodes // (len(models) * 5) or 1)]
    write_run_json(run, {"models": models, "env": "canvas", "benchmark": True})
    n = 0
    with open(run / "trace.jsonl", "w") as f:
        while n < episodes:
            for model in models:
                for ti, task in enumerate(tasks):
                    for repeat in range(5):
                        if n >= episodes:
                            break
                        reward = None if rng.random() < 0.02 else round(rng.random(), 3)
                        start = rng.randrange(N_FRAMES)
                        key = episode_key(model, "canvas", "tools", "reference", task, None, repeat)
                        rec = {
                            "format_version": 1, "key": key,
                            "model": model, "env": "canvas", "surface": "tools", "mode": "reference",
                            "task_id": task, "tier": ("easy", "medium", "hard")[ti % 3], "repeat": repeat,
                            "reward": reward, "grade": None if reward is None else {"total": reward},
                            "end_reason": "error" if reward is None else "submitted",
                            "error_class": "env_error" if reward is None else None,
                            "usage": {"input": 5000, "output": 800}, "cost_usd": 0.01, "n_turns": turns,
                            "tool_calls": turns, "seconds": 30.0, "target": frames[ti % N_FRAMES],
                            "frame0": frames[start], "render": frames[(start + turns) % N_FRAMES],
                            "turns": [{"turn": t, "text": f"turn {t}: adding a shape", "reasoning": "r" * 200,
                                       "stop": "tool_use", "model_s": 1.0, "env_s": 0.1,
                                       "frame": frames[(start + t) % N_FRAMES],
                                       "calls": [{"id": f"c{t}", "name": "add_element",
                                                  "args": {"kind": "rect", "x": t, "y": t}, "ok": True,
                                                  "result": "ok", "images": []}]}
                                      for t in range(1, turns + 1)],
                        }  # fmt: skip
                        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                        n += 1
    return None


FLOOR_APP = """import streamlit as st
st.text("floor ready")
if "n" not in st.session_state:
    st.session_state.n = 0


@st.fragment
def step():
    st.button("Next ▶", shortcut="Right", on_click=lambda: st.session_state.update(n=st.session_state.n + 1))
    st.image(PICTURES[st.session_state.n % len(PICTURES)], output_format="PNG")
    st.text(f"floor step {st.session_state.n}")


step()
"""
"""The floor: a one-line Streamlit page, and a step as small as Streamlit makes one (a fragment whose button
changes a picture and a line). What no Streamlit app can beat on this machine, measured beside the viewer,
turn about, so that each ratio compares two moments of the same load."""


def floor_app(workdir: Path) -> tuple[subprocess.Popen, str]:
    pictures = []
    for i in range(4):
        buf = io.BytesIO()
        PILImage.new("RGB", (320, 240), (60 * i, 90, 120)).save(buf, "PNG")
        pictures.append(buf.getvalue())
    app = workdir / "floor_app.py"
    app.write_text(f"PICTURES = {pictures!r}\n" + FLOOR_APP)
    port = free_port()
    proc = subprocess.Popen(
        vs.app_command([], port, app), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, 120)
    return proc, url


PAINTED = """(() => {
  const texts = %s, row = %s;
  const seen = () => document.body && (!row || document.querySelector(row)) &&
    texts.every(t => document.body.textContent.includes(t));
  const tick = () => { if (seen()) window.__painted = performance.now(); else requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
})();"""
"""Checked on every animation frame from the page's start: the time of the first frame with `texts` (and an
element `row`) in the page, from the navigation's start."""

TABLE_ROW = ".st-key-table .ek-rows tbody tr.row"
FLOOR_IMG = '[data-testid="stImage"] img'


def painted(page, url: str, texts: tuple[str, ...], row: str | None = None) -> float:
    """Open `url` in `page`: seconds from the navigation's start to the first frame with `texts` and `row`."""
    page.add_init_script(PAINTED % (json.dumps(list(texts)), json.dumps(row)))
    page.goto(url)
    page.wait_for_function("window.__painted !== undefined", timeout=300_000)
    return page.evaluate("window.__painted") / 1000


def paint(ctx, url: str, *texts: str, table: bool = False) -> float:
    page = ctx.new_page()
    took = painted(page, url, texts, TABLE_ROW if table else None)
    page.close()
    return took


SHOWN = """sel => { const i = [...document.querySelectorAll(sel)].find(x => x.offsetParent !== null);
  return i && i.complete ? i.getAttribute('src') : null; }"""
"""The source of the picture of `sel` on screen (the page holds the hidden ones of the steps around it)."""


READY = """(() => {
  const ok = () => {
    const img = [...document.querySelectorAll(%s)].find((i) => i.offsetParent !== null);
    const said = [...document.querySelectorAll(%s)].some((l) => l.offsetParent !== null &&
      l.textContent.trim() === %s);
    return img && img.complete && img.naturalWidth > 0 && said && img.getAttribute('src') !== window.__from;
  };
  const tick = () => { if (ok()) window.__ready = performance.now(); else requestAnimationFrame(tick); };
  window.__ready = undefined;
  requestAnimationFrame(tick);
})()"""
"""Checked on every animation frame: the time of the first frame with the step's picture on screen, loaded
and new (not `window.__from`), and a label of its saying `text`. A few selector lookups a frame: a text
search of the whole page (Playwright's `text=` locators) loaded a large page's main thread as it stepped."""


def ready(page, img: str, label: str, text: str, act, from_src: str | None = None) -> float:
    """Seconds from `act()` (a string: a URL to open) to the first frame showing picture `img` (new, loaded)
    and a label `label` saying `text`, timed by the page: from the navigation's start when it opens a URL."""
    cond = READY % (json.dumps(img), json.dumps(label), json.dumps(text))
    if isinstance(act, str):
        page.add_init_script(cond)
        page.goto(act)
        t0 = 0.0
    else:
        page.evaluate(f"window.__from = {json.dumps(from_src)}")
        t0 = page.evaluate("performance.now()")
        act()
        page.evaluate(cond)
    page.wait_for_function("() => window.__ready !== undefined", timeout=300_000)
    return (page.evaluate("window.__ready") - t0) / 1000


def step_once(page, img: str, label: str, text: str, by_key: bool) -> float:
    """One step (the Next button or the → key) until the new picture and a label saying `text` show."""
    src = page.evaluate(SHOWN, img)
    if by_key:
        page.evaluate("document.activeElement && document.activeElement.blur()")
        return ready(page, img, label, text, lambda: page.keyboard.press("ArrowRight"), src)
    return ready(page, img, label, text, page.get_by_role("button", name="Next ▶").click, src)


def measure(
    run: Path, episodes: int, turns: int, repeats: int, profile: Path | None
) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {k: [] for k in ("table_cold", "table_warm", "floor", "next", "key",
                                                   "floor_next", "floor_key")}  # fmt: skip
    fproc, furl = floor_app(run.parent)
    try:
        spied = profile / "viewer-table.txt" if profile is not None else None
        with served([run], run.parent / "viewer-table.log", spied) as (url, _), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
            label = f"{episodes:,} of {episodes:,} episodes"
            ctx = browser.new_context(viewport={"width": 1280, "height": 720})
            paint(ctx, furl, "floor ready")  # the first load fills the browser cache, as once for a user
            out["table_cold"].append(paint(ctx, url, label, table=True))
            for _ in range(repeats):
                out["table_warm"].append(paint(ctx, url, label, table=True))
                out["floor"].append(paint(ctx, furl, "floor ready"))
            page = ctx.new_page()
            page.goto(f"{url}/?view=episode&run={run.name}&episode={BENCH_KEY}&step=0")
            page.locator(f"text=Step 0 of {turns} >> visible=true").first.wait_for(timeout=120_000)
            fpage = ctx.new_page()
            fpage.goto(furl)
            fpage.get_by_text("floor step 0").wait_for(timeout=60_000)
            img = '[class*="st-key-enlarge_frame_ep"] img'  # the picture of the step, beside the target
            n = min(turns // 2, repeats * 3)  # n steps by the button, n by the key
            for step in range(1, 2 * n + 1):
                by_key = step > n
                page.bring_to_front()
                out["key" if by_key else "next"].append(
                    step_once(page, img, ".ek-step-label", f"Step {step} of {turns}", by_key)
                )
                fpage.bring_to_front()
                took = step_once(fpage, FLOOR_IMG, '[data-testid="stText"]', f"floor step {step}", by_key)
                out["floor_key" if by_key else "floor_next"].append(took)
            browser.close()
    finally:
        fproc.terminate()
        fproc.wait(10)
    return out


BENCH_KEY = episode_key("baseline:bench-1", "canvas", "tools", "reference", "canvas-test-0007", None, 2)


def bundle(run: Path, episodes: int, turns: int, repeats: int, workdir: Path) -> dict:
    """Build the static bundle of the run, then open it from file:// as a user would (network blocked)."""
    from playwright.sync_api import sync_playwright

    from evalkit.view.bundle import build

    site = workdir / "bundle"
    built = build([run], site)
    by_dir: dict[str, int] = {}
    for f in site.rglob("*"):
        if f.is_file():
            top = f.relative_to(site).parts[0] if len(f.relative_to(site).parts) > 1 else "page"
            by_dir[top] = by_dir.get(top, 0) + f.stat().st_size
    out: dict = {"built": built, "by_dir": by_dir, "paint": [], "open": [], "key": []}
    label = f"{episodes:,} of {episodes:,} episodes"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        for _ in range(repeats):
            page = ctx.new_page()
            out["paint"].append(painted(page, (site / "index.html").as_uri(), (label,), "#episodes tbody tr"))
            t0 = time.perf_counter()
            page.locator("#episodes tbody tr").nth(7).click()
            page.get_by_text(f"Step 1 of {turns}").wait_for(timeout=60_000)  # the first step acted in
            out["open"].append(time.perf_counter() - t0)
            frame = page.locator(".stepview figure img").nth(1)
            for step in range(2, 5):
                src = frame.get_attribute("src")
                t0 = time.perf_counter()
                page.keyboard.press("ArrowRight")
                page.get_by_text(f"Step {step} of {turns}").wait_for()
                page.wait_for_function("([i, s]) => i.getAttribute('src') !== s && i.complete",
                                       arg=[frame.element_handle(), src])  # fmt: skip
                out["key"].append(time.perf_counter() - t0)
            page.close()
        browser.close()
    return out


def search_times(run: Path, repeats: int) -> dict[str, float | list[float]]:
    """Building the search index of the run (once per trace change) and searching it."""
    t0 = time.perf_counter()
    idx = vs.text_index(run)
    build_s = time.perf_counter() - t0
    times = []
    for q in ["turn 7", '"adding a shape" "turn 19"', "no such phrase"] * repeats:
        t0 = time.perf_counter()
        vs.text_search.search(idx, q)
        times.append(time.perf_counter() - t0)
    return {"build": build_s, "rows": idx.height, "query": times}


# ------------------------------------------------------------------------------------ long episodes

LONG_TURNS = (20, 300, 1000)
SCREEN = (1280, 720)
STEPS_EACH = 5
"""Steps by the → key measured at each place of a long episode (the start, the middle, the end)."""


def screenshot(t: int, rng: random.Random) -> bytes:
    """A unique 1280 × 720 page-like screenshot (bars, text, boxes, a photo of noise): ~140 KB of PNG, as
    a browser's screenshot of a busy page is."""
    from PIL import ImageDraw

    im = PILImage.new("RGB", SCREEN, (248, 249, 251))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, SCREEN[0], 56), fill=(36, 41, 56))
    d.text((24, 20), f"Shop · page {t}", fill=(255, 255, 255))
    d.rectangle((0, 56, 220, SCREEN[1]), fill=(236, 239, 243))
    for i in range(12):
        d.text((20, 80 + 40 * i), f"Menu item {rng.randrange(1000)}", fill=(60, 60, 70))
    for _ in range(rng.randrange(4, 9)):
        x, y = rng.randrange(240, 1100), rng.randrange(70, 600)
        box = (x, y, x + rng.randrange(60, 180), y + rng.randrange(30, 110))
        d.rectangle(box, fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    for i in range(14):
        words = " ".join(f"w{rng.randrange(10**6)}" for _ in range(rng.randrange(3, 12)))
        d.text((260, 90 + 44 * i), words, fill=(30, 30, 30))
    im.paste(PILImage.frombytes("RGB", (200, 150), rng.randbytes(200 * 150 * 3)), (1040, 520))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def make_long_run(run: Path, turns: int) -> str:
    """One computer-use episode of `turns` turns, written by the project's own writer, frame store and
    transcript recorder as a batch writes it: a unique screenshot per turn, a click per turn (its result
    the screenshot after it), the conversation as the model saw it. Returns the episode's key."""
    from evalkit.records import transcripts
    from evalkit.records.rundir import TraceWriter
    from evalkit.types import CallRecord, EpisodeRecord, ToolOutcome, ToolSpec, TurnRecord

    rng = random.Random(turns)
    store = FrameStore(run)
    write_run_json(run, {"models": ["baseline:bench-cu"], "env": "webapp", "benchmark": True})
    key = episode_key("baseline:bench-cu", "webapp", "gui", "", f"shop-{turns}", None, 0)
    tx = transcripts.Recorder(run, True, key)
    first = Image(screenshot(0, rng))
    tools = [ToolSpec("click", "Click at a point of the screen", {"type": "object"})]
    tx.begin("You operate a web browser. " * 20, tools, "Find the cheapest skillet and add it to the cart.",
             [first])  # fmt: skip
    recs = []
    for t in range(1, turns + 1):
        shot = Image(screenshot(t, rng))
        x, y = rng.randrange(20, SCREEN[0] - 20), rng.randrange(20, SCREEN[1] - 20)
        said = f"clicked at ({x}, {y})"
        call = CallRecord(id=f"c{t}", name="click", args={"x": x, "y": y}, result=said,
                          images=[store.put(shot)])  # fmt: skip
        tx.results(t, [(call, ToolOutcome(said, [shot]))], "", False)
        recs.append(TurnRecord(turn=t, text=f"Turn {t}: the button I want is at ({x}, {y}); clicking it.",
                               reasoning="I look at the page and decide where to click next. " * 4,
                               stop="tool_use", usage={"input": 2000, "output": 60}, model_s=1.0, env_s=0.3,
                               frame=call.images[0], calls=[call]))  # fmt: skip
    rec = EpisodeRecord(key=key, model="baseline:bench-cu", env="webapp", surface="gui",
                        task_id=f"shop-{turns}", coordinates="pixels", reward=1.0, grade={"total": 1.0},
                        end_reason="submitted",
                        usage={"input": 2000 * turns, "output": 60 * turns}, cost_usd=0.01 * turns,
                        n_turns=turns, tool_calls=turns, seconds=1.3 * turns, frame0=store.put(first),
                        render=recs[-1].frame, turns=recs, transcript=tx.to_dict())  # fmt: skip
    TraceWriter(run).append(rec)
    return key


def frames_bytes(run: Path) -> int:
    return sum(f.stat().st_size for f in (run / "frames").rglob("*") if f.is_file())


@dataclass
class Page:
    """Where a page shows the step: its picture, its label, its slider, and how it labels step `i` of `n`."""

    img: str
    label: str
    slider: str
    last_label: str

    def text(self, i: int, last: int) -> str:
        return self.last_label.format(i=i, n=last) if i == last else f"Step {i} of {last}"


VIEWER_PAGE = Page('[class*="st-key-enlarge_frame_ep"] img', ".ek-step-label", ".ek-stepper input",
                   "Step {i} of {n}")  # fmt: skip
BUNDLE_PAGE = Page(
    ".stepview > figure img", ".steps .where", ".steps input[type=range]", "End (step {i} of {n})"
)


def until_ready(page, where: Page, i: int, last: int, act, from_src: str | None = None) -> float:
    """`ready` for step `i` of `last` on a page laid out as `where` says."""
    return ready(page, where.img, where.label, where.text(i, last), act, from_src)


def shown_src(page, where: Page) -> str | None:
    return page.evaluate(f"({SHOWN})({json.dumps(where.img)})")


def steps_at(page, where: Page, pos: int, last: int, out: list[float]) -> None:
    """STEPS_EACH steps by the → key from step `pos` (the page shows it)."""
    for i in range(pos + 1, min(pos + STEPS_EACH, last) + 1):
        page.evaluate("document.activeElement && document.activeElement.blur()")
        src = shown_src(page, where)
        out.append(until_ready(page, where, i, last, lambda: page.keyboard.press("ArrowRight"), src))


def jump_to_end(page, where: Page, last: int) -> float:
    """The slider moved to its end (End key on it) until the last step is on screen."""
    src = shown_src(page, where)
    page.locator(f"{where.slider} >> visible=true").first.focus()
    took = until_ready(page, where, last, last, lambda: page.keyboard.press("End"), src)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    return took


def heap_mb(ctx, page) -> float:
    cdp = ctx.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    cdp.detach()
    return metrics.get("JSHeapUsedSize", 0) / 1e6


def vm_hwm_mb(pid: int) -> float:
    """The peak resident memory of process `pid` so far (Linux's VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def places(turns: int) -> dict[str, int]:
    """The positions measured: the first step acted in, the middle, a few steps before the end."""
    last = turns + 1  # a computer-use episode ends with the screen its last action left
    return {"start": 1, "middle": turns // 2, "end": last - STEPS_EACH}


def py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # installed into the venv, as `pip install py-spy` does
    return str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"


@contextlib.contextmanager
def served(runs: list[Path], log: Path, profile: Path | None = None):
    """The viewer's server on `runs` (yields its URL and process id), recorded by py-spy into `profile` (every
    thread, raw collapsed stacks) when given."""
    from evalkit.view.serve import spawn, stop

    port = free_port()
    proc = spawn(vs.app_command([str(r) for r in runs], port), cwd=vs.APP_PATH.parent.parent, log=log)
    url = f"http://127.0.0.1:{port}"
    spy = None
    try:
        wait_healthy(url, proc, 120)
        if profile is not None:
            spy = subprocess.Popen([py_spy(), "record", "--pid", str(proc.pid), "--rate", "200", "--format",
                                    "raw", "-o", str(profile)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(1.0)
        yield url, proc.pid
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        stop(proc)


def long_viewer(run: Path, key: str, turns: int, profile: Path | None) -> dict:
    """The Streamlit viewer (its own server, so that its memory is this episode's) on one long episode."""
    from playwright.sync_api import sync_playwright

    out: dict = {"steps": {}}
    spied = profile / f"viewer-{turns}.txt" if profile is not None else None
    with served([run], run.parent / f"viewer-{turns}.log", spied) as (url, pid), sync_playwright() as p:
        last = turns + 1
        link = f"{url}/?view=episode&run={run.name}&episode={key}&step="
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        warm = ctx.new_page()  # the browser's cache of Streamlit's own scripts, as once for a user
        warm.goto(f"{url}/?view=summary")
        warm.get_by_text("evalkit viewer").first.wait_for(timeout=120_000)
        warm.close()
        for name, pos in places(turns).items():
            page = ctx.new_page()
            out[f"open_{name}"] = until_ready(page, VIEWER_PAGE, pos, last, link + str(pos))
            out["steps"][name] = []
            steps_at(page, VIEWER_PAGE, pos, last, out["steps"][name])
            if name == "start":
                out["jump"] = jump_to_end(page, VIEWER_PAGE, last)
                out["heap_mb"] = heap_mb(ctx, page)
            page.close()
        browser.close()
        out["server_mb"] = vm_hwm_mb(pid)
    return out


def build_child(run: Path, site: Path) -> tuple[float, float]:
    """`evalkit bundle` of `run` in a process of its own: (its build time, its peak resident memory, MB)."""
    code = ("import sys; from evalkit.view.bundle import build; "
            "print(build([sys.argv[1]], sys.argv[2]).seconds)")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # In ROOT: `python -c` puts the working directory first on the path, and this script's code is ROOT's.
    cmd = [sys.executable, "-c", code, str(run), str(site)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    said = proc.stdout.read().decode()
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"building the bundle of {run} failed")
    return float(said.split()[-1]), usage.ru_maxrss / 1024


def long_bundle(run: Path, turns: int, workdir: Path) -> dict:
    """`evalkit bundle` of one long episode: build time, size, peak memory, then from file:// (network
    blocked): opening the episode from the table at the start, the middle and the end, steps there, a jump
    to the end, the page's elements and heap."""
    from playwright.sync_api import sync_playwright

    site = workdir / f"bundle-{turns}"
    shutil.rmtree(site, ignore_errors=True)
    seconds, peak = build_child(run, site)
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    out: dict = {
        "build_s": seconds,
        "build_mb": peak,
        "bytes": size,
        "frames": frames_bytes(run),
        "steps": {},
    }
    last = turns + 1
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        for name, pos in places(turns).items():
            page = ctx.new_page()
            page.goto((site / "index.html").as_uri())
            page.locator("#episodes tbody tr").first.wait_for(timeout=60_000)
            row, hash_ = page.locator("#episodes tbody tr").first, f"location.hash = '#/ep/0/{pos}'"
            act = row.click if name == "start" else functools.partial(page.evaluate, hash_)
            out[f"open_{name}"] = until_ready(page, BUNDLE_PAGE, pos, last, act)
            if name == "start":
                out["elements"] = page.evaluate("document.getElementsByTagName('*').length")
            out["steps"][name] = []
            steps_at(page, BUNDLE_PAGE, pos, last, out["steps"][name])
            if name == "start":
                out["jump"] = jump_to_end(page, BUNDLE_PAGE, last)
                out["heap_mb"] = heap_mb(ctx, page)
            page.close()
        browser.close()
    return out


def long_episodes(root: Path, counts: list[int], profile: Path | None) -> dict[int, dict]:
    out = {}
    for turns in counts:
        run = root / f"long-{turns}"
        if not (run / "trace.jsonl").exists():
            t0 = time.perf_counter()
            shutil.rmtree(run, ignore_errors=True)
            make_long_run(run, turns)
            print(f"long run of {turns:,} turns written in {time.perf_counter() - t0:.0f} s", flush=True)
        key = json.loads((run / "trace.jsonl").open().readline())["key"]
        shutil.rmtree(run / ".evalkit", ignore_errors=True)
        out[turns] = {
            "viewer": long_viewer(run, key, turns, profile),
            "bundle": long_bundle(run, turns, root),
        }
        print(f"  {turns:,} turns measured", flush=True)
    return out


LONG_ROWS = [
    ("open at the start", "open_start", "s"), ("open in the middle", "open_middle", "s"),
    ("open at the end", "open_end", "s"), ("→ at the start", "steps.start", "s"),
    ("→ in the middle", "steps.middle", "s"), ("→ at the end", "steps.end", "s"),
    ("→ slowest", "steps.slowest", "s"), ("jump to the end", "jump", "s"),
    ("page JS heap", "heap_mb", "MB"),
]  # fmt: skip
VIEWER_ROWS = [*LONG_ROWS, ("server peak memory", "server_mb", "MB")]
BUNDLE_ROWS = [("build", "build_s", "s"), ("build peak memory", "build_mb", "MB"),
               ("size", "bytes", "MB"), ("size / its frames", "per_frames", "×"),
               *LONG_ROWS, ("page elements", "elements", "")]  # fmt: skip


def figure(m: dict, name: str) -> float:
    if name.startswith("steps."):
        steps = m["steps"]
        part = name.split(".")[1]
        return (
            max(x for v in steps.values() for x in v) if part == "slowest" else statistics.median(steps[part])
        )
    if name == "per_frames":
        return m["bytes"] / m["frames"]
    if name == "bytes":
        return m["bytes"] / 1e6
    return m[name]


def print_long(long: dict, title: str) -> None:
    counts = sorted(long, key=int)
    base = counts[0]
    print(f"\n{title}: one episode each, a unique {SCREEN[0]}×{SCREEN[1]} screenshot and a click per turn "
          f"(→: median of {STEPS_EACH} steps at each place; ratios to {base} turns)")  # fmt: skip
    head = "".join(f"{int(n):>22,} turns" for n in counts)
    for side, rows in (("viewer", VIEWER_ROWS), ("bundle", BUNDLE_ROWS)):
        print(f"  {side:<24}{head}")
        for label, name, unit in rows:
            cells = []
            for n in counts:
                v, b = figure(long[n][side], name), figure(long[base][side], name)
                fmt = f"{v:,.0f}" if unit == "" else f"{v:.3f}" if unit == "s" else f"{v:.2f}"
                ratio = f"({v / b:5.2f}×)" if n != base and b else " " * 8
                cells.append(f"{fmt + ' ' + unit:>19} {ratio}")
            print(f"    {label:<22}" + "".join(cells))


FIRST_MODES = ("evalkit view", "streamlit run")


def as_written(run: Path) -> None:
    """The run as evalkit's writer leaves it: its kept index beside the trace and nothing else derived (the
    viewer's caches of an earlier open removed)."""
    from evalkit.records import kept

    keep = run / ".evalkit" / kept.NAME
    if not keep.exists():
        kept.Journal.open(run, run / "trace.jsonl")
    for f in (run / ".evalkit").iterdir():
        if f.name != kept.NAME:
            shutil.rmtree(f) if f.is_dir() else f.unlink()


def first_command(root: Path, mode: str, run: Path, port: int) -> list[str]:
    """The viewer's server as `evalkit view` starts it, or as a user's `streamlit run viewer/app.py` in the
    checkout does (its settings from viewer/.streamlit/config.toml), with the code of `root`."""
    if mode == "evalkit view":
        return [*vs.app_command([run], port, root / "viewer" / "app.py")]
    return [sys.executable, "-m", "streamlit", "run", "viewer/app.py", "--server.port", str(port), "--",
            str(run)]  # fmt: skip


def first_opens(run: Path, episodes: int, rounds: int, trees: dict[str, Path], profile: Path | None) -> dict:
    """The first open of the run on a server just started (the browser navigates as soon as it answers):
    each round, a one-line page's first open (the floor), then the viewer started each way by each code
    tree in `trees`, the run as evalkit wrote it (its kept index, no other cache). Seconds from the
    navigation's start to the table's first paint."""
    from playwright.sync_api import sync_playwright

    from evalkit.view.serve import stop

    label = f"{episodes:,} of {episodes:,} episodes"
    out: dict[str, list[float]] = {"floor": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        for r in range(rounds):
            fproc, furl = floor_app(run.parent)
            try:
                ctx = browser.new_context(viewport={"width": 1280, "height": 720})
                out["floor"].append(paint(ctx, furl, "floor ready"))
                ctx.close()
            finally:
                fproc.terminate()
                fproc.wait(10)
            for name, root in trees.items():
                for mode in FIRST_MODES:
                    as_written(run)
                    port = free_port()
                    env = dict(os.environ, PYTHONPATH=str(root))
                    cmd = first_command(root, mode, run, port)
                    proc = subprocess.Popen(
                        cmd,
                        cwd=root,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    tag = f"first-{name}-{mode.split()[0]}.json".replace("/", "_")
                    try:
                        with spying(proc.pid, profile / tag if profile and r == 0 else None):
                            url = f"http://127.0.0.1:{port}"
                            wait_healthy(url, proc, 120)
                            ctx = browser.new_context(viewport={"width": 1280, "height": 720})
                            out.setdefault(f"{name} · {mode}", []).append(paint(ctx, url, label, table=True))
                            ctx.close()
                    finally:
                        stop(proc)
            print(f"  first opens, round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in out.items()),
                  flush=True)  # fmt: skip
        browser.close()
    return out


@contextlib.contextmanager
def spying(pid: int, into: Path | None):
    """py-spy on process `pid` from its start, every thread, idle ones too (what the script waits for), into
    `into` (speedscope's format: each thread's samples in time order); nothing when None."""
    spy = None
    if into is not None:
        spy = subprocess.Popen([py_spy(), "record", "--pid", str(pid), "--rate", "200", "--threads", "--idle",
                                "--format", "speedscope", "-o", str(into)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)


def print_first(first: dict) -> None:
    floor = first["floor"]
    print(f"\nfirst open of the run on a server just started (median of {len(floor)}; ratio: the median of "
          f"each round's to the floor's first open that round), load {os.getloadavg()[0]:.1f}:")  # fmt: skip
    print(f"  floor (one-line page)          {statistics.median(floor):6.2f} s")
    for k, v in first.items():
        if k == "floor":
            continue
        ratio = statistics.median(a / b for a, b in zip(v, floor, strict=True))
        print(f"  {k:<30} {statistics.median(v):6.2f} s   {ratio:4.2f} × floor   "
              f"{statistics.median(v) / GOAL_TABLE_S:4.2f} × goal (≤ {GOAL_TABLE_S} s)")  # fmt: skip


def table_part(args) -> dict:
    """The run of many short episodes: the table's first paint and steps against the floor, search, bundle."""
    t0 = time.perf_counter()
    if not (args.out / "trace.jsonl").exists():
        make_run(args.out, args.episodes, args.turns)
    size = (args.out / "trace.jsonl").stat().st_size
    print(f"run: {args.episodes:,} episodes, {args.episodes * args.turns:,} frame references, "
          f"trace {size / 1e6:.0f} MB, ready in {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    # "first open" means the run as evalkit's writer leaves it (its kept index, no cached one): a reused --out
    # must not bring its old caches along
    as_written(args.out)
    r = measure(args.out, args.episodes, args.turns, args.repeats, args.profile)
    if args.no_bundle:
        return {"trace_bytes": size, "viewer": r, "search": search_times(args.out, args.repeats)}
    b = bundle(args.out, args.episodes, args.turns, max(1, args.repeats // 2), args.out.parent)
    built = b.pop("built")
    b |= {"seconds": built.seconds, "bytes": built.bytes, "files": built.files}
    return {"trace_bytes": size, "viewer": r, "search": search_times(args.out, args.repeats), "bundle": b}


def print_table(t: dict, title: str) -> None:
    r, size = t["viewer"], t["trace_bytes"]
    med = {k: statistics.median(v) for k, v in r.items() if v}
    pairs = (("table_warm", "floor"), ("next", "floor_next"), ("key", "floor_key"))
    ratio = {k: statistics.median(a / b for a, b in zip(r[k], r[f], strict=True)) for k, f in pairs}
    cold, warm, base = r["table_cold"][0], med["table_warm"], med["floor"]
    print(f"\n{title}")
    print(f"floor (a one-line Streamlit page; median of {len(r['floor'])}): first paint {base:.2f} s, "
          f"a step by Next {med['floor_next']:.3f} s, by → {med['floor_key']:.3f} s")  # fmt: skip
    print(f"table first paint, first open of the run:  {cold:6.2f} s   {cold / GOAL_TABLE_S:5.2f} × goal")
    print(f"table first paint, again (median of {len(r['table_warm'])}):      {warm:6.2f} s   "
          f"{warm / GOAL_TABLE_S:5.2f} × goal, {ratio['table_warm']:4.2f} × floor (paired)")  # fmt: skip
    for k, what in (("next", "Next"), ("key", "→ key")):
        # The slowest too: a step onto another page of the filmstrip or transcript has them drawn again.
        print(f"{what} → new picture on screen (median of {len(r[k])}):   {med[k]:6.3f} s   "
              f"{med[k] / GOAL_NEXT_S:5.2f} × goal, {ratio[k]:4.2f} × floor (paired); "
              f"slowest {max(r[k]):.3f} s")  # fmt: skip
    s = t["search"]
    q = statistics.median(s["query"])
    print(f"search index: {s['rows']:,} steps built in {s['build']:.1f} s; a search (median of "
          f"{len(s['query'])}): {q * 1000:.0f} ms, {q / GOAL_NEXT_S:.2f} × the step goal")  # fmt: skip
    b = t.get("bundle")
    if b is None:
        return
    parts = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(b["by_dir"].items()))
    print(f"bundle: built in {b['seconds']:.1f} s, {b['bytes'] / 1e6:.1f} MB in {b['files']:,} files "
          f"({parts}); {b['bytes'] / size:.2f} × the trace")  # fmt: skip
    bpaint, opened, bkey = (statistics.median(b[k]) for k in ("paint", "open", "key"))
    print(f"bundle from file:// (median of {len(b['paint'])}): table {bpaint:.2f} s "
          f"({bpaint / GOAL_TABLE_S:.2f} × goal), an episode opens in {opened:.2f} s, → key → new frame "
          f"{bkey:.3f} s ({bkey / GOAL_NEXT_S:.2f} × goal)")  # fmt: skip


def export(rev: str, workdir: Path) -> Path:
    """The code of commit `rev`, exported beside the runs."""
    tree = workdir / f"code-{rev}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def before(rev: str, argv: list[str], workdir: Path) -> dict:
    """The same measures with the code of commit `rev` (exported beside, this script copied into it) on the
    same runs, in a process of its own: today's figures, taken in this run of the benchmark."""
    tree = export(rev, workdir)
    shutil.copyfile(Path(__file__), tree / "benchmarks" / "viewer.py")
    found = workdir / f"before-{rev}.json"
    cmd = [sys.executable, str(tree / "benchmarks" / "viewer.py"), *argv, "--json", str(found)]
    print(f"--- the code of {rev} ---", flush=True)
    subprocess.run(cmd, check=True, env=dict(os.environ, PYTHONPATH=str(tree)))
    print(f"--- this code ({ROOT.name}) ---", flush=True)
    return json.loads(found.read_text())


def goals(now: dict, then: dict | None) -> None:
    """The goals of issue 56, each with its figure (and today's, with --before)."""
    long = {int(k): v for k, v in now.get("long", {}).items()}
    if len(long) < 2:
        return
    lo, hi = min(long), max(long)
    b_lo, b_hi = long[lo]["bundle"], long[hi]["bundle"]
    steps = lambda m: statistics.median(x for v in m["steps"].values() for x in v)  # noqa: E731
    print(f"\ngoals at {hi:,} turns against {lo} (issue 56):")
    print(f"  bundle opens  {b_hi['open_start'] / b_lo['open_start']:5.2f}× (≤ 1.5×)   "
          f"steps {steps(b_hi) / steps(b_lo):5.2f}× (≤ 1.5×, median of every → step)")  # fmt: skip
    print(f"  bundle size   {b_hi['bytes'] / b_hi['frames']:5.2f}× its frames (≤ 1.2×)")
    if then and str(hi) in then.get("long", {}):
        old = then["long"][str(hi)]["bundle"]
        print(f"  bundle build  {b_hi['build_s']:.1f} s, {b_hi['build_s'] / old['build_s']:.2f}× today's "
              f"{old['build_s']:.1f} s (≤ 0.25×)")  # fmt: skip
    t = now.get("table")
    if t:
        r = t["viewer"]
        ratio = lambda k, f: statistics.median(a / b for a, b in zip(r[k], r[f], strict=True))  # noqa: E731
        print(f"  viewer first open {r['table_cold'][0]:.2f} s (≤ 1.5 s); table paint "
              f"{ratio('table_warm', 'floor'):.2f}× floor, steps {ratio('next', 'floor_next'):.2f}× / "
              f"{ratio('key', 'floor_key'):.2f}× (≤ 1.2×)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--long", default=",".join(map(str, LONG_TURNS)),
                    help="turns of the long episodes, comma-separated ('' for none)")  # fmt: skip
    ap.add_argument("--no-table", action="store_true", help="only the long episodes")
    ap.add_argument("--no-bundle", action="store_true", help="not the bundle of the many short episodes")
    ap.add_argument(
        "--before", metavar="REV", help="measure the code of commit REV too, first, on the same runs"
    )
    ap.add_argument(
        "--first",
        type=int,
        metavar="N",
        help="only the first open of the run on a fresh server, N rounds (with the floor's)",
    )
    ap.add_argument(
        "--first-against",
        metavar="REV",
        help="with --first: the code of commit REV too, turn about with this code",
    )
    ap.add_argument("--profile", type=Path, help="py-spy the viewer's servers into DIR (viewer-*.txt)")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    ap.add_argument("--out", type=Path, help="where to write the runs (default: a temporary directory)")
    args = ap.parse_args()
    if chromium_executable() is None:
        sys.exit("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
    tmp = None
    if args.out is None:
        tmp = Path(tempfile.mkdtemp(prefix="evalkit-viewer-bench-"))
        args.out = tmp / "bench-run"
    try:
        if args.first:
            if not (args.out / "trace.jsonl").exists():
                make_run(args.out, args.episodes, args.turns)
            trees = {"this code": ROOT}
            if args.first_against:
                trees = {args.first_against: export(args.first_against, args.out.parent), **trees}
            print_first(first_opens(args.out, args.episodes, args.first, trees, args.profile))
            return
        then = None
        if args.before:
            argv = [a for a in sys.argv[1:] if a not in ("--before", args.before)]
            argv = [*argv, "--out", str(args.out)] if "--out" not in argv else argv
            then = before(args.before, argv, args.out.parent)
        now: dict = {}
        counts = [int(x) for x in args.long.split(",") if x.strip()]
        if counts:
            now["long"] = long_episodes(args.out.parent, counts, args.profile)
        if not args.no_table:
            now["table"] = table_part(args)
        if args.json:
            args.json.write_text(json.dumps(now, default=str))
        for name, figs in (("today (" + str(args.before) + ")", then), ("this code", now)):
            if figs is None:
                continue
            if figs.get("table"):
                print_table(figs["table"], f"{args.episodes:,} episodes of {args.turns} turns, {name}")
            if figs.get("long"):
                print_long({int(k): v for k, v in figs["long"].items()}, f"long episodes, {name}")
        goals(now, then)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
