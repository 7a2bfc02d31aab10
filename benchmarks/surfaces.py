"""What each surface of the canvas env costs, and how many gui sessions one machine holds.

Measured in one run, through the real path (an embedded server on loopback, OpenEnv's client over WebSocket,
the process's one Chromium):

1. seconds per env step on each surface: a tools edit, an html `set_html` and `view_canvas`, a gui action
   followed by the screenshot a loop takes after it (action + settle + screenshot);
2. the screen's screenshot as PNG and as JPEG: bytes and seconds;
3. memory (PSS of the Chromium processes) per open gui session;
4. gui sessions running at once: step latency and failed steps as sessions are added.

Goals (issue #8): median gui step ≤ 0.25 s; 16 concurrent gui sessions without a failed step; ≤ 150 MB per
extra session. Medians and ratios only: absolute times on a shared machine are noise.

    python benchmarks/surfaces.py [--steps 40] [--sessions 1,4,8,16,24]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

from evalkit.browser import Browser
from evalkit.envs.client.openenv import OpenEnvSession
from evalkit.envs.embedded.canvas import task_from_id
from evalkit.envs.embedded.canvas.episode import registry
from evalkit.envs.embedded.canvas.gui_surface import SCREEN
from evalkit.envs.embedded.server import serve
from evalkit.providers.baseline.html_policy import page

TASK = "canvas-test-0002"  # 640 x 640, 11 elements
SKIN_CYCLE = ("classic", "midnight", "studio", "paper")


def median_ms(xs: list[float]) -> str:
    return f"{1000 * statistics.median(xs):7.1f} ms" if xs else "      —"


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)] if xs else float("nan")


def timed(fn, *a, **kw) -> float:
    t = time.perf_counter()
    fn(*a, **kw)
    return time.perf_counter() - t


def gui_actions(i: int) -> tuple[str, dict]:
    """A cycle of editor actions a model takes: pick a tool, draw, type into a field, leave it."""
    x, y = 300 + 7 * (i % 40), 200 + 5 * (i % 30)
    return [
        ("press_key", {"keys": "r"}),
        ("drag", {"x1": x, "y1": y, "x2": x + 60, "y2": y + 40}),
        ("press_key", {"keys": "Tab"}),
        ("type_text", {"text": str(10 + i % 50)}),
        ("press_key", {"keys": "Enter"}),
        ("click", {"x": x + 20, "y": y + 15}),
    ][i % 6]


def per_surface(base_url: str, steps: int) -> None:
    task_doc = task_from_id(TASK).doc
    html = page(
        task_doc.background, [e.to_dict() for e in task_doc.elements], task_doc.width, task_doc.height
    )
    s = OpenEnvSession(base_url)
    try:
        rows = []
        for surface in ("tools", "html", "gui"):
            resets = [timed(s.reset, task_id=TASK, surface=surface, max_steps=10_000) for _ in range(3)]
            rows.append((f"{surface}: reset", resets))
        s.reset(task_id=TASK, max_steps=10_000)
        add = {"kind": "rect", "x": 10, "y": 10, "width": 20, "height": 20, "fill": "#336699"}
        rows.append(("tools: add_element", [timed(s.call, "add_element", add) for _ in range(steps)]))
        rows.append(("tools: view_canvas (PIL)", [timed(s.call, "view_canvas", {}) for _ in range(steps)]))
        s.reset(task_id=TASK, surface="html", max_steps=10_000)
        rows.append((f"html: set_html ({len(task_doc.elements)} elements)",
                     [timed(s.call, "set_html", {"html": html}) for _ in range(steps)]))  # fmt: skip
        rows.append(
            ("html: view_canvas (Chromium)", [timed(s.call, "view_canvas", {}) for _ in range(steps)])
        )
        s.reset(task_id=TASK, surface="gui", skin="classic", max_steps=10_000)
        actions, shots, both = [], [], []
        for i in range(steps):
            a = timed(s.call, *gui_actions(i))
            b = timed(s.call, "screenshot", {})
            actions.append(a)
            shots.append(b)
            both.append(a + b)
        rows += [("gui: action (+ settle)", actions), ("gui: screenshot", shots), ("gui: step = both", both)]
        print(f"\nseconds per env step through the OpenEnv client ({steps} each; medians, p95)")
        for name, xs in rows:
            print(f"  {name:34s} {median_ms(xs)}   p95 {1000 * p95(xs):7.1f} ms")
        gui_step = statistics.median(both)
        print(
            f"  gui step median {gui_step:.3f} s (goal ≤ 0.25 s): {'met' if gui_step <= 0.25 else 'NOT met'}"
        )
        tools_step = statistics.median(rows[3][1])
        print(f"  gui step / tools add_element: {gui_step / tools_step:.1f}x")
    finally:
        s.close()


def screenshot_formats(base_url: str, n: int) -> None:
    s = OpenEnvSession(base_url)
    try:
        meta = s.reset(task_id=TASK, surface="gui", skin="classic")
        session = registry.get(meta["episode_id"]).page.session
        for i in range(12):
            s.call(*gui_actions(i))
        out = {}
        for fmt, q in (("png", None), ("jpeg", 85), ("jpeg", 70)):
            times, size = [], 0
            for _ in range(n):
                t = time.perf_counter()
                size = len(session.sync.screenshot(fmt, q))
                times.append(time.perf_counter() - t)
            out[(fmt, q)] = (statistics.median(times), size)
        print(f"\nthe gui screen ({SCREEN[0]} x {SCREEN[1]}) as an image ({n} each, in Chromium; medians)")
        png_t, png_b = out[("png", None)]
        for (fmt, q), (t, b) in out.items():
            name = fmt.upper() + (f" q{q}" if q else "")
            ratio = f"bytes {b / png_b:4.2f}x, time {t / png_t:4.2f}x PNG"
            print(f"  {name:9s} {b / 1024:7.1f} KiB  {1000 * t:6.1f} ms   {ratio}")
    finally:
        s.close()


def _chromium_pss_mb() -> float:
    """PSS of every Chromium process under this one: shared pages counted once across the tree."""
    me, total = os.getpid(), 0
    parents: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(p.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    for pid in parents:
        up, seen = pid, 0
        while up not in (0, 1, me) and seen < 50:
            up, seen = parents.get(up, 0), seen + 1
        if up != me or pid == me:
            continue
        try:
            rollup = (Path("/proc") / str(pid) / "smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
    return total / 1024


def memory(base_url: str, counts: list[int]) -> None:
    opened: list[OpenEnvSession] = []
    print("\nmemory of Chromium (PSS) with gui sessions open")
    try:
        base = None
        for n in counts:
            while len(opened) < n:
                s = OpenEnvSession(base_url)
                s.reset(
                    task_id=TASK,
                    surface="gui",
                    skin=("classic", "midnight", "studio", "paper")[len(opened) % 4],
                )
                s.call("press_key", {"keys": "r"})
                s.call("drag", {"x1": 400, "y1": 300, "x2": 500, "y2": 380})
                opened.append(s)
            time.sleep(1.0)
            mb = _chromium_pss_mb()
            base = mb if base is None else base
            per = (mb - base) / (n - counts[0]) if n > counts[0] else float("nan")
            goal = "" if n == counts[0] else f" (goal ≤ 150 MB: {'met' if per <= 150 else 'NOT met'})"
            print(f"  {n:3d} open: {mb:8.1f} MB   per extra session {per:6.1f} MB{goal}")
    finally:
        for s in opened:
            s.close()


def run_sessions(base_url: str, n: int, steps: int) -> tuple[list[float], list[str], float]:
    """`n` gui sessions stepping at once: (step seconds, failures, wall seconds)."""
    times: list[float] = []
    failed: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def worker(k: int) -> None:
        s = None
        try:
            s = OpenEnvSession(base_url, message_timeout_s=60)
            s.reset(task_id=TASK, surface="gui", skin=SKIN_CYCLE[k % 4], max_steps=10_000)
            start.wait(timeout=120)
            for i in range(steps):
                t = time.perf_counter()
                a = s.call(*gui_actions(i))
                b = s.call("screenshot", {})
                took = time.perf_counter() - t
                with lock:
                    times.append(took)
                    if a.is_error or b.is_error or not b.images:
                        failed.append(a.text or b.text)
        except Exception as e:
            with lock:
                failed.append(f"{type(e).__name__}: {e}")
        finally:
            if s is not None:
                s.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, failed, time.perf_counter() - t0


def concurrent(base_url: str, sessions: list[int], steps: int) -> None:
    print(f"\ngui sessions at once on {os.cpu_count()} cores ({steps} steps each: action + screenshot)")
    one = None
    for n in sessions:
        times, failed, wall = run_sessions(base_url, n, steps)
        med = statistics.median(times) if times else float("nan")
        one = one or med
        print(
            f"  {n:3d} sessions: step median {med:6.3f} s, p95 {p95(times):6.3f} s ({med / one:4.1f}x one), "
            f"{len(times) / wall:5.1f} steps/s in all, failed steps {len(failed)}"
            + (f" — e.g. {failed[0][:100]}" if failed else "")
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sessions", default="1,4,8,16,24")
    ap.add_argument("--memory", default="1,2,4,8,16")
    args = ap.parse_args()
    with serve("canvas", max_concurrent_envs=64) as env:
        per_surface(env.base_url, args.steps)
        screenshot_formats(env.base_url, max(10, args.steps // 2))
        memory(env.base_url, [int(x) for x in args.memory.split(",")])
        concurrent(env.base_url, [int(x) for x in args.sessions.split(",")], max(10, args.steps // 2))
    print(f"\nChromium launches in this process: {Browser.get().launches}")


if __name__ == "__main__":
    main()
