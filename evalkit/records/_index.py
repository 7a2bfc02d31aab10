"""The episode index of a native trace, read by msgspec instead of `json.loads` per line.

`columns.episode_row` over `traces.iter_offsets` stays the reference: this module must give the same frame,
row for row, and hands every line it cannot vouch for to that reference. Each line is decoded by msgspec
into only the fields the index needs (`_Episode`); everything else on the line (the final document, the
tool calls, the turns but their frame) is skipped, though still checked to be JSON. The fields are typed
as strictly as the reference converts them (text is a string or null, a count an integer within 64 bits, a
reward a number, a grade an object), so a value the reference would have to coerce makes msgspec refuse
the line, and the reference reads it. msgspec is stricter than `json.loads` in other ways (NaN, lone
surrogates, numbers out of range): those lines go the reference way too. It is more lenient in one: it does
not check that the text it skips is UTF-8, so a line with a byte that is not goes the reference way first.

Whether a record is malformed (`evalkit.wellformed`) depends on nested fields the decode skips; a line
`types.line_pattern` matches may be, and takes the reference path. That regex runs over every line in
Polars, in a thread beside the decode (Polars does not hold the GIL).

A line that names a harness's own reward or error (`info.harness_reward`, `info.harness_error`, which only
an importer sets) goes the reference way too: evalkit's own records never hold them, so the fast path gives
those two columns null.

A cold load of 100,000 episodes (710 MB), profiled: the NDJSON reader of Polars this replaces (it builds
every nested value) and eight regexes over the whole of every line (to pick the lines it could read) took
~45% of the time each. Now the main thread is mostly msgspec's decode (a third of it skipping what the
index does not need), then building the columns; the one regex left runs beside it.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Annotated, Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa

from evalkit.types import line_pattern

log = logging.getLogger(__name__)

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean

# Fields read as text (`columns.text`), as floats (`columns.number`) and as counts (`columns.integer`).
_TEXT = (
    "key model env surface mode split task_id evalset_task tier skin coordinates episode_id prompt_version "
    "end_reason error_class error started target frame0 render"
).split()
_NUM = "difficulty_score reward cost_usd seconds model_seconds env_seconds".split()
_COUNT = "repeat n_turns tool_calls tool_errors parse_errors drafts".split()
_USAGE = ("input", "output", "cache_read", "cache_write", "reasoning_tokens", "reasoning_chars")

# What the reference reads as itself, and nothing it would coerce: `columns.integer` makes 0 of an integer
# outside 64 bits and `int()` of a float or a string; `columns.number` takes a bool or a numeric string.
_Str = str | None
_Num = float | None
_Int = Annotated[int, msgspec.Meta(ge=-(2**63) + 1, le=2**63 - 1)] | None
_NULL = msgspec.Raw(b"null")


class _Usage(msgspec.Struct, gc=False):
    input: _Int = None
    output: _Int = None
    cache_read: _Int = None
    cache_write: _Int = None
    reasoning_tokens: _Int = None
    reasoning_chars: _Int = None


_NO_USAGE = _Usage()


class _Info(msgspec.Struct, gc=False):
    importer: _Str = None
    harness_reward: None = None  # a harness's own outcome: only null here, else the reference reads it
    harness_error: None = None


class _Turn(msgspec.Struct, gc=False):
    frame: _Str = None


_Episode = msgspec.defstruct(
    "_Episode",
    [(k, _Str, None) for k in _TEXT]
    + [(k, _Num, None) for k in _NUM]
    + [(k, _Int, None) for k in _COUNT]
    + [
        ("grade", msgspec.Raw, _NULL),  # its raw text: an object, null, or (the reference's) anything else
        ("auto_submitted", bool | None, None),
        ("usage", _Usage | None, None),
        ("info", _Info | None, None),
        ("provider_switches", list[msgspec.Raw] | None, None),
        ("turns", list[_Turn] | None, None),
    ],
    gc=False,
)
_DECODER = msgspec.json.Decoder(_Episode)
_DECODE, _DECODE_LINES = _DECODER.decode, _DECODER.decode_lines
_BLOCK = 1024  # lines per msgspec call; a block with a line it refuses is read again line by line
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError)


def _lines(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
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


def _not_utf8(buf: bytes, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which lines are not UTF-8 (only lines with a byte ≥ 0x80 are decoded to find out)."""
    bad = np.zeros(len(starts), bool)
    if buf.isascii():
        return bad
    step = 1 << 22  # in 4 MB chunks that stay in cache: several times faster than one 700 MB mask
    last = -1  # a line across two chunks is decoded once
    for lo in range(0, len(arr), step):
        high = np.flatnonzero(arr[lo : lo + step] >= 0x80)
        for i in np.unique(np.searchsorted(starts, high + lo, side="right") - 1).tolist():
            if i > last:
                try:
                    buf[starts[i] : ends[i]].decode()
                except UnicodeDecodeError:
                    bad[i] = True
                last = i
    return bad


def _suspects(buf: bytes, starts: np.ndarray, ends: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Which lines `types.line_pattern` matches (those that may hold a malformed record); lines in `skip`
    (not UTF-8) are not looked at."""
    if skip.any():
        blank = np.frombuffer(buf, np.uint8).copy()
        for a, b in zip(starts[skip].tolist(), ends[skip].tolist(), strict=True):
            blank[a:b] = 32
        buf = blank.tobytes()
    # One string per line, newline included, over the buffer as it is: no copy, no per-line decode. In
    # halves, so that Polars' threads share them once the decode beside them is done.
    offsets = np.concatenate([starts, [len(buf)]]).astype(np.int64)
    data = pa.py_buffer(buf)
    cut = [0, len(starts) // 2, len(starts)]
    parts = [
        pl.LazyFrame(
            {"l": pa.LargeStringArray.from_buffers(b - a, pa.py_buffer(offsets[a : b + 1]), data)}
        ).select(pl.col("l").str.contains(line_pattern()).fill_null(True))
        for a, b in zip(cut, cut[1:], strict=False)
        if b > a
    ]
    return np.concatenate([df["l"].to_numpy() for df in pl.collect_all(parts)])


def _decode(buf: bytes, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray) -> tuple[list, list[int]]:
    """The lines marked ok that msgspec reads as an `_Episode`, and their line numbers."""
    view = memoryview(buf)
    arr = np.frombuffer(buf, np.uint8)
    # A block of lines that each open with "{" and close with "}" is decoded in one call: each of them
    # holds at least one value, so as many values as lines means one each (and no value across lines,
    # which would need a line ending in ":", "," or "["). Any other block is decoded line by line.
    whole = ok & (ends > starts)
    whole &= (arr[np.minimum(starts, len(arr) - 1)] == ord("{")) & (arr[np.maximum(ends - 1, 0)] == ord("}"))
    s, e = starts.tolist(), ends.tolist()
    eps: list = []
    lines: list[int] = []
    for lo in range(0, len(s), _BLOCK):
        hi = min(lo + _BLOCK, len(s))
        if whole[lo:hi].all():
            try:
                got = _DECODE_LINES(view[s[lo] : e[hi - 1]])
            except _REFUSED:
                got = []
            if len(got) == hi - lo:
                eps += got
                lines += range(lo, hi)
                continue
        for i in range(lo, hi):
            if ok[i]:
                try:
                    eps.append(_DECODE(view[s[i] : e[i]]))
                except _REFUSED:
                    continue
                lines.append(i)
    return eps, lines


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


def _values(eps: list, lines: list[int]) -> tuple[list[pl.Series], list[int]]:
    """The decoded records' fields as Series (of lines as `_line`), and the lines the reference must read
    after all (a grade that is neither an object nor null). Nothing here runs in Polars' thread pool, so
    none of it waits for the regex that may still hold it (`fast`)."""
    raw = [bytes(e.grade) for e in eps]
    odd = [i for i, g in enumerate(raw) if g[:1] != b"{" and g != b"null"]
    if odd:
        drop = set(odd)
        keep = [i for i in range(len(eps)) if i not in drop]
        eps, raw = [eps[i] for i in keep], [raw[i] for i in keep]
        lines, odd = [lines[i] for i in keep], [lines[i] for i in odd]
    usage = [e.usage or _NO_USAGE for e in eps]
    info = [e.info for e in eps]
    frame = attrgetter("frame")
    return [
        *[pl.Series(k, list(map(attrgetter(k), eps)), _S) for k in _TEXT],
        *[pl.Series(k, list(map(attrgetter(k), eps)), _F) for k in _NUM],
        *[pl.Series(k, list(map(attrgetter(k), eps)), _I) for k in _COUNT],
        *[pl.Series(k, list(map(attrgetter(k), usage)), _I) for k in _USAGE],
        pl.Series("_line", lines, _I),
        pl.Series("auto_submitted", [e.auto_submitted for e in eps], _B),
        pl.Series("importer", [None if i is None else i.importer for i in info], _S),
        pl.Series("provider_switches", [len(e.provider_switches or ()) for e in eps], _I),
        pl.Series("n_frames", [sum(map(bool, map(frame, e.turns))) if e.turns else 0 for e in eps], _I),
        pl.Series("_grade", [g.decode() if g != b"null" else None for g in raw], _S),
    ], odd


def _fast_columns(values: list[pl.Series]) -> pl.DataFrame:
    """The reference's columns from `_values`."""
    df = pl.DataFrame(values)
    raw_grade = df["_grade"]
    has = raw_grade.is_not_null()
    plain, p_text, p_total = _plain_grades(raw_grade)
    plain &= has
    other = has & ~plain
    texts, totals = _grades(raw_grade.filter(other).to_list())
    idx = np.flatnonzero(other.to_numpy())
    g_text = p_text.zip_with(plain, pl.Series([None] * df.height, dtype=_S))
    g_total = p_total.zip_with(plain, pl.Series([None] * df.height, dtype=_F))
    g_text = g_text.scatter(idx, pl.Series(texts, dtype=_S))
    g_total = g_total.scatter(idx, pl.Series(totals, dtype=_F))
    tok = [pl.col(k).fill_null(0) for k in _USAGE]
    err_cls = pl.when(pl.col("error_class") != "").then(pl.col("error_class"))
    importer = pl.col("importer")
    out = df.select(
        pl.col("_line"),
        pl.when(importer != "").then(importer).otherwise(pl.lit("evalkit")).alias("source"),
        pl.col("key").replace("", None),  # as traces.record_key: an empty key is no key
        *[pl.col(c) for c in _TEXT if c not in ("key", "error_class", "error")],
        *[pl.col(c) for c in _NUM],
        *[pl.col(c).fill_null(0) for c in _COUNT],
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
        pl.col("provider_switches"),
        pl.col("n_frames"),
        pl.lit(None, _S).alias("problem"),  # a line that might hold a malformed record took the exact path
    )
    return out


def fast(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows of the lines the fast path reads (`_line` their line number), and which lines it leaves to
    the reference."""
    arr = np.frombuffer(buf, np.uint8)
    not_utf8 = _not_utf8(buf, arr, starts, ends)
    ok = ~not_utf8
    if ends[-1] == len(buf):
        ok[-1] = False  # a last line without its newline may be torn: the reference counts it
    found: dict[str, Any] = {}

    def check() -> None:
        try:
            found["suspect"] = _suspects(buf, starts, ends, not_utf8)
        except BaseException as e:  # raised again in the caller's thread
            found["error"] = e

    checker = threading.Thread(target=check, name="evalkit-index-check", daemon=True)
    checker.start()
    # 100,000 records make millions of objects, none in a cycle: with the collector on, it walked them over
    # and over (~9% of a cold load's profile).
    was = gc.isenabled()
    gc.disable()
    try:
        eps, lines = _decode(buf, starts, ends, ok)
        values, odd = _values(eps, lines)
        del eps
    finally:
        if was:
            gc.enable()
    checker.join()
    if "error" in found:
        raise found["error"]
    df = _fast_columns(values)
    slow = np.ones(len(starts), bool)
    slow[df["_line"].to_numpy()] = False
    slow |= found["suspect"]
    return df.filter(~pl.Series(slow[df["_line"].to_numpy()])), slow


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
    if not len(buf):
        return empty
    starts, ends = _lines(buf)
    if not len(starts):
        return empty
    fast_rows, slow = fast(buf, starts, ends)
    parts = [fast_rows] if fast_rows.height else []
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
