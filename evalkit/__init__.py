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
`types`, `wellformed`, `errors`, `secrets` and `serving` are shared by all; `cli` sits on top.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
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
    "turns": "evalkit.records.loading",
    "calls": "evalkit.records.loading",
    "summarise": "evalkit.analysis.stats",
    "by_tier": "evalkit.analysis.stats",
    "compare": "evalkit.analysis.stats",
    "compare_many": "evalkit.analysis.stats",
    **dict.fromkeys(
        ["EvalkitError", "ConfigError", "UnknownProviderError", "MissingKeyError", "KeyRejectedError",
         "EvalsetError", "EndpointError", "EnvError", "EnvCapacityError", "TraceError", "EpisodeCancelled"],
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


_MOVED = {
    "episode": "run.episode", "batch": "run.batch", "stepper": "run.stepper", "executors": "run.executors",
    "breaker": "run.breaker", "wording": "run.wording", "validate": "run.validate", "envs.probe": "run.probe",
    "evalsets": "envs.evalsets", "traces": "records.traces", "jsonl": "records.jsonl",
    "transcripts": "records.transcripts", "columns": "records.columns", "_index": "records._index",
    "index_cache": "records.index_cache", "loading": "records.loading", "grades": "records.grades",
    "plans": "records.plans", "marks": "records.marks", "live": "records.live",
    "importers": "records.importers",
    "stats": "analysis.stats", "tables": "analysis.tables", "plots": "analysis.plots",
    "display": "analysis.display", "report": "analysis.report", "export": "analysis.export",
    "viewer_support": "view.support", "viewer_pairs": "view.pairs", "viewer_search": "view.search",
    "viewer_links": "view.links", "viewer_serve": "view.serve", "viewer_text": "view.text",
    "viewer_live": "view.live", "bundle": "view.bundle", "standin": "providers.standin",
}  # fmt: skip
"""Where each module of evalkit's flat layout went when its parts became packages (0.1.0)."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import evalkit.traces` (a flat-layout path) gives `evalkit.records.traces` itself, with a
    DeprecationWarning naming the new path: the same module object, so a patch or an isinstance check made
    through either name holds for both. Submodules of a moved package follow it
    (`evalkit.importers.ownloop`)."""

    @staticmethod
    def target(fullname: str) -> str | None:
        if not fullname.startswith("evalkit."):
            return None
        rest = fullname[len("evalkit.") :]
        for old, new in _MOVED.items():
            if rest == old or rest.startswith(old + "."):
                return "evalkit." + new + rest[len(old) :]
        return None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if self.target(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        new = self.target(module.__name__)
        warnings.warn(f"{module.__name__} is now {new}", DeprecationWarning, stacklevel=2)
        # The import system returns what sys.modules holds under the name once this returns: the module.
        sys.modules[module.__name__] = importlib.import_module(new)

    def get_code(self, fullname: str) -> Any:
        """What `python -m` runs for an old path (`python -m evalkit.standin`): the module's new code."""
        new = self.target(fullname)
        warnings.warn(f"{fullname} is now {new}", DeprecationWarning, stacklevel=2)
        spec = importlib.util.find_spec(new)
        return spec.loader.get_code(new) if spec is not None and spec.loader is not None else None


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())


def _record_html(rec: Any) -> str:
    from evalkit.analysis.display import record_html

    return record_html(rec)


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
