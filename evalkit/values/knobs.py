"""A setting declared once: its default, its one-line help, how a value is checked (from Python and from the
command line alike), its flag, and whether it changes what an episode is.

A run's settings are a dataclass whose fields are knobs (`knob(...)`). From the declarations come the
checks a value passes wherever it enters (`check_all`, from `__post_init__`), the settings with keyword
overrides (`replace`: an unknown keyword is a ConfigError naming the ones there are), the command line's
flags (`add_flags`, `from_flags`), the run.json (`to_json`) and the settings a resume may not change and
summaries keep runs apart by (`outcome`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.errors import ConfigError
from evalkit.values.checks import Check, anything


@dataclass(frozen=True)
class Knob:
    """How one setting is given and checked."""

    help: str
    check: Check
    """`check(flag, value)`: the value normalised (a comma list split, a number checked), or ConfigError. A
    check with a `parse` method (`checks.Number`) also says how the command line's text becomes a value."""
    outcome: bool = False
    """Changes what an episode is: a resume may not change it."""
    flag: str | None = ""
    """The command-line flag ("" for --the-name; None: none)."""
    parse: Callable[[str], Any] | None = None
    """What the command line's text becomes before `check` (default: the check's `parse`, else the text)."""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    short: str | None = None
    """A one-letter alias of the flag."""
    agent: bool = False
    """A model setting: part of the agents' `AgentOptions` (run.json keeps them under `options`)."""
    many: bool = False
    """The flag may be given several times; its values are joined into one list."""


def knob(default: Any, help: str, check: Check | None = None, **kw: Any) -> Any:
    """A dataclass field that is a knob (an empty list as its default is given as `list`; a setting that
    must be given has `dataclasses.MISSING`)."""
    meta = {"knob": Knob(help, check or anything, **kw)}
    if default is list:
        return field(default_factory=list, metadata=meta)
    return field(default=default, metadata=meta)


def knobs(settings: Any) -> list[tuple[dataclasses.Field, Knob]]:
    """The knobs of a settings dataclass (or of one of its instances), in declaration order."""
    return [(f, f.metadata["knob"]) for f in dataclasses.fields(settings) if "knob" in f.metadata]


def flag_of(f: dataclasses.Field, k: Knob) -> str:
    return k.flag or "--" + f.name.replace("_", "-")


def check_all(settings: Any) -> None:
    """Each knob's value checked and normalised in place (from `__post_init__`)."""
    for f, k in knobs(settings):
        setattr(settings, f.name, k.check(flag_of(f, k), getattr(settings, f.name)))


def replace(settings: Any, who: str, **kw: Any) -> Any:
    """`settings` with keyword overrides of its knobs; an unknown keyword is a ConfigError naming the knobs
    there are (and `who` was given it)."""
    known = {f.name for f, _ in knobs(settings)}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise ConfigError(
            f"{who} got unknown setting(s) {', '.join(unknown)} (settings: {', '.join(sorted(known))})"
        )
    return dataclasses.replace(settings, **kw) if kw else settings


def make(cls: type, settings: Any, who: str, **kw: Any) -> Any:
    """`settings` (of class `cls`) with keyword overrides; without `settings`, the settings the overrides
    give (a knob that must be given and is not is a ConfigError)."""
    if settings is not None:
        return replace(settings, who, **kw)
    known = {f.name for f, _ in knobs(cls)}
    missing = [f.name for f, _ in knobs(cls) if f.name not in kw and _required(f)]
    if missing:
        raise ConfigError(f"{who} needs {', '.join(missing)}")
    unknown = sorted(set(kw) - known)
    if unknown:
        raise ConfigError(
            f"{who} got unknown setting(s) {', '.join(unknown)} (settings: {', '.join(sorted(known))})"
        )
    return cls(**kw)


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def plain(v: Any) -> Any:
    """A knob's value as JSON has it (a tuple as a list, a dataclass as its fields)."""
    if dataclasses.is_dataclass(v):
        return dataclasses.asdict(v)
    return json.loads(json.dumps(v, default=str))


def outcome(settings: Any) -> dict[str, Any]:
    """The knobs that change what an episode is, by name: what a resume may not change."""
    return {f.name: plain(getattr(settings, f.name)) for f, k in knobs(settings) if k.outcome}


def to_json(settings: Any) -> dict[str, Any]:
    """Each knob by name, and `outcome`: the knobs a resume compares."""
    out = {f.name: plain(getattr(settings, f.name)) for f, _ in knobs(settings)}
    out["outcome"] = outcome(settings)
    return out


def argtype(flag: str, k: Knob) -> Callable[[str], Any]:
    """The argparse `type=` of a knob: the text parsed, then checked as a value from Python is."""
    parse = k.parse or getattr(k.check, "parse", None)

    def typed(text: str) -> Any:
        try:
            return k.check(flag, parse(text) if parse else text)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return typed


def add_flags(settings: type, parser: argparse.ArgumentParser) -> None:
    """One flag per knob that has one, from its declaration."""
    for f, k in knobs(settings):
        if k.flag is None:
            continue
        flag = flag_of(f, k)
        flags = [flag, k.short] if k.short else [flag]
        if isinstance(f.default, bool):
            parser.add_argument(*flags, action="store_true", help=k.help)
            continue
        default = [] if f.default_factory is list else f.default
        parser.add_argument(
            *flags,
            type=argtype(flag, k),
            default=default,
            help=k.help,
            metavar=k.metavar,
            choices=k.choices,
            dest=f.name,
            action="append" if k.many else "store",
        )


def from_flags(settings: type, a: argparse.Namespace, **kw: Any) -> Any:
    """The settings the command line `a` gives (its flags made by `add_flags`), with `kw` beside them."""
    values = {}
    for f, k in knobs(settings):
        if k.flag is None:
            continue
        boolean = isinstance(f.default, bool)
        v = getattr(a, _dest(flag_of(f, k)) if boolean else f.name)
        if k.many and isinstance(v, list):  # one list per use of the flag
            v = [x for part in v for x in (part if isinstance(part, list) else [part])] or None
        values[f.name] = (not v if f.default else v) if boolean else v
    return settings(**values, **kw)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")
