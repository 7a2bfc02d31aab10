"""Which class runs each own-loop agent, imported only when asked for (a runner's module may need released
code that is not installed). Apart from `run` so that the fake endpoint reads an agent's viewport without
importing the run loop, which starts the fake."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from evalkit.errors import ConfigError

RUNNERS = {
    "uitars": "evalkit.ownloop.uitars:UITars",
    "opencua": "evalkit.ownloop.opencua:OpenCUA",
    "fara7b": "evalkit.ownloop.fara:Fara7B",
    "molmoweb": "evalkit.ownloop.molmoweb:MolmoWeb",
    "dom": "evalkit.ownloop.baselines:DomSolver",
    "random": "evalkit.ownloop.baselines:RandomClicks",
}


def runner_for(agent: str) -> Any:
    if agent not in RUNNERS:
        raise ConfigError(f"unknown own-loop agent {agent!r} (known: {', '.join(RUNNERS)})")
    module, _, name = RUNNERS[agent].partition(":")
    return getattr(import_module(module), name)()
