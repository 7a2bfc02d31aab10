"""The episode index of a native trace, read by msgspec instead of `json.loads` per line.

`columns.episode_row` over `traces.iter_offsets` stays the reference: this module must give the same frame,
row for row, and hands every line it cannot vouch for to that reference. Each line is decoded by msgspec
into an `_Episode`, a Struct derived from `wellformed.kinds` (`_struct`): every field a record declares, at
every depth (the turns, their calls, the plans), is typed by the kind it must hold, a field of any kind (the
final document, a call's arguments) is skipped, though still checked to be JSON. So a line msgspec reads
holds a record `wellformed.problems` finds nothing wrong with, and a malformed one goes the reference way
(which names its problems). The fields the index reads are typed as strictly as the reference converts them
(text is a string or null, a count an integer within 64 bits, a reward a number, a grade an object), so a
value the reference would have to coerce makes msgspec refuse the line too. msgspec reads keys as
`json.loads` does (escapes undone; of a duplicate key the last value, every one of them checked), and is
stricter in other ways (NaN, lone surrogates, numbers out of range, a float for an integer): those lines go
the reference way. It is more lenient in one: it does not check that the text it skips is UTF-8, so a line
with a byte that is not goes the reference way first.

A line that names a harness's own reward or error (`info.harness_reward`, `info.harness_error`, which only
an importer sets) goes the reference way too: evalkit's own records never hold them, so the fast path gives
those two columns null.

A cold load of 100,000 episodes (710 MB), profiled: the NDJSON reader of Polars this replaced (it builds
every nested value) and eight regexes over the whole of every line (to pick the lines it could read) took
~45% of the time each. Then the main thread was mostly msgspec's decode of the few fields the index needs,
beside one regex for the lines that might be malformed. msgspec now checks every field instead, so the regex
is gone; that decode builds the nested records (their strings), which cost ~1.6x as much as the skipping one
until the records were decoded and freed 128 lines at a time, while they are in the cache. It was then ~60%
of the load, and it holds the GIL: so a trace of 32 MB or more, when this process may use two CPUs, is read
in two (`_read`): a fork (`beside`) reads and decodes its later half from the file, a chunk at a time, while
this process reads the whole and decodes the first half; only the fork's fields come back (msgpack, ~27 MB
for 50,000 episodes), and only when it read the lines this process holds (else they are decoded here). Cold
load 2.4-3.05 s where one process took 3.1-3.5 s in the same runs (the 3.05: the other CPU busy, 1.02x
gained). On the main thread now: reading the file ~0.45 s, its half of the decode ~0.9 s, the fork's reply
~0.2 s, columns ~0.5 s, writing the cache ~0.15 s.
Tried and left out: a second process started anew (its imports and the hand-over cost more than it saved),
the fork decoding from this process's copy after the read (the read then not beside anything: 0.3 s more),
reading the trace in a thread while decoding (the decode slowed by what the read gained), reading it in
16 MB chunks, one `astuple` per record in `_take` (no faster while each block is in the cache).
"""

from __future__ import annotations

import gc
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter
from typing import Annotated, Any, BinaryIO, NamedTuple

import msgspec
import numpy as np
import polars as pl

from evalkit import wellformed
from evalkit.errors import NOT_JSON
from evalkit.records import beside
from evalkit.types import EpisodeRecord

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
_INT = Annotated[int, msgspec.Meta(ge=-(2**63) + 1, le=2**63 - 1)]  # wellformed.INT_LIMIT, exclusive
_Int = _INT | None
_NULL = msgspec.Raw(b"null")


class _Object(msgspec.Struct, gc=False):
    """Any JSON object, its contents skipped (checked to be JSON, never built)."""


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


# What each kind of `evalkit.wellformed` asks of a value, as msgspec checks it: never more lenient than
# `wellformed._fits` (msgspec refuses a bool or a float for an int, and a number out of a double's range).
_KIND = {
    wellformed.STR: str,
    wellformed.INT: _INT,
    wellformed.NUM: float,
    wellformed.BOOL: bool,
    wellformed.OBJ: _Object,
    wellformed.LIST: list[msgspec.Raw],
}


def _struct(cls: type, own: dict[str, tuple[Any, Any]] | None = None) -> type:
    """A Struct for a record of `cls` that msgspec reads only when `wellformed.problems` would find nothing
    wrong with it: every field `wellformed.kinds` declares is typed by its kind (or null), a list of records
    by the Struct of its items, recursively; an ANY field is left out (skipped). `own` gives the index's own
    type and default for some fields: each must be at least as strict as the field's kind."""
    own = own or {}
    fields: list[tuple[str, Any, Any]] = []
    for name, (kind, child) in wellformed.kinds(cls).items():
        if name in own:
            fields.append((name, *own[name]))
        elif kind == wellformed.OBJS:
            fields.append((name, list[_struct(child) if child else _Object] | None, None))
        elif kind != wellformed.ANY:
            fields.append((name, _KIND[kind] | None, None))
    return msgspec.defstruct(f"_{cls.__name__}", fields, gc=False)


_Episode = _struct(
    EpisodeRecord,
    {
        "grade": (msgspec.Raw, _NULL),  # its raw text: an object, null, or (the reference's) anything else
        "usage": (_Usage | None, None),
        "info": (_Info | None, None),
    },
)
_DECODER = msgspec.json.Decoder(_Episode)
_DECODE, _DECODE_LINES = _DECODER.decode, _DECODER.decode_lines
# Lines per msgspec call; a block with a line it refuses is read again line by line. Each block's fields are
# taken and its records freed before the next: 100,000 records at once (millions of nested objects) did not
# fit in the cache, and decoding and freeing them took ~1.6x as long as block by block.
_BLOCK = 128
# A trace this large is decoded in two processes when this one may use two CPUs: the lines of the later half
# of the bytes in a fork (`_read`), which starts at once while this process reads the whole trace.
_BESIDE_BYTES = 32 << 20
_BESIDE_SHARE = 0.5
_TAIL_CHUNK = 64 << 20  # what the process beside reads at a time
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)  # the last: nesting past its limit


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


class _Beside(NamedTuple):
    pos: int  # where in the file the bytes read start
    cut: int  # from there, where the process beside starts looking for a line start
    result: Callable[[], list | None]  # waits for that process's `_tail`


@contextmanager
def _read(src: BinaryIO) -> Iterator[tuple[bytes, _Beside | None]]:
    """The bytes of the open file `src` from its position to its end as it is now; of a large file, while a
    forked process (`beside`) reads and decodes its later lines when a second CPU is free."""
    pos = src.tell()
    size = os.fstat(src.fileno()).st_size - pos
    if size < _BESIDE_BYTES or not beside.spare_cpu():
        yield src.read(), None
        return
    fd, cut = src.fileno(), int(size * (1 - _BESIDE_SHARE))
    with beside.beside(lambda: _tail(fd, pos + cut, pos + size)) as theirs:
        yield src.read(size), _Beside(pos, cut, theirs)


def _tail(fd: int, lo: int, hi: int) -> list | None:
    """Run beside: the lines of the file `fd` from the first line start after `lo` to `hi`, decoded
    (`_decode_part`, a chunk at a time, so that this process holds little of the trace), after where they
    start in the file, how many bytes they are and where each of them starts (int64 bytes, from the first);
    None when no line starts there."""
    start = lo
    while (cut := (head := os.pread(fd, 1 << 16, start)).find(b"\n")) == -1:
        if not head or start >= hi:
            return None
        start += len(head)
    start += cut + 1
    cols: dict[str, list] = {k: [] for k in _TAKEN}
    lines: list[int] = []
    line_starts: list[np.ndarray] = []
    at, before, size = start, 0, _TAIL_CHUNK  # before: the lines of the chunks done
    while at < hi:
        want = min(hi - at, size)
        buf = os.pread(fd, want, at)
        if not buf:  # the file was cut before here
            break
        last = len(buf) < want or at + len(buf) >= hi  # the end, or the file was cut meanwhile
        end = len(buf) if last else buf.rfind(b"\n") + 1
        if not end:  # a line longer than a chunk: read it again, whole
            size *= 2
            continue
        size = _TAIL_CHUNK
        starts, ends = _lines(buf)
        if end < len(buf):  # the line that goes on in the next chunk is read there
            starts, ends = starts[:-1], ends[:-1]
        _add(cols, lines, *_decode_part(buf, starts, ends, _readable(buf, starts, ends)), before)
        line_starts.append(starts + (at - start))
        before += len(starts)
        at += end
        if last:
            break
    if at == start:
        return None
    return [start, at - start, np.concatenate(line_starts).tobytes(), cols, lines]


def _decode(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, tail: _Beside | None
) -> tuple[dict, list[int]]:
    """`_decode_part` of every line, the later ones by the process beside (`_read`) when there is one and
    it read the same bytes as `buf` holds."""
    if tail is None:
        return _decode_part(buf, starts, ends, ok)
    first = buf.find(b"\n", tail.cut) + 1  # where `_tail` starts: the first line start after the cut
    mid = int(np.searchsorted(starts, first)) if first else len(starts)
    cols, lines = _decode_part(buf, starts[:mid], ends[:mid], ok[:mid])
    got = tail.result() if mid < len(starts) else None
    if (
        got is not None
        and got[:2] == [tail.pos + first, len(buf) - first]
        and np.array_equal(np.frombuffer(got[2], np.int64), starts[mid:] - first)
    ):
        more, more_lines = got[3:]
    else:  # nothing beside, or it read other lines (a file cut or rewritten meanwhile): decoded here
        more, more_lines = _decode_part(buf, starts[mid:], ends[mid:], ok[mid:])
    _add(cols, lines, more, more_lines, mid)
    return cols, lines


def _add(cols: dict[str, list], lines: list[int], more: dict, more_lines: list[int], first: int) -> None:
    """Append the fields and line numbers `_decode_part` gave for lines from `first` on."""
    for k, col in cols.items():
        col += more[k]
    lines += (np.asarray(more_lines, np.int64) + first).tolist()


def _decode_part(buf: bytes, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray) -> tuple[dict, list[int]]:
    """The fields (`_take`) of the lines marked ok that msgspec reads as an `_Episode`, and their line
    numbers (from 0, the first of `starts`)."""
    view = memoryview(buf)
    arr = np.frombuffer(buf, np.uint8)
    # A block of lines that each open with "{" and close with "}" is decoded in one call: each of them
    # holds at least one value, so as many values as lines means one each (and no value across lines,
    # which would need a line ending in ":", "," or "["). Any other block is decoded line by line.
    whole = ok & (ends > starts)
    whole &= (arr[np.minimum(starts, len(arr) - 1)] == ord("{")) & (arr[np.maximum(ends - 1, 0)] == ord("}"))
    s, e = starts.tolist(), ends.tolist()
    cols: dict[str, list] = {k: [] for k in _TAKEN}
    lines: list[int] = []
    for lo in range(0, len(s), _BLOCK):
        hi = min(lo + _BLOCK, len(s))
        got: list = []
        if whole[lo:hi].all():
            try:
                got = _DECODE_LINES(view[s[lo] : e[hi - 1]])
            except _REFUSED:
                pass
        if len(got) == hi - lo:
            lines += range(lo, hi)
        else:
            got = []
            for i in range(lo, hi):
                if ok[i]:
                    try:
                        got.append(_DECODE(view[s[i] : e[i]]))
                    except _REFUSED:
                        continue
                    lines.append(i)
        _take(got, cols)
    return cols, lines


_FIELDS = _TEXT + _NUM + _COUNT
_TAKEN = [*_FIELDS, *_USAGE, "auto_submitted", "importer", "provider_switches", "n_frames", "_grade"]
_FRAME = attrgetter("frame")


def _take(eps: list, cols: dict[str, list]) -> None:
    """Append the fields the index needs of the decoded records `eps` to `cols`."""
    for k in _FIELDS:
        cols[k] += map(attrgetter(k), eps)
    usage = [e.usage or _NO_USAGE for e in eps]
    for k in _USAGE:
        cols[k] += map(attrgetter(k), usage)
    cols["auto_submitted"] += [e.auto_submitted for e in eps]
    cols["importer"] += [None if e.info is None else e.info.importer for e in eps]
    cols["provider_switches"] += [len(e.provider_switches or ()) for e in eps]
    cols["n_frames"] += [sum(map(bool, map(_FRAME, e.turns))) if e.turns else 0 for e in eps]
    cols["_grade"] += [bytes(e.grade) for e in eps]


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


def _values(cols: dict[str, list], lines: list[int]) -> list[pl.Series]:
    """The decoded records' fields (`_decode`) as Series, with their line numbers as `_line`, but for the
    records whose grade is neither an object nor null: the reference reads those."""
    raw = cols["_grade"]
    odd = [i for i, g in enumerate(raw) if g[:1] != b"{" and g != b"null"]
    if odd:
        keep = np.ones(len(raw), bool)
        keep[odd] = False
        cols = {k: [v for v, y in zip(col, keep, strict=True) if y] for k, col in cols.items()}
        lines = [v for v, y in zip(lines, keep, strict=True) if y]
    kinds = {**dict.fromkeys(_TEXT, _S), **dict.fromkeys(_NUM, _F), **dict.fromkeys([*_COUNT, *_USAGE], _I)}
    kinds |= {"auto_submitted": _B, "importer": _S, "provider_switches": _I, "n_frames": _I}
    return [
        *[pl.Series(k, cols[k], t) for k, t in kinds.items()],
        pl.Series("_line", lines, _I),
        pl.Series("_grade", [g.decode() if g != b"null" else None for g in cols["_grade"]], _S),
    ]


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


def _readable(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which lines the fast path may read: UTF-8, and not a last line without its newline (it may be torn:
    the reference counts it)."""
    ok = ~_not_utf8(buf, np.frombuffer(buf, np.uint8), starts, ends)
    if len(ends) and ends[-1] == len(buf):
        ok[-1] = False
    return ok


def fast(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, tail: _Beside | None = None
) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows of the lines the fast path reads (`_line` their line number), and which lines it leaves to
    the reference; the later lines from the process beside (`_read`), if any."""
    ok = _readable(buf, starts, ends)
    # 100,000 records make millions of objects, none in a cycle: with the collector on, it walked them over
    # and over (~9% of a cold load's profile).
    was = gc.isenabled()
    gc.disable()
    try:
        values = _values(*_decode(buf, starts, ends, ok, tail))
    finally:
        if was:
            gc.enable()
    df = _fast_columns(values)
    slow = np.ones(len(starts), bool)
    slow[df["_line"].to_numpy()] = False
    return df, slow


def records(
    src: BinaryIO,
    episode_row: Callable[[dict, int | None], tuple],
    schema: pl.Schema,
    trace: Any = "trace",
    counts: dict | None = None,
) -> pl.DataFrame:
    """Every readable record of the open native trace `src`, read from its position (its start, or a line
    start), in order, as the columns of `schema` (`episode_row`'s), `offset` relative to that position.
    `counts`, when given, gets `unreadable` (complete lines that hold no JSON object), `torn` (1 when the last
    line, without its newline, holds none) and `complete` (the bytes up to the end of the last line with its
    newline)."""
    with _read(src) as (buf, tail):
        if counts is not None:
            counts["complete"] = buf.rfind(b"\n") + 1
        return _records(buf, tail, episode_row, schema, trace, counts)


def _records(
    buf: bytes,
    tail: _Beside | None,
    episode_row: Callable[[dict, int | None], tuple],
    schema: pl.Schema,
    trace: Any,
    counts: dict | None,
) -> pl.DataFrame:
    cols = list(schema)
    empty = schema.to_frame()
    if counts is not None:  # an empty trace (a kill between its creation and its first line) counts nothing
        counts.update(unreadable=0, torn=0)
    if not len(buf):
        return empty
    starts, ends = _lines(buf)
    if not len(starts):
        return empty
    fast_rows, slow = fast(buf, starts, ends, tail)
    parts = [fast_rows] if fast_rows.height else []
    rows, lines = [], []
    bad = torn = 0
    for i in np.flatnonzero(slow).tolist():
        raw = buf[starts[i] : ends[i]]
        try:
            d = json.loads(raw)
        except NOT_JSON:
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
