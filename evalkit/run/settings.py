"""One batch's settings, each knob declared once.

A knob is a field of `Settings` with its default, its one-line docstring (the `--help` line), how a value
is checked (from Python and from the command line alike) and whether it changes what an episode is — what a
resume compares, and what summaries keep runs apart by. `run_batch` takes a Settings and keyword overrides;
`evalkit run` builds its flags from the declarations (`add_flags`, `from_flags`); `run.json` is `to_json()`.

    s = Settings(max_turns=12, repeats=3)
    run_batch(["baseline:tracer"], env, s, out="runs/x", concurrency=8)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError
from evalkit.run import validate
from evalkit.types import AgentOptions

_AGENT = AgentOptions()


@dataclass(frozen=True)
class Knob:
    """How one setting is given and checked."""

    help: str
    check: Callable[[str, Any], Any]
    """`check(flag, value)`: the value normalised (a comma list split, a number checked), or ConfigError."""
    outcome: bool = False
    """Changes what an episode is: a resume may not change it."""
    flag: str | None = ""
    """The command-line flag ("" for --the-name; None: none)."""
    parse: Callable[[str], Any] | None = None
    """What the command line's text becomes before `check` (default: the text)."""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    short: str | None = None
    """A one-letter alias of the flag."""
    agent: bool = False
    """A model setting: part of the agents' `AgentOptions` (run.json keeps them under `options`)."""
    many: bool = False
    """The flag may be given several times; its values are joined into one list."""


def knob(default: Any, help: str, check: Callable[[str, Any], Any] | None = None, **kw: Any) -> Any:
    return field(default=default, metadata={"knob": Knob(help, check or _any, **kw)})


# ---- checks: each takes the flag's name and a value from Python or from argparse


def _any(flag: str, v: Any) -> Any:
    return v


def whole(low: int = 1) -> Callable[[str, Any], Any]:
    def check(flag: str, v: Any) -> int | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"{flag} must be a whole number ≥ {low}, got {v!r}")
        return v

    return check


def positive(flag: str, v: Any) -> float | None:
    """A finite number > 0: NaN would never equal itself and refuse every resume; infinity never fires."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{flag} must be a finite number > 0, got {v!r}")
    return v


def count_or_all(flag: str, v: Any) -> int | str | None:
    return v if v == "all" else whole()(flag, v)


def _int_or_all(text: str) -> int | str:
    return "all" if text == "all" else _int(text)


def number(flag: str, v: Any) -> float | None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
        raise ConfigError(f"{flag} must be a finite number, got {v!r}")
    return v


def names(flag: str, v: Any) -> list[str] | None:
    """A list of names, or a comma-separated string of them."""
    if v is None:
        return None
    items = v.split(",") if isinstance(v, str) else v
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{flag} must be names (a list, or comma-separated), got {v!r}")
    return [x.strip() for x in items if x.strip()] or None


def one_of(*allowed: str | None) -> Callable[[str, Any], Any]:
    def check(flag: str, v: Any) -> Any:
        if v not in allowed:
            what = flag.lstrip("-").replace("-", " ")
            names = [a for a in allowed if a]
            use = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
            raise ConfigError(f"unknown {what} {v!r}: use {use}")
        return v

    return check


def image_window(flag: str, v: Any) -> tuple[int, int] | None:
    """(MAX, KEEP) with 0 ≤ KEEP < MAX: KEEP = MAX would drop an image, and rewrite the prompt prefix, every
    turn."""
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = tuple(int(x) for x in v.split(","))
        except ValueError:
            raise ConfigError(f"{flag} wants MAX,KEEP (two integers), got {v!r}") from None
    if not (isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int) for x in v)):
        raise ConfigError(f"{flag} wants MAX,KEEP (two integers), got {v!r}")
    hi, keep = v
    if not 0 <= keep < hi:
        raise ConfigError(f"{flag} MAX,KEEP wants 0 ≤ KEEP < MAX, got {hi},{keep}")
    return hi, keep


def reset_rows(flag: str, v: Any) -> dict | list[dict] | None:
    """A JSON object (one task's reset arguments) or a non-empty list of them; from the command line, the
    JSON text or @FILE holding it."""
    if isinstance(v, str):
        source = v
        if v.startswith("@"):
            try:
                source = Path(v[1:]).read_text()
            except OSError as e:
                raise ConfigError(f"cannot read {v[1:]}: {e.strerror}") from None
        try:
            v = json.loads(source)
        except ValueError as e:
            raise ConfigError(f"{flag} is not JSON ({e})") from None
    if (
        v is None
        or isinstance(v, dict)
        or (isinstance(v, list) and v and all(isinstance(r, dict) for r in v))
    ):
        return v
    raise ConfigError(f"{flag} wants a JSON object or a non-empty list of objects")


def breaker(flag: str, v: Any) -> Any:
    from evalkit.run.breaker import BreakerSettings

    if isinstance(v, str):
        try:
            return BreakerSettings.parse(v)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if v is not None and not isinstance(v, BreakerSettings):
        raise ConfigError(f"{flag} wants FAILURES,SECONDS or a BreakerSettings, got {v!r}")
    return v


_int = validate.argtype(int, low=0)
"""Command-line text as a whole number > 0 (its error says so: "expected a whole number > 0, got 'x'")."""
_count = validate.argtype(int, low=0, strict=False)
_float = validate.argtype(float, low=0)
_real = validate.argtype(float, low=None)


# ---- the knobs


@dataclass
class Settings:
    """Everything a batch is asked besides its models, env and run directory."""

    # Which tasks
    evalset: str | None = knob(None, "frozen task set JSON, e.g. data/evalsets/canvas-test-300.json")
    subset: str | None = knob(None, "evalset subset, e.g. lite or core30")
    tiers: list[str] | None = knob(None, "only these tiers (easy,medium,hard)", names)
    task_ids: list[str] | None = knob(None, "only these task ids", names)
    limit: int | None = knob(None, "at most N tasks, balanced across tiers", whole(), parse=_int)
    split: str | None = knob(None, "without an evalset: the split to draw tasks from (default: test)")
    tasks: int | str | None = knob(
        None,
        "without an evalset: number of tasks, or all (the env's own list, where it has one)",
        count_or_all,
        parse=_int_or_all,
    )
    start: int = knob(0, "without an evalset: first task index", whole(0), parse=_count)
    stride: int = knob(1, "without an evalset: index step", whole(), parse=_int)
    reset: dict | list[dict] | None = knob(
        None,
        "the reset arguments of the tasks, for envs whose reset takes its own: a JSON object, a list of "
        "them (one task each), or @FILE",
        reset_rows,
        flag="--reset-json",
    )
    # What each task is run as
    surfaces: list[str] | None = knob(None, "default: the env's first (canvas: tools, webapp: gui)", names)
    modes: list[str] | None = knob(
        None,
        "default: the env's first (canvas: reference, webapp: task); none for an env that declares none",
        names,
    )
    skins: list[str] | None = knob(
        None, "screen surfaces: run each task in each skin (default: one skin per task)", names
    )
    coordinates: str | None = knob(
        "auto",
        "screen coordinates; auto: a 0-1000 grid for hf: and vllm: models, pixels otherwise",
        one_of(None, "auto", "pixels", "normalized"),
        outcome=True,
        choices=("auto", "pixels", "normalized"),
    )
    repeats: int = knob(1, "episodes per task and model", whole(), parse=_int)
    # The loop
    max_turns: int | None = knob(
        None, "model turns per episode (default: the env's per surface)", whole(), outcome=True, parse=_int
    )
    max_steps: int | None = knob(
        None, "tool calls before the env ends the episode", whole(), outcome=True, parse=_int
    )
    episode_timeout: float | None = knob(
        None,
        "wall-clock seconds per episode, a model request in flight included (it is cut; the episode ends "
        "as deadline)",
        positive,
        outcome=True,
        parse=_float,
    )
    hide_fields: list[str] | None = knob(
        None,
        "KEY[,KEY]: a reset-metadata key or observation field the model is never sent (repeatable); the "
        "evaluator's task_spec, source_type and original_env_class, and a value equal to the Task API's "
        "record of the task, are never sent anyway",
        names,
        outcome=True,
        flag="--hide-field",
        metavar="KEY",
        many=True,
    )
    frames: bool = knob(True, "don't store a frame per turn", flag="--no-frames")
    save_raw: bool = knob(
        False,
        "keep each model call's request and response bodies under OUT/raw/ (images as frame references)",
    )
    # What it may cost (evalkit.run.budget)
    max_cost: float | None = knob(
        None,
        "USD for the run directory in all: no episode starts once what was spent plus what the episodes "
        "in flight are expected to cost would pass it (a resume may raise it)",
        positive,
        parse=_float,
        metavar="USD",
    )
    episode_max_cost: float | None = knob(
        None,
        "USD per episode: an episode whose cost passes it ends as cost_limit, scored as the env scores an "
        "unfinished one",
        positive,
        outcome=True,
        parse=_float,
        metavar="USD",
    )
    # Sequential (evalkit.run.rounds)
    until_decided: bool = knob(
        False,
        "run the tasks in rounds and stop once the paired comparison of --a and --b is decided "
        "(docs/statistics.md#sequential-comparisons)",
    )
    compare_a: str | None = knob(None, "with --until-decided: model A", flag="--a", metavar="A")
    compare_b: str | None = knob(None, "with --until-decided: model B", flag="--b", metavar="B")
    delta: float | None = knob(
        None,
        "with --until-decided: the smallest difference in mean reward that matters (stop also on 'no "
        "difference of D or more')",
        positive,
        parse=_float,
        metavar="D",
    )
    # The model
    max_tokens: int = knob(
        _AGENT.max_tokens, "output tokens per model call", whole(), outcome=True, parse=_int, agent=True
    )
    request_timeout: float | None = knob(
        _AGENT.request_timeout,
        "seconds one model request may take in all, however slowly its reply streams (default: 60 plus one "
        "per 20 output tokens allowed, 860 at --max-tokens 16000); --episode-timeout cuts a request sooner",
        positive,
        parse=_float,
        agent=True,
    )
    max_retries: int = knob(
        _AGENT.max_retries, "retries of a failed model request", whole(0), parse=_count, agent=True
    )
    keep_images: int | None = knob(
        None,
        "keep the target and at least the newest N later images; older ones go 4 at a time",
        whole(0),
        outcome=True,
        parse=_count,
        agent=True,
    )
    image_window: tuple[int, int] | None = knob(
        None,
        "MAX,KEEP (KEEP < MAX): keep the target; later images reach MAX, then drop to the newest KEEP",
        image_window,
        outcome=True,
        agent=True,
        metavar="MAX,KEEP",
    )
    temperature: float | None = knob(
        None, "sampling temperature (default: the provider's)", number, outcome=True, parse=_real, agent=True
    )
    seed: int | None = knob(
        None, "sampling seed, for providers that take one", whole(0), outcome=True, parse=_count, agent=True
    )
    send_reasoning: bool | None = knob(
        None, "chat completions: send a tool-call turn's reasoning back (None: as the model's rule says)",
        flag=None, agent=True)  # fmt: skip
    # How the batch runs
    concurrency: int = knob(4, "episodes at once (in all, on Ray)", whole(), parse=_int)
    executor: str = knob(
        "threads",
        "threads of this process, or tasks on a Ray cluster (pip install evalkit[ray])",
        one_of("threads", "ray"),
        choices=("threads", "ray"),
    )
    ray_address: str | None = knob(
        None, "with --executor ray: the cluster to join (default: start a local instance)"
    )
    env_breaker: Any = knob(
        None,
        "FAILURES,SECONDS: stop starting episodes after FAILURES env errors in a row, or when the env's "
        "/health has not answered for SECONDS (default 5,60; 0 turns either off); exit status 4",
        breaker,
    )
    progress: bool = knob(True, "no progress bar", flag="--no-progress")
    verbose: bool = knob(False, "a line per finished episode", short="-v")
    argv: list[str] | None = knob(None, "the command line that made the run", flag=None)

    def __post_init__(self) -> None:
        for f, k in _knobs():
            setattr(self, f.name, k.check(_flag(f, k), getattr(self, f.name)))
        if self.ray_address and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")
        if self.max_cost is not None and self.executor == "ray":
            raise ConfigError("--max-cost needs --executor threads (a Ray batch cannot hold a budget yet)")
        if not self.until_decided and (self.compare_a or self.compare_b or self.delta is not None):
            raise ConfigError("--a, --b and --delta go with --until-decided")
        if self.until_decided and not (self.compare_a and self.compare_b):
            raise ConfigError("--until-decided needs --a A and --b B, the two models to compare")
        if self.until_decided and self.compare_a == self.compare_b:
            raise ConfigError("--until-decided: --a and --b name the same model")

    @classmethod
    def make(cls, settings: Settings | None = None, **kw: Any) -> Settings:
        """`settings` with keyword overrides; `options=AgentOptions(...)` sets the model knobs it holds.
        An unknown keyword is a ConfigError naming the ones there are."""
        options = kw.pop("options", None)
        if options is not None:
            if not isinstance(options, AgentOptions):
                raise ConfigError(f"options must be an AgentOptions, got {type(options).__name__}")
            kw = {**{k: getattr(options, k) for k in _agent_names()}, **kw}
        known = {f.name for f, _ in _knobs()}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ConfigError(
                f"run_batch() got unknown setting(s) {', '.join(unknown)} "
                f"(settings: {', '.join(sorted(known))})"
            )
        base = settings if settings is not None else cls()
        return dataclasses.replace(base, **kw) if kw else base

    @property
    def options(self) -> AgentOptions:
        """The model knobs, as agents take them."""
        return AgentOptions(**{k: getattr(self, k) for k in _agent_names()})

    def outcome(self) -> dict[str, Any]:
        """The knobs that change what an episode is, by name: what a resume may not change."""
        return {f.name: _plain(getattr(self, f.name)) for f, k in _knobs() if k.outcome}

    def to_json(self) -> dict[str, Any]:
        """run.json's settings: each knob by name (the model knobs under `options` too, where earlier runs
        kept them), and `outcome`, the knobs a resume compares."""
        out = {f.name: _plain(getattr(self, f.name)) for f, _ in _knobs()}
        out["options"] = {k: out[k] for k in _agent_names()}
        out["outcome"] = self.outcome()
        return out

    # ---- the command line

    @staticmethod
    def add_flags(parser: argparse.ArgumentParser) -> None:
        """One flag per knob, from its declaration."""
        for f, k in _knobs():
            if k.flag is None:
                continue
            flag = _flag(f, k)
            flags = [flag, k.short] if k.short else [flag]
            if isinstance(f.default, bool):
                parser.add_argument(*flags, action="store_true", help=k.help)
                continue
            parser.add_argument(
                *flags,
                type=argtype(flag, k),
                default=f.default,
                help=k.help,
                metavar=k.metavar,
                choices=k.choices,
                dest=f.name,
                action="append" if k.many else "store",
            )

    @classmethod
    def from_flags(cls, a: argparse.Namespace, **kw: Any) -> Settings:
        values = {}
        for f, k in _knobs():
            if k.flag is None:
                continue
            v = getattr(a, f.name if not isinstance(f.default, bool) else _dest(_flag(f, k)))
            if k.many and isinstance(v, list):  # one list per use of the flag
                v = [x for part in v for x in (part if isinstance(part, list) else [part])] or None
            values[f.name] = (not v if f.default else v) if isinstance(f.default, bool) else v
        return cls(**values, **kw)


def _knobs() -> list[tuple[dataclasses.Field, Knob]]:
    return [(f, f.metadata["knob"]) for f in dataclasses.fields(Settings)]


def _agent_names() -> list[str]:
    return [f.name for f, k in _knobs() if k.agent]


def _flag(f: dataclasses.Field, k: Knob) -> str:
    return k.flag or "--" + f.name.replace("_", "-")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def argtype(flag: str, k: Knob | str) -> Callable[[str], Any]:
    """The argparse `type=` of a knob (`k` its declaration, or its name): the text parsed, then checked as a
    value from Python is."""
    if isinstance(k, str):
        k = dict((f.name, kn) for f, kn in _knobs())[k]

    def parse(text: str) -> Any:
        try:
            return k.check(flag, k.parse(text) if k.parse else text)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _plain(v: Any) -> Any:
    """A knob's value as JSON has it (a tuple as a list, a BreakerSettings as its fields)."""
    if dataclasses.is_dataclass(v):
        return dataclasses.asdict(v)
    return json.loads(json.dumps(v, default=str))
