"""A user's own notebook, executed headless: its charts (evalkit's and the user's own Altair chart) draw with
nothing loaded from a network, as JupyterLab, VS Code or an exported page would show them."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import nbformat
import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample-run"

CELLS = [
    f"import evalkit as ek\ndf = ek.load_runs([{str(SAMPLE)!r}])",
    "ek.plots.reward_by_tier(df)",
    "ek.plots.end_reasons(df)",
    # The user's own chart, Altair imported after evalkit: what `import evalkit` did covers it too.
    "import altair as alt\nimport polars as pl\n"
    "alt.Chart(pl.DataFrame({'x': [1, 2, 3], 'y': [3, 1, 2]})).mark_line().encode(x='x', y='y')",
]


def shown(data: dict) -> str:
    """The output as a notebook front end picks it: HTML first (its scripts run), then SVG, then PNG."""
    if "text/html" in data:
        page = data["text/html"]
        return "".join(page) if isinstance(page, list) else page
    if "image/svg+xml" in data:
        svg = data["image/svg+xml"]
        return "".join(svg) if isinstance(svg, list) else svg
    if "image/png" in data:
        return f'<img src="data:image/png;base64,{data["image/png"]}">'
    return f"<pre>{html.escape(str(data.get('text/plain', '')))}</pre>"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from evalkit.analysis.export import execute_notebook

    path = tmp_path_factory.mktemp("nb") / "mine.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS]), str(path))
    return execute_notebook(path, timeout=180)


@pytest.mark.slow
def test_chart_outputs_are_drawn_in_the_kernel(executed):
    charts = [o for c in executed.cells[1:] for o in c.get("outputs", [])]
    assert [o.get("output_type") for o in charts] == ["execute_result"] * 3, charts
    for o in charts:
        data = o["data"]
        assert "text/html" not in data and "image/svg+xml" in data and "image/png" in data, list(data)
        # The PNG is drawn at twice its size and shown at its size.
        assert o["metadata"]["image/png"]["width"] > 100
        assert base64.b64decode(data["image/png"])[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.browser
def test_chart_outputs_load_nothing_from_a_network(executed, browser, tmp_path):
    """Each chart output put in a page as a front end would: the page asks for nothing beyond itself, and
    every chart is drawn (an SVG or an image with a size)."""
    outs = [shown(o["data"]) for c in executed.cells[1:] for o in c.get("outputs", []) if "data" in o]
    page_file = tmp_path / "outputs.html"
    body = "".join(f'<div class="out">{o}</div>' for o in outs)
    page_file.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"
    )
    asked: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 720})

    def refuse(route):
        asked.append(route.request.url)
        route.abort()

    page.route("http*://**/*", refuse)
    page.goto(page_file.as_uri())
    page.wait_for_timeout(1_500)  # an output's script, if any, has asked by now
    sizes = page.evaluate(
        """() => [...document.querySelectorAll('.out')].map(o => {
             const pic = o.querySelector('svg, img, canvas');
             if (!pic) return 0;
             const r = pic.getBoundingClientRect();
             return Math.min(r.width, r.height);
           })"""
    )
    page.close()
    assert asked == [], asked
    assert len(sizes) == 3 and all(s > 100 for s in sizes), sizes


@pytest.mark.slow
def test_import_evalkit_alone_covers_the_users_own_charts(tmp_path):
    """`import evalkit` and nothing else of it, then Altair: the user's chart is drawn in the kernel too
    (Altair was not loaded when evalkit was imported; the renderer is chosen as it loads)."""
    from evalkit.analysis.export import execute_notebook

    cells = [
        "import evalkit as ek",
        "import altair as alt\nimport polars as pl\n"
        "alt.Chart(pl.DataFrame({'x': [1, 2], 'y': [3, 4]})).mark_point().encode(x='x', y='y')",
        "alt.renderers.active",
    ]
    path = tmp_path / "alone.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), str(path))
    nb = execute_notebook(path, timeout=180)
    chart, active = (c["outputs"][0]["data"] for c in nb.cells[1:])
    assert "text/html" not in chart and "image/svg+xml" in chart and "image/png" in chart
    assert active["text/plain"] == "'evalkit'"
