"""Opening an episode's session on any environment: what to connect to, what its reset is sent, and
waiting for a free session on a server whose sessions are all in use."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from evalkit.envs import SURFACES
from evalkit.envs.client.openenv import connect
from evalkit.errors import EnvCapacityError, EpisodeCancelled
from evalkit.types import EnvSession

log = logging.getLogger(__name__)

CAPACITY_WAIT = 300.0
"""Seconds an episode waits, in all, for a session on a server whose sessions are all in use."""


def session_for(env: Any, spread: str | None = None, **withhold: Any) -> EnvSession:
    """A session on `env`: a base URL or served env (connected to, told what to `withhold` from the model:
    `hide`, `records`; on a server of several, the one `spread` picks), an EnvSession, or a callable (a
    class among them) that returns one."""
    if isinstance(env, str) or hasattr(env, "base_url"):
        return connect(env, spread, **{k: v for k, v in withhold.items() if v})
    if isinstance(env, EnvSession) and not isinstance(env, type):
        return env
    return env()


def reset_kwargs(task: str | dict | None, env_name: str, surface: str, mode: str, **fixed: Any) -> dict:
    """What reset is sent: the task, and `surface` / `mode` only where the env has them (a foreign env's
    reset is not handed canvas arguments)."""
    kw = dict(fixed)
    if env_name in SURFACES or surface != "tools":
        kw["surface"] = surface
    if mode:
        kw["mode"] = mode
    return {**kw, **task} if isinstance(task, dict) else {**kw, "task_id": task}


def spread_key(reset_kw: dict) -> str:
    """The task an episode's reset opens, for spreading sessions over an env's servers by task
    (`evalkit.envs.client.openenv.Spread`): the reset's arguments less what sets one episode of a task
    apart from the next (its seed, its id)."""
    task = {k: v for k, v in reset_kw.items() if k not in ("seed", "episode_id")}
    return json.dumps(task, sort_keys=True, default=str)


def open_session(
    env: Any,
    reset_kw: dict,
    cancel: threading.Event | None = None,
    wait: float = CAPACITY_WAIT,
    **withhold: Any,
) -> tuple[EnvSession, dict, float]:
    """Connect and reset: (session, reset metadata, seconds spent waiting for a free session). A server at
    capacity is asked again with growing pauses for up to `wait` seconds, then the refusal is raised.
    `withhold` goes to an OpenEnv session (`session_for`)."""
    t0, pause, waited = time.monotonic(), 0.05, 0.0
    while True:
        session = session_for(env, spread_key(reset_kw), **withhold)
        try:
            return session, session.reset(**reset_kw), waited
        except EnvCapacityError:
            close_quietly(session)
            if time.monotonic() - t0 >= wait:
                raise
        except BaseException:
            close_quietly(session)
            raise
        if cancel is not None and cancel.wait(pause):
            raise EpisodeCancelled("the batch was interrupted")
        if cancel is None:
            time.sleep(pause)
        pause = min(pause * 2, 2.0)
        waited = time.monotonic() - t0


def close_quietly(session: Any) -> None:
    try:
        session.close()
    except Exception as e:  # closing must never mask what ended the episode
        log.debug("closing the env session failed: %s", e)
