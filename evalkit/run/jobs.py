"""What one episode is, and the jobs a batch plans: models × tasks × surfaces × skins × modes × repeats.

A `Job` names one episode — model, task, surface, mode, skin, screen coordinates, repeat — and its key,
the stable hash resume compares. `plan_jobs` orders a batch's jobs task-major, so that a batch cut short
still has every model on the same tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.envs.client.resolved import ResolvedEnv
from evalkit.envs.client.selection import task_identity
from evalkit.providers import check_endpoints, check_keys, make_agent, parse_spec
from evalkit.providers.health import ProviderHealth
from evalkit.types import Agent, AgentOptions, ToolSpec, episode_key

AgentFactory = Callable[..., Agent]
"""An agent given as a factory: `f(system=, tools=, options=) -> Agent`."""


@dataclass
class Job:
    """What one episode is: which model, task, surface, mode, skin and repeat."""

    model: str
    surface: str
    mode: str
    task: dict | str | None
    """Reset arguments (`task_id`, or `split` and `index`, or what `--reset-json` gave), or a task id."""
    ident: str
    """The task's identity in the key (`task_identity`)."""
    repeat: int
    key: str
    evalset_task: str | None = None
    skin: str | None = None
    """None: the env's default skin for the task."""
    coordinates: str | None = None
    """Screen coordinates asked of the env (None: its default)."""

    @classmethod
    def of(
        cls,
        model: str,
        env: ResolvedEnv,
        task: Any,
        surface: str | None = None,
        mode: str | None = None,
        repeat: int = 0,
        skin: str | None = None,
        coordinates: str | None = None,
        evalset_task: str | None = None,
        ident: str | None = None,
    ) -> Job:
        """The job of `task` on `env`: surface and mode default to the env's first."""
        surface = surface or env.default_surface
        mode = env.default_mode if mode is None else mode
        ident = ident or task_identity(task, env.name)
        key = episode_key(model, env.name, surface, mode, ident, skin, repeat)
        return cls(model, surface, mode, task, ident, repeat, key, evalset_task, skin, coordinates)


def agent_label(agent: str | AgentFactory) -> str:
    """The model's name in records: its spec, or what an agent factory calls itself."""
    if isinstance(agent, str):
        return agent
    return getattr(agent, "model", None) or getattr(agent, "__name__", "custom")


def check_agent(agent: str | AgentFactory, endpoint: bool = True) -> None:
    """What would only fail at the first model call, said before any work: an unknown provider, a missing
    key or endpoint URL, and (`endpoint`) an endpoint nothing answers at. (What the model settings ask is
    checked where the settings are made, `Settings.__post_init__`.)"""
    if isinstance(agent, str):
        parse_spec(agent)
        check_keys([agent])
        if endpoint:
            check_endpoints([agent])


def make(spec: str | AgentFactory, system: str, tools: list[ToolSpec], options: AgentOptions,
         health: ProviderHealth | None, keep_raw: bool) -> Agent:  # fmt: skip
    """The agent of an episode, told its system prompt and tools (`keep_raw`: its request and response
    bodies kept, for agents that can)."""
    if isinstance(spec, str):
        agent = make_agent(spec, system=system, tools=tools, options=options, health=health)
    else:
        agent = spec(system=system, tools=tools, options=options)
    if keep_raw and hasattr(agent, "keep_raw"):
        agent.keep_raw = True
    return agent


def job_coordinates(choice: str | None, model: str, env: ResolvedEnv, surface: str) -> str | None:
    """What to ask the env for: `auto` picks by model on the surfaces that show a screen (normalised for
    open VLMs, pixels for Claude and GPT) and leaves the others to the env; an explicit choice goes as is."""
    if choice not in (None, "auto"):
        return choice
    if surface in (env.screens or ()):
        from evalkit.browser.computer import coordinates_for  # start-up: evalkit.browser loads Playwright

        return coordinates_for(model, "auto")
    return None


def plan_jobs(
    models: list[str],
    env: ResolvedEnv,
    tasks: list[tuple[dict, str]],
    surfaces: list[str],
    modes: list[str],
    repeats: int,
    evalset_id: str | None = None,
    skins: list[str] | None = None,
    coordinates: str | None = "auto",
) -> list[Job]:
    """Jobs ordered task-major, so that a batch cut short still has every model on the same tasks. Skins
    multiply only the surfaces that show a screen (every surface of an env evalkit does not know)."""
    jobs = []
    for r in range(repeats):
        for task, ident in tasks:
            for surface in surfaces:
                skinned = skins and (env.screens is None or surface in env.screens)
                for skin in skins if skinned else [None]:
                    for mode in modes:
                        for m in models:
                            coords = job_coordinates(coordinates, m, env, surface)
                            jobs.append(
                                Job.of(m, env, task, surface, mode, r, skin, coords, evalset_id, ident)
                            )
    return jobs
