"""The notebooks execute top to bottom on a kernel of this interpreter, on small runs."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from fixtures.synth import make_run

from evalkit.analysis.report import execute_notebook

NB = Path(__file__).resolve().parent.parent / "notebooks"

pytestmark = pytest.mark.slow


def outputs(nb) -> str:
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            data = o.get("data", {})
            parts.append(o.get("text", "") + str(data.get("text/html", "")) + str(data.get("text/plain", "")))
            assert o.get("output_type") != "error", o
    return "\n".join(parts)


def test_kernel_is_this_python(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")])
    path = tmp_path / "k.ipynb"
    nbformat.write(nb, str(path))
    out = execute_notebook(path, timeout=60)
    assert out.cells[0].outputs[0]["text"].strip() == sys.executable


def test_02_report(tmp_path):
    run = make_run(tmp_path / "run", n_tasks=6, frames=False)
    nb = execute_notebook(NB / "02_report.ipynb", {"runs": [str(run)], "a": None, "b": None}, timeout=120)
    text = outputs(nb)
    assert "baseline:tracer" in text and "A − B" in text


def test_01_quickstart(tmp_path):
    nb = execute_notebook(
        NB / "01_quickstart.ipynb",
        {"RUN_DIR": str(tmp_path / "q"), "BATCH_LIMIT": 3, "MAX_TURNS": 6},
        cwd=tmp_path,
        timeout=120,
    )
    text = outputs(nb)
    assert "reward" in text and "Run(" in text
    assert (tmp_path / "q" / "batch" / "summary.json").exists()
    # shared as HTML it needs no network: the batch's progress bar drawn from its saved widget state
    from evalkit.analysis.export import to_html
    from tests.analysis.test_export import EXTERNAL

    assert any("widget-view" in k for c in nb.cells for o in c.get("outputs", []) for k in o.get("data", {}))
    page = to_html(nb)
    assert EXTERNAL.search(page) is None, EXTERNAL.search(page)
    assert "<progress" in page and "widget-view" not in page and "require.js" not in page


def test_03_debug_episode(tmp_path):
    nb = execute_notebook(NB / "03_debug_episode.ipynb", {"MAX_TURNS": 5}, cwd=tmp_path, timeout=120)
    text = outputs(nb)
    assert "reward:" in text and "kind" in text
    lines = (tmp_path / "runs" / "debugged" / "trace.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"edit"' in lines[0]  # the debugged episode, kept with its edit marked
