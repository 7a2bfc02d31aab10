"""An env made ready for a batch, and everything the batch needs of it in one record (`Prepared`).

`prepare(env, asked)` resolves what the user gave (an embedded env's name is served for the batch, through
the `serve` the batch hands it: a client never imports a server), checks the surfaces, modes and skins asked
against those the env declares, selects the tasks (`selection`), and runs the preflight on the first
(`preflight`: counting the sessions a server of someone else's accepts); for tasks drawn by position it
looks at the second too, since an env that ignores its split and index deals copies of one task. What the
user got wrong — a task, surface or skin the env refuses, an unreachable server, an env with no tools — is
a ConfigError before any episode, never an env error per episode; what fails stops the server it started.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalkit.envs.client import identity, observation
from evalkit.envs.client.preflight import Preflight, Reset, check_resets, preflight
from evalkit.envs.client.resolved import ResolvedEnv, embedded, resolve, served_by
from evalkit.envs.client.selection import Asked, Draw, Tasks, chosen, select_tasks
from evalkit.envs.client.sessions import close_quietly
from evalkit.errors import ConfigError, EnvCapacityError, EnvError, EnvSlowError, EnvUnreachableError
from evalkit.types import EnvSession

Serve = Callable[[str, int], Any]
"""`serve(name, concurrency)`: embedded env `name` served for `concurrency` episodes at once (a server to
`stop()`, with a `base_url`)."""


class BatchAsked(Asked, Protocol):
    """What a batch asks of its env: the task selection, and the surfaces, modes and skins it runs, with how
    many episodes at once (the knobs of `evalkit.run.settings.Settings`)."""

    surfaces: list[str] | None
    modes: list[str] | None
    skins: list[str] | None
    concurrency: int


@dataclass
class Prepared:
    """An env ready for a batch: what the batch needs of it. A context manager: its end stops the server the
    preparation started."""

    env: ResolvedEnv
    """The env with what its preparation measured: where it is served, the Task API's records of its tasks
    (withheld from the model), the sessions its server accepts, its modes and its configuration."""
    found: Preflight
    """What the first task's reset showed (its session closed)."""
    tasks: Tasks
    evalset_id: str | None
    surfaces: list[str]
    modes: list[str]
    concurrency: int
    """Episodes at once: as asked, unless the server accepts fewer sessions."""
    copies: int = 1
    """How many of the tasks drawn by position were one task (their resets showed the same): each is run
    this many times per repeat."""
    server: Any = None
    """The server the preparation started (an embedded env served for the batch), stopped at the end."""
    notices: list[str] = field(default_factory=list)
    """What the user is told of the env before the episodes: copies, alike tasks, a capped concurrency."""

    def check_resets(self, asked: list[Reset]) -> None:
        """The other resets the batch will make, tried once before any episode (`preflight.check_resets`)."""
        check_resets(self.env, asked, self.found.reset)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def prepare(env: Any, asked: BatchAsked, serve: Serve | None = None) -> Prepared:
    """`env` — an embedded env's name (served by `serve`), a served env, a base URL, an EnvSession or a
    factory — ready for a batch of what `asked` says. Raises ConfigError for everything the user got
    wrong, before any episode."""
    if isinstance(env, str) and "://" not in env and serve is not None:
        env, serving = embedded(env), serve
    else:
        env, serving = resolve(env), None
    surfaces = asked.surfaces or [env.default_surface]
    _check_names(env.name, "surface", surfaces, env.surfaces)
    if env.modes:  # known before the env is reached: said before serving it
        resolve_modes(env.name, asked.modes or [], env.modes)
    if asked.skins:  # a foreign env's skins are its own business
        _check_names(env.name, "skin", asked.skins, env.skins)
    tasks, evalset_id = select_tasks(env.name, asked)
    mode = asked.modes[0] if asked.modes else None
    ready = _measured(env, tasks, surfaces[0], mode, asked.concurrency, serving)
    ready.evalset_id, ready.surfaces = evalset_id, surfaces
    try:
        if not ready.found.tools:
            raise ConfigError(f"{ready.env.name} offers no tools: a model could not act in it")
        ready.modes = resolve_modes(ready.env.name, asked.modes or [], ready.found.modes)
    except BaseException:
        ready.stop()
        raise
    ready.notices += _notices(ready, tasks, asked.concurrency)
    return ready


def _measured(env: ResolvedEnv, tasks: Tasks | Draw, surface: str, mode: str | None, concurrency: int,
              serve: Serve | None) -> Prepared:  # fmt: skip
    """The env served (`serve`), its tasks as it has them, its preflight on the first (counting sessions up
    to `concurrency`), its configuration, and for tasks drawn by position, a look at the second
    (`_one_task`)."""
    server = None
    try:
        with _said(env, tasks):
            if serve is not None:
                server = serve(env.name, concurrency)
                env = served_by(env, server)
            listed, records = chosen(env, tasks)
            env = env.with_(records=records) if records is not None else env
            sessions = 1 if server is not None else concurrency
            found = preflight(
                env, task=listed[0][0], surface=surface, mode=mode, sessions=sessions, hold=True
            )
            try:
                config = identity.of_session(found.session, sent=found.reset)
                copies, listed, said = 1, listed, []
                if isinstance(tasks, Draw) and len(listed) > 1:
                    copies, listed, said = _one_task(env, found, listed, surface, mode, records is not None)
            finally:
                found.release()
    except BaseException:
        if server is not None:
            server.stop()
        raise
    capped = min(concurrency, found.capacity) if found.capacity is not None else concurrency
    env = env.with_(capacity=found.capacity, modes=found.modes, config=config)
    return Prepared(env, found, listed, None, [], [], capped, copies, server, said)


@contextlib.contextmanager
def _said(env: ResolvedEnv, tasks: Tasks | Draw) -> Iterator[None]:
    """The env's refusals while it is prepared, said as the user's mistakes."""
    try:
        yield
    except EnvCapacityError as e:
        raise ConfigError(f"{env.name} has had no free session for a minute ({e}); try again later") from None
    except (EnvSlowError, EnvUnreachableError) as e:
        raise ConfigError(f"{env.name}: {e}") from None
    except EnvError as e:
        first = tasks[0][1] if isinstance(tasks, list) else tasks.first(env.name)
        raise ConfigError(f"the environment refused task {first}: {e}") from None


def _one_task(env: ResolvedEnv, found: Preflight, tasks: Tasks, surface: str, mode: str | None,
              own_ids: bool) -> tuple[int, Tasks, list[str]]:  # fmt: skip
    """The first two tasks drawn by position, each reset on a session of its own as its episode will be:
    when they show the model the same thing, an env that ignores its split and index (reasoning_gym, which
    deals the next question on each reset of a session and starts over in a new one) would have the
    statistics count copies of one task as independent tasks: they are run as one task, its repeats
    (`Prepared.copies`). Tasks the env lists itself (`own_ids`: its Task API) stay its tasks, however alike
    they open (a notice says so). Returns the copies, the tasks and the notice."""
    if env.embedded:  # evalkit's own envs draw a task per split and index
        return 1, tasks, []
    first = _seen_at_reset(found.session, found.meta)
    mode = env.default_mode if mode is None else mode
    kw = {k: v for k, v in env.reset_kwargs(tasks[1][0], surface, mode).items() if v is not None}
    if isinstance(env.source, EnvSession) and not isinstance(env.source, type):
        # one session object given: every episode resets it, so the second task is reset on it too
        same = _seen_at_reset(found.session, found.session.reset(**kw)) == first
    else:
        found.release()  # a server of one session has room for another only once it is gone
        session, meta, _ = env.open(kw, wait=60.0)
        try:
            same = _seen_at_reset(session, meta) == first
        finally:
            close_quietly(session)
    if not same:
        return 1, tasks, []
    if own_ids:
        said = (f"{env.name}'s tasks {tasks[0][1]} and {tasks[1][1]} open alike (the model is shown the "
                "same); they are kept apart, as the env's Task API lists them")  # fmt: skip
        return 1, tasks, [said]
    return len(tasks), tasks[:1], []


def _seen_at_reset(session: Any, meta: dict) -> tuple:
    """What a reset shows the model, as a fingerprint and the task's target picture."""
    fields = dict(getattr(session, "observation", None) or {})
    withheld = getattr(session, "withheld", None) or {}
    picture = getattr(session, "target", None)  # a task may live in its target picture alone
    shown = picture() if callable(picture) else None
    return observation.fingerprint(meta, fields, withheld), shown.data if shown is not None else None


def _notices(ready: Prepared, tasks: Tasks | Draw, asked: int) -> list[str]:
    """What the user is told of copies of one task and of a concurrency the server caps."""
    name, said = ready.env.name, []
    if ready.copies > 1:
        said.append(f"{name} showed the same task at {tasks.split} indices {tasks.start} and "
                    f"{tasks.start + tasks.stride}, each reset in a new session as an episode is (its reset "
                    f"ignores split and index): running it as one task, {ready.copies} time(s) per "
                    "repeat")  # fmt: skip
    if ready.concurrency < asked:
        said.append(f"{name} accepts {ready.concurrency} session(s) at a time: running "
                    f"{ready.concurrency} episode(s) at once instead of {asked}")  # fmt: skip
    return said


def _check_names(name: str, what: str, asked: list[str], known: tuple[str, ...] | None) -> None:
    bad = [x for x in asked if known is not None and x not in known]
    if bad or not asked:
        raise ConfigError(
            f"{name} has no {what} {', '.join(bad) or '(none given)'}"
            + (f" (it has: {', '.join(known)})" if known else "")
        )


def resolve_modes(name: str, asked: list[str], declared: tuple[str, ...] | None) -> list[str]:
    """Modes exist where the env declares them: asked ones are checked against those, and by default the
    first is run. An env that declares none runs without a mode (asked ones are passed to its reset)."""
    if asked:
        _check_names(name, "mode", asked, declared)
        return asked
    return [declared[0]] if declared else [""]
