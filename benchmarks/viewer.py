"""How fast the viewer opens a large run, measured in headless Chromium.

Generates a run of 10,000 episodes with 20 turns each (200,000 frame references into a content-addressed
store of a few hundred small PNGs), serves the viewer on it with `streamlit run`, and measures through
Playwright:
  - time to first paint of the episode table (navigation to the table's grid and its row count on screen),
    once cold (the analysis index is built) and then warm (cached index, a new browser page each time);
  - time from a click on "Next" to the new frame on screen (its image source changed, the step label moved).
  - the same step by the → key;
  - building the search index and searching it;
  - `evalkit bundle` of the run: build time and size, then from file:// (network blocked) the table's first
    paint, opening an episode and a step by the → key.
Prints medians and their ratio to the goals of the issue (≤ 3 s and ≤ 0.5 s).

    .venv/bin/python benchmarks/viewer.py [--episodes 10000] [--turns 20] [--out DIR] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PIL import Image as PILImage  # noqa: E402

from evalkit.browser import CHROMIUM_ARGS, chromium_executable  # noqa: E402
from evalkit.records.traces import FrameStore, write_run_json  # noqa: E402
from evalkit.serving import free_port  # noqa: E402
from evalkit.types import Image, episode_key  # noqa: E402
from evalkit.view import support as vs  # noqa: E402

GOAL_TABLE_S = 3.0
GOAL_NEXT_S = 0.5
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


FLOOR_APP = 'import streamlit as st\nst.text("ready")\n'


def floor(browser, repeats: int, workdir: Path) -> list[float]:
    """First paint of a one-line Streamlit page on this machine: what no Streamlit app can beat."""
    app = workdir / "floor_app.py"
    app.write_text(FLOOR_APP)
    port = free_port()
    cmd = vs.app_command([], port)
    cmd[cmd.index(str(vs.APP_PATH))] = str(app)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        ctx = browser.new_context()
        times = []
        for _ in range(repeats + 1):
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(url)
            page.get_by_text("ready").wait_for(timeout=60_000)
            times.append(time.perf_counter() - t0)
            page.close()
        ctx.close()
        return times[1:]  # the first load fills the browser cache, as it does once for a user
    finally:
        proc.terminate()
        proc.wait(10)


def measure(run: Path, episodes: int, turns: int, repeats: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"table_cold": [], "table_warm": [], "next": [], "key": [], "floor": []}
    with vs.running_app([run]) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        label = f"{episodes:,} of {episodes:,} episodes"
        ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
        for i in range(repeats + 1):
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(url)
            page.locator('[data-testid="stDataFrame"] canvas').first.wait_for(timeout=300_000)
            page.get_by_text(label).wait_for(timeout=300_000)
            out["table_cold" if i == 0 else "table_warm"].append(time.perf_counter() - t0)
            page.close()
        page = ctx.new_page()
        page.goto(f"{url}/?view=episode&run={run.name}&episode={BENCH_KEY}&step=0")
        page.get_by_text(f"Step 0 of {turns}").wait_for(timeout=120_000)
        img = ".st-key-enlarge_frame_ep img"  # the frame at this step, in the row of pictures
        n = min(turns // 2, repeats * 3)  # n steps by the button, n by the key
        for step in range(1, 2 * n + 1):
            src = page.locator(img).first.get_attribute("src")
            t0 = time.perf_counter()
            if step <= n:
                page.get_by_role("button", name="Next ▶").click()
            else:
                page.evaluate("document.activeElement && document.activeElement.blur()")
                page.keyboard.press("ArrowRight")
            page.wait_for_function(
                f"s => document.querySelector('{img}')?.getAttribute('src') !== s", arg=src
            )
            page.get_by_text(f"Step {step} of {turns}").wait_for()
            out["next" if step <= n else "key"].append(time.perf_counter() - t0)
        out["floor"] = floor(browser, repeats, run.parent)
        browser.close()
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
        ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
        ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        for _ in range(repeats):
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto((site / "index.html").as_uri())
            page.get_by_text(label).wait_for(timeout=120_000)
            page.locator("#episodes tbody tr").first.wait_for()
            out["paint"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            page.locator("#episodes tbody tr").nth(7).click()
            page.get_by_text(f"Step 0 of {turns}").wait_for(timeout=60_000)
            out["open"].append(time.perf_counter() - t0)
            frame = page.locator(".pics figure img").nth(1)
            for step in range(1, 4):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="where to write the run (default: a temporary directory)")
    args = ap.parse_args()
    if chromium_executable() is None:
        sys.exit("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
    tmp = None
    if args.out is None:
        tmp = Path(tempfile.mkdtemp(prefix="evalkit-viewer-bench-"))
        args.out = tmp / "bench-run"
    try:
        t0 = time.perf_counter()
        if not (args.out / "trace.jsonl").exists():
            make_run(args.out, args.episodes, args.turns)
        size = (args.out / "trace.jsonl").stat().st_size
        print(
            f"run: {args.episodes:,} episodes, {args.episodes * args.turns:,} frame references, "
            f"trace {size / 1e6:.0f} MB, written in {time.perf_counter() - t0:.1f} s"
        )
        # "first open" means no analysis index yet: a reused --out must not bring its old one along
        shutil.rmtree(args.out / ".evalkit", ignore_errors=True)
        r = measure(args.out, args.episodes, args.turns, args.repeats)
        cold, warm = r["table_cold"][0], statistics.median(r["table_warm"])
        nxt, key = statistics.median(r["next"]), statistics.median(r["key"])
        base = statistics.median(r["floor"])
        print(
            f"first paint of a one-line Streamlit page (median of {len(r['floor'])}): {base:6.2f} s  (floor)"
        )
        print(f"table first paint, first open of the run:  {cold:6.2f} s  {cold / GOAL_TABLE_S:5.2f} × goal, "
              f"{cold / base:4.1f} × floor")  # fmt: skip
        print(f"table first paint, again (median of {len(r['table_warm'])}):         {warm:6.2f} s   "
              f"{warm / GOAL_TABLE_S:5.2f} × goal, {warm / base:4.1f} × floor")  # fmt: skip
        print(f"Next → new frame on screen (median of {len(r['next'])}):      {nxt:6.3f} s   "
              f"{nxt / GOAL_NEXT_S:5.2f} × goal")  # fmt: skip
        print(f"→ key → new frame on screen (median of {len(r['key'])}):      {key:6.3f} s   "
              f"{key / GOAL_NEXT_S:5.2f} × goal")  # fmt: skip
        s = search_times(args.out, args.repeats)
        q = statistics.median(s["query"])
        print(f"search index: {s['rows']:,} steps built in {s['build']:.1f} s; a search (median of "
              f"{len(s['query'])}): {q * 1000:.0f} ms, {q / GOAL_NEXT_S:.2f} × the step goal")  # fmt: skip
        b = bundle(args.out, args.episodes, args.turns, max(1, args.repeats // 2), args.out.parent)
        built = b["built"]
        parts = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(b["by_dir"].items()))
        print(f"bundle: built in {built.seconds:.1f} s, {built.bytes / 1e6:.1f} MB in {built.files:,} files "
              f"({parts}); {built.bytes / size:.2f} × the trace")  # fmt: skip
        paint, opened, bkey = (statistics.median(b[k]) for k in ("paint", "open", "key"))
        print(f"bundle from file:// (median of {len(b['paint'])}): table {paint:.2f} s "
              f"({paint / GOAL_TABLE_S:.2f} × goal), an episode opens in {opened:.2f} s, → key → new frame "
              f"{bkey:.3f} s ({bkey / GOAL_NEXT_S:.2f} × goal)")  # fmt: skip
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
