"""`python -m evalkit.view.streamlit_main run viewer/app.py …`: Streamlit's own command line, with the
modules of the viewer's first page imported in a thread beside the server as it starts (`evalkit view` and
`running_app` start the viewer so).

Streamlit runs the app's script only when a page opens, so the first page of a fresh server waited for the
script's imports (Polars, the viewer's modules): a second and more of a first open (py-spy of the server,
benchmarks/viewer.py). Imported while the user gets to the page, they are in `sys.modules` when the script
asks for them. Only the first page's (`FIRST`): every other import in that thread holds the interpreter's
lock while the server serves the page. The other views' modules (`REST`) are imported once the first page
has been sent (`warm_later`, called by the app's script at its end, so under a plain `streamlit run` too).
Only modules that import cleanly without a page: nothing of Streamlit's runtime is touched, and a module
that fails to import is left for the script to report.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

FIRST = ("polars", "evalkit.view.support", "evalkit.records.loading", "viewer.common", "viewer.rows",
         "viewer.table", "viewer.live")  # fmt: skip
"""What the Episodes table, the first page, imports (no statistics, NumPy or pandas: `viewer.packing`)."""
REST = ("evalkit.analysis.stats", "viewer.stepping", "viewer.episode", "viewer.ab")
"""The Episode and A-vs-B views' (not the Summary's charts: Altair takes seconds of CPU)."""

_later: list[threading.Thread] = []


def _warm(root: str, names: Sequence[str]) -> None:
    if root not in sys.path:  # as viewer/app.py does: the checkout, for `viewer.*`
        sys.path.insert(0, root)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the script imports it again and shows what is wrong
            return


def warm_later() -> None:
    """Import `REST` in a thread, once per process (the first page's script calls it when it is done)."""
    if _later or all(name in sys.modules for name in REST):
        return
    from evalkit.view.serve import APP_PATH

    _later.append(threading.Thread(target=_warm, args=(str(APP_PATH.parents[1]), REST), daemon=True,
                                   name="evalkit-warm-later"))  # fmt: skip
    _later[0].start()


def main() -> None:
    # start-up: Streamlit loads in the child it starts, not in evalkit view's parent
    from evalkit.view.serve import APP_PATH

    app = next((Path(a) for a in sys.argv[1:] if a.endswith(".py")), None)
    if app is not None and app.resolve() == APP_PATH:
        threading.Thread(
            target=_warm, args=(str(APP_PATH.parents[1]), FIRST), name="evalkit-warm", daemon=True
        ).start()
    from streamlit.web.cli import main as streamlit

    no_use_warning()
    streamlit(prog_name="streamlit")


def no_use_warning() -> None:
    """Tell Streamlit its "use `streamlit run`" warning was shown: this is `streamlit run`, where it never
    shows, but deciding so (`env_util.is_repl`: `inspect.stack()`, which reads the source of every frame of
    the script's thread) cost ~0.15 s of the first element of the first page (py-spy of the server, at load
    ~12). A Streamlit without that flag is left as it is. Called here and by the app's script (for a plain
    `streamlit run viewer/app.py`)."""
    try:
        from streamlit import delta_generator
    except ImportError:
        return
    if isinstance(getattr(delta_generator, "_use_warning_has_been_displayed", None), bool):
        delta_generator._use_warning_has_been_displayed = True


if __name__ == "__main__":
    main()
