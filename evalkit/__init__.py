"""evalkit: roll out LLM and VLM agents against environments, record every turn, analyse with error bars.

    import evalkit as ek
    with ek.serve("canvas") as env:
        rec = ek.run_episode("baseline:tracer", env, task="canvas-test-0007", out="runs/x")
        run = ek.run_batch(["baseline:tracer"], env, evalset="data/evalsets/canvas-test-300.json",
                           subset="lite", out="runs/y")
    df = ek.load_runs(["runs/y"])
    ek.plots.reward_by_tier(ek.by_tier(df))

This module is the public API. Names are imported on first use so that `import evalkit` stays cheap and
needs no optional dependency. The parts, each a package whose docstring says what it owns and may import:
`run` (the loop and the batch) uses `envs`, `providers` and `records`; `analysis` and `view` read `records`;
`scanners` (why models fail: rules, and questions a model answers) reads `records` and asks `providers`;
`types`, `wellformed`, `errors`, `secrets`, `serving`, `notices` and `values` are shared by all; `cli` sits
on top.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "serve": "evalkit.envs.embedded.server",
    "connect": "evalkit.envs.client.openenv",
    "OpenEnvSession": "evalkit.envs.client.openenv",
    "TypedSession": "evalkit.envs.client.openenv",
    "load_evalset": "evalkit.envs.evalsets",
    "make_agent": "evalkit.providers",
    "probe": "evalkit.run.probe",
    "run_episode": "evalkit.run.episode",
    "run_batch": "evalkit.run.batch",
    "EpisodeStepper": "evalkit.run.stepper",
    "read_records": "evalkit.records.rundir",
    "load_runs": "evalkit.records.loading",
    "run_status": "evalkit.records.loading",
    "turns": "evalkit.records.loading",
    "calls": "evalkit.records.loading",
    "summarise": "evalkit.analysis.stats",
    "by_tier": "evalkit.analysis.stats",
    "compare": "evalkit.analysis.sequential",  # stats.compare, or the design's result on a sequential run
    "compare_many": "evalkit.analysis.stats",
    "pass_at_k": "evalkit.analysis.repeats",
    "pass_hat_k": "evalkit.analysis.repeats",
    "plan": "evalkit.analysis.repeats",
    "noise": "evalkit.analysis.noise",
    "scan": "evalkit.scanners.engine",
    "why": "evalkit.analysis.why",
    **dict.fromkeys(
        ["EvalkitError", "ConfigError", "UnknownProviderError", "MissingKeyError", "KeyRejectedError",
         "EvalsetError", "EndpointError", "EnvError", "EnvCapacityError", "TraceError", "EpisodeCancelled",
         "EpisodeOver"],
        "evalkit.errors",
    ),
}  # fmt: skip
_MODULES = {
    "plots": "evalkit.analysis.plots",
    "display": "evalkit.analysis.display",
    "report": "evalkit.analysis.report",
    "export": "evalkit.analysis.export",
    "stats": "evalkit.analysis.stats",
    "transcripts": "evalkit.records.transcripts",
    "scanners": "evalkit.scanners",
}
"""Modules a notebook reaches as `ek.plots`, `ek.transcripts`, … (and `from evalkit import plots`)."""

__all__ = ["__version__", *_EXPORTS, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


if "IPython" in sys.modules:  # start-up: a kernel's display is set up in a kernel alone
    from evalkit.analysis import kernel

    kernel.install()
