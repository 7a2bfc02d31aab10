"""What an env shows before any episode: one session opened and reset, its tools listed, the sessions its
server accepts at once counted (`preflight`). `evalkit probe` reports it whole (`evalkit.run.probe`), a
batch prepares on it (`evalkit.envs.client.prepare`) and, once its jobs are planned, tries the other resets
it will make (`check_resets`): what the env refuses is the user's mistake, said before any work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from evalkit.envs.client.resolved import ResolvedEnv
from evalkit.envs.client.sessions import close_quietly
from evalkit.envs.client.wire import Connection
from evalkit.errors import ConfigError, EnvCapacityError, EnvError
from evalkit.types import ToolSpec

KINDS = {
    "mcp": "MCP env: its tools are listed and called over the session",
    "typed": "typed-action env: driven through one tool, step, whose parameters are its action schema",
    "session": "a Python EnvSession",
}


@dataclass
class Preflight:
    """What one reset of `env` showed."""

    env: ResolvedEnv
    kind: str
    """`mcp`, `typed`, or `session` (an EnvSession given as a Python object): one of KINDS."""
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

    def capacity_text(self) -> str:
        if self.capacity is None:
            return "not measured"
        if self.capacity >= self.tried:
            return f"at least {self.capacity} at once"
        return f"{self.capacity} at a time"

    def release(self) -> None:
        """Close the session held, if one is."""
        if self.session is not None:
            close_quietly(self.session)
            self.session = None


def preflight(
    env: ResolvedEnv,
    reset: dict | None = None,
    *,
    task: Any = None,
    surface: str | None = None,
    mode: str | None = None,
    sessions: int = 1,
    wait: float = 60.0,
    cancel: threading.Event | None = None,
    hold: bool = False,
) -> Preflight:
    """One session opened and reset (with `reset`, or the reset of `task` on `surface` in `mode`), its tools
    listed; while it is held, more sessions are opened, up to `sessions` in all, until the server refuses
    one: the count is what the server accepts now. The session is closed unless `hold`. Raises EnvError
    when the env refuses the reset or cannot list its tools."""
    if reset is None:
        mode = env.default_mode if mode is None else mode
        reset = env.reset_kwargs(task, surface or env.default_surface, mode)
    reset = {k: v for k, v in reset.items() if v is not None}
    session, meta, _ = env.open(reset, cancel, wait=wait)
    found = Preflight(env, getattr(session, "kind", "session"), [], meta, {}, reset, session=session)
    try:
        try:
            found.tools = session.tools()
        except EnvError as e:
            raise EnvError(f"it did not list its tools: {e}") from e
        declared = meta.get("modes")
        listed = tuple(str(m) for m in declared) if isinstance(declared, list) and declared else None
        found.observation = dict(getattr(session, "observation", None) or {})
        found.modes = env.modes or listed
        if env.url and sessions > 1:
            found.capacity = 1 + count_sessions(env.url, sessions - 1)
            found.tried = sessions
    except BaseException:
        found.release()
        raise
    if not hold:
        found.release()
    return found


def count_sessions(url: str, most: int, timeout: float = 10.0) -> int:
    """How many more sessions the server at `url` opens now, up to `most` (all are closed again)."""
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


Reset = tuple[str, Any, str, str, str | None, str | None]
"""A reset a batch will make: (task label, task, surface, mode, skin, coordinates)."""


def check_resets(env: ResolvedEnv, asked: list[Reset], probed: dict) -> None:
    """Reset each of `asked` once in one session: a task, skin or surface the env refuses (or a surface it
    cannot open, such as one that needs Chromium) is the user's mistake, said as a ConfigError naming it. A
    reset equal to `probed` is not made again."""
    session = None
    try:
        for label, task, surface, mode, skin, coordinates in asked:
            kw = env.reset_kwargs(task, surface, mode, skin=skin, coordinates=coordinates)
            kw = {k: v for k, v in kw.items() if v is not None}
            if kw == probed:
                continue
            try:
                if session is None:
                    session, _, _ = env.open(kw, wait=60.0)
                else:
                    session.reset(**kw)
            except EnvError as e:
                where = f"task {label}" + (f" on surface {surface}" if surface != "tools" else "")
                where += f" in skin {skin}" if skin else ""
                raise ConfigError(f"the environment refused {where}: {e}") from None
    finally:
        if session is not None:
            close_quietly(session)
