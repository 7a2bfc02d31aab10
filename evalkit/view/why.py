"""The "why" the viewer and the bundle show: what the scanners found over the runs on view, as tables of text.

The rows are a keyless scan of the episodes on view (`evalkit.scanners.scan`: ten rules, a few seconds for
10,000 episodes), with the rows of the judged scanners `evalkit scan --judge` kept beside each run (a judge
is never asked from here: that costs money). The numbers are `evalkit.analysis.why`'s, so the viewer, the
bundle, the report and `evalkit scan` say the same; this module only lays them out and finds, for an episode
a scanner fired on, the position of the step it points to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from evalkit.analysis import why as w
from evalkit.records import scans as store
from evalkit.view.text import clip as vs_clip
from evalkit.view.text import clip_columns

_S = pl.String


def scan_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per episode of `df` × scanner (`evalkit.scanners.engine.with_kept`)."""
    from evalkit.scanners.engine import with_kept

    return with_kept(df.drop("run_label", strict=False))


def labels_signature(runs: Sequence[str]) -> tuple:
    """What changes when a label is written: each run's labels file's size and time."""
    out = []
    for r in runs:
        p = store.labels_path(r)
        try:
            st = p.stat()
            out.append((r, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((r, 0, 0))
    return tuple(out)


def read_labels(runs: Sequence[str]) -> pl.DataFrame | None:
    """The labels kept for `runs` (each run's own file), or None when there are none, or when a file cannot
    be read (its rows are kept, and a label written now is appended after them)."""
    from evalkit.errors import ConfigError

    try:
        got = store.read_labels(list(runs))
    except ConfigError:
        return None
    return got if got.height else None


def shown(table: pl.DataFrame) -> pl.DataFrame:
    """A table of text as a page shows it: every cell and column name clipped (a model's name is a column of
    the rates; a hostile one may be megabytes), names kept apart where clipping made two alike."""
    names: list[str] = []
    for c in table.columns:
        name = vs_clip(c)
        while name in names:
            name += "\u200b"  # invisible: two models whose names clip alike stay two columns
        names.append(name)
    return clip_columns(table.rename(dict(zip(table.columns, names, strict=True))))


def rates_table(rates: pl.DataFrame) -> pl.DataFrame:
    return shown(w.rates_table(rates))


def differences_table(diffs: pl.DataFrame) -> pl.DataFrame:
    return shown(w.differences_table(diffs))


def fired(scans: pl.DataFrame, scanner: str, df: pl.DataFrame, quiet: bool = False) -> pl.DataFrame:
    """The episodes of `df` where `scanner` fired: run, key, model, task, surface, mode, repeat, the steps
    (turns) it points to and its evidence, by model then task. `quiet`: those where it answered and did not
    fire instead, in a random order fixed per scanner (what to label, a sample of them, for its recall)."""
    keep = df.select("run", "key")
    fired = pl.col("fired").fill_null(False) if not quiet else (pl.col("fired") == False)  # noqa: E712
    got = scans.filter((pl.col("scanner") == scanner) & fired)
    got = got.join(keep, on=["run", "key"], how="semi")
    cols = [c for c in ("run", "key", "model", "task_id", "surface", "mode", "repeat", "steps", "evidence")
            if c in got.columns]  # fmt: skip
    got = got.select(cols)
    if quiet:
        return got.sample(fraction=1.0, shuffle=True, seed=7)
    return got.sort(["model", "task_id"], nulls_last=True, maintain_order=True)


def step_position(turns: Sequence[int | None], indices: Sequence[int], turn: int | None) -> int | None:
    """The position among an episode's steps (`turns`: each step's turn number, None for the start and the
    end; `indices`: each step's index) of the step showing turn `turn`; by index where no turn says it."""
    if turn is None:
        return None
    for i, t in enumerate(turns):
        if t == turn:
            return i
    for i, x in enumerate(indices):
        if x == turn:
            return i
    return None


def label_of(labels: pl.DataFrame | None, run: str, key: str, scanner: str) -> bool | None:
    """The person's latest label of one episode for one scanner, or None."""
    if labels is None:
        return None
    got = labels.filter((pl.col("run") == run) & (pl.col("key") == key) & (pl.col("scanner") == scanner))
    return got.get_column("label")[-1] if got.height else None


def labels_file(run: str) -> Path:
    return store.labels_path(run)
