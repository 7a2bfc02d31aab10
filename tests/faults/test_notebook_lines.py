"""A batch run in a notebook: what it says for information is the cell's plain output, never a stderr line
(which Jupyter draws in a red box, as an error); a refused key is still said as an error."""

from __future__ import annotations

import nbformat
import pytest

from evalkit.analysis.export import execute_notebook
from tests.faults.drivers import MODEL, StandIn


@pytest.mark.slow
def test_a_batch_in_a_notebook_says_what_it_does_without_an_error_box(tmp_path, monkeypatch):
    model = StandIn()
    for k, v in model.env().items():
        monkeypatch.setenv(k, v)  # (the kernel gets this process's environment)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    batch = "evalkit.run_batch({models!r}, 'canvas', out={out!r}, tasks=2, max_turns=4).ran"
    cells = [
        "import evalkit",
        batch.format(models=MODEL, out=str(tmp_path / "ok")),
        batch.format(models=f"{MODEL}-refused", out=str(tmp_path / "refused")),
    ]
    path = tmp_path / "batch.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    try:
        nb = execute_notebook(path, cwd=tmp_path)
    finally:
        model.stop()
    ok, refused = nb.cells[1].outputs, nb.cells[2].outputs
    assert [o for o in ok if o.get("name") == "stderr"] == [], ok
    shown = [o["data"]["text/plain"] for o in ok if o["output_type"] == "display_data"]
    assert any(t.startswith("evalkit: canvas at http://127.0.0.1:") and "MCP env" in t for t in shown), ok
    assert ok[-1]["output_type"] == "execute_result" and ok[-1]["data"]["text/plain"] == "2"
    errors = "".join(o["text"] for o in refused if o.get("name") == "stderr")
    assert "the model endpoint rejected the API key (HTTP 401)" in errors, refused
