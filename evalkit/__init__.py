"""evalkit: roll out LLM and VLM agents against environments, record every turn, analyse with error bars.

    import evalkit as ek
    with ek.serve("canvas") as env:
        rec = ek.run_episode("baseline:tracer", env, task="canvas-test-0007", out="runs/x")
        run = ek.run_batch(["baseline:tracer"], env, evalset="data/evalsets/canvas-test-300.json",
                           subset="lite", out="runs/y")
    df = ek.load_runs(["runs/y"])

Names are imported on first use so that `import evalkit` stays cheap and needs no optional dependency.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "serve": "evalkit.envs.server",
    "connect": "evalkit.envs.openenv",
    "OpenEnvSession": "evalkit.envs.openenv",
    "TypedSession": "evalkit.envs.openenv",
    "probe": "evalkit.envs.probe",
    "run_episode": "evalkit.episode",
    "run_batch": "evalkit.batch",
    "load_evalset": "evalkit.evalsets",
    "make_agent": "evalkit.providers",
    "read_records": "evalkit.traces",
    "load_runs": "evalkit.loading",
    "summarise": "evalkit.stats",
    "by_tier": "evalkit.stats",
    "compare": "evalkit.stats",
    "compare_many": "evalkit.stats",
    "turns": "evalkit.loading",
    "calls": "evalkit.loading",
    "EpisodeStepper": "evalkit.stepper",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def _record_html(rec: Any) -> str:
    from evalkit.display import record_html

    return record_html(rec)


def _notebook_display() -> None:
    """Show episode records as HTML in IPython. The formatter is registered by the record type's module and
    name, so neither `evalkit.types` nor anything else imports `evalkit.display` until a record is shown."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        html = shell.display_formatter.formatters["text/html"]
        html.for_type_by_name("evalkit.types", "EpisodeRecord", _record_html)


_notebook_display()
