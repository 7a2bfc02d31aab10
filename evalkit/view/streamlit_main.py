"""`python -m evalkit.view.streamlit_main run viewer/app.py …`: Streamlit's own command line, with the
viewer's modules imported in a thread beside the server as it starts (`evalkit view` and `running_app` start
the viewer so).

Streamlit runs the app's script only when a page opens, so the first page of a fresh server waited for the
script's imports (Polars, the analysis, the viewer's modules): a second and more of a first open (py-spy of
the server, benchmarks/viewer.py). Imported while the user gets to the page, they are in `sys.modules` when
the script asks for them. Only modules that import cleanly without a page: nothing of Streamlit's runtime is
touched, and a module that fails to import is left for the script to report.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

WARM = ("pandas", "polars", "evalkit.analysis", "evalkit.view.support", "viewer.common", "viewer.rows",
        "viewer.table", "viewer.stepping", "viewer.episode", "viewer.ab", "viewer.live")  # fmt: skip
"""The modules the Episodes, Episode and A-vs-B views import (not the Summary's charts: Altair takes seconds
of CPU the first page would be kept waiting for). Pandas: Streamlit imports it the first time a component's
data holds a list (to see whether it is a data frame), in the first page's table."""


def _warm(root: str) -> None:
    if root not in sys.path:  # as viewer/app.py does: the checkout, for `viewer.*`
        sys.path.insert(0, root)
    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception:  # the script imports it again and shows what is wrong
            return


def main() -> None:
    # start-up: Streamlit loads in the child it starts, not in evalkit view's parent
    from evalkit.view.serve import APP_PATH

    app = next((Path(a) for a in sys.argv[1:] if a.endswith(".py")), None)
    if app is not None and app.resolve() == APP_PATH:
        threading.Thread(
            target=_warm, args=(str(APP_PATH.parents[1]),), name="evalkit-warm", daemon=True
        ).start()
    from streamlit.web.cli import main as streamlit

    streamlit(prog_name="streamlit")


if __name__ == "__main__":
    main()
