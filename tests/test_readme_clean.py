"""The README's commands and the shipped notebooks leave a checkout as it was: `git status` is clean after
the commands, and running and saving the notebooks changes nothing git would commit, in a fresh clone with
the set-up `make` does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def as_lab_saves_it(path: Path) -> None:
    """What Run All and a save in JupyterLab leave in a notebook: outputs, counts, timings, widget state, the
    kernel's version, and a checkpoint beside it."""
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
            cell["metadata"]["execution"] = {"iopub.status.idle": "2026-12-04T18:00:00.000Z"}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2", "mimetype": "text/x-python"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path.write_text(json.dumps(nb, indent=1))
    checkpoints = path.parent / ".ipynb_checkpoints"
    checkpoints.mkdir(exist_ok=True)
    shutil.copy(path, checkpoints / f"{path.stem}-checkpoint.ipynb")


def test_git_status_is_clean_after_the_readmes_commands(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    if shutil.which("make"):
        subprocess.run(["make", "-s", "notebook-filter"], cwd=clone, check=True)
    else:  # what that target does
        git("config", "filter.evalkit-notebook.clean", "python3 notebooks/strip_outputs.py", cwd=clone)
    env = {**os.environ, "PYTHONPATH": str(clone), "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def evalkit(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "evalkit.cli", *args], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, (args, done.stderr[-2000:])

    evalkit("summarise", "data/sample-run")
    evalkit("compare", "data/sample-run", "--a", "baseline:tracer", "--b", "baseline:random")
    evalkit("bundle", "data/sample-run", "-o", "runs/demo-site")
    evalkit("export", "notebooks/01_quickstart.ipynb", "-o", "runs/quickstart.html")
    evalkit("report", "data/sample-run", "-o", "runs/report.html", "--bundle")
    assert git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
    for nb in sorted((clone / "notebooks").glob("*.ipynb")):
        as_lab_saves_it(nb)
    # What running them saved is not a change to them: the clean filter strips it, so there is nothing to
    # diff, add or commit, and the checkpoints are ignored. (git status still lists a saved notebook until it
    # is added: git trusts a changed file size over the filter; see notebooks/strip_outputs.py.)
    assert git("diff", "--stat", cwd=clone) == ""
    git("add", "--all", cwd=clone)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
