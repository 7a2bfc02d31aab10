"""The columns of evalkit's frames, declared once, and how one episode record becomes one row.

`EPISODE_COLUMNS` (one row per episode), `TURN_COLUMNS` (per model turn) and `CALL_COLUMNS` (per tool call):
every frame `evalkit.records.loading` returns has exactly these columns in this order, so the viewer, the
plots and the notebooks can rely on them. `episode_row` is the reference for one episode's row: the fast index
reader (`evalkit.records._index`) must give the same row for every line it reads itself.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from evalkit import wellformed
from evalkit.records.keys import record_key
from evalkit.types import record_problems

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean

EPISODE_COLUMNS: dict[str, Any] = {
    "run": _S,  # the run directory as given to load_runs
    "run_name": _S,  # its last path component, for labels
    "offset": _I,  # byte offset of the record's line in trace.jsonl (native runs), for rundir.read_at
    "source": _S,  # "evalkit" or the importer that read the run
    "key": _S,
    "model": _S,
    "env": _S,
    "env_config": _S,  # the env's configuration as the run recorded it (`config_label`); null: none said
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
    "harness_reward": _F,  # a foreign run's own reward for the episode, as its harness recorded it
    "harness_error": _S,  # that harness's own error for it (first 300 characters); both null when native
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

EPISODE_OF: dict[str, Any] = dict.fromkeys(["run", "key", "model", "env", "surface", "mode", "task_id"], _S)
"""Which run and episode a row of a per-episode table belongs to (turns, calls, scanners' findings)."""
_PER_TURN: dict[str, Any] = {
    **EPISODE_OF,
    "tier": _S,
    "repeat": _I,
    "turn": _I,
}
"""Where a turn (and each of its calls) belongs: the leading columns of the turn and call tables."""
TURN_COLUMNS: dict[str, Any] = {
    **_PER_TURN,
    "provider": _S,  # who answered: the provider behind a router spec (`hf:org/m:a|b`), else the spec's
    "route": _S,  # the model id the answering request named
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
    **_PER_TURN,
    "index": _I,
    "id": _S,
    "name": _S,
    "args": _S,
    "ok": _B,
    "parse_error": _B,
    "result": _S,
    "n_images": _I,
}


PER_RUN = ("run", "run_name", "env_config")
"""Columns `load_runs` fills in per run rather than per record: the run as it was given, and the env
configuration its run.json recorded (one per run: a resume against another configuration is refused)."""
CACHED = [c for c in EPISODE_COLUMNS if c not in PER_RUN] + ["problem"]
"""The columns of a cached index: all but those filled in per run (`PER_RUN`), and `problem`: what is
wrong with a malformed record (`evalkit.wellformed`), null for a sound one. The index keeps malformed
records, so that the latest-record rule sees them; `load_runs` leaves them out."""
INDEX_COLUMNS = {**{c: EPISODE_COLUMNS[c] for c in CACHED[:-1]}, "problem": _S}
INDEX_VERSION = 5
"""The version of the rows `episode_row` makes: bump it when they, or the columns, change, so that every
cached index (`index_cache`) and kept one (`kept`) is built anew."""


def config_label(config: Any) -> str | None:
    """A run's env configuration (run.json's `env_config`, a dict such as {"game_name": "catch"}) as one
    short stable label, `game_name=catch` (keys sorted, values as compact JSON unless plain text): what
    keys a task apart from the same task id of another configuration. None for no configuration said
    (an empty dict, a foreign run)."""
    if not isinstance(config, dict) or not config:
        return None
    parts = []
    for k in sorted(config, key=str):
        v = config[k]
        shown = v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
        parts.append(f"{k}={shown}")
    return wellformed.text(", ".join(parts))


def text(v: Any) -> str | None:
    return None if v is None else wellformed.text(str(v))


def number(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError, OverflowError):  # an integer beyond a float's range is no number here
        return None


def integer(v: Any) -> int:
    try:
        n = int(v or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if -(2**63) <= n < 2**63 else 0  # a column of 64-bit integers cannot hold it


def episode_row(d: dict, offset: int | None) -> tuple:
    """The cached columns (`CACHED`) of one episode dict, in declared order. The key is `keys.record_key`'s:
    null for a record without a usable one."""
    return _row(d, offset) + (wellformed.summary(record_problems(d)),)


def _row(d: dict, offset: int | None) -> tuple:
    u = d.get("usage") if isinstance(d.get("usage"), dict) else {}
    grade = d.get("grade") if isinstance(d.get("grade"), dict) else None
    reward = number(d.get("reward"))
    err_cls = d.get("error_class") or None
    turns = d.get("turns") or []
    inp, out, cr, cw = (
        integer(u.get("input")),
        integer(u.get("output")),
        integer(u.get("cache_read")),
        integer(u.get("cache_write")),
    )
    err = d.get("error")
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    switches = d.get("provider_switches")
    return (
        offset,
        text(info.get("importer")) or "evalkit",
        text(record_key(d)),  # a lone surrogate in it becomes "?", as in every other text
        text(d.get("model")),
        text(d.get("env")),
        text(d.get("surface")),
        text(d.get("mode")),
        text(d.get("split")),
        text(d.get("task_id")),
        text(d.get("evalset_task")),
        text(d.get("tier")),
        number(d.get("difficulty_score")),
        text(d.get("skin")),
        text(d.get("coordinates")),
        integer(d.get("repeat")),
        text(d.get("episode_id")),
        text(d.get("prompt_version")),
        reward,
        err_cls is None and reward is not None,
        number(grade.get("total")) if grade else None,
        json.dumps(grade, default=str) if grade else None,
        text(d.get("end_reason")),
        text(err_cls),
        None if err is None else wellformed.text(str(err)[:300]),
        number(info.get("harness_reward")),
        None if info.get("harness_error") is None else wellformed.text(str(info["harness_error"])[:300]),
        bool(d.get("auto_submitted")),
        inp,
        out,
        cr,
        cw,
        integer(u.get("reasoning_tokens")),
        integer(u.get("reasoning_chars")),
        inp + out + cr + cw,
        number(d.get("cost_usd")),
        integer(d.get("n_turns")),
        integer(d.get("tool_calls")),
        integer(d.get("tool_errors")),
        integer(d.get("parse_errors")),
        integer(d.get("drafts")),
        len(switches) if isinstance(switches, list) else 0,
        number(d.get("seconds")),
        number(d.get("model_seconds")),
        number(d.get("env_seconds")),
        text(d.get("started")),
        text(d.get("target")),
        text(d.get("frame0")),
        text(d.get("render")),
        sum(1 for t in turns if isinstance(t, dict) and t.get("frame")),
    )


def frame(rows: list[tuple], columns: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=pl.Schema(columns), orient="row")


def eager(df: Any, what: str = "this") -> pl.DataFrame:
    """A Polars frame to work on: a LazyFrame is collected; a pandas frame (or anything else) is refused in
    one line that says how to convert it, rather than failing later on a missing Polars method."""
    if isinstance(df, pl.DataFrame):
        return df
    if isinstance(df, pl.LazyFrame):
        return df.collect()
    kind = f"{type(df).__module__.split('.')[0]}.{type(df).__name__}"
    hint = " (convert it with pl.from_pandas(df))" if kind.startswith("pandas.") else ""
    raise TypeError(f"{what} takes a Polars DataFrame or LazyFrame (from load_runs), not a {kind}{hint}")
