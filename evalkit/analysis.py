"""Runs as Polars frames: one row per episode, turn and tool call; summaries, tier CIs, paired comparison.

The column lists are declared once below (`EPISODE_COLUMNS`, `TURN_COLUMNS`, `CALL_COLUMNS`) and every frame
this module returns has exactly those columns in that order, so the viewer, the plots and the notebooks can
rely on them. An unscored episode (`reward` null, `error_class` set: the infrastructure failed) is never read
as a zero: summaries give the mean over scored episodes and, labelled, the mean with unscored counted as zero.
An episode with no reward and no error (an env that gives no reward, or none for how this episode ended) is
neither: summaries count it as `no_reward` and leave it out of both means.

Loading a native run builds an index of its trace (one row per episode plus the byte offset of its line, for
`traces.read_at`) and caches it as Parquet under `<run>/.evalkit/`, named by the trace's size and mtime; a
changed trace gets a new index, a read-only run gets none. The index is read by Polars (`evalkit._index`);
`_build_index_reference`, one `json.loads` per line, is what it must equal. Traces are append-only, so a trace
that grew since its cached index is indexed from where that index stopped (see `_extend_index`), not anew.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from evalkit import _index, traces
from evalkit.errors import TraceError

log = logging.getLogger(__name__)

INDEX_VERSION = 2
N_BOOT = 2000
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143
TIER_ORDER = ("easy", "medium", "hard")

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean

EPISODE_COLUMNS: dict[str, Any] = {
    "run": _S,  # the run directory as given to load_runs
    "run_name": _S,  # its last path component, for labels
    "offset": _I,  # byte offset of the record's line in trace.jsonl (native runs), for traces.read_at
    "source": _S,  # "evalkit" or the importer that read the run
    "key": _S,
    "model": _S,
    "env": _S,
    "surface": _S,
    "mode": _S,
    "split": _S,
    "task_id": _S,
    "evalset_task": _S,
    "tier": _S,
    "difficulty_score": _F,
    "skin": _S,
    "coordinates": _S,
    "repeat": _I,
    "episode_id": _S,
    "prompt_version": _S,
    "reward": _F,  # null when unscored
    "scored": _B,  # no error_class and a reward
    "grade_total": _F,
    "grade": _S,  # the env's grade dict as JSON
    "end_reason": _S,
    "error_class": _S,
    "error": _S,  # first 300 characters
    "auto_submitted": _B,
    "input_tokens": _I,
    "output_tokens": _I,
    "cache_read": _I,
    "cache_write": _I,
    "reasoning_tokens": _I,
    "reasoning_chars": _I,
    "tokens": _I,  # input + cache_read + cache_write + output
    "cost_usd": _F,
    "n_turns": _I,
    "tool_calls": _I,
    "tool_errors": _I,
    "parse_errors": _I,
    "drafts": _I,  # plans checked before the episode ended (envs with plan tools, e.g. berth)
    "provider_switches": _I,
    "seconds": _F,
    "model_seconds": _F,
    "env_seconds": _F,
    "started": _S,
    "target": _S,
    "frame0": _S,
    "render": _S,
    "n_frames": _I,
}
EPISODE_SCHEMA = pl.Schema(EPISODE_COLUMNS)

TURN_COLUMNS: dict[str, Any] = {
    "run": _S,
    "key": _S,
    "model": _S,
    "env": _S,
    "surface": _S,
    "mode": _S,
    "task_id": _S,
    "tier": _S,
    "repeat": _I,
    "turn": _I,
    "stop": _S,
    "text": _S,
    "reasoning": _S,
    "input_tokens": _I,
    "output_tokens": _I,
    "reasoning_tokens": _I,
    "reasoning_chars": _I,
    "model_s": _F,
    "env_s": _F,
    "frame": _S,
    "n_calls": _I,
    "n_call_errors": _I,
}
CALL_COLUMNS: dict[str, Any] = {
    "run": _S,
    "key": _S,
    "model": _S,
    "env": _S,
    "surface": _S,
    "mode": _S,
    "task_id": _S,
    "tier": _S,
    "repeat": _I,
    "turn": _I,
    "index": _I,
    "id": _S,
    "name": _S,
    "args": _S,
    "ok": _B,
    "parse_error": _B,
    "result": _S,
    "n_images": _I,
}

GROUP = ("model", "env", "surface", "mode")
_CACHED = [c for c in EPISODE_COLUMNS if c not in ("run", "run_name")]


# ---------------------------------------------------------------- loading


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _f(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def _i(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def _episode_row(d: dict, offset: int | None) -> tuple:
    """The cached columns (all but run / run_name) of one episode dict, in declared order."""
    u = d.get("usage") if isinstance(d.get("usage"), dict) else {}
    grade = d.get("grade") if isinstance(d.get("grade"), dict) else None
    reward = _f(d.get("reward"))
    err_cls = d.get("error_class") or None
    turns = d.get("turns") or []
    inp, out, cr, cw = (
        _i(u.get("input")),
        _i(u.get("output")),
        _i(u.get("cache_read")),
        _i(u.get("cache_write")),
    )
    err = d.get("error")
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    switches = d.get("provider_switches")
    return (
        offset,
        _s(info.get("importer")) or "evalkit",
        _s(d.get("key")),
        _s(d.get("model")),
        _s(d.get("env")),
        _s(d.get("surface")),
        _s(d.get("mode")),
        _s(d.get("split")),
        _s(d.get("task_id")),
        _s(d.get("evalset_task")),
        _s(d.get("tier")),
        _f(d.get("difficulty_score")),
        _s(d.get("skin")),
        _s(d.get("coordinates")),
        _i(d.get("repeat")),
        _s(d.get("episode_id")),
        _s(d.get("prompt_version")),
        reward,
        err_cls is None and reward is not None,
        _f(grade.get("total")) if grade else None,
        json.dumps(grade, default=str) if grade else None,
        _s(d.get("end_reason")),
        _s(err_cls),
        None if err is None else str(err)[:300],
        bool(d.get("auto_submitted")),
        inp,
        out,
        cr,
        cw,
        _i(u.get("reasoning_tokens")),
        _i(u.get("reasoning_chars")),
        inp + out + cr + cw,
        _f(d.get("cost_usd")),
        _i(d.get("n_turns")),
        _i(d.get("tool_calls")),
        _i(d.get("tool_errors")),
        _i(d.get("parse_errors")),
        _i(d.get("drafts")),
        len(switches) if isinstance(switches, list) else 0,
        _f(d.get("seconds")),
        _f(d.get("model_seconds")),
        _f(d.get("env_seconds")),
        _s(d.get("started")),
        _s(d.get("target")),
        _s(d.get("frame0")),
        _s(d.get("render")),
        sum(1 for t in turns if isinstance(t, dict) and t.get("frame")),
    )


def _frame(rows: list[tuple], columns: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=pl.Schema(columns), orient="row")


def _latest(pairs: Iterable[tuple[int | None, dict]]) -> list[tuple[int | None, dict]]:
    """Keep the last record of each key, in the order of those last records (as traces.iter_dicts does)."""
    by_key: dict[str, tuple[int | None, dict]] = {}
    for n, (off, d) in enumerate(pairs):
        k = d.get("key") or f"#{n}"
        by_key.pop(k, None)
        by_key[k] = (off, d)
    return list(by_key.values())


def _build_index(run: Path) -> pl.DataFrame:
    cached = {c: EPISODE_COLUMNS[c] for c in _CACHED}
    if traces.is_native(run):
        return _index.build(run / traces.TRACE, _episode_row, pl.Schema(cached))
    return _frame([_episode_row(d, None) for d in traces.iter_dicts(run)], cached)


def _build_index_reference(run: Path) -> pl.DataFrame:
    """`_build_index` one `json.loads` at a time: the definition the fast reader is tested against."""
    cached = {c: EPISODE_COLUMNS[c] for c in _CACHED}
    if traces.is_native(run):
        pairs = _latest(traces.iter_offsets(run))
    else:
        pairs = [(None, d) for d in traces.iter_dicts(run)]
    return _frame([_episode_row(d, off) for off, d in pairs], cached)


def index_path(run: str | Path) -> Path:
    """Where the cached index of `run` lives for the trace as it is now."""
    size, mtime = traces.trace_signature(run)
    return Path(run) / ".evalkit" / f"index-v{INDEX_VERSION}-{size}-{mtime}.parquet"


_META = "evalkit_index"  # the Parquet metadata key of what an index covers (see `_extend_index`)
_WINDOW = 4096  # bytes per window of the prefix checked before an index is extended
_N_WINDOWS = 16


def _fingerprint(f: Any, size: int) -> str:
    """A hash of the first `size` bytes of the open file `f`, from 16 windows of 4 KB spread over them (the
    first and the last included): cheap, and an append leaves it as it was."""
    h = hashlib.sha256(str(size).encode())
    last = max(size - _WINDOW, 0)
    for k in range(_N_WINDOWS):
        at = last * k // (_N_WINDOWS - 1)
        f.seek(at)
        h.update(f.read(min(_WINDOW, size - at)))
    return h.hexdigest()


def _meta(f: Any, df: pl.DataFrame, indexed: int, n_records: int) -> dict:
    """What an index with `_tok` covers: the bytes up to `indexed` (a line start), the number of readable
    records there (the next key-less one is `#n_records`), and the dedup key of each row whose key column
    does not give it (no key, or a key that is not a string)."""
    odd = df.with_row_index("_r").filter(pl.col("_tok").ne_missing(pl.col("key")))
    return {
        "version": INDEX_VERSION,
        "indexed": indexed,
        "records": n_records,
        "rows": df.height,
        "fingerprint": _fingerprint(f, indexed),
        "tokens": {str(r): t for r, t in zip(odd["_r"].to_list(), odd["_tok"].to_list(), strict=True)},
    }


def _covered(recs: pl.DataFrame, indexed: int) -> bool:
    """Whether the records read stop before `indexed`: a last line without its newline that still parsed
    is in the index but not in the prefix a later append would extend (so that index is not extended)."""
    return recs.height == 0 or recs["offset"][-1] < indexed


def _index_native(run: Path) -> tuple[pl.DataFrame, dict | None]:
    """The index of a native run, extended from a cached one when the trace only grew since; and what it
    covers (None when a later one cannot extend it)."""
    cached = pl.Schema({c: EPISODE_COLUMNS[c] for c in _CACHED})
    cols = list(cached)
    trace = run / traces.TRACE
    with open(trace, "rb") as f:
        base = _extendable(run, f)
        start = base[1]["indexed"] if base else 0
        f.seek(start)
        buf = f.read()
        recs = _index.records(buf, _episode_row, cached, trace)
        indexed = start + buf.rfind(b"\n") + 1
        if base is None:
            df = _index.latest(recs)
            n_records = recs.height
        else:
            df = _extend_index(*base, recs.with_columns(pl.col("offset") + start))
            n_records = base[1]["records"] + recs.height
        meta = _meta(f, df, indexed, n_records) if _covered(recs, indexed - start) else None
    return df.select(cols), meta


def _extend_index(old: pl.DataFrame, meta: dict, tail: pl.DataFrame) -> pl.DataFrame:
    """The cached index `old` (with `meta`) followed by the records read after it (`tail`, offsets absolute),
    deduplicated as one pass over the whole trace would: an old row stays unless a later record has its key,
    in place; the tail's last records follow. Key-less tail records are numbered on from the old count."""
    tok = old["key"]
    if meta["tokens"]:
        rows = [int(r) for r in meta["tokens"]]
        tok = tok.scatter(rows, pl.Series(list(meta["tokens"].values()), dtype=_S))
    old = old.with_columns(tok.alias("_tok"))
    new = _index.latest(tail, first=meta["records"])
    keep = old.filter(~pl.col("_tok").is_in(new["_tok"].implode()))
    return pl.concat([keep, new.select(old.columns)], how="vertical")


def _extendable(run: Path, f: Any) -> tuple[pl.DataFrame, dict] | None:
    """The newest cached index of `run` that the open trace `f` only appended to, and what it covers."""
    folder = run / ".evalkit"
    try:
        found = sorted(
            folder.glob(f"index-v{INDEX_VERSION}-*.parquet"), key=lambda p: p.stat().st_mtime_ns, reverse=True
        )
    except OSError:
        return None
    size = os.fstat(f.fileno()).st_size
    for path in found:
        try:
            meta = json.loads(pl.read_parquet_metadata(path).get(_META) or "null")
            if not isinstance(meta, dict) or meta.get("version") != INDEX_VERSION:
                continue
            if not 0 < meta["indexed"] <= size or _fingerprint(f, meta["indexed"]) != meta["fingerprint"]:
                continue
            df = pl.read_parquet(path)
        except Exception as e:  # a damaged cache is skipped, never fatal
            log.debug("%s: not extended (%s)", path, e)
            continue
        if df.height == meta["rows"] and df.columns == _CACHED:
            return df, meta
    return None


def _load_one(run: Path, cache: bool) -> pl.DataFrame:
    if not run.exists():
        raise TraceError(f"{run}: no such run directory")
    native = run.is_dir() and traces.is_native(run)
    if not (cache and native):
        return _build_index(run)
    path = index_path(run)
    if path.exists():
        try:
            return pl.read_parquet(path)
        except Exception as e:  # a damaged cache is rebuilt, never fatal
            log.warning("%s: unreadable index, rebuilding (%s)", path, e)
    df, meta = _index_native(run)
    _write_index(path, df, meta)
    return df


def _write_index(path: Path, df: pl.DataFrame, meta: dict | None = None) -> None:
    try:
        buf = io.BytesIO()
        extra = {_META: json.dumps(meta)} if meta else None
        df.write_parquet(buf, compression="lz4", statistics=False, metadata=extra)
        traces.atomic_write(path, buf.getvalue())
        for old in path.parent.glob(f"index-v{INDEX_VERSION}-*.parquet"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only run directory just goes without a cache


def load_runs(paths: str | Path | Iterable[str | Path], cache: bool = True) -> pl.DataFrame:
    """One row per episode of every run in `paths` (native run dirs or formats `evalkit.importers` reads),
    with exactly the columns of `EPISODE_COLUMNS`. A key recorded twice yields its latest record."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    frames = []
    for p in paths:
        run = Path(p)
        df = _load_one(run, cache)
        frames.append(
            df.with_columns(
                pl.lit(os.fspath(p), _S).alias("run"), pl.lit(run.name or str(run), _S).alias("run_name")
            )
        )
    if not frames:
        return EPISODE_SCHEMA.to_frame()
    return pl.concat([f.select(list(EPISODE_COLUMNS)) for f in frames], how="vertical")


def _episodes(paths_or_df: Any) -> Iterator[tuple[str, dict]]:
    """(run, episode dict) for runs, or for exactly the episodes of a frame from `load_runs`."""
    if isinstance(paths_or_df, pl.DataFrame):
        for (run,), sub in paths_or_df.group_by("run", maintain_order=True):
            keys = set(sub["key"].drop_nulls().to_list())
            for d in traces.iter_dicts(run):
                if d.get("key") in keys:
                    yield run, d
        return
    if isinstance(paths_or_df, str | os.PathLike):
        paths_or_df = [paths_or_df]
    for p in paths_or_df:
        for d in traces.iter_dicts(p):
            yield os.fspath(p), d


def _head(run: str, d: dict) -> tuple:
    return (
        run,
        _s(d.get("key")),
        _s(d.get("model")),
        _s(d.get("env")),
        _s(d.get("surface")),
        _s(d.get("mode")),
        _s(d.get("task_id")),
        _s(d.get("tier")),
        _i(d.get("repeat")),
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
                    _i(t.get("turn")),
                    _s(t.get("stop")),
                    t.get("text") or "",
                    t.get("reasoning") or "",
                    _i(u.get("input")),
                    _i(u.get("output")),
                    _i(u.get("reasoning_tokens")),
                    _i(u.get("reasoning_chars")),
                    _f(t.get("model_s")),
                    _f(t.get("env_s")),
                    _s(t.get("frame")),
                    len(calls),
                    sum(1 for c in calls if not c.get("ok", True)),
                )
            )
    return _frame(rows, TURN_COLUMNS)


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
                        _i(t.get("turn")),
                        n,
                        _s(c.get("id")),
                        _s(c.get("name")),
                        args if isinstance(args, str) else json.dumps(args, default=str),
                        bool(c.get("ok", True)),
                        bool(c.get("parse_error")),
                        c.get("result") or "",
                        len(c.get("images") or []),
                    )
                )
    return _frame(rows, CALL_COLUMNS)


# ---------------------------------------------------------------- summaries


def _aggs() -> list[pl.Expr]:
    r = pl.col("reward")
    scored = pl.col("scored")
    failed = pl.col("error_class").is_not_null()
    turns_ = pl.col("n_turns").cast(_F)
    return [
        pl.len().alias("n"),
        scored.sum().cast(_I).alias("scored"),
        failed.sum().cast(_I).alias("unscored"),
        (~scored & ~failed).sum().cast(_I).alias("no_reward"),
        r.filter(scored).mean().alias("mean_reward"),
        pl.when(scored).then(r).when(failed).then(0.0).mean().alias("mean_reward_unscored_as_0"),
        r.filter(scored).min().alias("min_reward"),
        r.filter(scored).max().alias("max_reward"),
        pl.col("n_turns").mean().alias("mean_turns"),
        pl.col("tool_calls").mean().alias("mean_tool_calls"),
        pl.col("tool_errors").mean().alias("mean_tool_errors"),
        pl.col("parse_errors").mean().alias("mean_parse_errors"),
        pl.col("tokens").mean().alias("mean_tokens"),
        (pl.col("reasoning_tokens").sum() / turns_.sum()).alias("reasoning_tokens_per_turn"),
        (pl.col("reasoning_chars").sum() / turns_.sum()).alias("reasoning_chars_per_turn"),
        # A price missing for any episode makes the total unknown, not smaller: null, never a guess.
        pl.when(pl.col("cost_usd").null_count() == 0).then(pl.col("cost_usd").sum()).alias("cost_usd"),
        pl.col("cost_usd").mean().alias("mean_cost_usd"),
        pl.col("seconds").mean().alias("mean_seconds"),
    ]


def summarise(df: pl.DataFrame, by: Iterable[str] = GROUP) -> pl.DataFrame:
    """Per model × env × surface × mode: counts, reward (scored mean, and with unscored counted as zero),
    turns, tool calls and errors, tokens, reasoning per turn, cost.

    `n` = `scored` + `unscored` + `no_reward`: `unscored` are infrastructure errors (`error_class` set, no
    reward); `no_reward` are episodes that ended without error and without a reward (an env that gives
    none). `mean_reward` is over scored episodes; `mean_reward_unscored_as_0` also counts the unscored as
    zero. No-reward episodes are in neither mean: there is no score to take, and no failure to charge."""
    by = list(by)
    return df.group_by(by, maintain_order=True).agg(_aggs()).sort(by, nulls_last=True)


def _tier_rank() -> pl.Expr:
    t = pl.col("tier")
    return (
        pl.when(t == "all")
        .then(99)
        .when(t.is_in(list(TIER_ORDER)))
        .then(t.replace_strict(list(TIER_ORDER), list(range(len(TIER_ORDER))), default=50))
        .otherwise(50)
    )


def _chunks(n_boot: int, width: int, budget: int = 250_000) -> Iterator[int]:
    # Resamples in blocks of ~budget draws: a block's buffers stay in cache, several times faster than one
    # 2,000 × n matrix on this machine, and memory stays flat for any n.
    step = max(1, min(n_boot, budget // max(1, width)))
    done = 0
    while done < n_boot:
        yield min(step, n_boot - done)
        done += step


def cluster_bootstrap(
    sums: np.ndarray, counts: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
) -> np.ndarray:
    """Bootstrap means of a ratio estimator over clusters: resample clusters (tasks) with replacement and
    return sum(sums)/sum(counts) per resample. With one episode per cluster this is the plain bootstrap.

    `sums` may be 2-D (k statistics × clusters) sharing one `counts` row each ((k × clusters) too); the same
    resamples serve all k, returned as (n_boot × k). Each distinct input row is gathered by the resampled
    indices and summed per resample; a matrix product of cluster multiplicities gave the same sums but went
    through multi-threaded BLAS, which on a busy two-core machine cost several times the whole loop."""
    s2 = np.atleast_2d(np.asarray(sums, float))
    c2 = np.atleast_2d(np.asarray(counts, float))
    rng = np.random.default_rng(seed)
    n = s2.shape[1]
    if n == 0:
        out = np.full((n_boot, s2.shape[0]), np.nan)
        return out if np.ndim(sums) > 1 else out[:, 0]
    k = s2.shape[0]
    # by_tier passes the reward sums twice (once per mean): gather each distinct row once.
    rows: list[np.ndarray] = []
    inv = []
    for r in np.concatenate([s2, c2]):
        same = [j for j, u in enumerate(rows) if np.array_equal(u, r)]
        if not same:
            rows.append(np.ascontiguousarray(r))
        inv.append(same[0] if same else len(rows) - 1)
    # A constant row (episodes per task when every task has the same repeats) sums to the same every time.
    const = [bool((r == r[0]).all()) for r in rows]
    tot = np.empty((n_boot, len(rows)))
    done = 0
    for b in _chunks(n_boot, n):
        # intp draws are the int32 stream for n < 2**32, and indexing with them needs no conversion.
        idx = rng.integers(0, n, size=(b, n), dtype=np.intp)
        for j, r in enumerate(rows):
            tot[done : done + b, j] = r[0] * n if const[j] else r[idx].sum(1)
        done += b
    tot = tot[:, inv]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = tot[:, :k] / tot[:, k:]
    return out if np.ndim(sums) > 1 else out[:, 0]


def _ci(boot: np.ndarray) -> tuple[float | None, float | None]:
    boot = boot[np.isfinite(boot)]
    if not len(boot):
        return None, None
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(lo), float(hi)


def by_tier(
    df: pl.DataFrame, by: Iterable[str] = GROUP, n_boot: int = N_BOOT, seed: int = 0, cluster: str = "task_id"
) -> pl.DataFrame:
    """`summarise` per group and tier, plus tier "all", with 95% percentile bootstrap CIs on both reward
    means. The bootstrap resamples tasks (repeats of a task move together), vectorised over resamples."""
    by = list(by)
    keys = by + ["tier"]
    both = pl.concat([df, df.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    table = both.group_by(keys, maintain_order=True).agg(_aggs())
    per_task = both.group_by(keys + [cluster], maintain_order=True).agg(
        pl.col("reward").filter(pl.col("scored")).sum().alias("s"),
        pl.col("scored").sum().cast(_F).alias("c"),
        (pl.col("scored") | pl.col("error_class").is_not_null()).sum().cast(_F).alias("nz"),
    )
    ci_rows = []
    for n, (k, sub) in enumerate(per_task.group_by(keys, maintain_order=True)):
        s, c, nz = (sub[col].to_numpy() for col in ("s", "c", "nz"))
        # Both means share resamples; a task whose episodes are all unscored adds nothing to the scored mean.
        boot = cluster_bootstrap(np.stack([s, s]), np.stack([c, nz]), n_boot, seed + n)
        lo, hi = _ci(boot[:, 0])
        zlo, zhi = _ci(boot[:, 1])
        ci_rows.append((*k, lo, hi, zlo, zhi))
    ci = pl.DataFrame(
        ci_rows,
        schema=[(k, both.schema[k]) for k in keys]
        + [("ci_low", _F), ("ci_high", _F), ("ci_low_unscored_as_0", _F), ("ci_high_unscored_as_0", _F)],
        orient="row",
    )
    out = table.join(ci, on=keys, how="left", nulls_equal=True)
    cols = list(table.columns)
    i = cols.index("mean_reward") + 1
    cols[i:i] = ["ci_low", "ci_high"]
    j = cols.index("mean_reward_unscored_as_0") + 1
    cols[j:j] = ["ci_low_unscored_as_0", "ci_high_unscored_as_0"]
    return (
        out.select(cols)
        .with_columns(_tier_rank().alias("_r"))
        .sort(by + ["_r", "tier"], nulls_last=True)
        .drop("_r")
    )


# ---------------------------------------------------------------- paired comparison

PAIR_KEYS = ("env", "surface", "mode", "task_id", "skin")


def _select(df: pl.DataFrame, who: str) -> pl.DataFrame:
    """Episodes of `who`: a model label, a run as given to load_runs, or a run's name."""
    for col in ("model", "run", "run_name"):
        sub = df.filter(pl.col(col) == who)
        if sub.height:
            return sub
    raise ValueError(f"{who!r} is neither a model nor a run in this frame")


def paired_bootstrap(d: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Bootstrap distribution of the mean of per-task differences `d`: tasks are resampled (the cluster) and
    each carries its own difference, so the repeats behind it travel with it. Resampling the repeats again
    inside each drawn task would count the within-task noise twice (it is already in the spread of `d`)."""
    d = np.asarray(d, float)
    return cluster_bootstrap(d, np.ones_like(d), n_boot, seed)


COMPARE_COLUMNS = (
    "a",
    "b",
    "by",
    "group",
    "n_tasks",
    "n_dropped",
    "n_unpaired",
    "n_unscored_a",
    "n_unscored_b",
    "mean_a",
    "mean_b",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "wins",
    "ties",
    "losses",
    "sd_diff",
    "mde",
)


def _per_task_differences(
    a_df: pl.DataFrame, b_df: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, int]:
    """Per task with at least one repeat scored on both sides: the mean over those repeats of A, of B, and of
    their difference (repeat r of A against repeat r of B). Also the number of scored episodes of those tasks
    left out because the other side has no scored episode with the same repeat."""
    rk = keys + ["repeat"]

    def cells(d: pl.DataFrame) -> pl.DataFrame:
        # One value per task and repeat (a model found in two runs may have both at the same repeat).
        return (
            d.filter(pl.col("scored"))
            .group_by(rk)
            .agg(pl.col("reward").mean().alias("r"), pl.len().alias("k"))
        )

    ca, cb = cells(a_df), cells(b_df)
    # Sorted, so that sums (and the seeded bootstrap over them) come out the same on every call.
    j = ca.join(cb, on=rk, how="inner", suffix="_b", nulls_equal=True).sort(rk, nulls_last=True)
    per_task = (
        j.group_by(keys, maintain_order=True)
        .agg(
            pl.col("r").mean().alias("mean_a"),
            pl.col("r_b").mean().alias("mean_b"),
            (pl.col("r") - pl.col("r_b")).mean().alias("d"),
        )
        .sort(keys, nulls_last=True)
    )
    paired = per_task.select(keys)
    scored_in_paired = sum(
        int(c.join(paired, on=keys, how="semi", nulls_equal=True)["k"].sum()) for c in (ca, cb)
    )
    return per_task, scored_in_paired - int(j["k"].sum() + j["k_b"].sum())


def _compare_block(a_df: pl.DataFrame, b_df: pl.DataFrame, n_boot: int, seed: int) -> dict:
    keys = [k for k in PAIR_KEYS if k in a_df.columns]
    per_task, unpaired = _per_task_differences(a_df, b_df, keys)
    n = per_task.height
    row: dict[str, Any] = {
        "n_tasks": n,
        "n_dropped": pl.concat([a_df.select(keys), b_df.select(keys)]).unique().height - n,
        "n_unpaired": unpaired,
        "n_unscored_a": int((~a_df["scored"]).sum()),  # no score: an infrastructure error or no reward
        "n_unscored_b": int((~b_df["scored"]).sum()),
    }
    if n == 0:
        return (
            row
            | {
                k: None
                for k in ("mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value", "sd_diff", "mde")
            }
            | {"wins": 0, "ties": 0, "losses": 0}
        )
    d = per_task["d"].to_numpy()
    boot = paired_bootstrap(d, n_boot, seed)
    lo, hi = _ci(boot)
    le, ge = int((boot <= 0).sum()), int((boot >= 0).sum())
    p = min(1.0, (2 * min(le, ge) + 1) / (len(boot) + 1))
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    tie = np.isclose(d, 0, atol=1e-9)
    return row | {
        "mean_a": float(per_task["mean_a"].mean()),
        "mean_b": float(per_task["mean_b"].mean()),
        "diff": float(d.mean()),
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "wins": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "losses": int(((d < 0) & ~tie).sum()),
        "sd_diff": sd,
        "mde": None if sd is None else (Z_975 + Z_80) * sd / math.sqrt(n),
    }


def compare(
    df: pl.DataFrame, a: str, b: str, by: str | None = "tier", n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """Paired comparison of `a` against `b` (models, or runs): episodes paired by task (env, surface, mode,
    task, skin) and repeat. Each task gives one difference d, the mean over its paired repeats of
    (A − B); `diff` is the mean of d over tasks, `sd_diff` its SD. The bootstrap resamples tasks only, each
    with its d (a task-clustered bootstrap: repeats travel with their task); `p_value` is two-sided from
    that distribution; `mde` is the smallest true difference this many tasks would detect with 80% power
    at α = 0.05, from `sd_diff`. Left out and counted: episodes without a score (`n_unscored_*`: an
    infrastructure error or no reward), tasks without a repeat scored on both sides (`n_dropped`), and
    scored episodes of the other tasks whose repeat has no scored partner on the other side
    (`n_unpaired`). One row per value of `by` plus "all"."""
    da, db = _select(df, a), _select(df, b)
    groups: list[tuple[str, pl.DataFrame, pl.DataFrame]] = []
    if by:
        values = [v for v in pl.concat([da[by], db[by]]).unique().to_list()]
        rank = {t: i for i, t in enumerate(TIER_ORDER)}
        values.sort(key=lambda v: (v is None, rank.get(v, 50), str(v)))
        for v in values:
            f = pl.col(by).is_null() if v is None else pl.col(by) == v
            groups.append((None if v is None else str(v), da.filter(f), db.filter(f)))
    groups.append(("all", da, db))
    rows = []
    for n, (g, xa, xb) in enumerate(groups):
        rows.append({"a": a, "b": b, "by": by or "", "group": g} | _compare_block(xa, xb, n_boot, seed + n))
    schema = {c: (_S if c in ("a", "b", "by", "group") else _F) for c in COMPARE_COLUMNS}
    for c in ("n_tasks", "n_dropped", "n_unpaired", "n_unscored_a", "n_unscored_b", "wins", "ties", "losses"):
        schema[c] = _I
    return pl.DataFrame(rows, schema=schema).select(COMPARE_COLUMNS)


def compare_many(
    df: pl.DataFrame, ref: str, by: str | None = None, n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """`compare(df, m, ref)` for every other model m: one table of each model against the reference."""
    _select(df, ref)
    others = [m for m in df["model"].unique(maintain_order=True).to_list() if m != ref]
    if not others:
        return pl.DataFrame(schema=compare(df, ref, ref, by=None, n_boot=10).schema)
    return pl.concat([compare(df, m, ref, by=by, n_boot=n_boot, seed=seed) for m in others], how="vertical")


# ---------------------------------------------------------------- text and files


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return format(v, spec)
    return str(v)


def _table(df: pl.DataFrame, cols: list[tuple[str, str]], markdown: bool = False) -> str:
    head = [h for _, h in cols]
    body = [[_fmt(r.get(c), _SPEC.get(c, ".3f")) for c, _ in cols] for r in df.iter_rows(named=True)]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        # Only text from the trace (names) can carry Markdown; numbers and CIs we formatted stay readable.
        raw = [isinstance(df.schema.get(c), pl.String) and c not in ("ci", "ci0") for c, _ in cols]
        lines += ["| " + " | ".join(_md_text(x) if r else x for x, r in zip(row, raw, strict=True)) + " |"
                  for row in body]  # fmt: skip
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)


_SPEC = {
    "mean_turns": ".1f", "mean_tool_calls": ".1f", "mean_tool_errors": ".2f", "mean_parse_errors": ".2f",
    "mean_tokens": ".0f", "reasoning_tokens_per_turn": ".0f", "cost_usd": ".2f",
}  # fmt: skip

_SUMMARY_COLS = [
    ("model", "model"),
    ("env", "env"),
    ("surface", "surface"),
    ("mode", "mode"),
    ("n", "n"),
    ("scored", "scored"),
    ("unscored", "unscored"),
    ("no_reward", "no reward"),
    ("mean_reward", "reward (scored)"),
    ("mean_reward_unscored_as_0", "reward (unscored=0)"),
    ("min_reward", "min"),
    ("max_reward", "max"),
    ("mean_turns", "turns"),
    ("mean_tool_calls", "calls"),
    ("mean_tool_errors", "tool err"),
    ("mean_parse_errors", "parse err"),
    ("mean_tokens", "tokens"),
    ("reasoning_tokens_per_turn", "reason tok/turn"),
    ("cost_usd", "cost $"),
]


def _with_ci(df: pl.DataFrame) -> pl.DataFrame:
    def ci(lo: str, hi: str) -> pl.Series:
        pairs = zip(df[lo].to_list(), df[hi].to_list(), strict=True)
        return pl.Series([f"[{a:.3f}, {b:.3f}]" if a is not None else "-" for a, b in pairs], dtype=_S)

    return df.with_columns(
        ci("ci_low", "ci_high").alias("ci"),
        ci("ci_low_unscored_as_0", "ci_high_unscored_as_0").alias("ci0"),
    )


_TIER_COLS = [
    ("model", "model"),
    ("surface", "surface"),
    ("mode", "mode"),
    ("tier", "tier"),
    ("n", "n"),
    ("unscored", "unscored"),
    ("mean_reward", "reward (scored)"),
    ("ci", "95% CI"),
    ("mean_reward_unscored_as_0", "reward (unscored=0)"),
    ("ci0", "95% CI (unscored=0)"),
    ("mean_turns", "turns"),
]


def format_summary(df: pl.DataFrame, tiers: bool = True, markdown: bool = False) -> str:
    """The summary tables of an episode frame as text (the CLI's `evalkit summarise`)."""
    if df.height == 0:
        return "no episodes"
    parts = ["Per model × env × surface × mode", _table(summarise(df), _SUMMARY_COLS, markdown)]
    if tiers:
        parts += [
            "",
            "Per tier (95% bootstrap CI over tasks)",
            _table(_with_ci(by_tier(df)), _TIER_COLS, markdown),
        ]
    errs = df.filter(pl.col("error_class").is_not_null())
    if errs.height:
        counts = errs.group_by("model", "error_class").len().sort("model", "error_class")
        parts += [
            "",
            "Unscored (infrastructure errors): "
            + ", ".join(f"{r['model']} {r['error_class']} ×{r['len']}" for r in counts.iter_rows(named=True)),
        ]
    quiet = df.filter(~pl.col("scored") & pl.col("error_class").is_null())
    if quiet.height:
        counts = quiet.group_by("model").len().sort("model")
        parts += [
            "",
            "No reward (ended without error, the env gave none; in neither mean): "
            + ", ".join(f"{r['model']} ×{r['len']}" for r in counts.iter_rows(named=True)),
        ]
    return "\n".join(parts)


def format_compare(result: pl.DataFrame, markdown: bool = False) -> str:
    """A `compare` / `compare_many` frame as text."""
    if result.height == 0:
        return "nothing to compare"
    r = result.with_columns(
        pl.when(pl.col("ci_low").is_not_null())
        .then(pl.format("[{}, {}]", pl.col("ci_low").round(3), pl.col("ci_high").round(3)))
        .otherwise(pl.lit("-"))
        .alias("ci"),
        pl.format("{}/{}/{}", "wins", "ties", "losses").alias("wtl"),
        pl.when(pl.col("p_value") < 0.001)
        .then(pl.lit("<0.001"))
        .otherwise(pl.col("p_value").round(3).cast(_S))
        .alias("p"),
    )
    by = result["by"][0] or "group"
    cols = [
        ("a", "A"),
        ("b", "B"),
        ("group", by),
        ("n_tasks", "tasks"),
        ("n_dropped", "dropped"),
        ("n_unpaired", "unpaired"),
        ("mean_a", "mean A"),
        ("mean_b", "mean B"),
        ("diff", "A − B"),
        ("ci", "95% CI"),
        ("p", "p"),
        ("wtl", "win/tie/loss"),
        ("mde", "MDE (80%)"),
    ]
    note = (
        "Paired by task and repeat; per task, the mean of the paired differences; bootstrap over tasks "
        "(repeats travel with their task); unscored episodes left out."
    )
    return _table(r, cols, markdown) + "\n" + note


def _md_text(text: str) -> str:
    """A name as literal Markdown text: a run or model name must not become a link, an image or HTML."""
    return "".join("\\" + c if c in "\\`*_[]()<>!|~&" else c for c in text)


def write_summary(run_dir: str | Path) -> dict:
    """Write `summary.json` and `summary.md` for a run; returns what was written to the JSON."""
    run_dir = Path(run_dir)
    df = load_runs([run_dir])
    summ, tiers = summarise(df), by_tier(df)
    data = {
        "run": str(run_dir),
        "n_episodes": df.height,
        "n_scored": int(df["scored"].sum()),
        "n_unscored": int(df["error_class"].is_not_null().sum()),
        "n_no_reward": int((~df["scored"] & df["error_class"].is_null()).sum()),
        "notes": "mean_reward is over scored episodes; mean_reward_unscored_as_0 counts unscored "
        "(infrastructure errors) as zero; episodes with no reward and no error are in neither mean "
        "(no_reward). CIs: 95% percentile bootstrap over tasks (repeats travel with their task), "
        "2,000 resamples, seed 0.",
        "summary": summ.to_dicts(),
        "by_tier": tiers.to_dicts(),
    }
    traces.atomic_write(run_dir / "summary.json", json.dumps(data, indent=2, default=str) + "\n")
    md = f"# Summary of {_md_text(run_dir.name)}\n\n{df.height} episodes, {data['n_unscored']} unscored"
    md += f", {data['n_no_reward']} without a reward.\n\n" if data["n_no_reward"] else ".\n\n"
    md += "## Per model × env × surface × mode\n\n" + _table(summ, _SUMMARY_COLS, True) + "\n\n"
    md += "## Per tier (95% bootstrap CI over tasks)\n\n" + _table(_with_ci(tiers), _TIER_COLS, True) + "\n\n"
    md += data["notes"] + "\n"
    traces.atomic_write(run_dir / "summary.md", md)
    return data


def grade_components(df: pl.DataFrame) -> pl.DataFrame:
    """Long frame (model, component, value) of the numeric grade entries in [0, 1] other than `total` —
    for canvas: structure, visual, coverage, order, background — over scored episodes."""
    rows = []
    for model, g in (
        df.filter(pl.col("scored") & pl.col("grade").is_not_null()).select("model", "grade").iter_rows()
    ):
        for k, v in json.loads(g).items():
            if (
                k != "total"
                and not k.startswith("n_")
                and isinstance(v, int | float)
                and not isinstance(v, bool)
            ):
                rows.append((model, k, float(v)))
    return pl.DataFrame(rows, schema={"model": _S, "component": _S, "value": _F}, orient="row")
