"""Search over what the model said and did, step by step: the viewer's index and its query language.

The index holds one row per step of every episode (run, key, step, text), where a step's text is the turn's
model text, its reasoning, and each tool call's name, arguments and result; it is built in one pass over a
trace (the same latest-record-per-key rule as every reader) and searched in memory.

A query matches whole words and phrases, in any case: `round 2` finds those two words in a row (not
"backg**round** … 2"), `(round 2)` with its brackets; several quoted phrases must all occur in the
episode, each anywhere: `"round 2" "red circle"`. An episode matches when every phrase occurs in some step;
the steps listed are those that hold at least one phrase.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.records import rundir
from evalkit.records.jsonl import placed_lines

INDEX_SCHEMA = {"run": pl.String, "key": pl.String, "step": pl.Int32, "text": pl.String}
FIELD_CAP = 20_000
"""Characters of one field (a turn's text, one tool result, ...) kept in the index: a 10 MB field is
searched in its first part only, and the index of a large run stays in memory."""
SNIPPET = 70
"""Characters shown either side of a hit."""


def _field(value: Any) -> str:
    if isinstance(value, str):
        return value[:FIELD_CAP]
    if value is None or value == {} or value == []:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)[:FIELD_CAP]
    except (TypeError, ValueError):
        return ""


def step_texts(turns: Any) -> list[str]:
    """The searchable text of each turn of a record dict, in order (step 1 first)."""
    out = []
    for t in turns if isinstance(turns, list) else []:
        if not isinstance(t, dict):
            out.append("")
            continue
        parts = [_field(t.get("text")), _field(t.get("reasoning"))]
        for c in t.get("calls") or []:
            if isinstance(c, dict):
                parts += [_field(c.get("name")), _field(c.get("args")), _field(c.get("result"))]
        out.append("\n".join(p for p in parts if p))
    return out


def _rows(run: str, pairs: Iterable[tuple[str, dict]]) -> pl.DataFrame:
    keys: list[str] = []
    steps: list[int] = []
    texts: list[str] = []
    for key, d in pairs:
        per = step_texts(d.get("turns"))
        for i, text in enumerate(per or [""], 1 if per else 0):
            keys.append(key)
            steps.append(i)
            texts.append(text)
    return pl.DataFrame(
        {"run": [run] * len(keys), "key": keys, "step": steps, "text": texts}, schema=INDEX_SCHEMA
    )


def _complete_lines(path: Path, start: int) -> tuple[list[tuple[int, dict]], int]:
    """(offset, dict) of each whole, readable line from byte `start`, and where the last whole line ends (a
    line still being written is left for the next read)."""
    lines = list(placed_lines(path, start, whole=True))
    end = lines[-1][1] if lines else start
    return [(offset, d) for offset, _, d in lines if d is not None], end


_INDEXES: dict[str, tuple[Any, pl.DataFrame]] = {}
"""The latest index of each run, with what it was built from: for a native run where its trace's indexed
part ends and the bytes before that (a trace that grew is indexed from there on: a batch still running
appends an episode every few seconds), for a foreign run its signature. One per run: a growing run must not
pile up copies of a large index."""
_TAIL = 64


def _tail(path: Path, end: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(max(0, end - _TAIL))
        return f.read(min(end, _TAIL))


def step_index(run: str | Path, imported: Any) -> pl.DataFrame:
    """(run, key, step, text) for every step of every episode of `run`; an episode without turns has one
    row (step 0, no text) so that it is still listed. A native run is read once and then only as it grows
    (an episode recorded again replaces its rows: the latest record of a key counts, as everywhere);
    `imported(run)` gives a foreign run's records by key (the viewer's cached import)."""
    run = Path(run)
    name = str(run)
    prev = _INDEXES.get(name)
    if not rundir.is_native(run):
        sig = rundir.trace_signature(run)
        if prev is None or prev[0] != sig:
            prev = _INDEXES[name] = (sig, _rows(name, imported(run).items()))
        return prev[1]
    path = rundir.trace_file(run)  # one that leads out of the run is refused, as by every reader
    start, base = 0, None
    size = path.stat().st_size
    if prev is not None and isinstance(prev[0], tuple) and len(prev[0]) == 3 and prev[0][0] == "native":
        _, end, tail = prev[0]
        if size >= end and _tail(path, end) == tail:
            if size == end:
                return prev[1]
            start, base = end, prev[1]
    lines, end = _complete_lines(path, start)
    latest = rundir.latest_records(lines, key=lambda p: rundir.record_key(p[1]))
    new = _rows(name, ((rundir.record_key(d) or f"#{o}", d) for o, d in latest))
    if base is not None:
        again = new.get_column("key").unique()
        new = pl.concat([base.filter(~pl.col("key").is_in(again.implode())), new])
    _INDEXES[name] = (("native", end, _tail(path, end)), new)
    return new


# ------------------------------------------------------------------------------------------------ query

_QUOTED = re.compile(r'"([^"]*)"')
# What Rust's regex (Polars) and Python's re both read as literal once escaped.
_META = re.compile(r"([\\.+*?()|\[\]{}^$#&\-~])")


def phrases(query: str) -> list[str]:
    """The phrases of a query: each quoted part, and what is left outside quotes as one more phrase."""
    quoted = [" ".join(p.split()) for p in _QUOTED.findall(query)]
    rest = " ".join(_QUOTED.sub(" ", query).replace('"', " ").split())
    return [p for p in [*quoted, rest] if p]


def phrase_pattern(phrase: str) -> str:
    """A case-insensitive regex for `phrase` as whole words: any run of whitespace between its words, and
    a word boundary at each end that is a letter or digit (so `(round 2)` still matches after a letter)."""
    body = r"\s+".join(_META.sub(r"\\\1", w) for w in phrase.split())
    head = r"\b" if re.match(r"\w", phrase[0]) else ""
    tail = r"\b" if re.match(r"\w", phrase[-1]) else ""
    return f"(?i){head}{body}{tail}"


def matching_steps(index: pl.DataFrame, query: str) -> pl.DataFrame:
    """(run, key, step) of every step holding at least one phrase of `query`, in episodes where every
    phrase occurs somewhere; ordered by episode (index order), then step."""
    pats = [phrase_pattern(p) for p in phrases(query)]
    if not pats:
        return index.select("run", "key", "step").clear()
    flags = index.select(
        "run", "key", "step", *[pl.col("text").str.contains(p).alias(f"_p{i}") for i, p in enumerate(pats)]
    )
    names = [f"_p{i}" for i in range(len(pats))]
    whole = (
        flags.group_by("run", "key").agg(pl.all_horizontal(pl.col(n).any() for n in names).alias("_all"))
    ).filter("_all")
    steps = flags.filter(pl.any_horizontal(names)).join(whole.select("run", "key"), on=["run", "key"])
    # The join does not keep the index's order: put episodes back in it (the order of the trace).
    order = index.select("run", "key").unique(maintain_order=True).with_row_index("_o")
    return steps.join(order, on=["run", "key"]).sort("_o", "step").select("run", "key", "step")


def search(index: pl.DataFrame, query: str) -> pl.DataFrame:
    """(run, key) of the episodes that match `query`, with the first matching step (`first_hit`) and how
    many steps match (`hits`)."""
    return (
        matching_steps(index, query)
        .group_by("run", "key", maintain_order=True)
        .agg(pl.col("step").first().alias("first_hit"), pl.len().alias("hits"))
    )


def snippet(text: str, query: str, width: int = SNIPPET) -> str:
    """The first hit of any phrase of `query` in `text`, with `width` characters either side, on one line."""
    best = None
    for p in phrases(query):
        m = re.search(phrase_pattern(p), text)
        if m and (best is None or m.start() < best.start()):
            best = m
    if best is None:
        return ""
    lo, hi = max(0, best.start() - width), min(len(text), best.end() + width)
    out = ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")
    return " ".join(out.split())


def hit_rows(index: pl.DataFrame, steps: pl.DataFrame, query: str, limit: int = 500) -> pl.DataFrame:
    """The first `limit` matching steps with a snippet of each: (run, key, step, snippet)."""
    top = steps.head(limit).join(index, on=["run", "key", "step"], how="left", maintain_order="left")
    snips = [snippet(t or "", query) for t in top.get_column("text").to_list()]
    return top.select("run", "key", "step").with_columns(pl.Series("snippet", snips, pl.String))
