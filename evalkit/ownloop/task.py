"""One task of an own-loop run: its browser session on a web-app server, its outputs and its timings.

A runner gets a `TaskRun` and fills in `result` (the seed format's `session.json` fields) while it writes
what each step saw and did through `shot` and `step`. The files are the own-loop harness's format
(`steps.jsonl`, `screens/step_NN.png`); every step also becomes a `TurnRecord` of the run's EpisodeRecord,
its screen stored once in the run's `frames/`.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.envs.embedded.webapp.tasks import fill, instruction
from evalkit.errors import ConfigError
from evalkit.records.rundir import FrameStore
from evalkit.types import CallRecord, Image, TurnRecord, Usage

from .settings import Settings

CLIPBOARD = ("clipboard-read", "clipboard-write")
SESSION_FIELDS = (
    "task_id",
    "base",
    "answer",
    "status",
    "rounds",
    "error",
    "record",
    "log",
    "seconds",
    "parse_fails",
    "action_errors",
)


RELEASED = {
    "opencua": (
        "OSWorld's mm_agents/opencua",
        "git clone --depth 1 https://github.com/xlang-ai/OSWorld ~/ownloop/osworld && "
        "pip install --no-deps --target ~/ownloop/pkgs backoff loguru",
        "~/ownloop/osworld:~/ownloop/pkgs",
    ),
    "fara7b": (
        "microsoft/fara's src/fara",
        "git clone --depth 1 https://github.com/microsoft/fara ~/ownloop/fara && "
        "pip install --no-deps --target ~/ownloop/pkgs tenacity browserbase distro",
        "~/ownloop/fara/src:~/ownloop/pkgs",
    ),
    "molmoweb": (
        "allenai/molmoweb's agent and utils",
        "git clone --depth 1 https://github.com/allenai/molmoweb ~/ownloop/molmoweb && "
        "pip install --no-deps --target ~/ownloop/pkgs tenacity",
        "~/ownloop/molmoweb:~/ownloop/pkgs",
    ),
}
"""Per agent whose released code is not on the package registry: what it is, the one command that fetches
it (its requirements that evalkit does not already install beside it), and the --path that finds both."""


def not_released(agent: str, err: BaseException) -> ConfigError:
    """The one line that says what released code to fetch, and where, when importing it failed."""
    what, fetch, path = RELEASED[agent]
    return ConfigError(
        f"{agent} runs {what}, which is not on --path ({type(err).__name__}: {err}); fetch it with "
        f"`{fetch}` and add --path {path}"
    )


def on_path(paths: list[str]) -> None:
    """Put released code's directories first on sys.path (`--path`), once each."""
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)


class Released:
    """An own-loop agent that runs its released code, found on `--path` (RELEASED), against a model
    endpoint: `check` puts the path first and imports that code (`load`) before any task, or says in one
    line what to fetch."""

    NAME = ""
    needs_endpoint = True

    def load(self) -> None:
        """Import the released code (ImportError when it is not there)."""
        raise NotImplementedError

    def check(self, settings: Settings) -> None:
        on_path(settings.path)
        try:
            self.load()
        except ImportError as e:
            raise not_released(self.NAME, e) from None


class TaskRun:
    """One task's run: `open_browser`, then a runner's steps, then `read_backend`."""

    def __init__(self, task: dict, site: Any, folder: Path, settings: Settings, frames: FrameStore):
        self.raw_task, self.site, self.folder, self.settings = task, site, folder, settings
        self.task = fill(task, site.base)
        self.base = site.base
        self.start_url = self.task["start"]
        self.flags_url = f"{self.base}/_admin/session-flags" + (
            "?logout=1" if task.get("needs_login") else ""
        )
        self.prompt = instruction(self.task["prompt"], self.start_url)
        self.timing = {"model": 0.0, "action": 0.0, "screenshot": 0.0}
        self.usage = Usage()
        self.usage_known = True
        self._store = frames
        self.t0 = time.monotonic()
        self._fresh()

    def _fresh(self) -> None:
        self.result: dict[str, Any] = {k: None for k in SESSION_FIELDS}
        self.result.update(
            task_id=self.raw_task["task_id"],
            base=self.base,
            rounds=0,
            record=[],
            log=[],
            parse_fails=0,
            action_errors=0,
        )
        self.turns: list[TurnRecord] = []
        self.frames: dict[int, str] = {}
        (self.folder / "screens").mkdir(parents=True, exist_ok=True)
        self._steps = open(self.folder / "steps.jsonl", "w")

    def close_steps(self) -> None:
        if not self._steps.closed:
            self._steps.close()

    def restart(self) -> None:
        """A fresh attempt at the task (for a runner that re-runs failed attempts): new result, steps and
        screens; time and tokens keep counting."""
        self.close_steps()
        self._fresh()

    # ------------------------------------------------------------------ time

    @property
    def deadline(self) -> float:
        return self.t0 + self.settings.timeout

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    @contextmanager
    def timed(self, kind: str):
        t = time.monotonic()
        try:
            yield
        finally:
            self.timing[kind] += time.monotonic() - t

    def pause(self, seconds: float) -> None:
        """A released loop's sleep, counted as action time."""
        with self.timed("action"):
            time.sleep(max(0.0, seconds))

    # ------------------------------------------------------------------ browser

    def session_options(self, width: int, height: int) -> Any:
        # start-up: the browser layer (Playwright) only for a task's session
        from evalkit.browser import SessionOptions

        return SessionOptions(
            width=width,
            height=height,
            permissions=CLIPBOARD,
            focus_emulation=True,
            allow_origins=(self.base,),
        )

    def open_browser(self, width: int, height: int) -> Any:
        """A fresh context: the session-flags page (logged out for a login task), then the start page."""
        # start-up (as above)
        from evalkit.browser import new_session

        session = new_session(self.session_options(width, height))
        try:
            self.admin_get(session, self.flags_url)
            session.sync.goto(self.start_url, timeout=60)
        except BaseException:
            session.sync.close()
            raise
        time.sleep(self.settings.settle_s)
        return session

    def admin_get(self, session: Any, url: str) -> Any:
        status, body = session.sync.fetch(url, headers=self.site.admin_headers)
        if status != 200:
            raise RuntimeError(f"{url} answered {status}")
        return json.loads(body)

    def read_backend(self, session: Any) -> None:
        """The session's record and request log, read with its own cookies; the grader needs the record."""
        self.result["record"] = self.admin_get(session, f"{self.base}/_admin/record").get("entries", [])
        self.result["log"] = self.admin_get(session, f"{self.base}/_admin/log").get("entries", [])

    def end(self, session: Any) -> None:
        """Read the session's record and log, then close its context. A record that cannot be read leaves
        the task ungradable (unscored), whatever the runner made of it."""
        try:
            self.read_backend(session)
        except Exception as e:  # the boundary of the backend read: any failure means "not graded"
            self.backend_failed(e)
        finally:
            session.sync.close()

    def backend_failed(self, e: BaseException) -> None:
        self.result["record_read"] = False
        self.result["error"] = (
            self.result["error"] or ""
        ) + f" | backend read: {type(e).__name__}: {str(e)[:200]}"

    def screenshot(self, session: Any, step: int) -> bytes:
        with self.timed("screenshot"):
            png = session.sync.screenshot()
        self.shot(step, png)
        return png

    # ------------------------------------------------------------------ outputs

    def shot(self, step: int, png: bytes) -> None:
        (self.folder / "screens" / f"step_{step:02d}.png").write_bytes(png)
        self.frames[step] = self._store.put(Image(png))

    def step(
        self,
        step: int,
        *,
        raw: str | None,
        actions: list[dict] | None = None,
        model_s: float = 0.0,
        env_s: float = 0.0,
        usage: Usage | None = None,
        errors: list[str] | None = None,
        **extra: Any,
    ) -> None:
        """One model call: a `steps.jsonl` line and a turn. `actions` are the parsed actions, each a dict with
        a `type`; `errors` what went wrong executing them (one per action, "" when it went fine)."""
        row = {"step": step, "raw": raw, "actions": actions, **extra}
        if errors is not None:
            row["notes"] = errors
        self._steps.write(json.dumps(row, default=str) + "\n")
        self._steps.flush()
        errs = list(errors or [])
        calls = [
            CallRecord(
                id=f"step{step}.{i}",
                name=str(a.get("type") or a.get("action_type") or a.get("action") or "action"),
                args={k: v for k, v in a.items() if k not in ("type", "action_type", "text")},
                ok=not (errs[i] if i < len(errs) else ""),
                result=(errs[i] if i < len(errs) else "")[:500],
            )
            for i, a in enumerate(actions or [])
        ]
        if usage is not None:
            self.usage = self.usage + usage
        self.turns.append(
            TurnRecord(
                turn=step,
                text=raw or "",
                usage=(usage or Usage()).to_dict(),
                model_s=round(model_s, 3),
                env_s=round(env_s, 3),
                frame=self.frames.get(step),
                calls=calls,
            )
        )

    def close(self) -> None:
        self.close_steps()
        self.result["seconds"] = round(time.monotonic() - self.t0, 1)
