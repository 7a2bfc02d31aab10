"""Runs written by the three harnesses evalkit grew from, read exactly as they wrote them.

`read_foreign(path)` recognises a format by the shape of what is there (never by a file name alone) and
yields one dict per record in the shape of `EpisodeRecord.to_dict()`, image fields as paths relative to
`path`, oldest first. One module per harness, each with its field-by-field mapping and its status table:

- `canvas_rollout` — a design-canvas rollout directory (`trace.jsonl` of records without `format_version`,
  `frames/`, `renders/`): seed 000;
- `ownloop` — an own-loop GUI run, one folder per task with `session.json` or `session_failed.json`: seed 001;
- `tool_planning` — tool-planning rollout records (`messages`, `steps`, `final`) in a `.jsonl` file, a `.json`
  file or a folder of them: seed 003.

Shared rules. Every record gets a key built from the job as its harness tells jobs apart, so keys never
collide and a record a resume appended later has the key of the one it replaces: `evalkit.records.traces`
keeps the latest record per key, as the harnesses' own summaries do. An episode the infrastructure broke is
unscored (reward null, `error_class` set) even where the harness scored it; a finished episode the files hold
no reward for is "no reward" (reward null, no `error_class`), never 0. Every record keeps the harness's own
reward and error (`info.harness_reward`, `info.harness_error`: the `harness_reward` and `harness_error`
columns of `load_runs`), and where evalkit leaves unscored what the harness scored, `info.unscored_because`
says why. `info.importer` names the importer. Nothing is written into the directory read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evalkit.errors import TraceError
from evalkit.records.importers import canvas_rollout, ownloop, tool_planning
from evalkit.records.jsonl import iter_lines, load_json

VERSION = 4
"""Changes whenever an importer maps a record differently: it is part of the name of a cached index."""

GRADED_ELSEWHERE = frozenset({ownloop.NAME})
"""Importers of runs whose files hold no reward because a separate step grades them: a grades file gives
their harness's own reward (`evalkit.records.grades`)."""

_READERS = {
    canvas_rollout.NAME: canvas_rollout.read,
    ownloop.NAME: ownloop.read,
    tool_planning.NAME: tool_planning.read,
}


def _first(path: Path) -> object:
    return next(iter_lines(path), None) if path.suffix == ".jsonl" else load_json(path)


def detect(path: str | Path) -> str:
    """The importer for `path` (`design-canvas`, `ownloop-gui` or `tool-planning`); TraceError otherwise."""
    path = Path(path)
    if path.is_file():
        if path.suffix in (".jsonl", ".json") and tool_planning.is_planning(_first(path)):
            return tool_planning.NAME
        raise TraceError(f"{path}: not a run directory or a rollout file evalkit can read")
    if not path.is_dir():
        raise TraceError(f"{path}: no such run directory")
    trace = path / "trace.jsonl"
    if trace.is_file():
        first = _first(trace)
        if canvas_rollout.is_rollout_record(first):
            return canvas_rollout.NAME
        if tool_planning.is_planning(first):
            return tool_planning.NAME
    if any(ownloop.is_task_folder(p) for p in path.iterdir()):
        return ownloop.NAME
    if any(tool_planning.is_planning(load_json(p)) for p in sorted(path.glob("*.json"))):
        return tool_planning.NAME
    raise TraceError(
        f"{path}: no evalkit trace and no known rollout format (design-canvas, tool-planning, own-loop GUI)"
    )


def read_foreign(path: str | Path) -> Iterator[dict]:
    """Episode dicts in the native EpisodeRecord shape from a run another harness wrote, oldest first."""
    path = Path(path)
    kind = detect(path)
    if kind == tool_planning.NAME and path.is_dir() and (path / "trace.jsonl").is_file():
        path = path / "trace.jsonl"
    yield from _READERS[kind](path)
