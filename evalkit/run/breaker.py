"""What a batch does when the things it depends on break, and the exit status that says what happened.

- **A refused key.** A model endpoint that answers 401 or 403 (after the agent's own retries and
  fallbacks) refuses every episode of that model alike: `refused_key` turns it into a `KeyRejectedError`
  that leaves the episode unrecorded. The batch says so in one line naming the model and the key variable,
  starts no further episode of that model, and runs the other models to the end.
- **The env circuit breaker.** When `failures` episodes in a row end with `env_error` (the server is gone:
  every new session is refused), or the server's `/health` has not answered for `silence` seconds (a frozen
  server, on which every session would hang until its message timeout), the breaker opens: the batch says
  so in one line, starts no further episode, stops waiting for the episodes in flight (resume runs them
  again) and ends with its own exit status. Rerunning the same command resumes.
- **Exit status** of `evalkit run` (`exit_status`): 0 when every episode run was scored or ended by the
  model; 3 when some ended unscored by an infrastructure error (rerun to retry them); 4 when the breaker
  stopped the batch; 2 for a configuration mistake, a refused key included; 130 when interrupted.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.errors import EndpointError, KeyRejectedError
from evalkit.secrets import redact_url

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_CONFIG = 2
"""A configuration mistake (nothing ran), or a model whose key its endpoint refused (its episodes stopped)."""
EXIT_UNSCORED = 3
"""Some episodes ended unscored by infrastructure errors (endpoint, env or harness): rerun to retry them."""
EXIT_ENV_DOWN = 4
"""The env circuit breaker stopped the batch: rerun the same command to resume once the env is back."""
EXIT_INTERRUPTED = 130


def refused_key(model: str, exc: EndpointError) -> KeyRejectedError | None:
    """The configuration error a failed model call stands for when its endpoint refused the key."""
    from evalkit.providers import AUTH_STATUSES, key_variables  # start-up: the CLI's flags read this module

    if exc.status not in AUTH_STATUSES:
        return None
    return KeyRejectedError(model, exc.status, key_variables(model))


@dataclass(frozen=True)
class BreakerSettings:
    """When the env circuit breaker opens; 0 turns a condition off."""

    failures: int = 5
    """Episodes in a row that ended with `env_error`."""
    silence: float = 60.0
    """Seconds the server's `/health` may go unanswered (it answers even while every session is busy; an
    env whose steps block the server's event loop for longer needs a larger value)."""
    every: float = 5.0
    """Seconds between two `/health` requests."""

    @classmethod
    def parse(cls, text: str) -> BreakerSettings:
        """`--env-breaker FAILURES,SECONDS`; ValueError with the reason for anything else."""
        parts = text.split(",")
        if len(parts) != 2:
            raise ValueError(f"--env-breaker wants FAILURES,SECONDS, got {text!r}")
        try:
            failures, silence = int(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"--env-breaker wants FAILURES,SECONDS (numbers), got {text!r}") from None
        if failures < 0 or not math.isfinite(silence) or silence < 0:
            raise ValueError(f"--env-breaker wants FAILURES ≥ 0 and finite SECONDS ≥ 0, got {text!r}")
        return cls(failures, silence, min(cls.every, silence / 3) if silence else cls.every)


class Guard:
    """One batch's breaker and refused models. `allow` before an episode is queued and again when it starts,
    `ended` with each record, `refused` with each refused key; `down` is the line that opened the breaker.
    Thread-safe; `start` begins watching the server's `/health` (when the env has a URL)."""

    def __init__(
        self,
        env: Any,
        settings: BreakerSettings | None = None,
        say: Callable[[str], None] | None = None,
        models: list[str] | tuple[str, ...] = (),
    ):
        self.settings = settings or BreakerSettings()
        self.say = say or log.error
        self.models = tuple(models)
        """The batch's models: once each has been refused, a refusal says nothing else goes on."""
        url = env if isinstance(env, str) else getattr(env, "base_url", None)
        self.url = url if isinstance(url, str) and "://" in url else None
        self.down: str | None = None
        self.refused: dict[str, KeyRejectedError] = {}
        self._row = 0
        self._last_error = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def allow(self, model: str) -> bool:
        return self.down is None and model not in self.refused

    def episode(self, model: str, run: Callable[..., Any], *args: Any) -> Any:
        """`run(*args)`, one episode of `model`, unless the breaker is open or the model's key was refused
        (then None: not started, and nothing written). A refused key ends it the same way."""
        if not self.allow(model):
            return None
        try:
            rec = run(*args)
        except KeyRejectedError as e:  # not data about the env: nothing is written, resume runs it
            self.refused_by(e)
            return None
        self.ended(rec)
        return rec

    def ended(self, rec: Any) -> None:
        """An episode ended: `env_error` in a row counts towards the breaker, anything else resets it. Once
        the batch has stopped (interrupted, stopped by a signal), episodes ending then broke because it did,
        and its server with it: they say nothing of the env."""
        if self._stop.is_set():
            return
        with self._lock:
            if rec.error_class != "env_error":
                self._row = 0
                return
            self._row += 1
            self._last_error = str(rec.error or "")[:200]
            n = self.settings.failures
            if n and self._row >= n:
                self._open(f"{self._row} episodes in a row lost the environment (last: {self._last_error})")

    def refused_by(self, exc: KeyRejectedError) -> None:
        with self._lock:
            if exc.model in self.refused:
                return
            self.refused[exc.model] = exc
            others = not self.models or any(m not in self.refused for m in self.models)
        if others:
            self.say(f"{exc}; no further episode of {exc.model} is started (the other models go on)")
        else:
            self.say(f"{exc}; no further episode is started")

    def _open(self, why: str) -> None:
        if self.down is None:
            where = f" at {redact_url(self.url)}" if self.url else ""
            self.down = f"the environment{where} is down: {why}"
            self.say(f"{self.down}; no further episode is started (rerun the same command to resume)")

    # ---- watching /health

    def start(self) -> None:
        if self.url is None or not self.settings.silence or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._watch, name="evalkit-env-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:  # gone with the batch: it wakes at once, or ends its last request
            self._thread.join(timeout=max(self.settings.every, 2.0) + 1)

    def _watch(self) -> None:
        import httpx  # start-up: the CLI's flags read this module, and only a batch's watch needs these

        from evalkit.envs.client.openenv import http_url

        health = f"{http_url(self.url)}/health"
        every, silence = self.settings.every, self.settings.silence
        heard = time.monotonic()
        with httpx.Client(timeout=max(every, 2.0), verify=health.startswith("https://")) as client:
            while not self._stop.wait(every):
                try:
                    client.get(health)  # any answer at all: the server is alive
                    heard = time.monotonic()
                except httpx.HTTPError:
                    quiet = time.monotonic() - heard
                    if quiet >= silence:
                        with self._lock:
                            self._open(f"its /health has not answered for {quiet:.0f}s")
                        return


def exit_status(run: Any) -> int:
    """The exit status of `evalkit run` for a finished (or stopped) batch (see the module doc)."""
    if run.refused:
        return EXIT_CONFIG
    if run.stopped:
        return EXIT_ENV_DOWN
    if run.errors:
        return EXIT_UNSCORED
    return EXIT_OK
