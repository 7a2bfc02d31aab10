"""A run's settings, each knob declared once (`evalkit.values.knobs`).

A knob is a field of `Settings` with its default, its one-line help (the `--help` line), how a value is
checked (from Python and from the command line alike: `evalkit.values.checks`) and whether it changes what
an episode is — what a resume compares, and what summaries keep runs apart by. Every driver takes a
Settings and keyword overrides of it (`run_batch`, `run_episode`, `EpisodeStepper`); `evalkit run` builds
its flags from the declarations (`add_flags`, `from_flags`); `run.json` is `to_json()`.

    s = Settings(max_turns=12, repeats=3)
    run_batch(["baseline:tracer"], env, s, out="runs/x", concurrency=8)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.errors import ConfigError
from evalkit.providers.images import check_budget
from evalkit.run.breaker import BreakerSettings
from evalkit.types import AgentOptions
from evalkit.values import knobs
from evalkit.values.checks import (
    COUNT,
    POSITIVE,
    REAL,
    WHOLE,
    CountOrAll,
    cluster_address,
    image_window,
    names,
    one_of,
    reset_rows,
)
from evalkit.values.knobs import knob

_AGENT = AgentOptions()


def breaker(flag: str, v: Any) -> Any:
    """FAILURES,SECONDS (`--env-breaker`), or a BreakerSettings."""
    if isinstance(v, str):
        try:
            return BreakerSettings.parse(v)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if v is not None and not isinstance(v, BreakerSettings):
        raise ConfigError(f"{flag} wants FAILURES,SECONDS or a BreakerSettings, got {v!r}")
    return v


# ---- the knobs


@dataclass
class Settings:
    """Everything a batch is asked besides its models, env and run directory."""

    # Which tasks
    evalset: str | None = knob(None, "frozen task set JSON, e.g. data/evalsets/canvas-test-300.json")
    subset: str | None = knob(None, "evalset subset, e.g. lite or core30")
    tiers: list[str] | None = knob(None, "only these tiers (easy,medium,hard)", names)
    task_ids: list[str] | None = knob(None, "only these task ids", names)
    limit: int | None = knob(None, "at most N tasks, balanced across tiers", WHOLE)
    split: str | None = knob(None, "without an evalset: the split to draw tasks from (default: test)")
    tasks: int | str | None = knob(
        None,
        "without an evalset: number of tasks, or all (the env's own list, where it has one)",
        CountOrAll(),
    )
    start: int = knob(0, "without an evalset: first task index", COUNT)
    stride: int = knob(1, "without an evalset: index step", WHOLE)
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
    repeats: int = knob(1, "episodes per task and model", WHOLE)
    # The loop
    max_turns: int | None = knob(
        None, "model turns per episode (default: the env's per surface)", WHOLE, outcome=True
    )
    max_steps: int | None = knob(None, "tool calls before the env ends the episode", WHOLE, outcome=True)
    episode_timeout: float | None = knob(
        None,
        "wall-clock seconds per episode, a model request in flight included (it is cut; the episode ends "
        "as deadline)",
        POSITIVE,
        outcome=True,
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
        POSITIVE,
        metavar="USD",
    )
    episode_max_cost: float | None = knob(
        None,
        "USD per episode: an episode whose cost passes it ends as cost_limit, scored as the env scores an "
        "unfinished one",
        POSITIVE,
        outcome=True,
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
        POSITIVE,
        metavar="D",
    )
    # The model
    max_tokens: int = knob(_AGENT.max_tokens, "output tokens per model call", WHOLE, outcome=True, agent=True)
    request_timeout: float | None = knob(
        _AGENT.request_timeout,
        "seconds one model request may take in all, however slowly its reply streams (default: 60 plus one "
        "per 20 output tokens allowed, 860 at --max-tokens 16000); --episode-timeout cuts a request sooner",
        POSITIVE,
        agent=True,
    )
    max_retries: int = knob(_AGENT.max_retries, "retries of a failed model request", COUNT, agent=True)
    keep_images: int | None = knob(
        None,
        "keep the target and at least the newest N later images; older ones go 4 at a time",
        COUNT,
        outcome=True,
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
        None, "sampling temperature (default: the provider's)", REAL, outcome=True, agent=True
    )
    seed: int | None = knob(
        None, "sampling seed, for providers that take one", COUNT, outcome=True, agent=True
    )
    send_reasoning: bool | None = knob(
        None, "chat completions: send a tool-call turn's reasoning back (None: as the model's rule says)",
        flag=None, agent=True)  # fmt: skip
    # How the batch runs
    concurrency: int = knob(4, "episodes at once (in all, on Ray)", WHOLE)
    executor: str = knob(
        "threads",
        "threads of this process, or tasks on a Ray cluster (pip install evalkit[ray])",
        one_of("threads", "ray"),
        choices=("threads", "ray"),
    )
    ray_address: str | None = knob(
        None,
        "with --executor ray: the cluster to join, HOST:PORT (default: start a local instance)",
        cluster_address,
    )
    ray_runners: str = knob(
        "node",
        "with --executor ray: one runner process per node, or one per CPU of each node (cpus)",
        one_of("node", "cpus"),
        choices=("node", "cpus"),
    )
    ray_node_timeout: float = knob(
        30.0,
        "with --executor ray: seconds a node may leave the driver unanswered before its episodes in flight "
        "run on the other nodes",
        POSITIVE,
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
        knobs.check_all(self)
        check_budget(self.keep_images, self.image_window)  # the two image budgets: one at a time
        if self.ray_address and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")
        if not self.until_decided and (self.compare_a or self.compare_b or self.delta is not None):
            raise ConfigError("--a, --b and --delta go with --until-decided")
        if self.until_decided and not (self.compare_a and self.compare_b):
            raise ConfigError("--until-decided needs --a A and --b B, the two models to compare")
        if self.until_decided and self.compare_a == self.compare_b:
            raise ConfigError("--until-decided: --a and --b name the same model")

    @classmethod
    def make(cls, settings: Settings | None = None, who: str = "run_batch()", **kw: Any) -> Settings:
        """`settings` with keyword overrides; `options=AgentOptions(...)` sets the model knobs it holds.
        An unknown keyword is a ConfigError naming the ones there are (and `who` was given it)."""
        options = kw.pop("options", None)
        if options is not None:
            if not isinstance(options, AgentOptions):
                raise ConfigError(f"options must be an AgentOptions, got {type(options).__name__}")
            kw = {**{k: getattr(options, k) for k in _agent_names()}, **kw}
        return knobs.replace(settings if settings is not None else cls(), who, **kw)

    @property
    def options(self) -> AgentOptions:
        """The model knobs, as agents take them."""
        return AgentOptions(**{k: getattr(self, k) for k in _agent_names()})

    def outcome(self) -> dict[str, Any]:
        """The knobs that change what an episode is, by name: what a resume may not change."""
        return knobs.outcome(self)

    def to_json(self) -> dict[str, Any]:
        """run.json's settings: each knob by name (the model knobs under `options` too, where earlier runs
        kept them), and `outcome`, the knobs a resume compares."""
        out = knobs.to_json(self)
        out["options"] = {k: out[k] for k in _agent_names()}
        return out

    @classmethod
    def add_flags(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per knob, from its declaration."""
        knobs.add_flags(cls, parser)

    @classmethod
    def from_flags(cls, a: argparse.Namespace, **kw: Any) -> Settings:
        return knobs.from_flags(cls, a, **kw)


def _agent_names() -> list[str]:
    return [f.name for f, k in knobs.knobs(Settings) if k.agent]


def argtype(flag: str, name: str) -> Callable[[str], Any]:
    """The argparse `type=` of knob `name` (for a flag of another command that takes its values)."""
    return knobs.argtype(flag, dict((f.name, k) for f, k in knobs.knobs(Settings))[name])
