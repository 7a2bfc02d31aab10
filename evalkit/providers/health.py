"""Provider health over a run: which providers behind a router spec (`hf:org/m:a|b`) failed lately.

One `ProviderHealth` is shared by the episodes of a batch (and kept by a stepper). A provider that failed
is passed over for a cool-down, so a dead first provider costs the batch one failed request instead of one
per episode; when the cool-down ends a single request tries it again (the others keep away meanwhile), and
each further failure doubles the cool-down. When every provider is cooling down, the one that recovers
soonest is tried anyway: failing an episode would only make resume run it again.

Which failures are the provider's (fall back) and which are the request's (no other provider would take it):
any transport failure — 5xx, 408, 409, 429, timeouts, lost connections, cut streams — and the 4xx a router
uses to say a provider cannot serve the model: 402, 403, 404, or a 400/422 whose error names `model`
(`param`) or a model code. Decided on status and the error body's fields, never on its message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evalkit.providers.attempts import error_fields, transient
from evalkit.types import Attempt

COOLDOWN = 300.0
"""Seconds a failed provider is passed over (doubling with each failure in a row, at most 8×)."""

PROVIDER_STATUSES = (402, 403, 404)
MODEL_CODES = ("model_not_supported", "model_not_found", "model_not_available", "provider_not_supported")


def provider_failure(attempt: Attempt, exc: BaseException | None) -> bool:
    """Whether the failed request says the provider, not the request, is at fault (see the module doc)."""
    if transient(attempt) or attempt.status in PROVIDER_STATUSES:
        return True
    if attempt.status in (400, 422):
        fields = error_fields(exc)
        return fields.get("param") == "model" or fields.get("code") in MODEL_CODES
    return False


@dataclass
class _Down:
    until: float
    """Clock time from which the provider may be tried again."""
    why: str
    failures: int
    at: float


class ProviderHealth:
    """Failures per provider route over a run, with a cool-down; thread-safe. `clock` is injectable so that
    tests move time instead of waiting."""

    def __init__(self, cooldown: float = COOLDOWN, clock: Callable[[], float] = time.monotonic):
        self.cooldown = cooldown
        self.clock = clock
        self._down: dict[str, _Down] = {}
        self._lock = threading.Lock()

    def failed(self, route: str, why: str, wait: float | None = None) -> None:
        """`route` failed: pass it over for the cool-down (or as long as the server asked, if longer)."""
        with self._lock:
            now = self.clock()
            before = self._down.get(route)
            n = before.failures + 1 if before is not None else 1
            pause = max(self.cooldown * min(2 ** (n - 1), 8), wait or 0.0)
            self._down[route] = _Down(now + pause, why, n, now)

    def succeeded(self, route: str) -> None:
        if route in self._down:
            with self._lock:
                self._down.pop(route, None)

    def choose(self, routes: Iterable[str], exclude: Iterable[str] = ()) -> str | None:
        """The route to try next: the first (in the spec's order) that is not cooling down, else the one that
        recovers soonest; None when every route is excluded. A route whose cool-down just ended is handed to
        one caller as a trial, and kept from the others until that trial succeeds or fails."""
        skip = set(exclude)
        candidates = [r for r in routes if r not in skip]
        if not candidates:
            return None
        with self._lock:
            now = self.clock()
            for r in candidates:
                down = self._down.get(r)
                if down is None:
                    return r
                if down.until <= now:
                    down.until = now + self.cooldown
                    return r
            return min(candidates, key=lambda r: self._down[r].until)

    def note(self, route: str) -> str | None:
        """Why `route` is being passed over, for the record; None when it is not."""
        with self._lock:
            down = self._down.get(route)
            if down is None:
                return None
            now = self.clock()
            return (
                f"cooling down: failed {now - down.at:.0f}s ago ({down.why}); "
                f"next try in {max(0.0, down.until - now):.0f}s"
            )

    def snapshot(self) -> dict[str, Any]:
        """Routes currently passed over: why, failures in a row, seconds left."""
        with self._lock:
            now = self.clock()
            return {
                r: {"why": d.why, "failures": d.failures, "seconds_left": round(max(0.0, d.until - now), 1)}
                for r, d in self._down.items()
            }


class Routes:
    """The providers of one router spec over one episode: the one in use (the episode stays on it, its cache
    is there, until it fails), and each switch, handed to `on_switch` as {turn, from, to, why, status}."""

    def __init__(self, routes: list[str], health: ProviderHealth, on_switch: Callable[[dict], None]):
        self.routes = routes
        self.health = health
        self.on_switch = on_switch
        self.current: str | None = None
        self._tried: set[str] = set()

    def begin(self, turn: int) -> str:
        """Start a model call: the route to use, chosen by the run's health at the episode's first call."""
        self._tried = set()
        if self.current is None:
            self._enter(self.health.choose(self.routes) or self.routes[0], turn, None)
        return self.current  # type: ignore[return-value]

    @property
    def fallback_left(self) -> bool:
        """Whether another route is left to try in this call if the current one fails."""
        return any(r != self.current and r not in self._tried for r in self.routes)

    def succeeded(self) -> None:
        if self.current is not None:
            self.health.succeeded(self.current)

    def failed(self, attempt: Attempt, turn: int) -> bool:
        """The current route failed by its own fault: the run remembers it, and the call moves to the next
        route; False when none is left."""
        assert self.current is not None
        self.health.failed(self.current, _why(attempt), attempt.retry_after)
        self._tried.add(self.current)
        nxt = self.health.choose(self.routes, exclude=self._tried)
        if nxt is None:
            return False
        self._enter(nxt, turn, attempt)
        return True

    def _enter(self, route: str, turn: int, failure: Attempt | None) -> None:
        old = self.current or self.routes[0]
        self.current = route
        if route == old:
            return
        # The failure's details are in the turn's failed attempts; the switch says what kind it was.
        why = _why(failure) if failure else self.health.note(old) or "passed over"
        status = failure.status if failure else None
        self.on_switch({"turn": turn, "from": old, "to": route, "why": why, "status": status})


def _why(attempt: Attempt) -> str:
    return f"{attempt.kind} {attempt.status or ''}".strip()
