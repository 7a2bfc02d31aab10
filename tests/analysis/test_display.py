"""Notebook display of records and runs: frames inline, model text escaped, nothing read outside the run."""

from __future__ import annotations

import pytest
from fixtures.synth import make_run

from evalkit import analysis as A
from evalkit.analysis import display, kernel
from evalkit.records import rundir
from evalkit.types import EpisodeRecord


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("d") / "r", n_tasks=3)


def notebook_html(obj) -> str:
    """What a notebook shows for `obj`: IPython's own HTML formatter, as a kernel runs it."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    kernel.install()  # what `import evalkit` does inside a kernel
    data, _ = shell.display_formatter.format(obj)
    return data.get("text/html", "")


def test_record_html_with_and_without_run(run):
    rec = rundir.read_at(run, 0)
    assert rec.run_dir == str(run) and "run_dir" not in rec.to_dict()  # known to the reader, never written
    bare = notebook_html(EpisodeRecord.from_dict(rec.to_dict()))
    assert "data:image" not in bare and "(no run dir)" in bare and "reward" in bare
    html = display.episode_html(run, rec)
    assert html.count("data:image/jpeg;base64") == 1 + sum(1 for t in rec.turns if t.frame)
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "reward" in html and "structure" in html
    assert notebook_html(rec) == html


def test_a_record_is_displayed_without_its_type_importing_the_display():
    import subprocess
    import sys

    code = "import sys, evalkit.types, evalkit.records.rundir\n"
    code += "print('evalkit.analysis.display' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unscored_and_hostile_paths(run, tmp_path):
    from PIL import Image as PILImage

    outside = tmp_path / "outside.png"  # a real image, just not inside the run
    PILImage.new("RGB", (4, 4), "red").save(outside)
    (run / "frames" / "link.png").symlink_to(outside)
    rec = next(r for r in rundir.read_records(run) if r.error_class)
    rec.turns[0].frame = "frames/link.png"
    rec.target = str(outside)
    rec.render = "../outside.png"
    rec.frame0 = None
    for t in rec.turns[1:]:
        t.frame = None
    rec.error = "<img src=x onerror=alert(1)>"
    html = display.record_html(rec, run)
    assert "unscored: endpoint_error" in html and "(missing)" in html
    assert "data:image" not in html, "an image outside the run was inlined"
    assert "<img src=x" not in html


def test_run_view(run):
    view = display.RunView(run)
    assert len(view) == 6
    html = view._repr_html_()
    assert "reward (scored)" in html and "baseline:tracer" in html and "too few tasks" in html
    assert "data:image" in display.record_html(view.episode(0))
    assert display.run_html(run, max_episodes=2).count('class="strip"') == 2
    assert A.load_runs(run).height == 6


def test_a_conversation_shows_as_one_in_a_notebook():
    """`ek.transcripts.messages(...)` in a notebook: the conversation as HTML (roles, tool calls, thumbnails),
    not ~5,000 characters of dataclass reprs."""
    import json
    from pathlib import Path

    from IPython.core.interactiveshell import InteractiveShell

    import evalkit as ek

    run = Path(__file__).resolve().parents[2] / "data" / "sample-run"
    rec = next(
        r for r in map(json.loads, (run / "trace.jsonl").read_text().splitlines())
        if r["model"].startswith("anthropic") and r["mode"] == "reference"
    )  # fmt: skip
    msgs = ek.transcripts.messages(rec, run)
    assert isinstance(msgs, list) and msgs[0].role == "system"  # still the list it was
    shell = InteractiveShell.instance()
    kernel.install()
    data, _ = shell.display_formatter.format(msgs)
    page = data["text/html"]
    for role in ("system", "user", "assistant", "tool"):
        assert f">{role}</span>" in page
    assert "→ add_element(" in page and '<img src="data:image/jpeg;base64,' in page
    assert "<script" not in page


def test_a_batchs_run_is_displayed_without_the_batch_importing_the_display(run):
    """`run_batch`'s Run shows as the run's HTML in a notebook: the formatter is registered by its type's
    name, so `evalkit.run` never imports the display (`tests/test_imports.py`)."""
    from evalkit.run.batch import Run

    html = notebook_html(Run(run))
    assert html == display.run_html(run) and "<table" in html
