"""`evalkit export`: a notebook as one HTML page with nothing fetched from a network — widgets from their
saved state, Altair charts as SVG, math as MathML — opened in Chromium with the network blocked."""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from evalkit.analysis.export import WIDGET_STATE, WIDGET_VIEW, math_to_mathml, offline
from evalkit.cli import main

EXTERNAL = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?\s*(?:https?:)?//", re.I)
Q = "quantitative"
SPEC = {"data": {"values": [{"x": 1, "y": 2}, {"x": 2, "y": 5}]}, "mark": "line",
        "encoding": {"x": {"field": "x", "type": Q}, "y": {"field": "y", "type": Q}}}  # fmt: skip
ALTAIR_HTML = (
    '<div id="altair-viz-1"></div><script src="https://cdn.example/vega@6"></script><script>'
    "(function(spec, embedOpt){ vegaEmbed('#altair-viz-1', spec, embedOpt); })("
    + json.dumps(SPEC) + ', {"mode": "vega-lite"});</script>'
)  # fmt: skip


def widget_state() -> dict:
    """What tqdm leaves in a notebook: a box of a label, a progress bar and its counters."""

    def model(name, **state):
        return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}

    return {"version_major": 2, "version_minor": 0, "state": {
        "box": model("HBoxModel", children=["IPY_MODEL_l", "IPY_MODEL_p", "IPY_MODEL_r"]),
        "l": model("HTMLModel", value="steps: 100%"),
        "p": model("FloatProgressModel", value=3, max=3, bar_style="success"),
        "r": model("HTMLModel", value="3/3 [00:00&lt;00:00]<script>alert(1)</script>"),
    }}  # fmt: skip


def notebook() -> nbformat.NotebookNode:
    widget = new_output("display_data", {WIDGET_VIEW: {"model_id": "box", "version_major": 2},
                                         "text/plain": "HBox(children=(...))"})  # fmt: skip
    chart = new_output(
        "execute_result", {"text/html": ALTAIR_HTML, "text/plain": "alt.Chart(...)"}, execution_count=2
    )
    lite = new_output(
        "display_data", {"application/vnd.vegalite.v6+json": SPEC, "text/plain": "alt.Chart(...)"}
    )
    js = new_output("display_data", {"application/javascript": "require(['x'])", "text/plain": "a js output"})
    nb = new_notebook(cells=[
        new_markdown_cell("The mean $\\bar x = \\frac{1}{n}\\sum_i x_i$, costs $5 and $10, and\n\n"
                          "$$a^2 + b^2 = c^2$$\n\n`$kept$`"),
        new_code_cell("for _ in tqdm(range(3)): pass", outputs=[widget]),
        new_code_cell("chart", outputs=[chart, lite, js]),
    ])  # fmt: skip
    nb.metadata["widgets"] = {WIDGET_STATE: widget_state()}
    return nb


def test_outputs_become_static():
    nb = offline(notebook())
    widget, (chart, lite, js) = nb.cells[1].outputs[0], nb.cells[2].outputs
    assert WIDGET_VIEW not in widget.data and "<progress" in widget.data["text/html"]
    assert "alert(1)" not in widget.data["text/html"] and "3/3" in widget.data["text/html"]
    assert chart.data["image/svg+xml"].startswith("<svg") and "text/html" not in chart.data
    assert lite.data["image/svg+xml"].startswith("<svg")
    assert "application/javascript" not in js.data and js.data["text/plain"] == "a js output"
    assert "widgets" not in nb.metadata


def test_math_outside_code_becomes_mathml():
    page = math_to_mathml(
        "<p>$x^2$ and $5 or $10</p><p>$$\\frac{a}{b}$$</p><code>$kept$</code><pre>$also$</pre>"
    )
    assert page.count("<math") == 2 and "<mfrac>" in page and 'display="block"' in page
    assert "$5 or $10" in page and "<code>$kept$</code>" in page and "<pre>$also$</pre>" in page


def test_export_opens_offline_in_chromium(tmp_path, browser):
    src = tmp_path / "shared.ipynb"
    nbformat.write(notebook(), str(src))
    assert main(["export", str(src), "-o", str(tmp_path / "shared.html")]) == 0
    page = (tmp_path / "shared.html").read_text()
    assert EXTERNAL.search(page) is None, EXTERNAL.search(page)
    asked = []
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
              else (asked.append(r.request.url), r.abort()))  # fmt: skip
    tab.goto((tmp_path / "shared.html").as_uri())
    tab.wait_for_load_state("load")
    drawn = tab.evaluate("""() => ({
        math: [...document.querySelectorAll('math')].map(m => m.getBoundingClientRect().width),
        progress: document.querySelectorAll('progress').length,
        charts: [...document.querySelectorAll('img')].filter(i => i.naturalWidth > 100).length,
        wide: document.documentElement.scrollWidth})""")
    tab.close()
    assert asked == []
    assert len(drawn["math"]) == 2 and min(drawn["math"]) > 10  # laid out as math, not collapsed text
    assert drawn["progress"] == 1 and drawn["charts"] == 2 and drawn["wide"] <= 1280


def test_a_missing_or_broken_notebook_is_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none.ipynb")]) == 2
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert main(["export", str(tmp_path / "bad.ipynb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no notebook" in err[0] and "not a readable notebook" in err[1]


@pytest.mark.slow
def test_executing_says_nothing_of_the_kernels_transport(tmp_path):
    """`evalkit export --execute` (and `report`, which runs its notebook the same way) prints no warning of
    ipykernel's about a kernel over TCP without encryption: the kernel speaks over Unix sockets."""
    import subprocess
    import sys

    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")]), str(path))
    out = tmp_path / "n.html"
    cmd = [sys.executable, "-m", "evalkit.cli", "export", str(path), "-o", str(out), "--execute"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "TCP" not in done.stderr and "WARNING" not in done.stderr, done.stderr
    assert "42" in out.read_text()
