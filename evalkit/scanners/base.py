"""What a scanner is: a function of one episode's record that says whether a failure shows in it, at which
turns, with a line of evidence.

A user's scanner is a plain function: `f(rec)` or `f(rec, ctx)`, `rec` an `EpisodeRecord` (its `turns`, each
turn's `calls`, the end), `ctx` a `Context` (the run, and the tools the model was told of). It returns a
`Finding`, or anything `finding()` reads as one: None or False (did not fire), True (fired), a tuple
`(fired, steps, evidence)`, or a dict with those keys. `Scanner` wraps it with a name and the phrase the
rates are said with ("repeats the same call"); `as_scanner` makes one of a function or a built-in's name.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

KINDS = ("model", "infra")
"""A scanner finds the model's failures (`model`) or the infrastructure's (`infra`, kept apart: an episode
the infrastructure ended is not counted in the rates of the model's failures)."""


@dataclass(frozen=True)
class Finding:
    """What a scanner saw in one episode."""

    fired: bool
    steps: tuple[int, ...] = ()
    """The turns (`TurnRecord.turn`, from 1) where it saw the failure; the first is where to look."""
    evidence: str = ""
    """One line: the call, the error, the text."""


NOT_FIRED = Finding(False)


@dataclass(frozen=True)
class Context:
    """What a scanner may need beyond the record."""

    run: str
    """The run directory the record was read from, as given."""
    tools: frozenset[str] | None = None
    """The names of the tools declared to the model, when the record keeps them (evalkit's own runs)."""
    succeeded: frozenset[str] = frozenset()
    """The tool names the environment answered without an error anywhere in the run (for the record's env):
    what stands for the declared tools where a record does not keep them (runs of other harnesses)."""


def finding(value: Any) -> Finding:
    """A scanner's return value as a Finding (see the module doc); anything else is a TypeError."""
    if isinstance(value, Finding):
        return value
    if value is None or value is False:
        return NOT_FIRED
    if value is True:
        return Finding(True)
    if isinstance(value, dict):
        value = (value.get("fired", True), value.get("steps", ()), value.get("evidence", ""))
    if isinstance(value, tuple | list) and 1 <= len(value) <= 3:
        fired, steps, evidence = (*value, (), "")[:3]
        if isinstance(steps, int) and not isinstance(steps, bool):
            steps = (steps,)
        return Finding(bool(fired), tuple(int(s) for s in steps or ()), str(evidence or ""))
    raise TypeError(f"a scanner returns a Finding, a bool, None, (fired, steps, evidence) or a dict; got "
                    f"{type(value).__name__}")  # fmt: skip


@dataclass(frozen=True)
class Scanner:
    """A named scanner. Call it on a record (and a Context) to get its Finding."""

    name: str
    fn: Callable[..., Any] = field(compare=False)
    phrase: str = ""
    """How its rate is said after a model's name: "repeats the same call"."""
    kind: str = "model"
    about: str = ""
    """What it looks at and when it fires, in a sentence (the first line of its docs)."""
    fast: bool = False
    """A built-in that reads records as the fast reader decodes them (`evalkit.scanners.engine`); any
    other scanner gets a whole `EpisodeRecord`."""
    judged: ClassVar[bool] = False
    """Asks a model (`evalkit.scanners.judge.Judged`) rather than reading the record by a rule."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("a scanner needs a name")
        if self.kind not in KINDS:
            raise ValueError(f"a scanner's kind is one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.phrase:
            object.__setattr__(self, "phrase", f"trips {self.name}")

    @functools.cached_property
    def _wants_ctx(self) -> bool:
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return False
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)

    def __call__(self, rec: Any, ctx: Context | None = None) -> Finding:
        ctx = ctx if ctx is not None else Context(run=str(getattr(rec, "run_dir", "") or ""))
        return finding(self.fn(rec, ctx) if self._wants_ctx else self.fn(rec))

    def with_(self, **settings: Any) -> Scanner:
        """The same scanner with some of its settings changed (`repeated_call.with_(min_repeats=4)`)."""
        fn = functools.partial(self.fn, **settings)
        functools.update_wrapper(fn, self.fn)
        return dataclasses.replace(self, fn=fn)


def as_scanner(x: Any, builtins: dict[str, Scanner] | None = None) -> Scanner:
    """A Scanner from a Scanner, a built-in's name, or a plain function (named after it)."""
    if isinstance(x, Scanner):
        return x
    if isinstance(x, str):
        found = (builtins or {}).get(x)
        if found is None:
            known = ", ".join(sorted(builtins or {}))
            raise ValueError(f"no scanner named {x!r} (built-in: {known})")
        return found
    if callable(x):
        name = getattr(x, "__name__", None) or type(x).__name__
        doc = (inspect.getdoc(x) or "").split("\n\n")[0].replace("\n", " ")
        return Scanner(name, x, about=doc)
    raise TypeError(f"a scanner is a function of a record, a Scanner or a built-in's name, not {x!r}")
