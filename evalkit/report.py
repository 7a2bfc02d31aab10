"""`evalkit report`: execute the report notebook on some runs and write one standalone HTML file.

The notebook (`notebooks/02_report.ipynb`) takes its inputs from a cell tagged `parameters`; the values
given here go into a cell inserted right after it (as papermill does), so the notebook also runs as it
is in JupyterLab. Charts render to PNG inside the notebook (Altair's vl-convert renderer), and the
exported page keeps no script that loads from the network, so a colleague can open it offline.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_report.ipynb"
CELL_TIMEOUT = 600

# nbconvert's templates load require.js, MathJax and mermaid from a CDN; the report needs none of them.
_EXTERNAL_SCRIPT = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I | re.S
)
_NETWORK_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/(?:(?!</script>).)*</script>",
    re.I | re.S,
)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)


def parameter_cell_source(params: dict[str, Any]) -> str:
    return "# Injected by evalkit.report\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())


def inject_parameters(nb: Any, params: dict[str, Any]) -> Any:
    """Insert a cell setting `params` after the cell tagged `parameters` (or first, if none is tagged)."""
    import nbformat

    cell = nbformat.v4.new_code_cell(parameter_cell_source(params))
    cell.metadata["tags"] = ["injected-parameters"]
    at = next(
        (i + 1 for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), 0
    )
    nb.cells.insert(at, cell)
    return nb


def execute_notebook(
    path: str | Path,
    params: dict[str, Any] | None = None,
    cwd: str | Path | None = None,
    timeout: int = CELL_TIMEOUT,
) -> Any:
    """Run a notebook on a kernel of this Python (the `python3` spec resolves to sys.executable) and return
    the executed notebook; raises nbclient's CellExecutionError on a failing cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    if params:
        inject_parameters(nb, params)
    env = dict(os.environ)
    # The kernel must import this evalkit even when it is not installed (a checkout run in place).
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or Path(path).parent)}},
    )
    client.km = client.create_kernel_manager()
    # A user-installed `python3` kernelspec may point at another interpreter; run ours.
    client.km.kernel_spec.argv[0] = sys.executable
    client.execute(env=env)
    return nb


def to_html(nb: Any, show_code: bool = False, title: str | None = None) -> str:
    """A standalone HTML page of an executed notebook, with no script or stylesheet fetched from a network."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        exclude_input=not show_code,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    if title:
        nb.metadata["title"] = title
    body, _ = exporter.from_notebook_node(nb)
    return strip_network(body)


def strip_network(html: str) -> str:
    html = _EXTERNAL_SCRIPT.sub("", html)
    html = _NETWORK_SCRIPT.sub("", html)
    return _EXTERNAL_LINK.sub("", html)


def build_report(
    runs: list[str],
    out: str | Path = "report.html",
    a: str | None = None,
    b: str | None = None,
    show_code: bool = False,
    notebook: str | Path = NOTEBOOK,
    n_boot: int = 2000,
) -> Path:
    """Execute the report notebook on `runs` (comparing `a` with `b` when given) and write `out`."""
    if not runs:
        raise ConfigError("report: give at least one run directory")
    for r in runs:
        if not Path(r).exists():
            raise ConfigError(f"report: no run directory {r!r}")
    params = {"runs": [str(Path(r).resolve()) for r in runs], "a": a, "b": b, "n_boot": n_boot}
    out = Path(out)
    nb = execute_notebook(notebook, params, cwd=out.resolve().parent if out.parent.exists() else None)
    html = to_html(nb, show_code=show_code, title="evalkit report: " + ", ".join(Path(r).name for r in runs))
    from evalkit.traces import atomic_write

    atomic_write(out, html)
    return out
