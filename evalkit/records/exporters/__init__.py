"""Runs written out in the trajectory formats of evalkit's neighbours, so their tools open them.

- `atif` — one ATIF trajectory per episode (Harbor's Agent Trajectory Interchange Format), in the layout of a
  Harbor job: a trial folder per episode with `agent/trajectory.json`, its images, and `result.json`;
- `inspect_log` — Inspect `.eval` logs (one per model × env × surface × mode × skin), a sample per episode;
- `hf` — a Hugging Face dataset folder: one Session Trace Simple Format file per episode (the Hub's trace
  viewer), the episodes as a Parquet table (`datasets.load_dataset`), a dataset card.

Neither format has a place for everything a record holds, so each episode also carries evalkit's outcome and
identity (`outcome`) under an `evalkit` key of the format's own free-form metadata (`extra` in ATIF,
`metadata` in Inspect, extra fields of a session file's lines): reading the output back
(`evalkit.records.importers`) gives the same keys, rewards,
turns and calls. What each format keeps and drops is in docs/run-directory.md.

`convert(run, to, out)` reads any run evalkit reads (native or imported) and never writes into it.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.types import EpisodeRecord

FORMATS = ("atif", "inspect", "hf")
MARK = "evalkit"
"""The key of evalkit's block in a format's free-form metadata; the importers look for it."""


@dataclass
class Converted:
    """What a conversion wrote."""

    episodes: int = 0
    paths: list[Path] = field(default_factory=list)
    """The files (Inspect logs) or the folder (an ATIF job) written."""
    images: int = 0


@functools.cache  # reading a distribution's metadata took a third of a conversion
def version() -> str:
    try:
        return importlib.metadata.version("evalkit")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "0+unknown"


def outcome(rec: EpisodeRecord) -> dict:
    """What neither format has a field for: the episode's identity (so the key comes back the same) and its
    outcome. `unscored` is evalkit's word for an episode whose reward must not be read (an infrastructure
    error, or no reward at all): never a reward of 0."""
    return {
        "format_version": rec.format_version,
        "key": rec.key,
        "model": rec.model,
        "env": rec.env,
        "surface": rec.surface,
        "mode": rec.mode,
        "split": rec.split,
        "task_id": rec.task_id,
        "evalset_task": rec.evalset_task,
        "tier": rec.tier,
        "difficulty_score": rec.difficulty_score,
        "skin": rec.skin,
        "coordinates": rec.coordinates,
        "repeat": rec.repeat,
        "episode_id": rec.episode_id,
        "prompt_version": rec.prompt_version,
        "reward": rec.reward,
        "grade": rec.grade,
        "end_reason": rec.end_reason,
        "error_class": rec.error_class,
        "error": rec.error,
        "unscored": not rec.scored,
        "auto_submitted": rec.auto_submitted,
        "usage": dict(rec.usage or {}),
        "cost_usd": rec.cost_usd,
        "seconds": rec.seconds,
        "model_seconds": rec.model_seconds,
        "env_seconds": rec.env_seconds,
        "started": rec.started,
        "final_doc": rec.final_doc,
        "info": rec.info or {},
    }


def convert(run: str | Path, to: str, out: str | Path, summary: str | None = None) -> Converted:
    """Write the episodes of `run` (each key once, its latest record) as `to` (`atif`, `inspect` or `hf`) at
    `out`: a folder for ATIF and for a Hugging Face dataset, a `.eval` file for Inspect (one file per model ×
    env × surface × mode × skin when the run holds several: `out` with that group's name added to its stem).
    `summary` (Markdown) goes into a Hugging Face dataset's card."""
    src, dst = Path(run).resolve(), Path(out).resolve()
    if dst == src or src in dst.parents:  # a run is only read: nothing is written into it
        raise ConfigError(f"convert: {out} is inside the run {run}; write the conversion elsewhere")
    if to == "atif":
        # start-up: a format's exporter loads when that format is written
        from evalkit.records.exporters import atif
        from evalkit.records.outputs import building

        # Built in a sibling folder and swapped in whole: a conversion cut short leaves no half a job.
        with building(out, "ATIF job") as tmp:
            done = atif.write(Path(run), tmp, home=Path(out))
        done.paths = [Path(out)]
        return done
    if to == "inspect":
        # start-up (as above)
        from evalkit.records.exporters import inspect_log

        return inspect_log.write(Path(run), Path(out))
    if to == "hf":
        # start-up (as above)
        from evalkit.records.exporters import hf

        return hf.write(Path(run), Path(out), summary)
    raise ConfigError(f"convert: unknown format {to!r} (known: {', '.join(FORMATS)})")
