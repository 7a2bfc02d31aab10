"""The environment an episode or a batch runs against, resolved once at the door.

`resolve(env)` turns what a user hands `run_batch`, `run_episode` or `EpisodeStepper` — an embedded env's
server (`evalkit.serve`), the base URL of any OpenEnv server, an `EnvSession`, or a callable that returns one
— into a `ResolvedEnv`: its name in keys and records, its kind, where its sessions open (a server's
`openenv.Endpoint`, resolved here and nowhere else, or the session or factory given), and what it declares
(surfaces, modes, skins, the surfaces that show a screen). An embedded env named before it is served
(`embedded`) declares what it offers, so a batch checks what it was asked before a server starts
(`served_by` then says where it is served); a batch's preparation adds what its preflight measured
(`evalkit.envs.client.prepare`). Everything below the door takes the ResolvedEnv and never asks the server
again; it is plain data when its source is a server, so it travels to other processes (Ray).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any

from evalkit.envs import EMBEDDED, MODES, SCREEN_SURFACES, SKINS, SURFACES
from evalkit.envs.client import sessions
from evalkit.envs.client import tasks as task_api
from evalkit.envs.client.openenv import Endpoint, env_identity, http_url
from evalkit.errors import ConfigError, EnvError
from evalkit.secrets import redact_url
from evalkit.types import EnvSession

KINDS = ("embedded", "openenv", "session")
"""`embedded`: one of evalkit's own envs, served by evalkit; `openenv`: any other OpenEnv server (MCP or
typed-action, as its schema says); `session`: an EnvSession given as a Python object or factory."""


@dataclass(frozen=True)
class ResolvedEnv:
    """One environment, resolved: everything an episode needs to open a session on it."""

    name: str
    """The env's name in keys and records."""
    kind: str
    """One of KINDS."""
    source: Any = field(repr=False, compare=False)
    """Where its sessions open: the server's `evalkit.envs.client.openenv.Endpoint`, or the EnvSession /
    factory given."""
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

    def with_(self, **changes: Any) -> ResolvedEnv:
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


def resolve(env: Any, *, strict: bool = True, name: str | None = None) -> ResolvedEnv:
    """`env` as a ResolvedEnv. A server is asked its name (`/metadata`) and kind (`/schema`) once; one that
    cannot be reached raises ConfigError — or, with `strict=False` (a single episode, which records the
    failure as its env error), gives a ResolvedEnv named by its URL whose sessions will fail to open. `name`
    names a Python session's env (`canvas` for a wrapped canvas session: it then declares the canvas'
    surfaces)."""
    if isinstance(env, ResolvedEnv):
        return env
    if isinstance(env, str) or hasattr(env, "base_url"):
        return _server(env, strict)
    if isinstance(env, type) or callable(env) or isinstance(env, EnvSession):
        name = name or getattr(env, "name", None) or getattr(env, "__name__", None) or type(env).__name__
        return _declared(ResolvedEnv(str(name), "session", env))
    raise ConfigError(
        f"cannot run against {env!r}: give a served environment, a base URL, an EnvSession or a callable "
        "returning one"
    )


def with_records(env: ResolvedEnv, tasks: list[Any]) -> ResolvedEnv:
    """`env` knowing the Task API's records of `tasks` (reset arguments, task ids, or None for the
    env's default task), so that its sessions withhold a value equal to one from the model
    (`evalkit.envs.client.tasks.records`). A server without the API, or one that cannot be asked, is left as
    is: its reset says what is wrong."""
    if not env.url or env.embedded:
        return env
    resets = [t if isinstance(t, dict) else ({"task_id": t} if t else {}) for t in tasks]
    try:
        got = task_api.records(env.url, resets)
    except (ConfigError, EnvError):
        return env
    return env.with_(records=env.records | got) if got else env


def embedded(name: str) -> ResolvedEnv:
    """An embedded env by name, before it is served (`served_by` then says where): what it declares is
    known, so a batch checks its surfaces, modes and skins before starting a server."""
    if name not in EMBEDDED:
        raise ConfigError(
            f"unknown environment {name!r} (embedded: {', '.join(sorted(EMBEDDED))}; or give a base URL)"
        )
    return _declared(ResolvedEnv(name, "embedded", None))


def served_by(env: ResolvedEnv, server: Any) -> ResolvedEnv:
    """`env` (an embedded env) as `server` serves it."""
    try:
        source = Endpoint.of(server, env.name)
    except EnvError as e:
        raise ConfigError(f"cannot read what kind of env {env.name} is: {e}") from None
    return env.with_(source=source, url=http_url(server.base_url))


def _server(env: Any, strict: bool) -> ResolvedEnv:
    if isinstance(env, str) and "://" not in env:
        known = f"embedded: {', '.join(sorted(EMBEDDED))}"
        raise ConfigError(f"{env!r} is not a base URL ({known}, served with evalkit.serve({env!r}))")
    url = http_url(str(getattr(env, "base_url", env)))
    try:
        name = env_identity(env)
        source = Endpoint.of(env, name)
    except (ConfigError, EnvError) as e:
        if not strict:
            return ResolvedEnv(redact_url(url), "openenv", Endpoint(url, redact_url(url)), url)
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"cannot read what kind of env {name} is: {e}") from None
    kind = "embedded" if getattr(env, "name", None) in EMBEDDED else "openenv"
    return _declared(ResolvedEnv(name, kind, source, url))


def _declared(env: ResolvedEnv) -> ResolvedEnv:
    """What evalkit knows an embedded env declares; nothing for the others."""
    n = env.name
    if env.kind != "embedded" and n not in SURFACES:
        return env
    return env.with_(
        surfaces=SURFACES.get(n),
        modes=MODES.get(n),
        skins=SKINS.get(n, ()),
        screens=SCREEN_SURFACES.get(n, ()),
    )
