"""Fara-7B as released: Microsoft's FaraAgent with its browser manager (BrowserBB) and PlaywrightController,
from `--path` (the `src/` dir of a microsoft/fara clone), as `fara-cli` and webeval run it: 1440×900, the
last 3 screenshots, temperature 0, single-tab mode, their page script.

The browser manager is subclassed only to launch our Chromium (`evalkit.browser.launch_options`) with our
context (clipboard granted, focus emulated, en-US / UTC, requests kept to the web app) instead of Firefox
with an Edge user agent. A parse or action error ends the episode, as in the released loop, and the task is
re-run (webeval's error retries, default 5) with earlier attempts kept aside in `error_attempt_N/`. The
answer is theirs: the terminate step's thoughts. Only the agent modules are imported, not the package's
`__init__`, which pulls in other agents' stacks in later releases.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, EndpointError
from evalkit.types import Usage

from .settings import Settings
from .task import Released, TaskRun

VIEWPORT = (1440, 900)
_lock = threading.Lock()


def fara_modules() -> dict[str, Any]:
    """FaraAgent, BrowserBB and AssistantMessage from the `fara` dir on sys.path, in either layout
    (`fara/fara_7b/...` or `fara/...`), with the package registered but its `__init__` not run."""
    with _lock:
        if "fara" not in sys.modules:
            for p in sys.path:
                d = Path(p or ".") / "fara"
                if (d / "fara_7b" / "fara_agent.py").is_file() or (d / "fara_agent.py").is_file():
                    spec = importlib.machinery.ModuleSpec("fara", None, is_package=True)
                    spec.submodule_search_locations = [str(d)]
                    sys.modules["fara"] = importlib.util.module_from_spec(spec)
                    break
            else:
                raise ImportError("no fara/fara_agent.py (or fara/fara_7b/) on sys.path")
        base = "fara.fara_7b" if Path(sys.modules["fara"].__path__[0], "fara_7b").is_dir() else "fara"
        agent = importlib.import_module(f"{base}.fara_agent")
        bb = importlib.import_module(f"{base}.browser.browser_bb")
        types = importlib.import_module(f"{base}.fara_types")
        return {
            "FaraAgent": agent.FaraAgent,
            "BrowserBB": bb.BrowserBB,
            "AssistantMessage": types.AssistantMessage,
        }


class _ThreadStdout:
    """sys.stdout that sends a worker thread's writes to that thread's file when it has one: FaraAgent
    print()s every thought and action, and tasks run side by side."""

    def __init__(self, base: Any):
        self.base, self.local = base, threading.local()

    def _target(self) -> Any:
        return getattr(self.local, "f", None) or self.base

    def write(self, s: str) -> int:
        return self._target().write(s)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def _thread_stdout() -> _ThreadStdout:
    with _lock:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        return sys.stdout


def parse(agent: Any, text: str) -> tuple[bool, dict | None]:
    """Their `_parse_thoughts_and_action`, and whether the result has what their loop reads next."""
    try:
        _, action = agent._parse_thoughts_and_action(text)
    except Exception:  # their parser raises anything on a reply it cannot read
        return False, None
    return isinstance(action.get("arguments"), dict) and "action" in action["arguments"], action


@contextlib.contextmanager
def _their_logs(ctx: TaskRun, fdir: Path) -> Iterator[logging.Logger]:
    """A logger of this attempt's own for their agent, to web_surfer.log, and this thread's prints to
    stdout.log, as webeval keeps them; both closed when the attempt ends."""
    log = logging.getLogger(f"evalkit.ownloop.fara7b.{ctx.raw_task['task_id']}.{id(ctx)}")
    log.setLevel(logging.DEBUG)  # webeval's level: their thoughts, actions and observations are DEBUG
    log.propagate = False
    handler = logging.FileHandler(fdir / "web_surfer.log")
    log.addHandler(handler)
    out = _thread_stdout()
    out.local.f = open(fdir / "stdout.log", "w")
    try:
        yield log
    finally:
        out.local.f.close()
        out.local.f = None
        log.removeHandler(handler)
        handler.close()


def _browser_manager(ctx: TaskRun, m: dict, fdir: Path, log: logging.Logger) -> Any:
    """Their BrowserBB as fara-cli configures it, launching our Chromium and context (the session flags
    first), its screenshots timed."""
    # start-up: the browser only for a run
    from evalkit.browser import context_options, emulate_focus, launch_options, prepare_context

    s = ctx.settings
    opts = ctx.session_options(s.width, s.height)

    class BrowserManager(m["BrowserBB"]):
        async def _init_regular_browser(self, channel: str = "chromium") -> None:
            self.browser = await self._playwright.chromium.launch(**launch_options())
            self._context = await self.browser.new_context(**context_options(opts))
            await prepare_context(self._context, opts)
            self._context.on("page", lambda page: asyncio.ensure_future(emulate_focus(self._context, page)))
            # The session flags go first, with this context's cookies, before their start page loads.
            r = await self._context.request.get(ctx.flags_url, headers=ctx.site.admin_headers)
            if r.status != 200:
                raise RuntimeError(f"{ctx.flags_url} answered {r.status}")
            self._page = await self._context.new_page()

    bm = BrowserManager(
        viewport_height=s.height,
        viewport_width=s.width,
        headless=True,
        page_script_path=None,
        browser_channel="chromium",
        browser_data_dir=None,
        downloads_folder=str(fdir),
        to_resize_viewport=True,
        single_tab_mode=True,
        animate_actions=False,
        use_browser_base=False,
        logger=log,
    )
    shoot = bm._playwright_controller.get_screenshot

    async def timed_screenshot(*a: Any, **kw: Any) -> bytes:
        t = time.monotonic()
        try:
            return await shoot(*a, **kw)
        finally:
            ctx.timing["screenshot"] += time.monotonic() - t

    bm._playwright_controller.get_screenshot = timed_screenshot
    return bm


def _agent(ctx: TaskRun, m: dict, bm: Any, fdir: Path, log: logging.Logger) -> Any:
    """Their FaraAgent on the endpoint, its model calls timed and their usage counted."""
    s = ctx.settings

    class Agent(m["FaraAgent"]):
        async def _make_model_call(self, history: Any, extra_create_args: Any = None) -> Any:
            t = time.monotonic()
            try:
                response = await super()._make_model_call(history, extra_create_args)
            finally:
                ctx.timing["model"] += time.monotonic() - t
            u = response.usage or {}
            ctx.usage = ctx.usage + Usage(
                input=int(u.get("prompt_tokens") or 0), output=int(u.get("completion_tokens") or 0)
            )
            return response

    return Agent(
        browser_manager=bm,
        client_config={
            "model": s.model,
            "base_url": s.endpoint,
            "api_key": os.environ.get("OWNLOOP_API_KEY") or "not-needed",
        },
        start_page=ctx.start_url,
        downloads_folder=str(fdir),
        save_screenshots=True,
        max_rounds=s.max_steps,
        logger=log,
    )


class Fara7B(Released):
    """`evalkit ownloop fara7b`."""

    NAME, viewport, coordinates, prompt_version = "fara7b", VIEWPORT, "fara-resized-pixels", "fara-7b"

    def check(self, settings: Settings) -> None:
        if (settings.width, settings.height) != VIEWPORT:
            raise ConfigError(
                "fara7b maps coordinates to its fixed 1440x900 viewport: leave --width/--height"
            )
        super().check(settings)

    def load(self) -> None:
        fara_modules()

    def run(self, ctx: TaskRun) -> None:
        """One task with webeval's error retries: an attempt that ended in an error or a parse error is moved
        to error_attempt_N/ and the task runs again in a fresh context; the last attempt is graded."""
        s, failed = ctx.settings, []
        while True:
            asyncio.run(self._attempt(ctx))
            res = ctx.result
            if res["status"] not in ("error", "parse_error") or len(failed) >= s.fara_retries:
                break
            # Numbered after any kept by an earlier run of this task (a resume keeps them too).
            keep = ctx.folder / f"error_attempt_{len(list(ctx.folder.glob('error_attempt_*'))) + 1}"
            keep.mkdir()
            ctx.close_steps()
            for p in list(ctx.folder.iterdir()):
                if not p.name.startswith("error_attempt_"):
                    shutil.move(str(p), str(keep / p.name))
            (keep / "attempt.json").write_text(json.dumps(res, default=str))
            failed.append({k: res[k] for k in ("status", "rounds", "error", "parse_fails", "action_errors")})
            ctx.restart()
        if failed:
            ctx.result["error_attempts"] = failed
            ctx.result["parse_fails"] += sum(f["parse_fails"] for f in failed)
            ctx.result["action_errors"] += sum(f["action_errors"] for f in failed)

    async def _attempt(self, ctx: TaskRun) -> None:
        m = fara_modules()
        fdir = ctx.folder / "fara7b"  # their downloads folder: screenshot{n}.png, web_surfer.log, prints
        fdir.mkdir(parents=True, exist_ok=True)
        with _their_logs(ctx, fdir) as log:
            bm = _browser_manager(ctx, m, fdir, log)
            agent = _agent(ctx, m, bm, fdir, log)
            answer = await self._drive(ctx, agent)
            self._collect(ctx, agent, m, fdir, answer)
            try:
                if bm.context is not None:
                    for key in ("record", "log"):
                        r = await bm.context.request.get(
                            f"{ctx.base}/_admin/{key}", headers=ctx.site.admin_headers
                        )
                        ctx.result[key] = ((await r.json()) or {}).get("entries", [])
            except Exception as e:  # without the record the session cannot be graded
                ctx.backend_failed(e)
            for close in (
                agent.close,
                getattr(bm.browser, "close", None),
                getattr(agent._openai_client, "close", None),
            ):
                try:
                    if close is not None:
                        await close()
                except Exception as e:  # a browser already gone has nothing left to close
                    log.debug("close failed: %s", e)
        if ctx.result["status"] == "endpoint_error":
            raise EndpointError(ctx.result["error"])

    @staticmethod
    async def _drive(ctx: TaskRun, agent: Any) -> Any:
        """Their agent's run, to its end or the task's deadline: its answer (None when it raised, the error's
        class then in the result); the time spent neither in model calls nor in screenshots is action time."""
        # start-up: the SDK only for a run
        import openai

        s, res = ctx.settings, ctx.result
        answer, t0, m0, s0 = None, time.monotonic(), ctx.timing["model"], ctx.timing["screenshot"]
        try:
            await agent.initialize()
            await asyncio.sleep(s.settle_s)
            left = max(1.0, ctx.deadline - time.monotonic())
            answer, _, _ = await asyncio.wait_for(agent.run(ctx.prompt), timeout=left)
        except TimeoutError as e:
            res["status"], res["error"] = "timeout", f"{type(e).__name__}: {str(e)[:200]}"
        except (
            openai.APIConnectionError,
            openai.InternalServerError,
            openai.NotFoundError,
            openai.RateLimitError,
        ) as e:
            res["status"], res["error"] = "endpoint_error", f"{type(e).__name__}: {str(e)[:300]}"
        except Exception as e:  # the released loop has no recovery: a parse or action error ends it
            res["status"], res["error"] = "error", f"{type(e).__name__}: {str(e)[:300]}"
        waited = ctx.timing["model"] - m0 + ctx.timing["screenshot"] - s0
        ctx.timing["action"] += max(0.0, time.monotonic() - t0 - waited)
        return answer

    @staticmethod
    def _collect(ctx: TaskRun, agent: Any, m: dict, fdir: Path, answer: Any) -> None:
        """Steps and screens from what their agent kept: its chat history and its numbered screenshots."""
        res = ctx.result
        for png in sorted(fdir.glob("screenshot*.png")):  # screenshot{n}: after n actions = what step n+1 saw
            n = re.fullmatch(r"screenshot(\d+)\.png", png.name)
            if n:
                ctx.shot(int(n.group(1)) + 1, png.read_bytes())
                png.unlink()
        replies = [msg.content for msg in agent._chat_history if isinstance(msg, m["AssistantMessage"])]
        res["rounds"] = len(replies)
        parsed = [parse(agent, r) for r in replies]
        for i, (text, (ok, action)) in enumerate(zip(replies, parsed, strict=True), 1):
            args = (action or {}).get("arguments") if ok else None
            acts = (
                [
                    {
                        "type": args.get("action"),
                        **{k: v for k, v in args.items() if k not in ("action", "thoughts")},
                    }
                ]
                if args
                else []
            )
            ctx.step(i, raw=text, actions=acts, parse_error=not ok)
        last_ok, last = parsed[-1] if parsed else (True, None)
        if res["status"] is None:
            if last_ok and last and last["arguments"]["action"] in ("terminate", "stop"):
                res["status"], res["answer"] = "terminate", answer
            else:
                res["status"] = "max_steps"
        elif res["status"] == "error" and replies and not last_ok:
            res["status"], res["parse_fails"] = "parse_error", 1
        elif res["status"] == "error":
            res["action_errors"] = 1
