"""Which tasks a run runs, and what each is called.

A task is the reset arguments an episode's reset is sent (`task_id`; `split` and `index`; whatever a user's
env takes), or a task id; its identity (`task_identity`) is what keys and records call it. A run names its
tasks (`select_tasks`, from the task-selection knobs of its settings) by an evalset (its subset, tiers, ids
and limit), by task ids, by reset arguments (`reset`: one dict, or a list of them), or by drawing a split by
position (`Draw`): the env's own tasks where it lists them (the OpenEnv Task API, `tasks`), else split and
index as asked (`drawn`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evalkit.envs.client import tasks as task_api
from evalkit.envs.client.resolved import ResolvedEnv
from evalkit.envs.evalsets import load_evalset, repeated
from evalkit.errors import ConfigError

Tasks = list[tuple[dict, str]]
"""Tasks as a run runs them: the reset arguments and the identity of each."""


class Asked(Protocol):
    """What a run asks of its tasks: the task-selection knobs of its settings (`evalkit.run.settings`)."""

    evalset: str | Path | None
    subset: str | None
    tiers: list[str] | None
    task_ids: list[str] | None
    limit: int | None
    split: str | None
    tasks: int | str | None
    start: int
    stride: int
    reset: dict | list[dict] | None


@dataclass(frozen=True)
class Draw:
    """Tasks drawn from a split by position: `tasks` of them (None or "all": every one the env has) from
    index `start`, every `stride`."""

    split: str
    tasks: int | str | None
    start: int = 0
    stride: int = 1

    def indices(self, count: int | None = None) -> range:
        """The indices drawn, among `count` tasks (None: not known, `tasks` must be a number)."""
        n = None if self.tasks in (None, "all") else int(self.tasks)
        stop = self.start + n * self.stride if n is not None else (count if count is not None else self.start)
        return range(self.start, stop, self.stride)

    def first(self, env_name: str) -> str:
        """The identity of the first task drawn, before the env is asked."""
        return f"{env_name}-{self.split}-{self.start:04d}"


def task_identity(task: str | dict | None, env_name: str) -> str:
    """The task's identity in keys and records: its id; for a dict, its `task_id` when that is all it
    holds, `<env>-<split>-<index>` (as a batch names drawn tasks), else a canonical string of its contents —
    distinct resets never share a key."""
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


def select_tasks(env_name: str, asked: Asked) -> tuple[Tasks | Draw, str | None]:
    """The tasks `asked` names — or, drawn from a split by position, the `Draw` the env resolves (`drawn`)
    — and the evalset id. Raises ConfigError on a bad selection."""
    s = asked
    if s.task_ids and repeated(s.task_ids):
        raise ConfigError(f"--task-ids names a task more than once: {repeated(s.task_ids)}; name each once "
                          "(--repeats runs every task again)")  # fmt: skip
    if s.reset is not None:
        return _resets(env_name, s), None
    if s.evalset is not None:
        es = load_evalset(s.evalset)
        chosen = es.select(subset=s.subset, tiers=s.tiers, task_ids=s.task_ids, limit=s.limit)
        if not chosen:
            raise ConfigError("the task selection is empty")
        return [({"task_id": t["task_id"]}, t["task_id"]) for t in chosen], es.evalset_id or es.name
    if s.subset or s.tiers:
        raise ConfigError("--subset and --tiers need --evalset")
    if s.task_ids:
        return [({"task_id": t}, t) for t in s.task_ids], None
    if s.stride < 1 or s.start < 0:
        raise ConfigError("--start must be ≥ 0 and --stride ≥ 1")
    n = s.tasks if s.tasks is not None else (s.limit if s.limit is not None else 10)
    if n != "all" and n < 1:
        raise ConfigError("--tasks must be ≥ 1")
    return Draw(s.split or "test", n, s.start, s.stride), None


def _resets(env_name: str, s: Asked) -> Tasks:
    """The tasks `--reset-json` gives: its reset arguments themselves, one task each."""
    if s.evalset is not None or s.task_ids or s.tasks is not None or s.split is not None:
        raise ConfigError(
            "--reset-json names the tasks itself: drop --evalset, --task-ids, --split and --tasks"
        )
    resets = [s.reset] if isinstance(s.reset, dict) else list(s.reset)
    if not resets or not all(isinstance(r, dict) for r in resets):
        raise ConfigError("--reset-json wants a JSON object or a non-empty list of objects")
    chosen = [(dict(r), task_identity(r, env_name)) for r in resets]
    if len({ident for _, ident in chosen}) < len(chosen):
        raise ConfigError("--reset-json lists the same task twice (use --repeats to run a task again)")
    return chosen


def drawn(env: ResolvedEnv, draw: Draw) -> tuple[Tasks, list | None]:
    """The tasks of `draw`: the env's own (their ids from its Task API), else split and index as asked; and
    the Task API's records of the tasks drawn (None without the API)."""
    api = task_api.task_api(env.url) if env.url and not env.embedded else None
    if api is None:
        if draw.tasks in (None, "all"):
            raise ConfigError(f"--tasks all needs an env that lists its tasks (the Task API); {env.name} "
                              "does not: give a number")  # fmt: skip
        name, split = env.name, draw.split
        return [({"split": split, "index": i}, f"{name}-{split}-{i:04d}") for i in draw.indices()], None
    everything = draw.tasks in (None, "all")
    with api:
        last = None if everything else draw.indices()[-1] + 1
        refs = api.draw(draw.split, "all" if everything else last)
    refs = (refs or [])[draw.start :: draw.stride]
    if not refs:
        raise ConfigError(f"split {draw.split!r} of {env.name} has no task from index {draw.start}")
    tasks = [(r.reset, r.id or f"{env.name}-{r.split}-{r.index:04d}") for r in refs]
    return tasks, [r.spec for r in refs if r.spec is not None]


def chosen(env: ResolvedEnv, tasks: Tasks | Draw) -> tuple[Tasks, frozenset[str] | None]:
    """A run's tasks as the env has them, and the digests of the Task API's records of them (None: the env
    lists none), which its sessions withhold from the model."""
    if isinstance(tasks, Draw):
        listed, specs = drawn(env, tasks)
        return listed, None if specs is None else task_api.digests(specs)
    if not env.url or env.embedded:
        return tasks, None
    return tasks, task_api.records(env.url, [reset for reset, _ in tasks]) or None
