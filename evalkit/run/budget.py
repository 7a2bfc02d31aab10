"""What a batch and an episode may cost: `--max-cost` and `--episode-max-cost`.

- **An episode's limit** (`EpisodeMeter`): before each model call, the turns so far are priced as
  `prices.episode_cost` prices them (each request at its provider and tier); once their cost has passed the
  limit the episode ends as `cost_limit` and is scored as the env scores an unfinished one (submitted on the
  model's behalf where the finishing tool needs no arguments), like a turn limit. The turn that passed it
  has run: an episode ends within one turn's cost of its limit.
- **A batch's budget** (`BatchBudget`, `BudgetGate`): the budget is the run directory's, every episode it
  ever recorded counted (re-run ones too: they were paid for). An episode starts only if what was spent, plus
  what each episode in flight is expected to cost, plus what this one is expected to cost, stays within it;
  the first that does not stops the batch (no further episode of any model starts, so the models stay on the
  same tasks), the episodes in flight end and are written, and run.json's `budget_stop` says so. Expected
  cost: the mean cost of the model's episodes so far in this run; a model with none yet runs one episode at
  a time until one has ended (or is expected at `--episode-max-cost`, when that is given). A batch so stops
  within about one episode's cost of its budget. A resume with a higher `--max-cost` goes on.
- **Unknown cost is not zero.** A model evalkit cannot price (no price in genai-prices for it or its
  provider, and none in the user's file: `evalkit.providers.prices`) would make any budget a guess: a batch
  that asks for one refuses it before any work (a configuration error naming the model and the price file
  that would price it). The offline agents (`baseline:`, `replay:`) call no model and cost nothing. An
  episode whose usage went partly unreported (a cut stream; its `cost_usd` is null) counts against the
  batch's budget at its model's expected cost, and a run directory whose spending cannot be counted so (no
  priced episode of that model) is refused; a turn's unreported usage counts against the episode's limit at
  what it did report (at least that was spent).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError
from evalkit.notices import notice
from evalkit.providers.prices import OVERRIDE_VARIABLE, priced, turn_cost
from evalkit.records.rundir import TRACE, read_records, read_run_json, write_run_json
from evalkit.types import EpisodeRecord, TurnRecord

log = logging.getLogger(__name__)

FREE = ("baseline", "replay")
"""Providers whose agents call no model."""


class EpisodeMeter:
    """An episode's cost so far, turn by turn, against its limit (None: no limit)."""

    def __init__(self, model: str, limit: float | None, started: str | None):
        self.model, self.limit, self.started = model, limit, started
        self.spent = 0.0
        self.known = True
        self._priced = 0

    def passed(self, turns: list[TurnRecord]) -> bool:
        """Whether the turns' cost has passed the limit. A turn whose usage was partly unreported counts at
        what it did report: at least that was spent (`known` then says the sum is a lower bound)."""
        if self.limit is None or _free(self.model):
            return False
        for t in turns[self._priced :]:
            self.known = self.known and t.usage_known
            cost = turn_cost(self.model, dataclasses.replace(t, usage_known=True), self.started)
            self.spent += cost or 0.0
        self._priced = len(turns)
        return self.spent > self.limit

    def said(self) -> dict:
        """What the record keeps of it (`info["cost_limit"]`)."""
        return {"limit": self.limit, "spent": round(self.spent, 8), "turns": self._priced,
                "complete": self.known}  # fmt: skip


def _free(model: str) -> bool:
    return model.partition(":")[0] in FREE


def check_priced(models: list[str], max_cost: float | None, episode_max_cost: float | None) -> None:
    """ConfigError before any work when a budget is asked of a model evalkit cannot price."""
    if max_cost is None and episode_max_cost is None:
        return
    unpriced = [m for m, ok in priced([m for m in models if not _free(m)]).items() if not ok]
    if unpriced:
        flag = "--max-cost" if max_cost is not None else "--episode-max-cost"
        raise ConfigError(
            f"{flag}: no price for {', '.join(unpriced)}, so its cost is unknown and the budget could not "
            f"hold; give its prices in a file named by {OVERRIDE_VARIABLE} (docs/running.md#budgets)"
        )


class BatchBudget:
    """The run directory's spending against `limit`, and the episodes in flight. Thread-safe."""

    def __init__(self, limit: float, records: list[EpisodeRecord], episode_limit: float | None = None):
        self.limit, self.episode_limit = limit, episode_limit
        self.spent = 0.0
        self.costs: dict[str, list[float]] = defaultdict(list)
        self.flight: dict[str, int] = defaultdict(int)
        self.stopped: dict | None = None
        self._cond = threading.Condition()
        unknown = []
        for rec in records:
            unknown += self._settle(rec)
        guess = sorted({m for m in unknown if self.expected(m) is None})
        if guess:
            raise ConfigError(
                f"--max-cost: this run directory holds episodes of {', '.join(guess)} whose cost is unknown "
                "(no price, or usage never reported), so what was spent cannot be counted; use a new --out"
            )
        for model in unknown:  # counted at their model's expected cost
            self.spent += self.expected(model)

    def _settle(self, rec: EpisodeRecord) -> list[str]:
        """Count an ended episode; [its model] when its cost is unknown (counted at the model's expected)."""
        if _free(rec.model):
            return []
        if rec.cost_usd is None:
            return [rec.model]
        self.spent += rec.cost_usd
        self.costs[rec.model].append(rec.cost_usd)
        return []

    def expected(self, model: str) -> float | None:
        """An episode of `model`'s expected cost: its mean so far, else the episode limit, else unknown."""
        if _free(model):
            return 0.0
        known = self.costs.get(model)
        return sum(known) / len(known) if known else self.episode_limit

    def _committed(self) -> float:
        return self.spent + sum(n * (self.expected(m) or 0.0) for m, n in self.flight.items())

    def reserve(self, model: str, alive: Callable[[], bool]) -> bool:
        """Let one episode of `model` start (True), or say the budget is spent (False, and stopped). A
        model with no expected cost yet waits while one of its episodes runs."""
        with self._cond:
            while alive():
                took = self._take(model)
                if took is not None:
                    return took
                self._cond.wait(timeout=1.0)
            return False

    def try_reserve(self, model: str) -> bool | None:
        """`reserve` for a dispatcher that cannot wait (Ray's): None where `reserve` would wait."""
        with self._cond:
            return self._take(model)

    def _take(self, model: str) -> bool | None:
        if self.stopped is not None:
            return False
        if self.expected(model) is None and self.flight[model]:
            return None
        mine = self.expected(model) or 0.0
        if self._committed() + mine > self.limit:
            self.stopped = {
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "max_cost": self.limit,
                "spent": round(self.spent, 6),
                "in_flight": sum(self.flight.values()),
                "expected_in_flight": round(self._committed() - self.spent, 6),
                "next_expected": round(mine, 6),
            }
            self._cond.notify_all()
            return False
        self.flight[model] += 1
        return True

    def release(self, model: str, rec: EpisodeRecord | None) -> None:
        """An episode that `reserve` let start has ended (`rec` None: it was not written)."""
        with self._cond:
            self.flight[model] -= 1
            if rec is not None:
                for m in self._settle(rec):
                    self.spent += self.expected(m) or 0.0
            self._cond.notify_all()


class BudgetGate:
    """The batch's breaker (`evalkit.run.breaker.Guard`) with a budget: an episode starts only when both
    allow it. Everything else is the guard's."""

    def __init__(self, guard: Any, budget: BatchBudget, out: Path):
        self.guard, self.budget, self.out = guard, budget, out
        self._said = False
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.guard, name)

    def allow(self, model: str) -> bool:
        return self.budget.stopped is None and self.guard.allow(model)

    def episode(self, model: str, run: Callable[..., Any], *args: Any) -> Any:
        if not self.guard.allow(model):
            return None
        if not self.budget.reserve(model, lambda: self.guard.down is None):
            self._say_stopped()
            return None
        rec = None
        try:
            rec = self.guard.episode(model, run, *args)
        finally:
            self.budget.release(model, rec)
        return rec

    def admit(self, model: str) -> bool | None:
        """For Ray's dispatcher, which holds a job rather than wait: True, the episode may start (`release`
        must follow); None, not yet (the model's first episode still runs); False, not at all (the guard
        or the budget said no: `stopped` says which)."""
        if not self.guard.allow(model):
            return False
        took = self.budget.try_reserve(model)
        if took is False:
            self._say_stopped()
        return took

    def release(self, model: str, rec: EpisodeRecord | None) -> None:
        """An episode `admit` let go has ended (`rec` None: it came to no record, or its node was lost)."""
        self.budget.release(model, rec)

    @property
    def down(self) -> str | None:  # set by the dispatcher too: the guard's, not a copy of it
        return self.guard.down

    @down.setter
    def down(self, why: str | None) -> None:
        self.guard.down = why

    def _say_stopped(self) -> None:
        """Once: run.json's `budget_stop` (before the batch's summary reads it) and one line."""
        with self._lock:
            if self._said or self.budget.stopped is None:
                return
            self._said = True
        meta = read_run_json(self.out)
        write_run_json(self.out, {**meta, "budget_stop": self.budget.stopped})
        notice(log, stop_line(self.budget.stopped), logging.WARNING)


def gate(guard: Any, max_cost: float | None, episode_max_cost: float | None, out: Path) -> Any:
    """`guard` with the run's budget over it (as it stands in `out`'s trace), or `guard` without one."""
    if max_cost is None:
        return guard
    records = list(read_records(out, latest=False)) if (out / TRACE).exists() else []
    return BudgetGate(guard, BatchBudget(max_cost, records, episode_max_cost), out)


def admit(g: Any, model: str) -> bool | None:
    """For a dispatcher that holds a job rather than wait (Ray's): whether an episode of `model` may start
    under the batch's gate, budget or not (`BudgetGate.admit`; `release` follows a True)."""
    return g.admit(model) if isinstance(g, BudgetGate) else g.allow(model)


def release(g: Any, model: str, rec: EpisodeRecord | None) -> None:
    if isinstance(g, BudgetGate):
        g.release(model, rec)


def stopped(g: Any) -> dict | None:
    """Why the budget stopped the batch (run.json's `budget_stop`), or None."""
    return g.budget.stopped if isinstance(g, BudgetGate) else None


def stop_line(stop: dict) -> str:
    """One line for a person: what was spent of what budget, and how to go on."""
    return (
        f"the next episode would pass the budget of ${stop['max_cost']:g} (${stop['spent']:.4f} spent, "
        f"{stop['in_flight']} episode(s) in flight, the next expected at ${stop['next_expected']:.4f}): "
        "no further episode is started; rerun with a higher --max-cost to go on"
    )
