"""A batch that is still running, as the viewer reads it: finished episodes from the trace (appended as each
ends), running ones from the progress files the batch keeps, one per process, in
`<run>/.live/<pid>@<host>.json` (`evalkit.records.live` writes them: for each running episode its model, task,
turn, newest frame, the newest turn's text and calls; with the pid and host of the batch; rewritten at most
once a second, an episode leaving it once its record is in the trace).

A progress file is read as data, never trusted: a field of the wrong type reads as missing, a torn or
foreign file is skipped, a frame path outside the run is dropped. A file whose batch is gone (its process
on this host no longer exists, or, from another host, no change for `STALE_S`) is not a running episode.
"""

from __future__ import annotations

import time
from pathlib import Path

from evalkit.records import rundir
from evalkit.records.live import LIVE_DIR, MAX_SHOWN, STALE_S, files, running
from evalkit.records.live import LiveEpisode as Running

__all__ = ["ACTIVE_S", "LIVE_DIR", "MAX_SHOWN", "STALE_S", "Running", "active", "running"]

ACTIVE_S = 600.0
"""A run whose trace changed this recently is polled often even with no progress file (between episodes)."""


def active(run: str | Path, now: float | None = None) -> bool:
    """Whether `run` looks like a batch in progress: a progress file, or a trace that changed lately."""
    now = time.time() if now is None else now
    if files(run):
        return True
    try:
        return now - (Path(run) / rundir.TRACE).stat().st_mtime < ACTIVE_S
    except OSError:
        return False
