"""The trace viewer's logic, kept out of Streamlit so it can be tested as plain functions.

`viewer/app.py` draws; this module decides: which runs to show, the episode table (from
`evalkit.analysis.load_runs` and its cached index, or a small fallback built from `evalkit.traces`),
filters and text search, how an episode splits into steps, A-vs-B pairing, truncation of huge fields, deep
links and the escaping of trace text for the few Streamlit elements that interpret Markdown. It reads runs
only through `evalkit.traces` and `evalkit.analysis`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from evalkit import analysis, traces, viewer_search
from evalkit.analysis import PAIR_KEYS
from evalkit.browser import CHROMIUM_ARGS, chromium_executable
from evalkit.errors import TraceError
from evalkit.types import EpisodeRecord, TurnRecord
from evalkit.viewer_serve import APP_PATH, app_command, running_app

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
NONE_LABEL = "(none)"

TEXT_LIMIT = 20_000
"""Characters of one field shown at once; longer fields are paged (a 10 MB field would stall the browser)."""
CELL_LIMIT = 200
"""Characters of a table cell, header or label; longer values are cut with an ellipsis."""
IMAGE_LIMIT = 40 * 1024 * 1024


# ------------------------------------------------------------------------------------------------ runs


def has_trace(path: Path) -> bool:
    return (path / traces.TRACE).is_file()


def discover_runs(
    argv: Sequence[str] = (), environ: Mapping[str, str] | None = None, cwd: str | Path = "."
) -> list[Path]:
    """Run directories to offer: script arguments, else `EVALKIT_RUNS` (os.pathsep-separated), else the
    subfolders of `./runs/` that hold a trace. Explicit paths are kept even without a `trace.jsonl`, since
    runs of other harnesses have their own layout."""
    environ = os.environ if environ is None else environ
    named = [a for a in argv if a and not a.startswith("-")]
    if not named and environ.get("EVALKIT_RUNS"):
        named = [p for p in environ["EVALKIT_RUNS"].split(os.pathsep) if p.strip()]
    if named:
        out = [Path(cwd, p).resolve() for p in named]
        return list(dict.fromkeys(p for p in out if p.exists()))
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
    A record without a key (`traces.record_key`) is named by its offset, as `text_index` names it."""
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


# ---------------------------------------------------------------------------------------------- search


def text_index(run: str | Path) -> pl.DataFrame:
    """(run, key, step, text) for every step of every episode of `run` (`evalkit.viewer_search`), read in one
    pass so that a search is a scan of memory, not of the trace."""
    return viewer_search.step_index(run, imported_records)


search = viewer_search.search


# -------------------------------------------------------------------------------------------- episodes


@functools.lru_cache(maxsize=8)
def _imported(run: str, signature: tuple[int, int]) -> dict[str, dict]:
    return {traces.record_key(d) or f"#{i}": d for i, d in enumerate(traces.iter_dicts(run))}


def imported_records(run: str | Path, signature: tuple[int, int] | None = None) -> dict[str, dict]:
    """Episode dicts of a run written by another harness, by key. Imported runs have no byte offsets, and
    importing can mean reading every episode folder, so this happens once per run and signature
    (`traces.trace_signature`, computed here unless given): opening another episode then reads nothing."""
    return _imported(str(run), tuple(signature or traces.trace_signature(run)))


def open_record(
    run: str | Path, key: str, offset: int | None = None, signature: tuple[int, int] | None = None
) -> EpisodeRecord:
    """One episode: by byte offset when the index has it (one line read), else by key: from the cached import
    of a foreign run (`signature` as in `imported_records`), or one pass over a native trace."""
    if offset is not None and not (isinstance(offset, float) and math.isnan(offset)):
        rec = traces.read_at(run, int(offset))
        if not key or rec.key == key or key.startswith("#"):
            return rec
    if traces.is_native(run):
        return traces.find_record(run, key)
    d = imported_records(run, signature).get(key)
    if d is None:
        raise TraceError(f"{run}: no episode with key {key!r}")
    return EpisodeRecord.from_dict(d)


@dataclass
class Step:
    """One position of the step slider: 0 is the start (the first frame, no model output), n is turn n."""

    index: int
    frame: str | None
    turn: TurnRecord | None = None


def steps_of(rec: EpisodeRecord) -> list[Step]:
    steps = [Step(0, rec.frame0)]
    for i, t in enumerate(rec.turns, 1):
        steps.append(Step(i, t.frame, t))
    return steps


def align_steps(a: EpisodeRecord, b: EpisodeRecord) -> list[tuple[Step | None, Step | None]]:
    """Steps of two episodes paired by index (turn n with turn n), the shorter padded with None."""
    sa = {s.index: s for s in steps_of(a)}
    sb = {s.index: s for s in steps_of(b)}
    return [(sa.get(i), sb.get(i)) for i in sorted(set(sa) | set(sb))]


def filmstrip(n_steps: int, current: int, size: int = 12) -> range:
    """The step positions a filmstrip of `size` thumbnails shows: a window around `current`, kept inside
    the episode (all of them when the episode has no more)."""
    size = max(1, size)
    if n_steps <= size:
        return range(n_steps)
    start = min(max(current - size // 2, 0), n_steps - size)
    return range(start, start + size)


def _one_line(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return " ".join(text[: 4 * CELL_LIMIT].split())


def call_line(name: Any, args: Any, result: Any, limit: int = 110) -> str:
    """A tool call on one line, `name(args…) → result…`, each part cut to fit `limit` characters."""
    head = clip(name or "?", 60)
    a = _one_line(args if args not in (None, {}) else "")
    if a.startswith("{") and a.endswith("}"):
        a = a[1:-1]  # name(x: 1, y: 2) reads as a call
    r = _one_line(result or "")
    room = max(10, limit - len(head) - 6)
    a = clip(a, max(8, room // 2) if r else room)
    line = f"{head}({a})"
    return line + (f" → {clip(r, max(8, limit - len(line) - 3))}" if r else "")


def pruned_note(image: Mapping[str, Any]) -> str:
    """What a transcript image's `pruned` mark means, with the turn it was pruned at when known."""
    at = image.get("pruned_at")
    if isinstance(at, int) and not isinstance(at, bool):
        return f"pruned: the requests from turn {at} on no longer carried it"
    return "pruned: a later request no longer carried it"


def thumbnail(path: Path, width: int = 160) -> bytes | None:
    """A small JPEG of the image at `path` (for filmstrips), or None when it cannot be read."""
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


def clip(value: Any, limit: int = CELL_LIMIT) -> str:
    """`value` as text of at most `limit` characters, cut with an ellipsis: for cells, labels and headers."""
    s = "" if value is None else str(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


LABEL_COLUMNS = (
    "model",
    "env",
    "surface",
    "mode",
    "task_id",
    "skin",
    "tier",
    "end_reason",
    "error_class",
    "run_name",
    "run_label",
)
"""The text columns of the episode frame that name things (and end up in table cells and chart legends)."""


def clip_columns(
    df: pl.DataFrame, limit: int = CELL_LIMIT, columns: Iterable[str] | None = None
) -> pl.DataFrame:
    """The text columns of `df` (or just `columns`) with cells cut to `limit` characters (ellipsis), before
    they go to the browser: a 10 MB model name or task id in a trace must not travel with every table."""
    wanted = None if columns is None else set(columns)
    exprs = [
        pl.when(pl.col(c).str.len_chars() > limit)
        .then(pl.col(c).str.slice(0, limit - 1) + "…")
        .otherwise(pl.col(c))
        .alias(c)
        for c, dtype in df.schema.items()
        if dtype == pl.String and (wanted is None or c in wanted)
    ]
    return df.with_columns(exprs) if exprs else df


def short_id(value: Any) -> str:
    """A short stable id for trace text used in widget keys (which the browser receives)."""
    return hashlib.sha256(str(value).encode("utf-8", "replace")).hexdigest()[:12]


def field_rows(values: Any, limit: int = CELL_LIMIT) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """A grade or usage dict as (name, value) rows of text, each cell clipped to `limit`; and (name, whole
    text) of every value that was clipped, for the page-by-page view of long fields."""
    if not isinstance(values, dict):
        return [], []
    rows, long = [], []
    for k, v in values.items():
        if isinstance(v, float):
            s = f"{v:.4g}"
        elif isinstance(v, (dict, list)):
            s = json.dumps(v, default=str, ensure_ascii=False)
        else:
            s = str(v)
        rows.append({"name": clip(k, limit), "value": clip(s, limit)})
        if len(s) > limit:
            long.append((clip(k, 60), s))
    return rows, long


def as_json(value: Any) -> str:
    """Tool arguments as indented JSON; a string that did not parse is shown as it came."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def page_of(text: str, page: int, size: int = TEXT_LIMIT) -> tuple[str, int]:
    """(the `page`-th chunk of `text`, number of pages)."""
    n = max(1, math.ceil(len(text) / size))
    page = min(max(page, 0), n - 1)
    return text[page * size : (page + 1) * size], n


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^&\"'])")


def md_escape(s: Any, limit: int = 200) -> str:
    """Trace text safe for a label that Streamlit reads as Markdown: every punctuation character escaped, so
    no link, image (a fetch to a foreign host), directive or HTML can come of it; newlines flattened."""
    s = str(s)
    if len(s) > limit:
        s = s[:limit] + "…"
    return _MD_SPECIAL.sub(r"\\\1", s.replace("\n", " ").replace("\r", " "))


def safe_image(run: str | Path, rel: Any) -> Path | None:
    """The image `rel` inside `run`, or None when absent, outside the run, or too large to show."""
    if not isinstance(rel, str):
        return None
    path = traces.safe_path(run, rel)
    if path is None:
        return None
    try:
        if path.stat().st_size > IMAGE_LIMIT:
            return None
    except OSError:
        return None
    return path


# ---------------------------------------------------------------------------------------------- A vs B


def side_label(model: Any, run_label: Any) -> str:
    return f"{model} · {run_label}"


def _side() -> pl.Expr:
    return pl.concat_str([pl.col("model").fill_null(NONE_LABEL), pl.lit(" · "), pl.col("run_label")])


def sides(df: pl.DataFrame) -> list[str]:
    if df.is_empty():
        return []
    return df.select(_side().alias("s")).get_column("s").unique().sort().to_list()


def side_rows(df: pl.DataFrame, side: str) -> pl.DataFrame:
    return df.filter(_side() == side)


PAIR_SEP = "\x1f"
"""Joins the values of the pairing columns into one pair id (a unit separator: not in task ids or names)."""


def pair_columns(df: pl.DataFrame) -> list[str]:
    """The columns of `evalkit.analysis.PAIR_KEYS` that `df` has: an A episode is compared with a B episode
    only when all of them agree (same env, surface, mode, task and skin)."""
    return [k for k in PAIR_KEYS if k in df.columns]


def _pair_expr(keys: Sequence[str]) -> pl.Expr:
    return pl.concat_str([pl.col(k).cast(pl.String).fill_null(NONE_LABEL) for k in keys], separator=PAIR_SEP)


def pair_id(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """The pair id of one table row (as `ab_tasks` puts in its `pair` column)."""
    return PAIR_SEP.join(NONE_LABEL if row.get(k) is None else str(row.get(k)) for k in keys)


def pair_label(pid: str, keys: Sequence[str], limit: int = CELL_LIMIT) -> str:
    """`task · env surface/mode · skin` for a pair id, what is unset left out, clipped for a label."""
    v = dict(zip(keys, pid.split(PAIR_SEP), strict=False))
    where = f"{v.get('surface', NONE_LABEL)}/{v.get('mode', NONE_LABEL)}"
    if v.get("env", NONE_LABEL) != NONE_LABEL:
        where = f"{v['env']} {where}"
    parts = [v.get("task_id", NONE_LABEL), where]
    if v.get("skin", NONE_LABEL) != NONE_LABEL:
        parts.append(f"skin {v['skin']}")
    return clip(" · ".join(parts), limit)


def pair_rows(df: pl.DataFrame, side: str, pid: str) -> pl.DataFrame:
    """The episodes of `side` on one pair (task, surface, mode, …), by repeat."""
    keys = pair_columns(df)
    return (
        side_rows(df, side)
        .filter(_pair_expr(keys) == pid)
        .sort("repeat", nulls_last=True, maintain_order=True)
    )


def best_opponent(df: pl.DataFrame, a: str) -> str | None:
    """The default B against `a`: the other side that shares most (task, surface, mode, …) pairs with it,
    the better one (`ranked_sides`) among equals; None when no side shares a pair."""
    labelled = df.with_columns(_side().alias("_side"), _pair_expr(pair_columns(df)).alias("_pair"))
    mine = labelled.filter(pl.col("_side") == a).get_column("_pair").unique()
    shared = (
        labelled.filter((pl.col("_side") != a) & pl.col("_pair").is_in(mine.implode()))
        .group_by("_side")
        .agg(pl.col("_pair").n_unique().alias("n"))
    )
    if shared.is_empty():
        return None
    rank = {s: i for i, s in enumerate(ranked_sides(df))}
    best = max(shared.iter_rows(), key=lambda r: (r[1], -rank.get(r[0], len(rank))))
    return best[0]


def ab_tasks(df: pl.DataFrame, a: str, b: str, solved: float = 0.5) -> pl.DataFrame:
    """One row per pair (env, surface, mode, task, skin: `evalkit.analysis.PAIR_KEYS`) that both sides
    attempted: the pairing columns, a `pair` id, best scored reward of each side and an outcome label. A pair
    is solved by a side when any scored episode (repeat) reaches `solved`; unscored episodes count neither
    way. Pairing on the task alone would line up one mode of A against another of B."""
    keys = pair_columns(df)

    def per(side: str, tag: str) -> pl.DataFrame:
        return (
            side_rows(df, side)
            .with_columns(pl.col(k).cast(pl.String).fill_null(NONE_LABEL) for k in keys)
            .group_by(keys)
            .agg(
                pl.col("reward").max().alias(f"{tag}_best"),
                pl.len().alias(f"{tag}_n"),
                pl.col("reward").is_not_null().sum().alias(f"{tag}_scored"),
            )
        )

    both = per(a, "a").join(per(b, "b"), on=keys, how="inner")
    a_ok = pl.col("a_best") >= solved
    b_ok = pl.col("b_best") >= solved
    outcome = (
        pl.when(pl.col("a_best").is_null() | pl.col("b_best").is_null())
        .then(pl.lit("unscored"))
        .when(a_ok & ~b_ok)
        .then(pl.lit("A solved, B failed"))
        .when(~a_ok & b_ok)
        .then(pl.lit("B solved, A failed"))
        .when(a_ok & b_ok)
        .then(pl.lit("both solved"))
        .otherwise(pl.lit("both failed"))
    )
    return both.with_columns(
        _pair_expr(keys).alias("pair"),
        outcome.alias("outcome"),
        (pl.col("a_best") - pl.col("b_best")).alias("difference"),
    ).sort(["task_id", *[k for k in keys if k != "task_id"]])


def ab_table(pairs: pl.DataFrame) -> pl.DataFrame:
    """`ab_tasks` as shown: task, surface and mode always, env and skin only when they tell pairs apart."""
    cols = [c for c in ("task_id", "surface", "mode") if c in pairs.columns]
    if "env" in pairs.columns and pairs.get_column("env").n_unique() > 1:
        cols.append("env")
    if "skin" in pairs.columns and (pairs.get_column("skin") != NONE_LABEL).any():
        cols.append("skin")
    return clip_columns(pairs.select(*cols, "outcome", "a_best", "b_best", "difference", "a_n", "b_n"))


def ranked_sides(df: pl.DataFrame) -> list[str]:
    """Sides (model · run) by mean scored reward, best first: the default A is the best, B the runner-up."""
    if df.is_empty():
        return []
    scored = pl.col("reward").filter(pl.col("error_class").is_null())
    means = df.group_by(_side().alias("s")).agg(scored.mean().alias("m"))
    return means.sort(["m", "s"], descending=[True, False], nulls_last=True).get_column("s").to_list()


def _as_sides(df: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """The episodes of the sides `names` with the side as their `model` (what `analysis.compare` selects
    by): the same model in two runs is two sides."""
    d = df.with_columns(_side().alias("_s")).filter(pl.col("_s").is_in(list(names)))
    if "scored" not in d.columns:
        d = d.with_columns((pl.col("error_class").is_null() & pl.col("reward").is_not_null()).alias("scored"))
    return d.with_columns(pl.col("_s").alias("model")).drop("_s")


def ab_difference(df: pl.DataFrame, a: str, b: str, tier: str | None = None) -> dict[str, Any]:
    """The paired comparison of side `a` against side `b` on the tasks both ran (`analysis.compare`: mean of
    per-task differences, task-clustered bootstrap CI, p, wins/ties/losses), in one tier or all."""
    d = _as_sides(df, [a, b])
    if tier is not None:
        d = d.filter(pl.col("tier").cast(pl.String).fill_null(NONE_LABEL) == tier)
    if d.filter(pl.col("model") == a).is_empty() or d.filter(pl.col("model") == b).is_empty():
        return {"n_tasks": 0}
    return analysis.compare(d, a, b, by=None).row(0, named=True)


def difference_line(r: Mapping[str, Any], tier: str | None = None) -> str:
    """A paired comparison row (`analysis.compare`) as one line: difference, CI, p, wins / ties / losses."""
    where = "all tiers" if tier is None else f"tier {clip(tier, 60)}"
    n = r.get("n_tasks") or 0
    if not n:
        return f"No task with a scored episode on both sides in {where}: no paired difference."
    ci = "no CI" if r.get("ci_low") is None else f"95% CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
    p = r.get("p_value")
    p = "—" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")
    return (
        f"A − B = {r['diff']:+.3f} ({where}) · {ci} · p {p} · wins / ties / losses "
        f"{r['wins']} / {r['ties']} / {r['losses']} over {n} task{'s' if n != 1 else ''}"
    )


COMPARE_NAMES = {
    "a": "A", "b": "B", "group": "tier", "n_tasks": "tasks", "mean_a": "mean A", "mean_b": "mean B",
    "diff": "A − B", "ci": "95% CI", "p": "p", "wtl": "wins / ties / losses", "n_dropped": "tasks left out",
}  # fmt: skip


def paired_table(df: pl.DataFrame, ref: str, by: str = "tier") -> pl.DataFrame:
    """Every other side against `ref`, per tier and over all, as the Summary shows it: readable column
    names, the CI and the win counts as text."""
    others = [s for s in sides(df) if s != ref]
    if not others:
        return pl.DataFrame()
    d = _as_sides(df, [ref, *others])
    rows = pl.concat([analysis.compare(d, o, ref, by=by) for o in others], how="vertical")
    rows = rows.filter((pl.col("n_tasks") > 0) | (pl.col("group") == "all"))
    shown = rows.with_columns(
        pl.when(pl.col("ci_low").is_not_null())
        .then(pl.format("[{}, {}]", pl.col("ci_low").round(3), pl.col("ci_high").round(3)))
        .otherwise(pl.lit("—"))
        .alias("ci"),
        pl.format("{} / {} / {}", "wins", "ties", "losses").alias("wtl"),
        pl.when(pl.col("p_value") < 0.001)
        .then(pl.lit("< 0.001"))
        .otherwise(pl.col("p_value").round(3).cast(pl.String))
        .alias("p"),
    )
    return shown.select(list(COMPARE_NAMES)).rename(COMPARE_NAMES)


def matching_episode(a_row: Mapping[str, Any] | None, b_rows: pl.DataFrame) -> int:
    """Index in `b_rows` of the episode to show against A's: same surface, mode and repeat when there is one
    (the rows already share the pair), else the first."""
    if a_row is None or b_rows.is_empty():
        return 0
    for i, r in enumerate(b_rows.iter_rows(named=True)):
        if all(r.get(k) == a_row.get(k) for k in ("surface", "mode", "repeat")):
            return i
    return 0


# ----------------------------------------------------------------------------------------------- links

VIEWS = ("Episodes", "Episode", "A vs B", "Summary")
VIEW_SLUGS = {"Episodes": "table", "Episode": "episode", "A vs B": "ab", "Summary": "summary"}


@dataclass
class DeepLink:
    """What a shared URL points at: a view, an episode (run + key), a step, for A vs B a second episode."""

    view: str | None = None
    run: str | None = None
    episode: str | None = None
    step: int | None = None
    brun: str | None = None
    bepisode: str | None = None


def _first(v: Any) -> str | None:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return None if v is None else str(v)


def resolve_run(value: str | None, runs: Sequence[str], labels: Mapping[str, str]) -> str | None:
    """The offered run a link names (by label or path); None for anything else, so a URL cannot open a
    directory that was not given to the viewer."""
    if not value:
        return None
    for r in runs:
        if value == labels.get(r) or value == r:
            return r
    try:
        resolved = str(Path(value).resolve())
    except (OSError, RuntimeError, ValueError):
        return None
    return resolved if resolved in runs else None


def parse_link(params: Mapping[str, Any], runs: Sequence[str], labels: Mapping[str, str]) -> DeepLink:
    """Read `?view=…&run=…&episode=<key>&step=N[&brun=…&b=<key>]`; whatever is malformed is dropped."""
    link = DeepLink()
    view = _first(params.get("view"))
    slugs = {v: k for k, v in VIEW_SLUGS.items()}
    link.view = slugs.get(view or "", None)
    link.run = resolve_run(_first(params.get("run")), runs, labels)
    key = _first(params.get("episode"))
    link.episode = key if link.run and key and len(key) < 512 else None
    try:
        step = int(_first(params.get("step")) or "")
        link.step = step if 0 <= step < 1_000_000 else None
    except ValueError:
        link.step = None
    link.brun = resolve_run(_first(params.get("brun")), runs, labels) or (
        link.run if params.get("b") else None
    )
    bkey = _first(params.get("b"))
    link.bepisode = bkey if link.brun and bkey and len(bkey) < 512 else None
    if link.view is None and link.episode:
        link.view = "A vs B" if link.bepisode else "Episode"
    return link


def make_link(link: DeepLink, labels: Mapping[str, str]) -> dict[str, str]:
    """The query parameters for `link` (runs by label)."""
    out: dict[str, str] = {}
    if link.view:
        out["view"] = VIEW_SLUGS[link.view]
    if link.run and link.episode:
        out["run"] = labels.get(link.run, link.run)
        out["episode"] = link.episode
    if link.step is not None and link.episode:
        out["step"] = str(link.step)
    if link.brun and link.bepisode:
        out["brun"] = labels.get(link.brun, link.brun)
        out["b"] = link.bepisode
    return out


__all__ = [
    "TABLE_COLUMNS",
    "DISPLAY_COLUMNS",
    "FILTER_COLUMNS",
    "Filters",
    "Step",
    "DeepLink",
    "TraceError",
    "discover_runs",
    "run_labels",
    "episode_table",
    "concat_tables",
    "with_labels",
    "options",
    "apply_filters",
    "sort_table",
    "text_index",
    "search",
    "open_record",
    "steps_of",
    "align_steps",
    "is_ownloop",
    "field_rows",
    "clip",
    "clip_columns",
    "LABEL_COLUMNS",
    "short_id",
    "imported_records",
    "as_json",
    "page_of",
    "md_escape",
    "safe_image",
    "sides",
    "side_rows",
    "ab_tasks",
    "ab_table",
    "pair_rows",
    "pair_id",
    "pair_label",
    "pair_columns",
    "matching_episode",
    "best_opponent",
    "parse_link",
    "make_link",
    "resolve_run",
    "APP_PATH",
    "CHROMIUM_ARGS",
    "chromium_executable",
    "app_command",
    "running_app",
]
