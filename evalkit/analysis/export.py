"""Notebooks run on a kernel of this Python (`execute_notebook`, with parameters injected as papermill does)
and `evalkit export NOTEBOOK -o FILE.html`: a notebook as one HTML page that works offline.

nbconvert's page loads require.js, MathJax and the Jupyter widget manager from CDNs, and a chart or a widget
without them is an empty box. Before converting, each output that needs a script gets a static form, and
after it every script or stylesheet fetched from a network is removed:

- widgets (a tqdm progress bar, a label, a slider) are drawn from the widget state saved with the notebook,
  as HTML (`<progress>`, text, boxes in a row or column); without saved state, their text form is kept;
- Vega-Lite charts (Altair's default output in JupyterLab) are rendered to SVG by vl-convert;
- `$…$` and `$$…$$` in Markdown become MathML, which browsers draw themselves (needs `latex2mathml`; without
  it the TeX stays as written, as MathJax would have found it);
- JavaScript outputs are dropped for their other forms (an image, text).
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_VEGA = re.compile(r"application/vnd\.vega(lite)?\.v\d+\+json")
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])")


CELL_TIMEOUT = 600

# nbconvert's templates load require.js, MathJax and mermaid from a CDN; an offline page needs none of them.
_EXTERNAL_SCRIPT = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I | re.S
)
_NETWORK_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/(?:(?!</script>).)*</script>",
    re.I | re.S,
)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)


def parameter_cell_source(params: dict[str, Any]) -> str:
    return "# Injected by evalkit\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())


def inject_parameters(nb: Any, params: dict[str, Any]) -> Any:
    """Insert a cell setting `params` after the cell tagged `parameters` (or first, if none is tagged), as
    papermill does, so that the notebook also runs as it is in JupyterLab."""
    # start-up: the notebook machinery loads with the function that needs it
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
    # start-up (as above)
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    if params:
        inject_parameters(nb, params)
    env = dict(os.environ)
    # The kernel must import this evalkit even when it is not installed (a checkout run in place).
    root = str(Path(__file__).resolve().parents[2])
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
    if os.name != "nt":
        # Over TCP, ipykernel warns on the user's terminal that the kernel's traffic is unencrypted, for every
        # report and export. Unix sockets in a private folder are local by construction: nothing to warn of.
        with tempfile.TemporaryDirectory(prefix="evalkit-kernel-") as sockets:
            client.km.transport = "ipc"
            client.km.ip = str(Path(sockets) / "kernel")
            client.execute(env=env)
        return nb
    client.execute(env=env)
    return nb


def strip_network(html: str) -> str:
    html = _EXTERNAL_SCRIPT.sub("", html)
    html = _NETWORK_SCRIPT.sub("", html)
    return _EXTERNAL_LINK.sub("", html)


def _widget_html(models: dict, model_id: str, depth: int = 0) -> str:
    """A widget as static HTML, from its saved state; its children drawn inside it."""
    model = models.get(model_id) or {}
    state = model.get("state") or {}
    name = str(model.get("model_name", ""))
    desc = html.escape(str(state.get("description") or ""))
    if depth > 20:
        return ""
    if name.endswith(("HBoxModel", "VBoxModel", "BoxModel", "GridBoxModel")):
        kids = [
            _widget_html(models, str(c).removeprefix("IPY_MODEL_"), depth + 1)
            for c in state.get("children", [])
        ]
        direction = "column" if name.startswith("VBox") else "row"
        style = f"display:flex;flex-direction:{direction};gap:6px;align-items:center"
        return f'<div style="{style}">{"".join(kids)}</div>'
    if name.endswith("ProgressModel"):
        value, top = state.get("value", 0), state.get("max", 100)
        colour = {"danger": "#d9534f", "success": "#5cb85c"}.get(state.get("bar_style") or "", "")
        style = f' style="accent-color:{colour}"' if colour else ""
        return f'{desc} <progress value="{value}" max="{top}"{style}></progress>'
    if name.endswith(("HTMLModel", "HTMLMathModel")):
        # The widget's own HTML, as the live notebook shows it (tqdm's counters); scripts do not survive it.
        return re.sub(r"<script\b.*?</script>", "", str(state.get("value") or ""), flags=re.S | re.I)
    if "value" in state:
        return f"{desc} <span>{html.escape(str(state['value']))}</span>"
    return f'<span style="color:#777">({html.escape(name.removesuffix("Model") or "widget")})</span>'


_TAG = re.compile(r"(<[^>]*>)")
_RAW = ("code", "pre", "script", "style", "textarea", "kbd", "samp")


def math_to_mathml(page: str) -> str:
    """`$$…$$` and `$…$` in the text of an HTML page (outside code, scripts and styles) as MathML, which
    browsers draw with no script. Pages stay as they are without `latex2mathml`."""
    try:
        # start-up: only for a notebook with LaTeX in it
        from latex2mathml.converter import convert
    except ImportError:
        return page

    def swap(display: str) -> Any:
        def one(m: re.Match) -> str:
            try:
                return convert(html.unescape(m.group(1)).strip(), display=display)
            except Exception:  # TeX it cannot read stays as written
                return m.group(0)

        return one

    parts, raw = _TAG.split(page), 0
    for i, part in enumerate(parts):
        if i % 2:  # a tag
            name = re.match(r"</?\s*([a-zA-Z0-9]+)", part)
            if name and name.group(1).lower() in _RAW and not part.endswith("/>"):
                raw += -1 if part.startswith("</") else 1
                raw = max(raw, 0)
        elif raw == 0 and "$" in part:
            parts[i] = _INLINE.sub(swap("inline"), _DISPLAY.sub(swap("block"), part))
    return "".join(parts)


def _embedded_spec(page: str) -> dict | None:
    """The Vega-Lite spec inside Altair's HTML form (a script calling vega-embed with the spec), if any."""
    if "vega-embed" not in page and "vegaEmbed" not in page:
        return None
    at = page.rfind("})(")
    if at < 0:
        return None
    try:
        spec, _ = json.JSONDecoder().raw_decode(page[at + 3 :])
    except ValueError:
        return None
    vega = isinstance(spec, dict) and any(k in spec for k in ("mark", "layer", "$schema"))
    return spec if vega else None


def _svg(spec: dict) -> str | None:
    try:
        # start-up: vl-convert only to draw a chart
        import vl_convert as vlc

        return vlc.vegalite_to_svg(spec)
    except Exception:  # a spec vl-convert cannot draw keeps its other forms
        return None


def offline(nb: Any) -> Any:
    """A copy of `nb` whose outputs need no script: widgets from their saved state, charts as SVG, math as
    MathML, JavaScript outputs dropped."""
    nb = copy.deepcopy(nb)
    state = (nb.metadata.get("widgets") or {}).get(WIDGET_STATE) or {}
    models = state.get("state") or {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not isinstance(data, dict):
                continue
            view = data.get(WIDGET_VIEW)
            if view is not None:
                model_id = view.get("model_id") if isinstance(view, dict) else None
                if model_id in models:
                    data["text/html"] = _widget_html(models, model_id)
                data.pop(WIDGET_VIEW, None)
            for mime in [m for m in data if _VEGA.fullmatch(m)]:
                spec = data.pop(mime)
                svg = _svg(spec if isinstance(spec, dict) else json.loads(spec)) if "lite" in mime else None
                if svg and "image/png" not in data:
                    data["image/svg+xml"] = svg
                    data.pop("text/html", None)  # Altair's HTML form loads vega from a CDN
            page = data.get("text/html")
            spec = _embedded_spec("".join(page) if isinstance(page, list) else str(page or ""))
            if spec is not None:
                svg = _svg(spec)
                if svg is not None:
                    data["image/svg+xml"] = svg
                    del data["text/html"]
            data.pop("application/javascript", None)
    nb.metadata.pop("widgets", None)
    return nb


def to_html(nb: Any, show_code: bool = True, title: str | None = None) -> str:
    """A standalone HTML page of a notebook that fetches nothing from a network."""
    # start-up (as above)
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        exclude_input=not show_code,
        exclude_input_prompt=not show_code,
        exclude_output_prompt=not show_code,
        embed_images=True,
    )
    nb = offline(nb)
    if title:
        nb.metadata["title"] = title
    body, _ = exporter.from_notebook_node(nb)
    return math_to_mathml(strip_network(body))


def export(notebook: str | Path, out: str | Path, execute: bool = False, show_code: bool = True) -> Path:
    """Write `notebook` (executed first with `execute`, in its own folder) as one offline HTML page."""
    # start-up (as above; the run-directory writer with it)
    import nbformat

    from evalkit.records.rundir import atomic_write

    path = Path(notebook)
    if not path.is_file():
        raise ConfigError(f"export: no notebook {str(path)!r}")
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as e:  # not JSON, not a notebook: the user's file, said in one line
        raise ConfigError(f"export: {path} is not a readable notebook ({type(e).__name__}: {e})") from None
    if execute:
        nb = execute_notebook(path)
    out = Path(out)
    atomic_write(out, to_html(nb, show_code=show_code, title=path.stem))
    return out
