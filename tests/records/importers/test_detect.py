"""Which importer reads a path, and one line for anything none can."""

from __future__ import annotations

import json

import pytest

from evalkit import analysis as A
from evalkit.errors import TraceError
from evalkit.records import importers


def test_each_seed_is_recognised_by_its_shape(seed_runs):
    kinds = {name: importers.detect(path) for name, path in seed_runs.items()}
    assert {k for n, k in kinds.items() if n.startswith("canvas")} == {"design-canvas"}
    assert {kinds[a] for a in ("uitars", "fara7b", "molmoweb", "opencua")} == {"ownloop-gui"}
    assert kinds["planning_jsonl"] == kinds["planning_dir"] == "tool-planning"


def test_a_planning_trace_in_a_folder_reads_as_planning(seed_runs, tmp_path):
    (tmp_path / "trace.jsonl").write_bytes(seed_runs["planning_jsonl"].read_bytes())
    assert importers.detect(tmp_path) == "tool-planning"
    assert A.load_runs(tmp_path).height == 9


def test_unknown_directory_is_one_line_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TraceError) as e:
        list(importers.read_foreign(tmp_path))
    assert "\n" not in str(e.value) and "no known rollout format" in str(e.value)
    (tmp_path / "x.jsonl").write_text(json.dumps({"a": 1}) + "\n")
    with pytest.raises(TraceError, match="not a run directory"):
        A.load_runs(tmp_path / "x.jsonl")
    with pytest.raises(TraceError, match="no such run directory"):
        A.load_runs(tmp_path / "missing")
