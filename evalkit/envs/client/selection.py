"""Which tasks a run runs, and what each is called.

A task is the reset arguments an episode's reset is sent (`task_id`; `split` and `index`; whatever a user's
env takes), or a task id. Its identity (`task_identity`) is what keys and records call it.
"""

from __future__ import annotations

import json


def task_identity(task: str | dict | None, env_name: str) -> str:
    """The task's identity in keys and records: its id; for a dict, its `task_id` when that is all it
    holds, `<env>-<split>-<index>` (as `run_batch` names drawn tasks), else a canonical string of its
    contents — distinct resets never share a key."""
    if task is None or isinstance(task, str):
        return task or ""
    if task.get("task_id") and set(task) == {"task_id"}:
        return str(task["task_id"])
    if set(task) == {"split", "index"} and isinstance(task["index"], int):
        return f"{env_name}-{task['split']}-{task['index']:04d}"
    return canonical(task)


def canonical(task: str | dict) -> str:
    """A task as one string: its id, or its reset arguments as canonical JSON."""
    if isinstance(task, str):
        return task
    return json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
