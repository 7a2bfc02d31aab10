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
`types`, `wellformed`, `jsonvalues`, `errors`, `secrets` and `serving` are shared by all; `cli` sits on top.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "serve": "evalkit.envs.server",
    "connect": "evalkit.envs.openenv",
    "OpenEnvSession": "evalkit.envs.openenv",
    "TypedSession": "evalkit.envs.openenv",
    "load_evalset": "evalkit.envs.evalsets",
    "make_agent": "evalkit.providers",
    "probe": "evalkit.run.probe",
    "run_episode": "evalkit.run.episode",
    "run_batch": "evalkit.run.batch",
    "EpisodeStepper": "evalkit.run.stepper",
    "read_records": "evalkit.records.traces",
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


def _record_html(rec: Any) -> str:
    from evalkit.analysis.display import record_html

    return record_html(rec)


def _run_html(run: Any) -> str:
    """A batch's Run (`evalkit.run.batch.Run`): episodes, summary and tiers, as its run directory has them."""
    from evalkit.analysis.display import run_html

    return run_html(run.path, ran=getattr(run, "ran", None), kept=getattr(run, "skipped", None))


def _conversation_html(msgs: Any) -> str:
    from evalkit.analysis.display import conversation_html

    return conversation_html(msgs)


def _notebook_display() -> None:
    """Show episode records as HTML in IPython. The formatter is registered by the record type's module and
    name, so neither `evalkit.types` nor anything else imports `evalkit.analysis.display` until a record is
    shown."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        html = shell.display_formatter.formatters["text/html"]
        html.for_type_by_name("evalkit.types", "EpisodeRecord", _record_html)
        html.for_type_by_name("evalkit.run.batch", "Run", _run_html)
        html.for_type_by_name("evalkit.records.transcripts", "Conversation", _conversation_html)
        _offline_charts()


def _offline_charts() -> None:
    """In a notebook, Altair's charts draw with no network (`evalkit.analysis.offline`): now if Altair is
    loaded, else as soon as it is, so that `import evalkit` stays cheap and a user's own charts in the cells
    after it need nothing from a CDN either."""
    if "altair" in sys.modules:
        from evalkit.analysis import offline

        offline.use()
    elif not any(isinstance(f, _AfterAltair) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterAltair())


class _AfterAltair(importlib.abc.MetaPathFinder):
    """Finds nothing itself: on the first import of `altair` it steps aside, lets the other finders find it,
    and has the offline renderer chosen once Altair's module has run."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "altair":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            try:
                from evalkit.analysis import offline

                offline.use()
            except Exception:  # Altair imported either way; its own renderer stays
                pass

        loader.exec_module = exec_module  # this loader object serves this one import
        return spec


_notebook_display()
