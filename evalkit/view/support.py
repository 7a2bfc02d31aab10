"""The trace viewer's logic, kept out of Streamlit so it can be tested as plain functions.

`viewer/` draws; this module decides which runs to show, the episode table (from
`evalkit.analysis.load_runs` and its cached index), filters, and how an episode splits into steps. Its
neighbours in `evalkit.view` hold the rest, and their names are re-exported here: search (`text_search`,
the `search` module), A vs B (`pairs`), trace text shown safely (`text`), deep links (`links`), serving
(`serve`); a running batch is `live`. It reads runs only through `evalkit.records` and `evalkit.analysis`.
"""

from __future__ import annotations

import functools
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from evalkit import analysis
from evalkit.analysis.tables import MEAN_METHODS, METHODS, PAIRED_METHODS, ci_column, reward_text
from evalkit.errors import TraceError
from evalkit.records import rundir, settings, viewer_marks
from evalkit.types import EpisodeRecord, TurnRecord
from evalkit.view import lazy
from evalkit.view import search as text_search
from evalkit.view.links import VIEW_SLUGS, VIEWS, DeepLink, make_link, parse_link, resolve_run
from evalkit.view.pairs import (
    COMPARE_NAMES,
    PAIR_SEP,
    ab_difference,
    ab_table,
    ab_tasks,
    best_opponent,
    difference_line,
    flipped,
    matching_episode,
    pair_columns,
    pair_id,
    pair_label,
    pair_rows,
    paired_table,
    ranked_sides,
    side_label,
    side_rows,
    sides,
)
from evalkit.view.serve import APP_PATH, app_command, running_app
from evalkit.view.text import (
    CELL_LIMIT,
    LABEL_COLUMNS,
    NONE_LABEL,
    TEXT_LIMIT,
    as_json,
    call_line,
    clip,
    clip_columns,
    field_rows,
    md_escape,
    page_of,
    pruned_note,
    short_id,
)

# The columns the viewer relies on, whatever else the analysis frame holds.
TABLE_COLUMNS: dict[str, Any] = {
    "run": pl.String,
    "offset": pl.Int64,
    "key": pl.String,
    "model": pl.String,
    "env": pl.String,
    "surface": pl.String,
    "mode": pl.String,
    "task_id": pl.String,
    "skin": pl.String,
    "tier": pl.String,
    "repeat": pl.Int64,
    "reward": pl.Float64,
    "end_reason": pl.String,
    "error_class": pl.String,
    "n_turns": pl.Int64,
    "tool_calls": pl.Int64,
    "cost_usd": pl.Float64,
    "seconds": pl.Float64,
}
DISPLAY_COLUMNS = [
    "model",
    "surface",
    "mode",
    "task_id",
    "tier",
    "reward",
    "end_reason",
    "error_class",
    "n_turns",
    "cost_usd",
    "run_label",
]
FILTER_COLUMNS = {
    "model": "Model",
    "surface": "Surface",
    "mode": "Mode",
    "task_id": "Task",
    "tier": "Tier",
    "end_reason": "End reason",
    "error_class": "Error class",
}
OPTIONAL_COLUMNS = ("surface", "mode", "tier", "error_class", "cost_usd", "run_label")
"""Columns of the episode table left out when they hold one value (or none) for every episode shown."""
IMAGE_LIMIT = 40 * 1024 * 1024


# ------------------------------------------------------------------------------------------------ runs


def has_trace(path: Path) -> bool:
    return (path / rundir.TRACE).is_file()


def discover_runs(
    argv: Sequence[str] = (), environ: Mapping[str, str] | None = None, cwd: str | Path = "."
) -> list[Path]:
    """Run directories to offer: script arguments, else `EVALKIT_RUNS` (os.pathsep-separated), else the
    subfolders of `./runs/` that hold a trace. Explicit paths are kept even without a `trace.jsonl`, since
    runs of other harnesses have their own layout; a folder that holds runs stands for each of them."""
    environ = os.environ if environ is None else environ
    named = [a for a in argv if a and not a.startswith("-")]
    if not named and environ.get("EVALKIT_RUNS"):
        named = [p for p in environ["EVALKIT_RUNS"].split(os.pathsep) if p.strip()]
    if named:
        out = [Path(cwd, p).resolve() for p in named]
        found = rundir.expand_runs([p for p in out if p.exists()])[0]  # a folder of runs: each run in it
        return list(dict.fromkeys(Path(p) for p in found))
    root = Path(cwd, "runs")
    if not root.is_dir():
        return []
    return sorted(p.resolve() for p in root.iterdir() if p.is_dir() and has_trace(p))


def run_labels(runs: Sequence[str | Path]) -> dict[str, str]:
    """Short unique names for runs: the folder name, with more of the path only where names collide."""
    paths = [Path(r) for r in runs]
    labels: dict[str, str] = {}
    for depth in range(1, 64):
        cand = {str(p): "/".join(p.parts[-depth:]) for p in paths}
        counts: dict[str, int] = {}
        for v in cand.values():
            counts[v] = counts.get(v, 0) + 1
        for k, v in cand.items():
            if k not in labels and counts[v] == 1:
                labels[k] = v
        if len(labels) == len(paths):
            break
    for p in paths:
        labels.setdefault(str(p), str(p))
    return labels


# ----------------------------------------------------------------------------------------------- table


def _conform(df: pl.DataFrame, run: str) -> pl.DataFrame:
    """Add any missing viewer column as nulls and cast the ones present, so runs of any origin concatenate.
    A record without a key (`rundir.record_key`) is named by its offset, as `text_index` names it."""
    exprs = []
    for name, dtype in TABLE_COLUMNS.items():
        if name == "run":
            exprs.append(pl.lit(run, pl.String).alias("run"))
        elif name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype).alias(name))
    df = df.with_columns(exprs)
    return df.with_columns(pl.coalesce("key", pl.format("#{}", "offset")).alias("key"))


_TEXT_COLUMNS = [k for k, t in TABLE_COLUMNS.items() if t == pl.String and k != "run"]


def episode_table(run: str | Path) -> pl.DataFrame:
    """One row per episode of one run: the analysis frame (cached Parquet index) with the viewer's columns
    guaranteed."""
    return _conform(analysis.load_runs([str(run)]), str(run))


def incomplete_lines(df: pl.DataFrame) -> list[str]:
    """What the viewer and the bundle say above a run's numbers when it lacks planned or scored episodes
    ("incomplete: 17 of 20 episodes not run — rerun the same command to resume"): `loading.run_status` of
    the runs' whole tables (never of a filtered view, which would read as missing episodes)."""
    from evalkit.records.loading import incomplete_lines as said
    from evalkit.records.loading import run_status

    if df.is_empty() or not {"run", "model", "error_class"} <= set(df.columns):
        return []
    if "run_name" not in df.columns:
        df = df.with_columns(pl.col("run").str.split("/").list.last().alias("run_name"))
    if "scored" not in df.columns:
        scored = pl.col("error_class").is_null() & pl.col("reward").is_not_null()
        df = df.with_columns(scored.alias("scored"))
    return said(run_status(df))


def concat_tables(tables: Iterable[pl.DataFrame]) -> pl.DataFrame:
    tables = [t for t in tables if t is not None]
    if not tables:
        return pl.DataFrame(schema=TABLE_COLUMNS)
    return pl.concat(tables, how="diagonal_relaxed")


def with_labels(df: pl.DataFrame, labels: Mapping[str, str]) -> pl.DataFrame:
    return df.with_columns(
        pl.col("run").replace_strict(dict(labels), default=pl.col("run")).alias("run_label")
    )


# --------------------------------------------------------------------------------------------- filters


@dataclass
class Filters:
    """What the sidebar asks for; an empty list means no restriction."""

    include: dict[str, list[str]] = field(default_factory=dict)
    reward: tuple[float, float] | None = None
    unscored: bool = True
    """Keep episodes without a reward (infrastructure errors) when a reward range is set."""
    search: str = ""


def options(df: pl.DataFrame, column: str) -> list[str]:
    if column not in df.columns or df.is_empty():
        return []
    vals = df.get_column(column).cast(pl.String).fill_null(NONE_LABEL).unique().sort()
    return vals.to_list()


def apply_filters(df: pl.DataFrame, f: Filters, hits: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows of `df` that pass `f`; `hits` (columns run, key) restricts to text-search matches."""
    out = df
    for col, wanted in f.include.items():
        if wanted and col in out.columns:
            out = out.filter(pl.col(col).cast(pl.String).fill_null(NONE_LABEL).is_in(list(wanted)))
    if f.reward is not None:
        lo, hi = f.reward
        inside = pl.col("reward").is_between(lo, hi)
        out = out.filter(inside | pl.col("reward").is_null() if f.unscored else inside.fill_null(False))
    if hits is not None:
        out = out.join(hits.select("run", "key"), on=["run", "key"], how="semi")
    return out


def varying_columns(
    df: pl.DataFrame, columns: Sequence[str], optional: Sequence[str] = OPTIONAL_COLUMNS
) -> list[str]:
    """`columns` without the `optional` ones that tell no row of `df` apart (so a table fits 1280 px)."""
    if df.height < 2:
        return list(columns)
    same = {c for c in optional if c in df.columns and df.get_column(c).n_unique() <= 1}
    return [c for c in columns if c not in same]


def fingerprint(df: pl.DataFrame) -> tuple[int, int]:
    """Which episodes `df` holds, in a few bytes: a key for what is computed from a filtered table."""
    if df.is_empty():
        return (0, 0)
    h = df.select(pl.concat_str("run", "key").hash().sum()).item()
    return (df.height, int(h))


def sort_table(df: pl.DataFrame, by: str | None, descending: bool = False) -> pl.DataFrame:
    if not by or by not in df.columns:
        return df
    return df.sort(by, descending=descending, nulls_last=True, maintain_order=True)


def summary_rows(df: pl.DataFrame, pool: bool = False) -> tuple[pl.DataFrame, str]:
    """`df` with `model` naming what one row of a summary is, and a sentence saying so. By default one row is
    one model in one run: a model in several runs reads `model · run`. Pooled, a model's runs are one row
    when their settings that change an episode (`evalkit.records.settings`) agree, and apart, as
    `model · max_turns 12`, where they do not."""
    if df.is_empty() or "run" not in df.columns:
        return df, ""
    runs = df.get_column("run").unique(maintain_order=True).to_list()
    if len(runs) < 2:
        return df, ""
    per = df.group_by("model").agg(pl.col("run").n_unique().alias("n")).filter(pl.col("n") > 1)
    shared = sorted(str(m) for m in per.get_column("model").to_list())
    if not shared:
        return df, ""
    many = pl.col("model").is_in(shared)
    named = ", ".join(clip(m, 60) for m in shared[:3]) + (" and others" if len(shared) > 3 else "")
    if not pool:
        side = pl.concat_str([pl.col("model"), pl.lit(" · "), pl.col("run_label")])
        said = (f"One row per model and run: {named} ran in several runs, each its own row. Pool runs to "
                "make the runs of a model with the same settings one row.")  # fmt: skip
        return df.with_columns(pl.when(many).then(side).otherwise(pl.col("model")).alias("model")), said
    labels = settings.differences({r: settings.outcome_settings(r) for r in runs})
    setting = pl.col("run").replace_strict(labels, default="", return_dtype=pl.String)
    side = pl.concat_str([pl.col("model"), pl.lit(" · "), setting])
    apart = df.filter(many).group_by("model").agg(setting.n_unique().alias("n")).filter(pl.col("n") > 1)
    split = set(apart.get_column("model").to_list())
    said = f"Pooled: the runs of {named} are one row where their settings agree"
    said += (", apart where they differ (" + "; ".join(sorted({v for v in labels.values() if v})) + ")."
             if split else ".")  # fmt: skip
    model = pl.when(pl.col("model").is_in(list(split))).then(side).otherwise(pl.col("model"))
    return df.with_columns(model.alias("model")), said


# ---------------------------------------------------------------------------------------------- search


def text_index(run: str | Path) -> pl.DataFrame:
    """(run, key, step, text) for every step of every episode of `run` (`evalkit.view.search`), read in one
    pass so that a search is a scan of memory, not of the trace."""
    return text_search.step_index(run, imported_records)


search = text_search.search


# -------------------------------------------------------------------------------------------- episodes


@functools.lru_cache(maxsize=8)
def _imported(run: str, signature: tuple[int, int]) -> dict[str, dict]:
    return {rundir.record_key(d) or f"#{i}": d for i, d in enumerate(rundir.iter_dicts(run))}


def imported_records(run: str | Path, signature: tuple[int, int] | None = None) -> dict[str, dict]:
    """Episode dicts of a run written by another harness, by key. Imported runs have no byte offsets, and
    importing can mean reading every episode folder, so this happens once per run and signature
    (`rundir.trace_signature`, computed here unless given): opening another episode then reads nothing."""
    return _imported(str(run), tuple(signature or rundir.trace_signature(run)))


def open_record(
    run: str | Path, key: str, offset: int | None = None, signature: tuple[int, int] | None = None
) -> EpisodeRecord:
    """One episode: by byte offset when the index has it (one line read, its turns decoded as they are asked
    for: `evalkit.view.lazy`), else by key: from the cached import of a foreign run (`signature` as in
    `imported_records`), or one pass over a native trace."""
    if offset is not None and not (isinstance(offset, float) and math.isnan(offset)):
        rec = lazy.read_at(run, int(offset))
        if not key or rec.key == key or key.startswith("#"):
            return rec
    if rundir.is_native(run):
        return rundir.find_record(run, key)
    d = imported_records(run, signature).get(key)
    if d is None:
        raise TraceError(f"{run}: no episode with key {key!r}")
    return EpisodeRecord.from_dict(d)


@dataclass
class Step:
    """One position of the step slider: 0 is the start (the first frame, no model output), n is turn n, and
    an episode that acts on screens ends with one more position, the screen its last action left.

    `frame` is the picture shown at the step: for an agent that acts on screenshots
    (`viewer_marks.acts_on_screens`) the screen the turn's actions were taken on, with them drawn (`marked`);
    otherwise the frame after the turn, what its calls made."""

    index: int
    frame: str | None
    turn: TurnRecord | None = None
    marked: bool = False
    end: bool = False

    @property
    def caption(self) -> str:
        if self.end:
            return "After the last step"
        if self.index == 0:
            return "Start"
        return f"Step {self.index}: the screen it acted on" if self.marked else f"After step {self.index}"


def steps_of(rec: EpisodeRecord) -> list[Step]:
    steps = [Step(0, rec.frame0)]
    if not viewer_marks.acts_on_screens(rec):
        return steps + [Step(i, t.frame, t) for i, t in enumerate(rec.turns, 1)]
    steps += [Step(i, viewer_marks.acted_on(rec, i), t, marked=True) for i, t in enumerate(rec.turns, 1)]
    last = (rec.turns[-1].frame if rec.turns else None) or rec.render
    if rec.turns and last:
        steps.append(Step(len(rec.turns) + 1, last, end=True))
    return steps


def first_step(steps: Sequence[Step]) -> int:
    """Where an episode opens: the first step the model acted in that has a picture, else the first it acted
    in, else the start."""
    for want in (lambda s: s.turn is not None and s.frame, lambda s: s.turn is not None):
        found = next((i for i, s in enumerate(steps) if want(s)), None)
        if found is not None:
            return found
    return 0


def has_pictures(rec: EpisodeRecord) -> bool:
    """Whether an episode has any picture to show (a text env such as berth has none)."""
    return bool(rec.target or rec.frame0 or rec.render or any(t.frame for t in rec.turns))


def align_steps(a: EpisodeRecord, b: EpisodeRecord) -> list[tuple[Step | None, Step | None]]:
    """Steps of two episodes paired by index (turn n with turn n), the shorter padded with None."""
    sa = {s.index: s for s in steps_of(a)}
    sb = {s.index: s for s in steps_of(b)}
    return [(sa.get(i), sb.get(i)) for i in sorted(set(sa) | set(sb))]


def filmstrip(n_steps: int, current: int, size: int = 12) -> range:
    """The step positions a filmstrip of `size` thumbnails shows: the page of `size` steps holding
    `current` (the last page ends at the last step). Pages, not a window centred on the step: stepping
    within a page changes no thumbnail, so the browser redraws none."""
    size = max(1, size)
    if n_steps <= size:
        return range(n_steps)
    start = min(current // size * size, n_steps - size)
    return range(start, start + size)


def thumbnail(path: Path, width: int = 160) -> bytes | None:
    """A small JPEG of the image at `path` (for filmstrips), or None when it cannot be read."""
    # start-up: Pillow only for a picture's size
    from PIL import Image as PILImage

    try:
        with PILImage.open(path) as img:
            img.thumbnail((width, width * 4))
            buf = io.BytesIO()
            img.convert("RGB").save(buf, "JPEG", quality=80)
            return buf.getvalue()
    except Exception:  # a corrupt or non-image file inside the run is shown as missing, never fatal
        return None


def is_ownloop(rec: EpisodeRecord) -> bool:
    """An imported episode of an own-loop GUI agent: each step is a screenshot, a raw output, an action."""
    info = rec.info if isinstance(rec.info, dict) else {}
    marks = " ".join(str(info.get(k, "")) for k in ("format", "importer", "source", "harness", "kind"))
    return "ownloop" in marks.replace("-", "").replace("_", "").lower() or rec.env == "ownloop"


_SAFE: dict[tuple[str, str], Path] = {}
"""Pictures found safe, by (run, path): resolving a path and its symlinks took a fifth of a step's time, and
a run's frames are named by their content, never rewritten. A picture refused is checked again next time."""


def safe_image(run: str | Path, rel: Any) -> Path | None:
    """The image `rel` inside `run`, or None when absent, outside the run, or too large to show."""
    if not isinstance(rel, str):
        return None
    key = (str(run), rel)
    found = _SAFE.get(key)
    if found is None:
        found = _check_image(key[0], rel)
        if found is not None:
            if len(_SAFE) >= 100_000:
                _SAFE.clear()
            _SAFE[key] = found
    return found


def _check_image(run: str, rel: str) -> Path | None:
    path = rundir.safe_path(run, rel)
    if path is None:
        return None
    try:
        if path.stat().st_size > IMAGE_LIMIT:
            return None
    except OSError:
        return None
    return path


__all__ = [
    "APP_PATH", "CELL_LIMIT", "COMPARE_NAMES", "DISPLAY_COLUMNS", "DeepLink", "FILTER_COLUMNS", "Filters",
    "LABEL_COLUMNS", "MEAN_METHODS", "METHODS", "NONE_LABEL",
    "PAIRED_METHODS", "PAIR_SEP", "Step", "TABLE_COLUMNS",
    "TEXT_LIMIT", "TraceError", "VIEWS", "VIEW_SLUGS", "ab_difference", "ab_table", "ab_tasks",
    "align_steps", "analysis", "app_command", "apply_filters", "as_json", "best_opponent", "call_line",
    "ci_column", "clip", "clip_columns", "concat_tables", "difference_line", "discover_runs",
    "incomplete_lines", "episode_table", "field_rows", "filmstrip", "fingerprint", "first_step", "flipped",
    "has_pictures",
    "imported_records", "is_ownloop", "make_link", "matching_episode", "md_escape", "open_record", "options",
    "page_of", "pair_columns", "pair_id", "pair_label", "pair_rows", "paired_table", "parse_link",
    "pruned_note", "ranked_sides", "resolve_run", "reward_text", "run_labels", "running_app", "safe_image",
    "search", "short_id", "side_label", "side_rows", "sides", "sort_table", "steps_of", "summary_rows",
    "text_index", "text_search", "thumbnail", "varying_columns", "with_labels",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    # The statistics' constants, loaded on first use: `evalkit.analysis.stats` brings NumPy and the
    # intervals (0.1-0.4 s of a first page's imports here), and the Episodes table needs neither.
    if name in ("MIN_TASKS", "PAIR_KEYS"):
        return getattr(analysis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
