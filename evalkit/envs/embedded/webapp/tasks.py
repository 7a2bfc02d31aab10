"""Web-app tasks: read and check a task file, fill in a server's base URL, wrap the task text.

A task file is an evalset (`{"name", "env": "webapp", "tasks": [...]}`, so `run_batch` and `--limit` /
`--tiers` work on it) or a bare list of tasks, as the own-loop harness it grew from wrote them. A task:

    {"task_id", "app", "tier", "prompt", "start": "{BASE}/shop/", "needs_login": false,
     "check": {"record": [predicate, ...], "answer": {"any": [...], "number": 45.0}},
     "solution": [step, ...]}

`check` is what the grader reads (`evalkit.envs.embedded.webapp.grade`); `solution` is what the scripted DOM
solver does (`evalkit.ownloop.baselines`). `{BASE}` stands for the server the task runs on.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.values.checks import json_file

ROOT = Path(__file__).resolve().parents[4]
DEFAULT_TASKS = ROOT / "data" / "evalsets" / "webapp-v1.json"
REQUIRED = ("task_id", "prompt", "start")


def instruction(task_text: str, start_url: str) -> str:
    """The task as every own-loop agent (and the OpenEnv env) is given it."""
    return f"You are interacting with a web application at {start_url}. Your task: {task_text}"


def fill(task: dict, base: str) -> dict:
    """The task with `{BASE}` replaced in its prompt and start URL."""
    base = base.rstrip("/")
    return {
        **task,
        "prompt": task["prompt"].replace("{BASE}", base),
        "start": task["start"].replace("{BASE}", base),
    }


def check_task(t: object, where: str) -> dict:
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: a task must be an object")
    missing = [k for k in REQUIRED if not isinstance(t.get(k), str) or not t.get(k)]
    if missing:
        raise ConfigError(f"{where}: task {t.get('task_id', '?')!r} has no {', '.join(missing)}")
    if "{BASE}" not in t["start"]:
        raise ConfigError(f"{where}: task {t['task_id']!r} start {t['start']!r} has no {{BASE}} placeholder")
    check = t.get("check")
    if check is not None and not isinstance(check, dict):
        raise ConfigError(f"{where}: task {t['task_id']!r} check must be an object")
    return t


def load_tasks(path: str | Path | None = None) -> list[dict]:
    """The tasks of a task file; ConfigError (one line) for a missing, unreadable or malformed one."""
    path = Path(path) if path else DEFAULT_TASKS
    raw = json_file("task file", path)
    tasks = raw.get("tasks") if isinstance(raw, dict) else raw
    if not isinstance(tasks, list) or not tasks:
        raise ConfigError(f"task file {path} holds no task list")
    tasks = [check_task(t, str(path)) for t in tasks]
    seen: set[str] = set()
    for t in tasks:
        if t["task_id"] in seen:
            raise ConfigError(f"task file {path}: task id {t['task_id']!r} appears twice")
        seen.add(t["task_id"])
    return tasks


def task_by_id(task_id: str, path: str | Path | None = None) -> dict:
    for t in load_tasks(path):
        if t["task_id"] == task_id:
            return t
    raise ValueError(f"unknown webapp task {task_id!r}")
