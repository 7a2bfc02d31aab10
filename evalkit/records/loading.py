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

from evalkit.errors import TraceError
from evalkit.records import grades as grades_
from evalkit.records import importers, index_cache, jsonl, rundir
from evalkit.records.columns import (
    CALL_COLUMNS,
    EPISODE_COLUMNS,
    EPISODE_SCHEMA,
    TURN_COLUMNS,
    config_label,
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
                pl.lit(config_label(_plan(run).get("env_config")), pl.Utf8).alias("env_config"),
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


def _plan(run: Path) -> dict:
    """A native run's run.json (what was asked), {} for a foreign run or one whose run.json is unreadable
    (its episodes still say what they are)."""
    if not run.is_dir() or not rundir.is_native(run):
        return {}
    try:
        meta = rundir.read_run_json(run)
    except TraceError:
        return {}
    return meta if isinstance(meta, dict) else {}


REWARD_PROBLEM = "reward is "
"""How `evalkit.wellformed` names a reward that is not a number (a string, NaN, true, an object, ...)."""


def _only_reward() -> pl.Expr:
    """A record whose one problem is its reward: counted as an episode with no score, not left out."""
    return pl.col("problem").str.starts_with(REWARD_PROBLEM) & ~pl.col("problem").str.contains("; ")


def _sound(run: Path, df: pl.DataFrame, unreadable: int) -> pl.DataFrame:
    """The index without its malformed records; what was left out is said once (see `jsonl.warn_once`).
    A record whose one problem is its reward (a string, NaN) is kept as an episode with no score: its
    reward NaN, counted in `nan_reward` and `no_reward` as docs/statistics.md says, in no mean."""
    only_reward = _only_reward()
    df = df.with_columns(
        pl.when(only_reward).then(float("nan")).otherwise(pl.col("reward")).alias("reward"),
        pl.when(only_reward).then(False).otherwise(pl.col("scored")).alias("scored"),
        pl.when(only_reward).then(None).otherwise(pl.col("problem")).alias("problem"),
    )
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
    model, task and what is wrong (`problem`), so a viewer can list them and open each with its problems. A
    record whose one problem is its reward is not among them: `load_runs` counts it (`nan_reward`)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = rundir.expand_runs(paths)[0]
    cols = ["offset", "key", "model", "task_id", "problem"]
    frames = [
        index_cache.load(Path(p)).filter(pl.col("problem").is_not_null() & ~_only_reward()).select(cols)
        .with_columns(pl.lit(os.fspath(p), pl.Utf8).alias("run"))
        for p in paths
    ]  # fmt: skip
    if not frames:
        return pl.DataFrame(schema={"run": pl.Utf8, **{c: index_cache.SCHEMA[c] for c in cols}})
    return pl.concat(frames).select(["run", *cols])


STATUS_SCHEMA = {
    "run": pl.Utf8, "run_name": pl.Utf8, "model": pl.Utf8, "planned": pl.Int64, "recorded": pl.Int64,
    "scored": pl.Int64, "unscored": pl.Int64, "no_reward": pl.Int64, "not_run": pl.Int64,
    "writing": pl.Boolean, "complete": pl.Boolean, "status": pl.Utf8,
}  # fmt: skip


def planned_episodes(meta: dict) -> dict[str, int]:
    """Episodes a run's run.json says were asked of each model: the latest invocation that named the model
    (a batch runs the same jobs for every model it is given: its `n_jobs` over its models). Empty where
    run.json records no plan (a run another harness wrote, an own-loop run)."""
    calls = [c for c in meta.get("invocations") or [] if isinstance(c, dict)]
    if not calls and "n_jobs" in meta:
        calls = [{"models": meta.get("models"), "n_jobs": meta.get("n_jobs")}]
    out: dict[str, int] = {}
    for call in calls:  # in order: a later invocation's plan replaces an earlier one's
        models, n = call.get("models"), call.get("n_jobs")
        if isinstance(models, list) and models and isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            out |= dict.fromkeys((str(m) for m in models), n // len(models))
    return out


def run_status(runs: Any) -> pl.DataFrame:
    """Planned, recorded and unscored episodes per run and model, and a line saying whether each is
    complete: "incomplete: 17 of 20 episodes not run — rerun the same command to resume". `runs` is what
    `load_runs` takes, or a frame it returned (counted as it is: every model the run's plan names appears,
    with 0 recorded where the frame has none of its episodes). `planned` is null where the run recorded no
    plan (a foreign run); `writing` says a writer holds the run now (its episodes are still coming)."""
    df = load_runs(runs) if not isinstance(runs, pl.DataFrame | pl.LazyFrame) else eager(runs, "run_status")
    rows = []
    for run in df["run"].drop_nulls().unique(maintain_order=True).to_list() if df.height else []:
        sub = df.filter(pl.col("run") == run)
        path = Path(run)
        plan = planned_episodes(_plan(path))
        counts = {
            m: (g.height, int(g["scored"].sum()), int(g["error_class"].is_not_null().sum()))
            for (m,), g in sub.group_by("model", maintain_order=True)
        }
        writing = path.is_dir() and _writing(path)
        for model in [*plan, *(m for m in counts if m not in plan)]:
            n, scored, unscored = counts.get(model, (0, 0, 0))
            planned = plan.get(model)
            not_run = None if planned is None else max(0, planned - n)
            complete = None if planned is None else not_run == 0
            row = (run, sub["run_name"][0], model, planned, n, scored, unscored, n - scored - unscored,
                   not_run, writing, complete)  # fmt: skip
            rows.append((*row, status_line(planned, n, unscored, writing)))
    return pl.DataFrame(rows, schema=STATUS_SCHEMA, orient="row")


def _writing(run: Path) -> bool:
    from evalkit.records import lock

    return lock.writing(run)


def status_line(planned: int | None, recorded: int, unscored: int, writing: bool = False) -> str:
    """What a reader says of one model's episodes in a run beside its numbers (`run_status`)."""
    if planned is None:
        return f"{recorded} episode(s); no plan recorded, so whether any are missing is unknown"
    missing = max(0, planned - recorded)
    if writing:
        return f"being written: {recorded} of {planned} episodes so far"
    if missing:
        also = f" and {unscored} unscored" if unscored else ""
        return (f"incomplete: {missing} of {planned} episodes not run{also} — rerun the same command to "
                "resume")  # fmt: skip
    if unscored:
        return (f"{unscored} of {planned} episodes unscored (infrastructure errors) — rerun the same command "
                "to retry them")  # fmt: skip
    return f"complete: {recorded} of {planned} episodes recorded"


def incomplete_lines(status: pl.DataFrame) -> list[str]:
    """One line per run and model whose planned episodes are not all there (`run_status`): what every reader
    prints above its numbers. Empty when every planned episode was recorded (unscored ones are said where
    the numbers are: they are recorded, and counted apart)."""
    out = []
    for r in status.iter_rows(named=True):
        if r["writing"] or r["not_run"]:
            out.append(f"{r['run_name']} · {r['model']}: {r['status']}")
    return out


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
