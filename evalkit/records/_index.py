"""The episode index of a native trace, built by Polars' NDJSON reader instead of `json.loads` per line.

`columns.episode_row` over `traces.iter_offsets` stays the reference: this module must give the same frame,
row for row, and hands every line it cannot vouch for to that reference. A line takes the fast path only if
it is one `{...}` object on a line of its own, valid UTF-8 without control characters or lone surrogate
escapes, whose text-typed fields hold strings (Polars would print a number or `true` where `str()` gives
`1.0` or `True`) and whose top-level `grade` is a flat object or null — the first "grade" key reached
through scalars only, as `json.dumps` of an EpisodeRecord writes it (real records hold more grades, in
their final_doc and tool calls). Polars itself is stricter than `json.loads` (NaN, numbers out of range, a
string where a number belongs): a block it rejects is halved until the offending lines are found, and those
go the reference way too. Torn and corrupt lines therefore cost a few extra parses of a small block, never
the load.

A line that names a harness's own reward or error (`info.harness_reward`, `info.harness_error`, which only
an importer sets) goes the reference way too: evalkit's own records never hold them, so the fast path gives
those two columns null.

Not reproduced: objects with a key written twice (`json.loads` keeps the last, Polars the first) or keys
spelled with escapes; `json.dumps` writes neither.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from evalkit.types import line_pattern

log = logging.getLogger(__name__)

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean

# Fields read as text; `str()` of anything else differs from what Polars makes of it.
_TEXT = (
    "key model env surface mode split task_id evalset_task tier skin coordinates episode_id prompt_version "
    "end_reason error_class error started target frame0 render"
).split()
_NUM = {"difficulty_score": _F, "reward": _F, "cost_usd": _F, "seconds": _F, "model_seconds": _F}
_NUM |= {"env_seconds": _F, "repeat": _I, "n_turns": _I, "tool_calls": _I, "tool_errors": _I}
_NUM |= {"parse_errors": _I, "drafts": _I}
_USAGE = ("input", "output", "cache_read", "cache_write", "reasoning_tokens", "reasoning_chars")
SCHEMA = pl.Schema(
    {c: _S for c in _TEXT}
    | _NUM
    | {
        "grade": _S,  # only whether it is null: its text comes from the line (see _grades)
        "auto_submitted": _B,
        "usage": pl.Struct({k: _I for k in _USAGE}),
        "info": pl.Struct({"importer": _S}),
        "provider_switches": pl.List(_S),
        "turns": pl.List(pl.Struct({"frame": _S})),
    }
)
_TURNS = pl.Schema({"turns": SCHEMA["turns"]})
_HEAD = pl.Schema({k: v for k, v in SCHEMA.items() if k != "turns"})
_NOT_TEXT = r'"(?:' + "|".join(_TEXT + ["frame", "importer"]) + r')"\s*:\s*[^"n\s]'
_STR = r'"(?:[^"\\]|\\.)*"'
# The top-level grade: a "grade" key reached from the line's opening brace through strings and scalars
# only (so at depth 1, not the one a final_doc or a tool call's arguments may hold), whose value is a flat
# object (strings may hold anything, values no nested {} or []) or null. `json.dumps` of an EpisodeRecord
# writes grade after scalars alone; a line that puts it after a nested value takes the reference path.
_GRADE = r'^\{(?:[^{}\[\]"]|' + _STR + r')*?"grade"\s*:\s*(\{(?:[^{}\[\]"]|' + _STR + r")*\}|null)"
_FRAME = r'"frame"\s*:\s*"[^"]'  # a "frame" key, at any depth, with a non-empty string
_HARNESS = r'"harness_(?:reward|error)"'
_SURROGATE = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
_PAIR = r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_BLOCK = 8 << 20  # bytes per Polars call: a rejected block is re-parsed in halves, so keep it small
_PARSE_ERRORS = (pl.exceptions.PolarsError, pl.exceptions.PanicException, ValueError)


def _lines(buf: bytes, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (without the newline) of every line, as `for raw in f` splits a binary file."""
    # bytes.find is a memchr per line: on a 700 MB trace, ~10x faster than comparing every byte in numpy.
    found, find = [], buf.find
    i = find(b"\n")
    while i != -1:
        found.append(i)
        i = find(b"\n", i + 1)
    nl = np.array(found, np.int64)
    starts = np.concatenate([[0], nl + 1])
    ends = np.concatenate([nl, [len(buf)]])
    if starts[-1] == len(buf):  # the file ends with a newline: no fragment after it
        starts, ends = starts[:-1], ends[:-1]
    return starts.astype(np.int64), ends.astype(np.int64)


def _texts(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> pl.Series:
    """Each line as text, null where it is not UTF-8."""
    if b"\x01" not in buf:
        try:
            s = pl.read_csv(
                buf,
                has_header=False,
                separator="\x01",
                quote_char=None,
                schema={"l": _S},
                comment_prefix=None,
            )["l"]
            if s.len() == len(starts):
                return s
        except _PARSE_ERRORS:
            pass  # not UTF-8 somewhere: line by line below
    out: list[str | None] = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        try:
            out.append(buf[a:b].decode())
        except UnicodeDecodeError:
            out.append(None)
    return pl.Series("l", out, dtype=_S)


def _eligible(
    buf: bytes, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, pl.DataFrame]:
    """Which lines the fast path may read; per line, the raw text of its grade object and whether any
    "frame" in it is a non-empty string."""
    ok = ends > starts
    ok &= (arr[np.minimum(starts, len(arr) - 1)] == ord("{")) & (arr[np.maximum(ends - 1, 0)] == ord("}"))
    if ends[-1] == len(buf):
        ok[-1] = False  # a last line without its newline may be torn
    # In 4 MB chunks that stay in cache: several times faster than one pass over a 700 MB mask.
    step = 1 << 22
    ctl = np.concatenate(
        [np.flatnonzero(arr[i : i + step] < 32) + i for i in range(0, len(arr), step)]
        or [np.zeros(0, np.int64)]
    )
    ctl = ctl[arr[ctl] != 10]
    ok[np.searchsorted(starts, ctl, side="right") - 1] = False
    line = pl.col("l")
    checks = (
        pl.DataFrame({"l": _texts(buf, starts, ends)})
        .lazy()
        .select(
            line.is_not_null().alias("utf8"),
            line.str.contains(_NOT_TEXT).fill_null(True).alias("not_text"),
            line.str.contains(line_pattern()).fill_null(True).alias("suspect"),
            line.str.contains(_HARNESS).fill_null(True).alias("harness"),
            line.str.extract(_GRADE, 1).alias("grade"),
            line.str.contains(_FRAME).fill_null(False).alias("has_frame"),
            line.str.count_matches(_SURROGATE).fill_null(0).alias("sur"),
            line.str.count_matches(_PAIR).fill_null(0).alias("pairs"),
        )
        .collect()
    )
    ok &= checks["utf8"].to_numpy() & ~checks["not_text"].to_numpy() & ~checks["suspect"].to_numpy()
    ok &= ~checks["harness"].to_numpy()
    ok &= checks["sur"].to_numpy() == 2 * checks["pairs"].to_numpy()
    return ok, checks.select("grade", "has_frame")


def _parse(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, schema: pl.Schema
) -> tuple[pl.DataFrame, list[int]]:
    """Polars rows of the lines marked ok (their line number in `_line`), and the ok lines it rejected."""
    work = buf
    if not ok.all():
        blank = np.frombuffer(buf, np.uint8).copy()
        for a, b in zip(starts[~ok].tolist(), ends[~ok].tolist(), strict=True):
            blank[a:b] = 32  # Polars skips blank lines; the line numbers of the others stay put
        work = blank.tobytes()
    cum = np.concatenate([[0], np.cumsum(ok)])
    frames: list[pl.DataFrame] = []
    rejected: list[int] = []

    def read(lo: int, hi: int) -> None:
        want = int(cum[hi] - cum[lo])
        if want == 0:
            return
        try:
            df = pl.read_ndjson(work[starts[lo] : ends[hi - 1]], schema=schema, low_memory=True)
            if df.height != want:
                raise ValueError(f"{df.height} rows from {want} lines")
        except _PARSE_ERRORS:
            if hi - lo == 1:
                rejected.append(lo)
                return
            read(lo, (lo + hi) // 2)
            read((lo + hi) // 2, hi)
            return
        frames.append(df.with_columns(pl.Series("_line", np.flatnonzero(ok[lo:hi]) + lo)))

    lo = 0
    while lo < len(starts):
        hi = int(np.searchsorted(starts, starts[lo] + _BLOCK, side="right"))
        hi = min(max(hi, lo + 1), len(starts))
        read(lo, hi)
        lo = hi
    if not frames:
        return schema.to_frame().with_columns(pl.Series("_line", [], _I)), rejected
    return pl.concat(frames, how="vertical"), rejected


def _n_frames(turns: pl.Expr) -> pl.Expr:
    frame = pl.element().struct.field("frame")
    return turns.list.eval(frame.is_not_null() & (frame != "")).list.sum().cast(_I).fill_null(0)


def _read(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, checks: pl.DataFrame
) -> tuple[pl.DataFrame, np.ndarray]:
    """Polars rows of the ok lines, with `_grade` (raw text) and `_nf` (frames); and the lines it gave up."""
    has_frame = checks["has_frame"].to_numpy()
    # Turns are the costliest field to read; when few episodes have frames, read them for those alone.
    together = has_frame[ok].mean() > 0.5
    df, rejected = _parse(buf, starts, ends, ok, SCHEMA if together else _HEAD)
    lines = df["_line"].to_numpy()
    if together:
        df = df.with_columns(_n_frames(pl.col("turns")).alias("_nf")).drop("turns")
    else:
        nf = np.zeros(len(starts), np.int64)
        need = np.zeros(len(starts), bool)
        need[lines] = has_frame[lines]
        if need.any():
            t, rej = _parse(buf, starts, ends, need, _TURNS)
            nf[t["_line"].to_numpy()] = t.select(_n_frames(pl.col("turns")))["turns"].to_numpy()
            rejected += rej
        df = df.with_columns(pl.Series("_nf", nf[lines], _I))
    df = df.with_columns(checks["grade"].gather(lines).alias("_grade"))
    # A top-level grade the line's text did not show (a key spelled with escapes): the reference decides.
    lost = df["grade"].is_not_null() & df["_grade"].is_null()
    gone = np.zeros(len(starts), bool)
    gone[rejected] = True
    gone[df["_line"].filter(lost).to_numpy()] = True
    return df.filter(~pl.Series(gone[lines])), gone


def _f(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


_ENCODER = json.JSONEncoder(default=str)


def _grades(raw: list[str]) -> tuple[list[str | None], list[float | None]]:
    """`json.dumps` text and total of each raw grade object, exactly as the reference derives them."""
    grades = json.loads("[" + ",".join(raw) + "]") if raw else []
    texts: list[str | None]
    # One encode of the whole list, cut at the element boundaries: a dumps call per grade cost 1 s per 100k.
    # The cut is safe when "}, {" occurs only at boundaries, i.e. exactly once per boundary.
    whole = _ENCODER.encode([g for g in grades if g])[1:-1]
    n = sum(1 for g in grades if g)
    if n and whole.count("}, {") == n - 1:
        parts = iter(whole.replace("}, {", "}\x00{").split("\x00"))
        texts = [next(parts) if g else None for g in grades]
    else:
        texts = [_ENCODER.encode(g) if g else None for g in grades]
    totals = [_f(g.get("total")) if g else None for g in grades]
    return texts, totals


# A grade whose `json.dumps` text is its raw text with a space after each "," and ":": a flat, non-empty
# object of plain keys, each once, whose values are numbers as Python writes them back (an int but "-0"; a
# float with no exponent, no trailing zero but in ".0", at most 15 digits, not below 1e-4), true, false,
# null or plain strings (ASCII, no quote, escape, comma or colon), and whose total is a number or null.
# The profile of a cold load of 100,000 episodes had ~40% of its time in json.loads and json.dumps of the
# grades; a grade like these takes a vectorised string edit instead, any other the exact path.
_PLAIN_KEY = r'"[A-Za-z0-9_]+"'
_PLAIN_VALUE = (
    r"(?:0|-?[1-9][0-9]*|-?(?:0\.(?:[1-9]|0[1-9]|00[1-9]|000[1-9])[0-9]*|[1-9][0-9]*\.[0-9]+|0\.0)"
    r'|true|false|null|"[A-Za-z0-9_ .\-]*")'
)
_PAIR_RE = _PLAIN_KEY + ":" + _PLAIN_VALUE
_PLAIN_GRADE = r"^\{" + _PAIR_RE + "(?:," + _PAIR_RE + r")*\}$"
# Floats Python would write otherwise: a trailing zero ("0.50", "1.00"), or more than 15 digits.
_NOT_REPR = r'[0-9]\.[0-9]*[1-9]0+[,}]|\.00+[,}]|[0-9.]{17,}|"total":(?:"|true|false)'


def _plain_grades(raw: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """For each raw grade: whether the string edit gives its `json.dumps` text exactly, that text, and its
    total."""
    keys = raw.str.extract_all(r'"([A-Za-z0-9_]+)":')
    plain = (
        raw.str.contains(_PLAIN_GRADE)
        & ~raw.str.contains(_NOT_REPR)
        & (keys.list.len() == keys.list.n_unique())
    ).fill_null(False)
    text = raw.str.replace_all(",", ", ", literal=True).str.replace_all(":", ": ", literal=True)
    total = raw.str.extract(r'"total":(-?[0-9][0-9.]*)').cast(_F, strict=False)
    return plain, text, total


def _fast_columns(df: pl.DataFrame) -> pl.DataFrame:
    """The reference's derived columns from the Polars rows."""
    raw_grade = df["_grade"]
    has = df["grade"].is_not_null() & raw_grade.is_not_null() & (raw_grade != "null")
    plain, p_text, p_total = _plain_grades(raw_grade)
    plain &= has
    other = has & ~plain
    texts, totals = _grades(raw_grade.filter(other).to_list())
    idx = np.flatnonzero(other.to_numpy())
    g_text = p_text.zip_with(plain, pl.Series([None] * df.height, dtype=_S))
    g_total = p_total.zip_with(plain, pl.Series([None] * df.height, dtype=_F))
    g_text = g_text.scatter(idx, pl.Series(texts, dtype=_S))
    g_total = g_total.scatter(idx, pl.Series(totals, dtype=_F))
    u = pl.col("usage").struct.field
    tok = [u(k).fill_null(0) for k in _USAGE]
    err_cls = pl.when(pl.col("error_class") != "").then(pl.col("error_class"))
    importer = pl.col("info").struct.field("importer")
    return df.select(
        pl.col("_line"),
        pl.when(importer != "").then(importer).otherwise(pl.lit("evalkit")).alias("source"),
        pl.col("key").replace("", None),  # as traces.record_key: an empty key is no key
        *[pl.col(c) for c in _TEXT if c not in ("key", "error_class", "error")],
        *[pl.col(c).fill_null(0) if _NUM[c] == _I else pl.col(c) for c in _NUM],
        (err_cls.is_null() & pl.col("reward").is_not_null()).alias("scored"),
        pl.lit(g_total).alias("grade_total"),
        pl.lit(g_text).alias("grade"),
        err_cls.alias("error_class"),
        pl.col("error").str.slice(0, 300),
        pl.lit(None, _F).alias("harness_reward"),
        pl.lit(None, _S).alias("harness_error"),
        pl.col("auto_submitted").fill_null(False),
        *[
            t.alias(f"{k}_tokens" if k in ("input", "output") else k)
            for k, t in zip(_USAGE, tok, strict=True)
        ],
        (tok[0] + tok[1] + tok[2] + tok[3]).alias("tokens"),
        pl.col("provider_switches").list.len().cast(_I).fill_null(0),
        pl.col("_nf").alias("n_frames"),
        pl.lit(None, _S).alias("problem"),  # a line that might hold a malformed record took the exact path
    )


def records(
    buf: bytes,
    episode_row: Callable[[dict, int | None], tuple],
    schema: pl.Schema,
    trace: Any = "trace",
    counts: dict | None = None,
) -> pl.DataFrame:
    """Every readable record of `buf` (complete lines of a native trace, or its tail from a line start), in
    order, as the columns of `schema` (`episode_row`'s), `offset` relative to `buf`. `counts`, when given,
    gets `unreadable` (complete lines that hold no JSON object) and `torn` (1 when the last line, without its
    newline, holds none)."""
    cols = list(schema)
    empty = schema.to_frame()
    if counts is not None:  # an empty trace (a kill between its creation and its first line) counts nothing
        counts.update(unreadable=0, torn=0)
    arr = np.frombuffer(buf, np.uint8)
    if not len(buf):
        return empty
    starts, ends = _lines(buf, arr)
    if not len(starts):
        return empty
    ok, checks = _eligible(buf, arr, starts, ends)
    slow = ~ok
    parts = []
    if ok.any():
        fast, gone = _read(buf, starts, ends, ok, checks)
        slow |= gone
        parts.append(_fast_columns(fast))
    rows, lines = [], []
    bad = torn = 0
    for i in np.flatnonzero(slow).tolist():
        raw = buf[starts[i] : ends[i]]
        try:
            d = json.loads(raw)
        except ValueError:
            d = None if raw.strip() else {}
        if isinstance(d, dict) and (d or raw.strip()):
            rows.append(episode_row(d, int(starts[i])))
            lines.append(i)
        elif raw.strip():
            if ends[i] == len(buf):  # no newline after it: a write still going on, or cut by a kill
                torn = 1
            else:
                bad += 1
    if counts is not None:
        counts.update(unreadable=bad, torn=torn)
    if bad or torn:
        log.debug("%s: %d unreadable line(s) left out of the index", trace, bad + torn)
    if rows:
        ref = pl.DataFrame(rows, schema=schema, orient="row").drop("offset")
        parts.append(ref.with_columns(pl.Series("_line", lines, _I)))
    if not parts:
        return empty
    df = pl.concat([p.select(["_line"] + cols[1:]) for p in parts], how="vertical")
    if len(parts) > 1:
        df = df.sort("_line")
    off = pl.Series("offset", starts, _I)
    return df.with_columns(off.gather(df["_line"]).alias("offset")).select(cols)
