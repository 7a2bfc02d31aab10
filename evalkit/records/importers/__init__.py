"""Runs written by the three harnesses evalkit grew from, read exactly as they wrote them.

`read_foreign(path)` recognises a format by the shape of what is there (never by a file name alone) and
yields one dict per record in the shape of `EpisodeRecord.to_dict()`, image fields as paths relative to
`path`, oldest first. One module per harness, each with its field-by-field mapping and its status table:

- `canvas_rollout` — a design-canvas rollout directory (`trace.jsonl` of records without `format_version`,
  `frames/`, `renders/`): seed 000;
- `ownloop` — an own-loop GUI run, one folder per task with `session.json` or `session_failed.json`: seed 001;
- `tool_planning` — tool-planning rollout records (`messages`, `steps`, `final`) in a `.jsonl` file, a `.json`
  file or a folder of them: seed 003;
- `atif` — ATIF trajectories (Harbor's format): a Harbor job folder, one trial, a folder of trajectory files
  or one file; the reward from each trial's `result.json`;
- `inspect_log` — an Inspect log (`.eval`, or Inspect's `.json` log): a sample per episode, the reward from
  one scorer's score (`scoring(name)` / `EVALKIT_SCORER` when a log has several). Needs `evalkit[inspect]`;
- `sessions` — agent sessions as the Hugging Face Hub's trace viewer reads them (Session Trace Simple
  Format, Pi, Claude Code, Codex): one file, a folder of them, or a dataset folder `convert --to hf` wrote;
- `tau2` — τ²-bench results: its results JSON, a bare list of simulations, its directory format, or a
  leaderboard submission folder (`submission.json`, `trajectories/`): a simulation per episode.

Shared rules. Every record gets a key built from the job as its harness tells jobs apart, so keys never
collide and a record a resume appended later has the key of the one it replaces: `evalkit.records.rundir`
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
from evalkit.records.importers import (
    atif,
    canvas_rollout,
    inspect_log,
    ownloop,
    sessions,
    tau2,
    tool_planning,
)
from evalkit.records.jsonl import iter_lines, load_json

VERSION = 6
"""Changes whenever an importer maps a record differently: it is part of the name of a cached index."""

GRADED_ELSEWHERE = frozenset({ownloop.NAME})
"""Importers of runs whose files hold no reward because a separate step grades them: a grades file gives
their harness's own reward (`evalkit.records.grades`)."""

_READERS = {
    canvas_rollout.NAME: canvas_rollout.read,
    ownloop.NAME: ownloop.read,
    tool_planning.NAME: tool_planning.read,
    atif.NAME: atif.read,
    inspect_log.NAME: inspect_log.read,
    tau2.NAME: tau2.read,
    sessions.NAME: sessions.read,
}

scoring = inspect_log.scoring


def cache_tag(path: str | Path) -> str:
    """What names a foreign run's cached index besides its content: the importers' version, and for an
    Inspect log the scorer its rewards are read from (another scorer, another index)."""
    return f"{VERSION}{inspect_log.cache_tag(Path(path))}"


def _first(path: Path) -> object:
    return next(iter_lines(path), None) if path.suffix == ".jsonl" else load_json(path)


def detect(path: str | Path) -> str:
    """The importer for `path` (`design-canvas`, `ownloop-gui`, `tool-planning`, `atif`, `inspect`,
    `tau2-bench` or `sessions`); TraceError otherwise."""
    path = Path(path)
    if path.is_file():
        if path.suffix == ".eval":
            return inspect_log.NAME
        if path.suffix == ".json" and tau2.sniff(path):  # before parsing: τ² results run to gigabytes
            return tau2.NAME
        first = _first(path) if path.suffix in (".jsonl", ".json") else None
        if tool_planning.is_planning(first):
            return tool_planning.NAME
        if path.suffix == ".jsonl" and sessions.kind_of(path):
            return sessions.NAME
        if atif.is_trajectory(first):
            return atif.NAME
        if inspect_log.is_json_log(first):
            return inspect_log.NAME
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
    if tau2.is_dir_run(path):
        return tau2.NAME
    if atif.is_atif_dir(path):
        return atif.NAME
    if sessions.is_sessions_dir(path):
        return sessions.NAME
    raise TraceError(
        f"{path}: no evalkit trace and no known rollout format (design-canvas, tool-planning, own-loop GUI, "
        "ATIF or Harbor job, Inspect log, τ²-bench results, agent sessions)"
    )


def read_foreign(path: str | Path) -> Iterator[dict]:
    """Episode dicts in the native EpisodeRecord shape from a run another harness wrote, oldest first."""
    path = Path(path)
    kind = detect(path)
    if kind == tool_planning.NAME and path.is_dir() and (path / "trace.jsonl").is_file():
        path = path / "trace.jsonl"
    yield from _READERS[kind](path)
