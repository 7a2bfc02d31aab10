"""The environment an episode or a batch runs against, resolved once at the door.

`resolve(env)` turns what a user hands `run_batch`, `run_episode` or `EpisodeStepper` — an embedded env's
server (`evalkit.serve`), the base URL of any OpenEnv server, an `EnvSession`, or a callable that returns one
— into a `Target`: its name in keys and records, its kind, where sessions open, and what it declares
(surfaces, modes, skins, the surfaces that show a screen). A batch adds what its preflight measured (how many
sessions the server accepts, what the env reports of its configuration). Everything below the door takes
the Target and never asks the server again; it is plain data when its source is a server, so it travels to
other processes (Ray).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any

from evalkit.envs import MODES, SCREEN_SURFACES, SKINS, SURFACES
from evalkit.envs.client import sessions
from evalkit.envs.client.sessions import close_quietly as sessions_close
from evalkit.errors import ConfigError, EnvError
from evalkit.types import EnvSession, ToolSpec

KINDS = ("embedded", "openenv", "session")
"""`embedded`: one of evalkit's own envs, served by evalkit; `openenv`: any other OpenEnv server (MCP or
typed-action, as its schema says); `session`: an EnvSession given as a Python object or factory."""


@dataclass(frozen=True)
class Target:
    """One environment, resolved: everything an episode needs to open a session on it."""

    name: str
    """The env's name in keys and records."""
    kind: str
    """One of KINDS."""
    source: Any = field(repr=False, compare=False)
    """Where sessions open: an `evalkit.envs.client.openenv.Endpoint`, or the EnvSession / factory given."""
    url: str | None = None
    """The server's base URL (None for a Python session)."""
    surfaces: tuple[str, ...] | None = None
    """The surfaces the env declares (None: an env evalkit does not know, which has `tools`)."""
    modes: tuple[str, ...] | None = None
    """The modes the env declares: known for embedded envs, read from the reset by a preflight for others."""
    skins: tuple[str, ...] | None = None
    screens: tuple[str, ...] | None = None
    """Surfaces a model sees as a screen (skins and screen coordinates apply); None: not known."""
    capacity: int | None = None
    """Sessions the server accepted at once when a batch's preflight counted them."""
    config: dict = field(default_factory=dict)
    """What the env reports of its configuration (a game, a level), as a batch's preflight read it."""
    hide: tuple[str, ...] = ()
    """Reset-metadata keys and observation fields the model is never sent (`--hide-field`)."""
    records: frozenset[str] = frozenset()
    """Digests of the Task API's records of the tasks run (`evalkit.envs.client.tasks.records`): a value equal
    to one is never sent to the model."""

    @property
    def embedded(self) -> bool:
        return self.kind == "embedded"

    @property
    def default_surface(self) -> str:
        return (self.surfaces or ("tools",))[0]

    @property
    def default_mode(self) -> str:
        return (self.modes or ("",))[0]

    def with_(self, **changes: Any) -> Target:
        return dataclasses.replace(self, **changes)

    def reset_kwargs(self, task: str | dict | None, surface: str, mode: str, **fixed: Any) -> dict:
        """What reset is sent (`evalkit.envs.client.sessions.reset_kwargs`)."""
        return sessions.reset_kwargs(task, self.name, surface, mode, **fixed)

    def open(
        self, reset_kw: dict, cancel: threading.Event | None = None, wait: float = sessions.CAPACITY_WAIT
    ) -> tuple[EnvSession, dict, float]:
        """A session, reset: (session, reset metadata, seconds waited for a free session)."""
        withhold = {k: v for k, v in (("hide", self.hide), ("records", self.records)) if v}
        return sessions.open_session(self.source, reset_kw, cancel, wait=wait, **withhold)


def resolve(env: Any, *, strict: bool = True, name: str | None = None) -> Target:
    """`env` as a Target. A server is asked its name (`/metadata`) and kind (`/schema`) once; one that cannot
    be reached raises ConfigError — or, with `strict=False` (a single episode, which records the failure as
    its env error), gives a Target named by its URL whose sessions will fail to open. `name` names a Python
    session's env (`canvas` for a wrapped canvas session: it then declares the canvas' surfaces)."""
    if isinstance(env, Target):
        return env
    if isinstance(env, str) or hasattr(env, "base_url"):
        return _server(env, strict)
    if isinstance(env, type) or callable(env) or isinstance(env, EnvSession):
        name = name or getattr(env, "name", None) or getattr(env, "__name__", None) or type(env).__name__
        return _declared(Target(str(name), "session", env))
    raise ConfigError(
        f"cannot run against {env!r}: give a served environment, a base URL, an EnvSession or a callable "
        "returning one"
    )


def with_records(target: Target, tasks: list[Any]) -> Target:
    """`target` knowing the Task API's records of `tasks` (reset arguments, task ids, or None for the
    env's default task), so that its sessions withhold a value equal to one from the model
    (`evalkit.envs.client.tasks.records`). A server without the API, or one that cannot be asked, is left as
    is: its reset says what is wrong."""
    if not target.url or target.embedded:
        return target
    from evalkit.envs.client import tasks as task_api

    resets = [t if isinstance(t, dict) else ({"task_id": t} if t else {}) for t in tasks]
    try:
        got = task_api.records(target.url, resets)
    except (ConfigError, EnvError):
        return target
    return target.with_(records=target.records | got) if got else target


def embedded(name: str) -> Target:
    """An embedded env by name, before it is served (`served_by` then says where): what it declares is
    known, so a batch checks its surfaces, modes and skins before starting a server."""
    from evalkit.envs import EMBEDDED

    if name not in EMBEDDED:
        raise ConfigError(
            f"unknown environment {name!r} (embedded: {', '.join(sorted(EMBEDDED))}; or give a base URL)"
        )
    return _declared(Target(name, "embedded", None))


def served_by(target: Target, server: Any) -> Target:
    """`target` (an embedded env) as `server` serves it."""
    from evalkit.envs.client.openenv import http_url
    from evalkit.envs.client.openenv import resolve as endpoint

    try:
        source = endpoint(server, target.name)
    except EnvError as e:
        raise ConfigError(f"cannot read what kind of env {target.name} is: {e}") from None
    return target.with_(source=source, url=http_url(server.base_url))


def _server(env: Any, strict: bool) -> Target:
    from evalkit.envs import EMBEDDED
    from evalkit.envs.client.openenv import Endpoint, env_identity, http_url
    from evalkit.envs.client.openenv import resolve as endpoint

    if isinstance(env, str) and "://" not in env:
        known = f"embedded: {', '.join(sorted(EMBEDDED))}"
        raise ConfigError(f"{env!r} is not a base URL ({known}, served with evalkit.serve({env!r}))")
    url = http_url(str(getattr(env, "base_url", env)))
    try:
        name = env_identity(env)
        source = endpoint(env, name)
    except (ConfigError, EnvError) as e:
        if not strict:
            from evalkit.secrets import redact_url

            return Target(redact_url(url), "openenv", Endpoint(url, redact_url(url)), url)
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"cannot read what kind of env {name} is: {e}") from None
    kind = "embedded" if getattr(env, "name", None) in EMBEDDED else "openenv"
    return _declared(Target(name, kind, source, url))


def _declared(target: Target) -> Target:
    """What evalkit knows an embedded env declares; nothing for the others."""
    n = target.name
    if target.kind != "embedded" and n not in SURFACES:
        return target
    return target.with_(
        surfaces=SURFACES.get(n),
        modes=MODES.get(n),
        skins=SKINS.get(n, ()),
        screens=SCREEN_SURFACES.get(n, ()),
    )


@dataclass
class Found:
    """What a preflight found of an env on one reset."""

    kind: str
    """`mcp`, `typed`, or `session` (an EnvSession given as a Python object)."""
    tools: list[ToolSpec]
    meta: dict
    """The reset observation's metadata."""
    observation: dict
    """The reset observation's own fields."""
    reset: dict
    """The reset's keyword arguments, as sent."""
    modes: tuple[str, ...] | None = None
    """The modes the env declares (known, or listed in its reset metadata)."""
    capacity: int | None = None
    """Sessions the server accepted at once (counting the preflight's own); None when not measured."""
    tried: int = 0
    """Sessions tried at most: a capacity equal to it means "at least that many"."""
    session: Any = field(default=None, repr=False)
    """The session, still open, when the caller asked to hold it (and must close it)."""
    tasks: list[tuple[dict, str]] = field(default_factory=list)
    """The tasks a batch runs (`start`): reset arguments and identity of each."""
    copies: int = 1
    """How many of the tasks drawn by position were one task (their resets showed the same): run as its
    repeats."""
    alike: tuple[str, str] | None = None
    """Two of the env's own tasks (its Task API) whose resets showed the model the same: kept apart, said."""
    config: dict = field(default_factory=dict)
    """What the env reports of its configuration (`evalkit.envs.client.identity`)."""


def preflight(
    target: Target,
    reset: dict | None = None,
    *,
    task: Any = None,
    surface: str | None = None,
    mode: str | None = None,
    sessions: int = 1,
    wait: float = 60.0,
    cancel: threading.Event | None = None,
    hold: bool = False,
) -> Found:
    """One session opened and reset (with `reset`, or the reset of `task` on `surface` in `mode`), its tools
    listed; while it is held, more sessions are opened, up to `sessions` in all, until the server refuses
    one: the count is what the server accepts now. The session is closed unless `hold`. Raises EnvError
    when the env refuses the reset or cannot list its tools."""
    if reset is None:
        mode = target.default_mode if mode is None else mode
        reset = target.reset_kwargs(task, surface or target.default_surface, mode)
    reset = {k: v for k, v in reset.items() if v is not None}
    session, meta, _ = target.open(reset, cancel, wait=wait)
    try:
        try:
            tools = session.tools()
        except EnvError as e:
            raise EnvError(f"it did not list its tools: {e}") from e
        declared = meta.get("modes")
        listed = tuple(str(m) for m in declared) if isinstance(declared, list) and declared else None
        found = Found(
            getattr(session, "kind", "session"),
            tools,
            meta,
            dict(getattr(session, "observation", None) or {}),
            reset,
            target.modes or listed,
        )
        if target.url and sessions > 1:
            found.capacity = 1 + count_sessions(target.url, sessions - 1)
            found.tried = sessions
    except BaseException:
        sessions_close(session)
        raise
    if hold:
        found.session = session
    else:
        sessions_close(session)
    return found


def count_sessions(url: str, most: int, timeout: float = 10.0) -> int:
    """How many more sessions the server at `url` opens now, up to `most` (all are closed again)."""
    from evalkit.envs.client.wire import Connection
    from evalkit.errors import EnvCapacityError

    held: list[Connection] = []
    try:
        for _ in range(most):
            try:
                conn = Connection(url, timeout=timeout)
            except EnvError:
                break
            try:
                conn.request("state")
            except EnvCapacityError:
                break
            except EnvError:
                pass  # the session exists; its env just cannot say its state before a reset
            held.append(conn)
    finally:
        for conn in held:
            conn.close()
    return len(held)


def check_resets(target: Target, asked: list[tuple[str, Any, str, str, str | None, str | None]],
                 probed: dict) -> None:  # fmt: skip
    """Reset each of `asked` — (task label, task, surface, mode, skin, coordinates) — once in one session:
    a task, skin or surface the env refuses (or a surface it cannot open, such as one that needs Chromium)
    is the user's mistake, said as a ConfigError naming it. A reset equal to `probed` is not made again."""
    session = None
    try:
        for label, task, surface, mode, skin, coordinates in asked:
            kw = target.reset_kwargs(task, surface, mode, skin=skin, coordinates=coordinates)
            kw = {k: v for k, v in kw.items() if v is not None}
            if kw == probed:
                continue
            try:
                if session is None:
                    session, _, _ = target.open(kw, wait=60.0)
                else:
                    session.reset(**kw)
            except EnvError as e:
                where = f"task {label}" + (f" on surface {surface}" if surface != "tools" else "")
                where += f" in skin {skin}" if skin else ""
                raise ConfigError(f"the environment refused {where}: {e}") from None
    finally:
        if session is not None:
            sessions_close(session)


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


def start(
    target: Target,
    tasks: list[tuple[dict, str]] | Draw,
    surface: str,
    mode: str | None,
    concurrency: int,
    serve: bool = False,
) -> tuple[Target, Found, Any]:
    """The env ready for a batch of `concurrency` episodes at once: an embedded one served for it (`serve`;
    `evalkit.envs.embedded.process.serve_embedded`); `tasks` (reset arguments and identity of each) drawn from
    the env's own list where it has a Task API (whose records of them are withheld from the model: `records`);
    then its preflight on the first — counting the sessions a server of someone else's accepts, up to
    `concurrency` — its configuration, and, for tasks drawn by position, a look at the second
    (`Found.copies`, `Found.alike`). Returns the env with what was measured, what was found (its `tasks`),
    and the server to stop when the batch is over (None when it was not served here). What fails stops the
    server it started."""
    server = None
    try:
        if serve:
            from evalkit.envs.embedded import process

            server = process.serve_embedded(target.name, concurrency)
            target = served_by(target, server)
        chosen, listed = _chosen(target, tasks)
        if listed is not None:
            target = target.with_(records=listed)
        sessions = 1 if server is not None else concurrency
        found = preflight(target, task=chosen[0][0], surface=surface, mode=mode, sessions=sessions, hold=True)
        try:
            found.tasks = chosen
            found.config = _configuration(found)
            if isinstance(tasks, Draw) and len(chosen) > 1:
                _one_task(target, found, surface, mode, own_ids=listed is not None)
        finally:
            if found.session is not None:
                sessions_close(found.session)
            found.session = None
    except BaseException:
        if server is not None:
            server.stop()
        raise
    return target.with_(capacity=found.capacity, modes=found.modes, config=found.config), found, server


def _chosen(target: Target, tasks: list[tuple[dict, str]] | Draw) -> tuple[list, frozenset[str] | None]:
    """The batch's tasks, and the digests of the Task API's records of them (None: the env lists none)."""
    from evalkit.envs.client import tasks as task_api

    if isinstance(tasks, Draw):
        drawn, specs = _draw(target, tasks)
        return drawn, None if specs is None else task_api.digests(specs)
    if not target.url or target.embedded:
        return tasks, None
    return tasks, task_api.records(target.url, [reset for reset, _ in tasks]) or None


def draw_tasks(target: Target, draw: Draw) -> list[tuple[dict, str]]:
    """The tasks of `draw`: the env's own (their ids from its Task API), else split and index as asked."""
    return _draw(target, draw)[0]


def _draw(target: Target, draw: Draw) -> tuple[list[tuple[dict, str]], list | None]:
    """`draw_tasks`, and the Task API's records of the tasks drawn (None without the API)."""
    from evalkit.envs.client import tasks as task_api

    api = task_api.task_api(target.url) if target.url and not target.embedded else None
    if api is None:
        if draw.tasks in (None, "all"):
            raise ConfigError(f"--tasks all needs an env that lists its tasks (the Task API); {target.name} "
                              "does not: give a number")  # fmt: skip
        name, split = target.name, draw.split
        return [({"split": split, "index": i}, f"{name}-{split}-{i:04d}") for i in draw.indices()], None
    everything = draw.tasks in (None, "all")
    with api:
        last = None if everything else draw.indices()[-1] + 1
        refs = api.draw(draw.split, "all" if everything else last)
    refs = (refs or [])[draw.start :: draw.stride]
    if not refs:
        raise ConfigError(f"split {draw.split!r} of {target.name} has no task from index {draw.start}")
    drawn = [(r.reset, r.id or f"{target.name}-{r.split}-{r.index:04d}") for r in refs]
    return drawn, [r.spec for r in refs if r.spec is not None]


def _one_task(target: Target, found: Found, surface: str, mode: str | None, own_ids: bool) -> None:
    """The first two tasks drawn by position, each reset on a session of its own as its episode will be:
    when they show the model the same thing, an env that ignores its split and index (reasoning_gym, which
    deals the next question on each reset of a session and starts over in a new one) would have the
    statistics count copies of one task as independent tasks: they are run as one task, its repeats
    (`Found.copies`). Tasks the env lists itself (`own_ids`: its Task API) stay its tasks, however alike
    they open (`Found.alike` says so)."""
    if target.embedded:  # evalkit's own envs draw a task per split and index
        return
    first = _seen_at_reset(found.session, found.meta)
    mode = target.default_mode if mode is None else mode
    kw = {k: v for k, v in target.reset_kwargs(found.tasks[1][0], surface, mode).items() if v is not None}
    if isinstance(target.source, EnvSession) and not isinstance(target.source, type):
        # one session object given: every episode resets it, so the second task is reset on it too
        same = _seen_at_reset(found.session, found.session.reset(**kw)) == first
    else:
        sessions_close(found.session)  # a server of one session has room for another only once it is gone
        found.session = None
        session, meta, _ = target.open(kw, wait=60.0)
        try:
            same = _seen_at_reset(session, meta) == first
        finally:
            sessions_close(session)
    if not same:
        return
    if own_ids:
        found.alike = (found.tasks[0][1], found.tasks[1][1])
    else:
        found.copies, found.tasks = len(found.tasks), found.tasks[:1]


def _seen_at_reset(session: Any, meta: dict) -> tuple:
    """What a reset shows the model, as a fingerprint and the task's target picture."""
    from evalkit.envs.client import observation

    fields = dict(getattr(session, "observation", None) or {})
    withheld = getattr(session, "withheld", None) or {}
    picture = getattr(session, "target", None)  # a task may live in its target picture alone
    shown = picture() if callable(picture) else None
    return observation.fingerprint(meta, fields, withheld), shown.data if shown is not None else None


def _configuration(found: Found) -> dict:
    from evalkit.envs.client import identity

    return identity.of_session(found.session, sent=found.reset)
