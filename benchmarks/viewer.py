"""How fast the viewer opens a large run, measured in headless Chromium.

Generates a run of 10,000 episodes with 20 turns each (200,000 frame references into a content-addressed
store of a few hundred small PNGs), serves the viewer on it with `streamlit run`, and measures through
Playwright:
  - time to first paint of the episode table (navigation to the table's grid and its row count on screen),
    once cold (the analysis index is built) and then warm (cached index, a new browser page each time);
  - time from a click on "Next" to the new frame on screen (its image source changed, the step label moved).
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

from evalkit import viewer_support as vs  # noqa: E402
from evalkit.envs.server import free_port  # noqa: E402
from evalkit.traces import FrameStore, write_run_json  # noqa: E402
from evalkit.types import Image, episode_key  # noqa: E402

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

    out: dict[str, list[float]] = {"table_cold": [], "table_warm": [], "next": [], "floor": []}
    with vs.running_app([run]) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=vs.chromium_executable(), args=vs.CHROMIUM_ARGS)
        label = f"{episodes:,} of {episodes:,} episodes"
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        for i in range(repeats + 1):
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(url)
            page.locator('[data-testid="stDataFrame"] canvas').first.wait_for(timeout=300_000)
            page.get_by_text(label).wait_for(timeout=300_000)
            out["table_cold" if i == 0 else "table_warm"].append(time.perf_counter() - t0)
            page.close()
        page = ctx.new_page()
        key = episode_key("baseline:bench-1", "canvas", "tools", "reference", "canvas-test-0007", None, 2)
        page.goto(f"{url}/?view=episode&run={run.name}&episode={key}&step=0")
        page.get_by_text(f"Step 0 of {turns}").wait_for(timeout=120_000)
        img = '[data-testid="stImage"] img'
        for step in range(1, min(turns, repeats * 3) + 1):
            src = page.locator(img).first.get_attribute("src")
            t0 = time.perf_counter()
            page.get_by_role("button", name="Next ▶").click()
            page.wait_for_function(
                f"s => document.querySelector('{img}')?.getAttribute('src') !== s", arg=src
            )
            page.get_by_text(f"Step {step} of {turns}").wait_for()
            out["next"].append(time.perf_counter() - t0)
        out["floor"] = floor(browser, repeats, run.parent)
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="where to write the run (default: a temporary directory)")
    args = ap.parse_args()
    if vs.chromium_executable() is None:
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
        cold, warm, nxt = r["table_cold"][0], statistics.median(r["table_warm"]), statistics.median(r["next"])
        base = statistics.median(r["floor"])
        print(
            f"first paint of a one-line Streamlit page (median of {len(r['floor'])}): {base:6.2f} s  (floor)"
        )
        print(
            f"table first paint, first open of the run:  {cold:6.2f} s  {cold / GOAL_TABLE_S:5.2f} × goal, "
            f"{cold / base:4.1f} × floor"
        )
        print(
            f"table first paint, again (median of {len(r['table_warm'])}):         {warm:6.2f} s   "
            f"{warm / GOAL_TABLE_S:5.2f} × goal, {warm / base:4.1f} × floor"
        )
        print(
            f"next → new frame on screen (median of {len(r['next'])}):      {nxt:6.3f} s   "
            f"{nxt / GOAL_NEXT_S:5.2f} × goal"
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
