"""How runs become Polars frames: one row per episode (`load_runs`), per model turn (`turns`), per tool call
(`calls`), with exactly the columns `evalkit.records.columns` declares.

A run is a native run directory or anything `evalkit.records.importers` reads; each key counts once, as its
latest record (`rundir.latest_records`). Episodes come from the run's cached index
(`evalkit.records.index_cache`); turns and calls from the records themselves. Grades from elsewhere
(`evalkit.records.grades`) fill in episodes a run holds no reward for. The statistics over these frames are in
`evalkit.analysis.stats`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.records import grades as grades_
from evalkit.records import importers, index_cache, jsonl, rundir
from evalkit.records.columns import (
    CALL_COLUMNS,
    EPISODE_COLUMNS,
    EPISODE_SCHEMA,
    TURN_COLUMNS,
    eager,
    frame,
    integer,
    number,
    text,
)
from evalkit.types import record_problems

log = logging.getLogger(__name__)


def load_runs(
    paths: str | Path | Iterable[str | Path],
    cache: bool | str = True,
    grades: str | Path | None = None,
    scorer: str | None = None,
) -> pl.DataFrame:
    """One row per episode of every run in `paths` (native run dirs or formats `evalkit.records.importers`
    reads), with exactly the columns of `EPISODE_COLUMNS`. A key recorded twice yields its latest record. A
    folder that is no run but holds runs (one per model, say) stands for each of them, said in one warning.
    `grades`, a JSON or CSV file of task_id → reward (see `evalkit.records.grades`), fills in the episodes the
    runs hold no reward for; a bad grades file raises ConfigError before anything is read, and grades that
    matched nothing are named in a warning. `cache`: True reads and writes each run's cached index, "read"
    only reads a current one, False neither. Malformed records (`evalkit.wellformed`) are left out, with one
    warning per run (`malformed` lists them). A frame from an earlier `load_runs`, eager or lazy, comes back
    as it is (collected). `scorer`: the scorer an Inspect log's rewards are read from, where a log has
    several (default: the environment variable EVALKIT_SCORER, else the log's first, said in a warning)."""
    if not isinstance(paths, str | os.PathLike | list | tuple):
        if isinstance(paths, pl.DataFrame | pl.LazyFrame) or "pandas" in type(paths).__module__:
            return eager(paths, "load_runs")
    table = grades_.read(grades) if grades is not None else None
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths, notes = rundir.expand_runs(paths)
    for note in notes:
        jsonl.warn_once(("folder of runs", note), note)
    frames = []
    for p in paths:
        run = Path(p)
        with importers.scoring(scorer):
            df, unreadable = index_cache.read(run, cache)
        df = _sound(run, df, unreadable)
        frames.append(
            df.with_columns(
                pl.lit(os.fspath(p), pl.Utf8).alias("run"),
                pl.lit(run.name or str(run), pl.Utf8).alias("run_name"),
            )
        )
    out = (
        pl.concat([f.select(list(EPISODE_COLUMNS)) for f in frames], how="vertical")
        if frames
        else EPISODE_SCHEMA.to_frame()
    )
    if table is not None:
        out, merged = grades_.merge(out, table, grades)
        log.log(logging.WARNING if merged.unused else logging.INFO, "%s", merged.line())
    return out


def _sound(run: Path, df: pl.DataFrame, unreadable: int) -> pl.DataFrame:
    """The index without its malformed records; what was left out is said once (see `jsonl.warn_once`)."""
    bad = df.filter(pl.col("problem").is_not_null())
    if unreadable:
        jsonl.warn_unreadable(run / rundir.TRACE, unreadable)
    if bad.height:
        first = bad["problem"][0]
        jsonl.warn_once(
            ("malformed", str(run), bad.height, first),
            f"{run}: {bad.height} malformed record(s) left out of the analysis (first: {first})",
        )
        df = df.filter(pl.col("problem").is_null())
    return df


def malformed(paths: str | Path | Iterable[str | Path]) -> pl.DataFrame:
    """The malformed records of runs that `load_runs` leaves out: run, byte offset (`rundir.read_at`), key,
    model, task and what is wrong (`problem`), so a viewer can list them and open each with its problems."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = rundir.expand_runs(paths)[0]
    cols = ["offset", "key", "model", "task_id", "problem"]
    frames = [
        index_cache.load(Path(p)).filter(pl.col("problem").is_not_null()).select(cols)
        .with_columns(pl.lit(os.fspath(p), pl.Utf8).alias("run"))
        for p in paths
    ]  # fmt: skip
    if not frames:
        return pl.DataFrame(schema={"run": pl.Utf8, **{c: index_cache.SCHEMA[c] for c in cols}})
    return pl.concat(frames).select(["run", *cols])


def _episodes(paths_or_df: Any) -> Iterator[tuple[str, dict]]:
    """(run, episode dict) for runs, or for exactly the episodes of a frame from `load_runs`."""
    if isinstance(paths_or_df, pl.LazyFrame) or "pandas" in type(paths_or_df).__module__:
        paths_or_df = eager(paths_or_df, "turns and calls")
    if isinstance(paths_or_df, pl.DataFrame):
        for (run,), sub in paths_or_df.group_by("run", maintain_order=True):
            keys = set(sub["key"].drop_nulls().to_list())
            for d in rundir.iter_dicts(run):
                if text(rundir.record_key(d)) in keys and not record_problems(d):
                    yield run, d
        return
    if isinstance(paths_or_df, str | os.PathLike):
        paths_or_df = [paths_or_df]
    for p in rundir.expand_runs(paths_or_df)[0]:
        for d in rundir.iter_dicts(p):
            if not record_problems(d):  # as load_runs, malformed records are left out
                yield os.fspath(p), d


def _head(run: str, d: dict) -> tuple:
    return (
        run,
        text(rundir.record_key(d)),  # as the index has it: a lone surrogate is "?"
        text(d.get("model")),
        text(d.get("env")),
        text(d.get("surface")),
        text(d.get("mode")),
        text(d.get("task_id")),
        text(d.get("tier")),
        integer(d.get("repeat")),
    )


def turns(paths_or_df: Any) -> pl.DataFrame:
    """One row per model turn (`TURN_COLUMNS`) of runs, or of the episodes in a `load_runs` frame."""
    rows = []
    for run, d in _episodes(paths_or_df):
        head = _head(run, d)
        for t in d.get("turns") or []:
            u = t.get("usage") or {}
            calls = t.get("calls") or []
            rows.append(
                head
                + (
                    integer(t.get("turn")),
                    text(t.get("provider")) or None,
                    text(t.get("route")) or None,
                    text(t.get("stop")),
                    text(t.get("text")) or "",
                    text(t.get("reasoning")) or "",
                    integer(u.get("input")),
                    integer(u.get("output")),
                    integer(u.get("reasoning_tokens")),
                    integer(u.get("reasoning_chars")),
                    number(t.get("model_s")),
                    number(t.get("env_s")),
                    text(t.get("frame")),
                    len(calls),
                    sum(1 for c in calls if not c.get("ok", True)),
                )
            )
    return frame(rows, TURN_COLUMNS)


def calls(paths_or_df: Any) -> pl.DataFrame:
    """One row per tool call (`CALL_COLUMNS`); `args` is JSON text."""
    rows = []
    for run, d in _episodes(paths_or_df):
        head = _head(run, d)
        for t in d.get("turns") or []:
            for n, c in enumerate(t.get("calls") or []):
                args = c.get("args")
                rows.append(
                    head
                    + (
                        integer(t.get("turn")),
                        n,
                        text(c.get("id")),
                        text(c.get("name")),
                        args if isinstance(args, str) else json.dumps(args, default=str),
                        bool(c.get("ok", True)),
                        bool(c.get("parse_error")),
                        text(c.get("result")) or "",
                        len(c.get("images") or []),
                    )
                )
    return frame(rows, CALL_COLUMNS)
