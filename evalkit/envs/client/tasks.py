"""OpenEnv's Task API, asked over HTTP: which splits a server has, how many tasks each holds, and the tasks.

openenv 0.10 serves it beside `/ws` for an env that implements it (`list_splits`, `num_tasks`, `get_task`,
`list_tasks`, `get_task_range` on its Environment):

    GET  /list_environments         → ["<env>"]       the name the routes below are under
    GET  /<env>/splits              → [{"name": "train", "type": "train"}, ...]
    POST /<env>/num_tasks  {split}  → {"num_tasks": 7}
    POST /<env>/task       {split, index}         → {"task": {"id": "...", ...}}
    POST /<env>/tasks      {split}                → {"tasks": [...]}
    POST /<env>/task_range {split, start, stop}   → {"tasks": [...]}

A route the env does not implement answers 501 (404 on an older server, or one under another name): that
is an absent API, and these functions return None for it, so a server without it behaves as before. A
task is then played by `reset(split=..., index=...)`; its id is the task's `id`. Every request makes the
server build a short-lived env instance, so ask once per batch, not per episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from evalkit.envs.client.observation import digest
from evalkit.envs.client.openenv import http_client, http_url
from evalkit.errors import ConfigError, EnvError, EnvUnreachableError, reason
from evalkit.secrets import redact_url

ABSENT = (404, 405, 501)
"""Statuses that mean the server has no such route: no Task API, not a failure."""
TIMEOUT = 30.0
"""Seconds one request may take: each builds an env instance on the server, which can be slow to set up."""


@dataclass(frozen=True)
class TaskRef:
    """One of the env's own tasks, as a batch draws it."""

    split: str
    index: int
    id: str | None = None
    """The env's own id for the task (`get_task`'s `id`), None when its task spec has none."""
    spec: Any = field(default=None, compare=False)
    """The task spec as the server gave it."""

    @property
    def reset(self) -> dict:
        """What `reset` is sent to play this task."""
        return {"split": self.split, "index": self.index}


def task_id(task: Any) -> str | None:
    """The env's id of a task spec: its `id` (else `task_id`), None when it has none."""
    if isinstance(task, dict):
        for key in ("id", "task_id"):
            if task.get(key) not in (None, ""):
                return str(task[key])
    return None


class TaskApi:
    """The Task API of the server at `base_url` (an HTTP or WebSocket URL). Each method returns None when
    the server does not implement that route; raises EnvUnreachableError when the server cannot be reached,
    ConfigError for a request it refuses (an unknown split, an index past its end: 400 / 422) and EnvError
    for any other failure."""

    def __init__(self, base_url: str, *, timeout: float = TIMEOUT, headers: dict | None = None):
        self.base = http_url(base_url)
        self._client = http_client(self.base, timeout=timeout, headers=headers)
        self._name: str | None = None
        self._named = False

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TaskApi:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(self, method: str, route: str, body: dict | None = None) -> Any | None:
        url = f"{self.base}{route}"
        try:
            r = self._client.request(method, url, json=body)
        except httpx.HTTPError as e:
            where = redact_url(self.base)
            raise EnvUnreachableError(f"cannot reach the environment at {where}: {reason(e)}") from e
        if r.status_code in ABSENT:
            return None
        what = f"{route} of {redact_url(self.base)}"
        if r.status_code in (400, 422):
            raise ConfigError(f"{what} refused {body}: HTTP {r.status_code} {_detail(r)}")
        if r.status_code != 200:
            raise EnvError(f"{what} failed: HTTP {r.status_code} {_detail(r)}")
        try:
            return r.json()
        except ValueError:
            raise EnvError(f"{what} did not answer JSON") from None

    @property
    def env_name(self) -> str | None:
        """The name the server's Task API routes are under (its `create_app(env_name=...)`), None without
        the API."""
        if not self._named:
            names = self._request("GET", "/list_environments")
            self._name = str(names[0]) if isinstance(names, list) and names else None
            self._named = True
        return self._name

    def _env(self, verb: str, route: str, body: dict | None = None) -> Any | None:
        name = self.env_name
        return None if name is None else self._request(verb, f"/{name}{route}", body)

    def splits(self) -> list[dict] | None:
        """The splits, each `{"name", "type", ...}`; None without the API."""
        got = self._env("GET", "/splits")
        if not isinstance(got, list):
            return None
        return [s if isinstance(s, dict) else {"name": str(s)} for s in got]

    def num_tasks(self, split: str) -> int | None:
        """How many tasks `split` holds; None without the API."""
        got = self._env("POST", "/num_tasks", {"split": split})
        n = got.get("num_tasks") if isinstance(got, dict) else None
        return int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None

    def task(self, split: str, index: int) -> TaskRef | None:
        """Task `index` of `split`, with the env's id; None without the API."""
        got = self._env("POST", "/task", {"split": split, "index": index})
        if not isinstance(got, dict) or "task" not in got:
            return None
        return TaskRef(split, index, task_id(got["task"]), got["task"])

    def tasks(self, split: str) -> list[TaskRef] | None:
        """Every task of `split` (a large split may answer a bounded preview: `num_tasks` is its size);
        None without the API."""
        got = self._env("POST", "/tasks", {"split": split})
        return _refs(got, split, 0)

    def task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[TaskRef] | None:
        """Tasks `start` (inclusive) to `stop` (exclusive) of `split`; None without the API."""
        got = self._env("POST", "/task_range", {"split": split, "start": start, "stop": stop})
        return _refs(got, split, start or 0)

    def draw(self, split: str, tasks: int | str | None) -> list[TaskRef] | None:
        """The first `tasks` tasks of `split` (`"all"` or None: every one), with their ids: one `task_range`
        request, else one `task` request each. None without the API. Raises ConfigError naming the count
        when `split` holds fewer tasks than asked, or is not one of the server's splits."""
        splits = self.splits()
        if splits is None:
            return None
        names = [str(s.get("name")) for s in splits]
        if names and split not in names:
            raise ConfigError(f"the environment has no split {split!r} (its splits: {', '.join(names)})")
        count = self.num_tasks(split)
        if count is None:
            return None
        want = count if tasks in (None, "all") else int(tasks)
        if want > count:
            raise ConfigError(f"split {split!r} has {count} task(s); {want} were asked for")
        drawn = self.task_range(split, 0, want)
        if drawn is None or len(drawn) != want:
            drawn = [self.task(split, i) or TaskRef(split, i) for i in range(want)]
        return drawn


def _detail(r: httpx.Response) -> str:
    try:
        detail = r.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return f"({detail})" if isinstance(detail, str) else ""


def _refs(got: Any, split: str, start: int) -> list[TaskRef] | None:
    tasks = got.get("tasks") if isinstance(got, dict) else None
    if not isinstance(tasks, list):
        return None
    return [TaskRef(split, start + i, task_id(t), t) for i, t in enumerate(tasks)]


def task_api(base_url: str, **kw: Any) -> TaskApi | None:
    """The server's Task API when it has one (its splits answer), else None; the caller closes it."""
    api = TaskApi(base_url, **kw)
    try:
        if api.splits() is not None:
            return api
    except BaseException:
        api.close()
        raise
    api.close()
    return None


def summary(base_url: str, **kw: Any) -> list[dict] | None:
    """What `evalkit probe` shows of the API: each split `{"name", "type", "num_tasks"}` (num_tasks None
    where the server cannot count it); None without the API."""
    api = task_api(base_url, **kw)
    if api is None:
        return None
    with api:
        out = []
        for split in api.splits() or []:
            name = str(split.get("name"))
            try:
                n = api.num_tasks(name)
            except (ConfigError, EnvError):
                n = None
            out.append({"name": name, "type": split.get("type"), "num_tasks": n})
        return out


def digests(specs: list) -> frozenset[str]:
    """The digests (`observation.digest`) of task records: a value the env shows equal to one is the
    evaluator's record of a task (its answer with it), never sent to the model."""
    return frozenset(digest(spec) for spec in specs if isinstance(spec, dict | list) and spec)


RECORDS_MOST = 64
"""Task records asked for one by one at most (a batch that draws its tasks has them all already)."""


def records(base_url: str, resets: list[dict], **kw: Any) -> frozenset[str]:
    """The digests of the Task API's records of the tasks `resets` play: each by its split and index, and a
    reset that names no task by the first task of the first split (what `openenv import`'s wrappers play
    then). Empty without the API; a record the server will not give is left out (its reset says why)."""
    api = task_api(base_url, **kw)
    if api is None:
        return frozenset()
    wanted: set[tuple[str, int]] = set()
    with api:
        for reset in resets[:RECORDS_MOST]:
            split, index = reset.get("split"), reset.get("index")
            if split is None and index is None and not reset.get("task_spec") and not reset.get("task_id"):
                names = [str(s.get("name")) for s in api.splits() or []]
                split, index = (names[0], 0) if names else (None, None)
            if isinstance(split, str) and isinstance(index, int) and not isinstance(index, bool):
                wanted.add((split, index))
        specs = []
        for split, index in sorted(wanted):
            try:
                ref = api.task(split, index)
            except (ConfigError, EnvError):
                continue
            if ref is not None and ref.spec is not None:
                specs.append(ref.spec)
    return digests(specs)
