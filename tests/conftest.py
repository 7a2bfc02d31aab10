"""Session-wide fixtures: one embedded canvas server shared by every test that needs a live env, and runs
written as the original harnesses write them."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.server import serve

    with serve("canvas") as env:
        yield env


@pytest.fixture(scope="session")
def seed_runs(tmp_path_factory):
    """Runs written as the three original harnesses write them (tests/importers/seed_*.py), once per session:
    `canvas_issue`, `canvas`, `canvas_indexed`, `uitars`, `fara7b`, `molmoweb`, `opencua`, `planning_jsonl`,
    `planning_dir`. Read them only; copy one before changing it."""
    from tests.importers import seed_canvas, seed_ownloop, seed_planning

    root = tmp_path_factory.mktemp("seeds")
    runs = {
        "canvas_issue": seed_canvas.issue_run(root / "canvas-issue"),
        "canvas": seed_canvas.every_status_run(root / "canvas-every"),
        "canvas_indexed": seed_canvas.indexed_run(root / "canvas-indexed"),
        **seed_ownloop.write_runs(root / "ownloop"),
        "planning_jsonl": seed_planning.write_jsonl(root / "planning" / "rollouts.jsonl"),
        "planning_dir": seed_planning.write_folder(root / "planning" / "episodes"),
    }
    return runs
