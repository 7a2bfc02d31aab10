"""A shipped notebook saved from a real Jupyter server of this venv (as JupyterLab saves it: a PUT of the
whole model with its outputs) is written as committed, so `git status` stays clean; any other notebook keeps
its outputs. The server reads the hook from the venv's own configuration, as `make` wrote it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from evalkit.analysis.lab import HOOK, config_file
from evalkit.serving import free_port

pytest.importorskip("jupyter_server")

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _api(port: int, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/contents/{path}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "PUT",
        headers={"Authorization": "token t", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())


@pytest.fixture
def server(tmp_path):
    repo = tmp_path / "checkout"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "mine").mkdir()
    for name in ("strip_outputs.py", *SHIPPED):
        shutil.copy(REPO / "notebooks" / name, repo / "notebooks" / name)
    shutil.copy(REPO / "notebooks" / "01_quickstart.ipynb", repo / "mine" / "copy.ipynb")
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")  # Jupyter's checkpoints are ignored
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "clean")
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "JUPYTER_DATA_DIR": str(tmp_path / "d"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--allow-root", f"--ServerApp.root_dir={repo}", "--IdentityProvider.token=t"],
        env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("wb"),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _api(port, "")
                break
            except OSError as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "server.log").read_text()[-2000:]) from e
                time.sleep(0.3)
        yield repo, port
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _save_with_outputs(port: int, path: str) -> None:
    model = _api(port, path)
    code = next(c for c in model["content"]["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "120 episodes\n"}]
    code["execution_count"] = 3
    model["content"]["metadata"]["language_info"] = {"name": "python", "version": "3.11.9"}
    _api(port, path, {"type": "notebook", "format": "json", "content": model["content"]})


def test_a_shipped_notebook_saved_from_jupyter_leaves_git_status_clean(server):
    repo, port = server
    assert len(SHIPPED) == 3
    for name in SHIPPED:  # byte for byte as committed (nbformat's layout, every cell with its id)
        before = (repo / "notebooks" / name).read_bytes()
        _save_with_outputs(port, f"notebooks/{name}")
        assert (repo / "notebooks" / name).read_bytes() == before, name
    _save_with_outputs(port, "mine/copy.ipynb")
    status = _git(repo, "status", "--porcelain").splitlines()
    assert status == [" M mine/copy.ipynb"]  # a notebook of the user's own keeps what they ran
    assert "120 episodes" in (repo / "mine" / "copy.ipynb").read_text()


def test_make_names_the_hook_in_this_venvs_jupyter_config(tmp_path):
    """What the server above read: `make` (`python -m evalkit.analysis.lab`) wrote it into this venv's
    `jupyter_server_config.json`, keeping what else the file said."""
    config = json.loads(config_file().read_text())
    assert config["ContentsManager"]["pre_save_hook"] == HOOK
    from evalkit.analysis.lab import install

    other = config_file(tmp_path)
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"ServerApp": {"port": 9999}}))
    install(tmp_path)
    assert json.loads(other.read_text()) == {
        "ServerApp": {"port": 9999},
        "ContentsManager": {"pre_save_hook": HOOK},
    }
