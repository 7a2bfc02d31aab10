"""Offline own-loop baselines that need no model: a scripted solver that reads the DOM, and random clicks.

They run through the same harness as the model runners (fresh context, session flags, screens, steps,
grading) and act only through real input — mouse and keyboard at screen coordinates — so they show what
the grader gives a policy that does the task and one that does not. They are never presented as models.

The DOM solver follows a task's `solution` (click an element by its text or a CSS selector, fill a field,
press a key, read the answer off the page): it finds each element in the live DOM, scrolls it into view
with the mouse wheel when it is off screen, and clicks the middle of its box. The actions it took, in page
pixels, are a plan the fake endpoint (`evalkit.ownloop.fake`) can replay in any agent's output format.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.records.rundir import FrameStore

from .settings import Settings
from .task import TaskRun

# The element a solution step names: "css:<selector>", or the visible text of a link, button, label or
# heading (the first in document order, clickable elements first).
_LOCATE = """([how, what]) => {
  const visible = el => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none' };
  let found = null;
  if (how === 'css') { found = [...document.querySelectorAll(what)].find(visible) || null }
  else {
    const norm = t => (t || '').replace(/\\s+/g, ' ').trim();
    const pools = ['a, button, input[type=submit], label, [role=button]',
                   'h1, h2, h3, td, th, li, p, span, div'];
    for (const sel of pools) {
      found = [...document.querySelectorAll(sel)].find(el => visible(el) && (norm(el.innerText) === what
        || norm(el.value) === what)); if (found) break } }
  if (!found) return null;
  const r = found.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: innerWidth, h: innerHeight,
          text: (found.innerText || '').slice(0, 2000)} }"""
_TEXT = "(sel) => { const el = document.querySelector(sel); return el ? el.innerText : null }"
MAX_SCROLLS = 8
SCROLL_PX = 500


class SolverError(RuntimeError):
    """A solution step names nothing on the page: the task file and the app disagree."""


def execute(session: Any, action: dict) -> None:
    """One generic action (page pixels) as real input."""
    kind = action["type"]
    if kind == "click":
        session.sync.click(action["x"], action["y"])
    elif kind == "type":
        session.sync.type_text(action["text"])
    elif kind == "press":
        session.sync.key_press(action["key"])
    elif kind == "scroll":
        session.sync.scroll(action["x"], action["y"], 0, action["dy"])
    elif kind != "finish":
        raise ValueError(f"unknown action {kind!r}")
    if kind != "finish":
        settle(session)


def settle(session: Any, grace: float = 0.3) -> None:
    """Let a navigation that the last input started begin, load and paint: a form post or a link does not
    navigate at once, and a page read mid-navigation has no document."""
    time.sleep(grace)
    session.sync.settle(5.0)


def plan_of(folder: str | Path) -> list[dict]:
    """The generic actions a DOM-solver task folder took, in order: a plan for the fake endpoint."""
    plan = []
    for line in (Path(folder) / "steps.jsonl").read_text().splitlines():
        plan += json.loads(line).get("actions") or []
    return plan


def plan_task(task: dict, site: Any, width: int, height: int) -> list[dict]:
    """The generic actions the DOM solver takes on `task` in a `width` × `height` page on `site`, found by
    doing it there (its folder, screens and frames are thrown away): a plan for the fake endpoint, with no
    run before it. Raises SolverError when the task's solution does not fit its app."""
    with tempfile.TemporaryDirectory(prefix="evalkit-plan-") as tmp:
        settings = Settings(agent="dom", width=width, height=height, settle_s=0.2)
        ctx = TaskRun(task, site, Path(tmp) / "task", settings, FrameStore(tmp))
        try:
            DomSolver().run(ctx)
        finally:
            ctx.close()
        if ctx.result.get("status") != "finished":
            raise SolverError(f"the DOM solver could not do {task['task_id']} ({ctx.result.get('status')})")
        return plan_of(ctx.folder)


class _Baseline:
    viewport = (1280, 800)
    needs_endpoint = False
    coordinates = "pixels"
    prompt_version = None

    def check(self, settings: Settings) -> None:
        """Nothing to import."""

    def _act(self, ctx: TaskRun, session: Any, step: int, action: dict) -> None:
        ctx.screenshot(session, step)
        url = session.url
        error = ""
        with ctx.timed("action"):
            try:
                execute(session, action)
            except Exception as e:  # input that Playwright refused is the policy's mistake, kept as data
                error = f"{type(e).__name__}: {str(e)[:200]}"
                ctx.result["action_errors"] += 1
        ctx.result["rounds"] = step
        ctx.step(step, raw=json.dumps(action), actions=[action], url=url, errors=[error])

    def _last(self, ctx: TaskRun, session: Any, step: int, submit: bool) -> None:
        """The end of a task: finished on the policy's behalf when it did not end it (and `submit`), then the
        last screen."""
        if not ctx.result["status"] and submit:
            step += 1
            self._act(ctx, session, step, {"type": "finish", "answer": None})
            ctx.result["status"] = "finished"
        ctx.screenshot(session, step + 1)


class DomSolver(_Baseline):
    """Follows each task's reference solution through the live DOM (`evalkit ownloop dom`)."""

    def run(self, ctx: TaskRun) -> None:
        s = ctx.settings
        session = ctx.open_browser(s.width, s.height)
        step = 0
        try:
            plan = ctx.raw_task.get("solution") or []
            if not plan:
                ctx.result["status"] = "no_solution"
            for item in plan:
                for action in self._expand(session, item):
                    if step >= s.max_steps or ctx.out_of_time():
                        ctx.result["status"] = "max_steps" if step >= s.max_steps else "timeout"
                        break
                    step += 1
                    self._act(ctx, session, step, action)
                    if action["type"] == "finish":
                        ctx.result["answer"] = action.get("answer")
                        ctx.result["status"] = "finished"
                if ctx.result["status"]:
                    break
            self._last(ctx, session, step, submit=step < s.max_steps)
        finally:
            ctx.end(session)

    def _expand(self, session: Any, item: dict) -> Iterator[dict]:
        """A solution step → generic actions, each located in the DOM as the page is after the one before
        (the caller executes an action before asking for the next)."""
        if "press" in item:
            yield {"type": "press", "key": item["press"]}
            return
        if "answer_css" in item:
            text = session.sync.evaluate(_TEXT, item["answer_css"])
            if text is None:
                raise SolverError(f"no element {item['answer_css']!r} to read the answer from")
            if item.get("pattern"):
                m = re.search(item["pattern"], text)
                text = m.group(1) if m else None
            yield {"type": "finish", "answer": text.strip() if text else None}
            return
        target = item.get("click") or item.get("fill")
        if not isinstance(target, str):
            raise SolverError(f"unknown solution step {item!r}")
        for _ in range(MAX_SCROLLS):  # wheel the element's middle onto the screen first
            box = self._locate(session, target)
            if 0 <= box["y"] < box["h"] - 4:
                break
            # Whole turns of 5 wheel notches, as the GUI models scroll, so a plan replays for any of them.
            dy = SCROLL_PX if box["y"] >= box["h"] - 4 else -SCROLL_PX
            yield {"type": "scroll", "x": box["w"] // 2, "y": box["h"] // 2, "dy": dy}
        box = self._locate(session, target)
        yield {"type": "click", "x": round(box["x"], 1), "y": round(box["y"], 1)}
        if "fill" in item:
            yield {"type": "press", "key": "Control+a"}
            yield {"type": "type", "text": item["text"]}

    def _locate(self, session: Any, target: str) -> dict:
        how, what = ("css", target[4:]) if target.startswith("css:") else ("text", target)
        box = session.sync.evaluate(_LOCATE, [how, what])
        if box is None:
            raise SolverError(f"nothing on {session.url} matches {target!r}")
        return box


class RandomClicks(_Baseline):
    """Clicks at uniformly random points, then finishes without an answer (`evalkit ownloop random`)."""

    steps = 12

    def run(self, ctx: TaskRun) -> None:
        s = ctx.settings
        rng = random.Random(s.seed * 1_000_003 + zlib.crc32(ctx.raw_task["task_id"].encode()))
        session = ctx.open_browser(s.width, s.height)
        step = 0
        try:
            for _ in range(min(self.steps, s.max_steps - 1)):
                if ctx.out_of_time():
                    ctx.result["status"] = "timeout"
                    break
                step += 1
                x, y = round(rng.uniform(0, s.width - 1), 1), round(rng.uniform(0, s.height - 1), 1)
                self._act(ctx, session, step, {"type": "click", "x": x, "y": y})
            self._last(ctx, session, step, submit=True)
        finally:
            ctx.end(session)
