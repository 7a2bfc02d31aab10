"""`--until-decided`: a batch run in rounds of tasks that stops once the paired comparison of A and B is
decided (`evalkit.analysis.sequential`: a group-sequential design, O'Brien–Fleming-type alpha spending).

The tasks the batch selects are its planned maximum N (α is spent over them). They are put in an order fixed
by the selection alone (an evalset's or named tasks shuffled with a fixed seed, so that a round is not all of
one tier; tasks drawn from a split in their index order), and the rounds end at the design's planned looks
(`planned_looks(N)`: every tenth of N, the first at 6 tasks). A round is a batch of its own over the first
n tasks in that order (each with every model, surface, mode, skin and repeat asked; what an earlier round
ran is skipped, what ended unscored is run again), in the same run directory; then a look at the paired
differences of every task scored on both sides, appended to `looks.jsonl`. It stops when a look decides (A
better, B better, no difference of D or more), at the last planned look (undecided, if nothing was), when
`--max-cost` stops a round (its look is an ordinary one: "not decided yet" unless it decides, and the design
stays open, so that a resume with a higher `--max-cost` goes on under it), or when the env breaker or a
refused key stops one (no look: the round is unfinished; a resume goes on).

A resume (the same command) reads the looks taken: a decided run starts nothing; an undecided one goes on
from the round after its last look, under the same design (another N, α or D is a configuration error).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit.envs.client.resolved import embedded, served_by
from evalkit.envs.client.selection import Draw, select_tasks
from evalkit.errors import ConfigError
from evalkit.notices import notice
from evalkit.providers.health import ProviderHealth
from evalkit.records.checks import run_out
from evalkit.records.rundir import read_run_json
from evalkit.run.executors import serve_embedded
from evalkit.run.settings import Settings

log = logging.getLogger(__name__)

ORDER_SEED = 57
"""The seed of the task order: fixed, so that a resume runs the same rounds."""


def until_decided(
    models: list[str],
    env: Any,
    s: Settings,
    out: str | Path,
    health: Any,
    one_batch: Callable[..., Any],
    empty: Callable[..., Any],
) -> Any:
    """Run `one_batch(models, env, settings, out, health)` round after round (see the module doc) and return
    the batch's `Run`, its counts summed over the rounds and `look` its last look (`empty(out, meta=,
    look=)`: the Run of a batch that had nothing to run)."""
    # start-up: the sequential design loads scipy (400 modules), which a plain batch never needs
    from evalkit.analysis import sequential as seq

    a, b = s.compare_a, s.compare_b
    absent = [m for m in (a, b) if m not in models]
    if absent:
        raise ConfigError(f"--until-decided: {', '.join(absent)} is not among --models ({', '.join(models)})")
    out = run_out("--out", out)
    order, narrow = task_order(s, env)
    try:
        design = seq.Design(a, b, len(order), s.delta)
    except ValueError as e:
        raise ConfigError(f"--until-decided: {e}") from None
    looks = seq.read_looks(out, a, b)
    if looks and looks[-1].design() != design:
        raise ConfigError(f"{out} was compared under another design ({_design_text(looks[-1].design())}; "
                          f"now {_design_text(design)}): use a new --out")  # fmt: skip
    if looks and looks[-1].decision != "continue":
        notice(log, f"{out}: already decided at look {looks[-1].look}: {_verdict(looks[-1])}; nothing to run")
        return empty(out, meta=read_run_json(out), look=looks[-1])
    done = looks[-1].extra.get("round_tasks", 0) if looks else 0
    rounds = [n for n in seq.planned_looks(len(order)) if n > done] or [len(order)]
    if health is None:  # one for every round: a provider found failing stays cooled down
        health = ProviderHealth()
    with _served(env, s.concurrency) as where:
        return _rounds(models, where, s, out, health, one_batch, order, narrow, design, looks, rounds)


def _rounds(
    models: list[str],
    env: Any,
    s: Settings,
    out: Path,
    health: Any,
    one_batch: Callable[..., Any],
    order: list,
    narrow: Callable[[list], Settings],
    design: Any,
    looks: list,
    rounds: list[int],
) -> Any:
    """The rounds, each a batch over the first n tasks and a look after it, until one decides."""
    from evalkit.analysis import sequential as seq  # start-up (as in until_decided)

    total = None
    for n in rounds:
        run = one_batch(models, env, narrow(order[:n]), out, health)
        total = _add(total, run)
        if run.stopped or run.refused:  # the round is unfinished: no look, a resume goes on
            break
        final = n >= len(order)
        d = _differences(out, design.a, design.b)
        if looks and len(d) <= looks[-1].n_tasks:
            if final:
                notice(log, f"no task was paired since look {looks[-1].look}: no final look was taken")
                break
            continue
        look = seq.next_look(d, design, looks, final=final)
        look.extra = {"round_tasks": n, "episodes": run.ran + run.skipped}
        seq.append_look(out, look)
        looks.append(look)
        total.look = look
        notice(log, f"look {look.look} at {look.n_tasks} of {design.max_tasks} tasks: {_look_text(look)}")
        if look.decision != "continue" or final or run.budget_stop is not None:
            break
    if total is not None and total.look is None and looks:
        total.look = looks[-1]  # (a resume that ran nothing new): the comparison as it stands
    if total is not None and total.ran:
        from evalkit.analysis.summary import write_summary  # start-up: Polars, for the end alone

        write_summary(out)  # with the last look in it
    return total


def task_order(s: Settings, env: Any) -> tuple[list, Callable[[list], Settings]]:
    """The planned tasks (as the batch selects them: `selection.select_tasks`) in the order the rounds take
    them, and how the settings of a round over the first ones read. ConfigError where the number of tasks
    is not known before the batch."""
    tasks, _ = select_tasks(getattr(env, "name", None) or str(env), s)
    if isinstance(tasks, Draw):
        if tasks.tasks in (None, "all"):
            raise ConfigError("--until-decided plans its looks over a known number of tasks: give --tasks N, "
                              "--task-ids or an --evalset, not --tasks all")  # fmt: skip
        return list(range(int(tasks.tasks))), lambda first: dataclasses.replace(
            s, tasks=len(first), limit=None
        )
    if s.reset is not None:  # in the order given
        return [reset for reset, _ in tasks], lambda first: dataclasses.replace(s, reset=first)
    ids = [ident for _, ident in tasks]
    random.Random(ORDER_SEED).shuffle(ids)
    return ids, lambda first: dataclasses.replace(s, task_ids=list(first), limit=None)


def _differences(out: Path, a: str, b: str) -> list[float]:
    # start-up: the sequential design (scipy) and Polars, as in until_decided
    from evalkit.analysis.sequential import paired_differences
    from evalkit.records.loading import load_runs

    return paired_differences(load_runs([out]), a, b)["d"].to_list()


def _add(total: Any, run: Any) -> Any:
    """The rounds' Run so far with `run` added: counts summed; what stopped it and what is left: the
    last round's."""
    if total is None:
        return run
    total.ran += run.ran
    total.errors += run.errors
    for k, v in run.unscored.items():
        total.unscored[k] = total.unscored.get(k, 0) + v
    total.not_run, total.abandoned = run.not_run, run.abandoned
    total.stopped, total.refused, total.budget_stop = run.stopped, run.refused, run.budget_stop
    total.meta = run.meta
    return total


class _served:
    """An embedded env's name is served once for every round, as a batch serves it (a URL or a served env
    is used as given)."""

    def __init__(self, env: Any, concurrency: int):
        self.env, self.concurrency, self.server = env, concurrency, None

    def __enter__(self) -> Any:
        if isinstance(self.env, str) and "://" not in self.env:
            declared = embedded(self.env)
            self.server = serve_embedded(declared.name, self.concurrency)
            try:
                return served_by(declared, self.server)
            except BaseException:
                self.server.stop()
                raise
        return self.env

    def __exit__(self, *exc: Any) -> None:
        if self.server is not None:
            self.server.stop()


def _design_text(d: Any) -> str:
    text = f"{d.a} vs {d.b} over {d.max_tasks} tasks, α = {d.alpha:g}"
    return text + (f", delta = {d.delta:g}" if d.delta is not None else "")


def _verdict(look: Any) -> str:
    from evalkit.analysis.sequential import WORDS  # start-up (as in until_decided)

    return WORDS[look.decision].format(a=look.a, b=look.b, delta=look.delta or 0)


def _look_text(look: Any) -> str:
    said = "not decided yet" if look.decision == "continue" and not look.final else _verdict(look)
    return (f"{look.a} − {look.b} = {look.diff:+.3f}, repeated 95% CI [{look.ci_low:+.3f}, "
            f"{look.ci_high:+.3f}]: {said}")  # fmt: skip


def result_line(look: Any) -> str:
    """What `evalkit run --until-decided` prints at its end."""
    return (f"sequential comparison: {_verdict(look)} after {look.look} look(s), {look.n_tasks} of "
            f"{look.max_tasks} planned tasks paired ({_look_text(look)})")  # fmt: skip
