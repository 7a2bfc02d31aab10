"""Own-loop GUI agents: released agent loops (UI-TARS-1.5, OpenCUA-7B, Fara-7B, MolmoWeb) run as released on
the `webapp` tasks, only their model call swapped for an OpenAI-compatible endpoint and their browser for
evalkit's Chromium; plus offline baselines (a DOM solver, random clicks) and a fake endpoint that answers as
each agent would (`--endpoint fake`: no GPU).

`run_ownloop(Settings(agent=...), out)` (with keyword overrides of its settings) — or
`evalkit ownloop AGENT --endpoint URL --model NAME --out RUN`
— writes, per task, `session.json` (or `session_failed.json`), `steps.jsonl` and `screens/step_NN.png`, and
one EpisodeRecord per task in `trace.jsonl`, so analysis and the viewer read these runs like any other.

A runner beside `run`: may import `envs` (the webapp's tasks, site and grader), `browser`, `records`,
`analysis` (its summary files), `values` and the modules at evalkit's top.
"""

import importlib
from typing import Any

from .settings import Settings

_EXPORTS = {
    "OwnloopRun": ".run",
    "model_label": ".run",
    "run_ownloop": ".run",
    "RUNNERS": ".runners",
    "TaskRun": ".task",
}
"""Imported on first use: the CLI builds `evalkit ownloop`'s flags from `Settings` without loading the
runners, the web app's tasks and the run directory's writers (start-up)."""

__all__ = ["Settings", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
