"""What `import evalkit` sets up in an IPython kernel: episode records, a batch's Run and a transcript's
Conversation shown as HTML, and Altair's charts drawn with no network (`evalkit.analysis.offline`), now if
Altair is loaded, else as soon as it is.

Nothing here imports the display, Altair or Polars: the formatters are registered by each type's module and
name, and the display is imported when a record is first shown, so `import evalkit` in a kernel stays as
cheap as anywhere else. Outside a kernel (no IPython loaded, or no shell running) `install` does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

from evalkit.analysis import offline


def _record_html(rec: Any) -> str:
    # start-up (these three): the display, and Polars with it, load when a record is first shown
    from evalkit.analysis.display import record_html

    return record_html(rec)


def _run_html(run: Any) -> str:
    """A batch's Run (`evalkit.run.batch.Run`): episodes, summary and tiers, as its run directory has them."""
    from evalkit.analysis.display import run_html  # start-up

    return run_html(run.path, ran=getattr(run, "ran", None), kept=getattr(run, "skipped", None))


def _conversation_html(msgs: Any) -> str:
    from evalkit.analysis.display import conversation_html  # start-up

    return conversation_html(msgs)


def install() -> None:
    """In a running IPython shell: records, runs and conversations shown as HTML, Altair offline. The
    formatters are registered by each type's module and name, so neither `evalkit.types` nor anything else
    imports `evalkit.analysis.display` until a record is shown."""
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
                offline.use()
            except Exception:  # Altair imported either way; its own renderer stays
                pass

        loader.exec_module = exec_module  # this loader object serves this one import
        return spec
