"""The episode index of a native trace, read by msgspec instead of `json.loads` per line.

`columns.episode_row` over `rundir.iter_offsets` stays the reference: this module must give the same frame,
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

A trace of 32 MB or more, when this process may use two CPUs, is read in two (`_scan`): a fork (`beside`)
reads and decodes the later part while this process reads the first, each `_CHUNK` bytes at a time, and
sends its columns packed (`_Part.dump`). Why so, what each step costs and what was tried and left out:
docs/scale.md, "How the cold read got its shape".
"""

from __future__ import annotations

import gc
import json
import logging
import os
from collections.abc import Callable
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Annotated, Any, BinaryIO

import msgspec
import numpy as np
import polars as pl

from evalkit import wellformed
from evalkit.errors import NOT_JSON
from evalkit.records import beside
from evalkit.types import EpisodeRecord

log = logging.getLogger(__name__)

_S, _I, _F, _B, _BIN = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean, pl.Binary

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
        # Its values as their raw text; re-encoded (`_take`), the object json.loads makes of it (of a
        # duplicate key, the last value in the first one's place) as compact JSON.
        "grade": (dict[str, msgspec.Raw] | None, None),
        "usage": (_Usage | None, None),
        "info": (_Info | None, None),
    },
)
_DECODER = msgspec.json.Decoder(_Episode)
_DECODE, _DECODE_LINES = _DECODER.decode, _DECODER.decode_lines
# Lines per msgspec call; a block with a line it refuses is read again line by line. Each block's fields are
# taken and its records freed before the next: 100,000 records at once (millions of nested objects) did not
# fit in the cache, and decoding and freeing them took ~1.6x as long as block by block.
_BLOCK = 64
# Bytes read at a time, into one buffer for the whole scan: a 700 MB trace read whole into a new bytes object
# took 0.45 s (the copy, and a page fault per 4 KB of new memory); 8 MB at a time into the same buffer, 0.1 s.
_CHUNK = 8 << 20
# A trace this large is read in two processes when this one may use two CPUs: the lines of its later part by
# a fork (`_scan`), which starts at once and reads that part itself. Its share is a little under half: this
# process also builds its own part's columns before it waits, the fork packs its own (at 0.5 the fork's CPU
# was ~0.1 s more than this process's before the wait; at 0.47, the same).
_BESIDE_BYTES = 32 << 20
_BESIDE_SHARE = 0.47
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)  # the last: nesting past its limit

# The fields taken of each decoded record (`_take`) and the kind of column each becomes.
_FIELDS = _TEXT + _NUM + _COUNT
_TAKEN = [*_FIELDS, *_USAGE, "auto_submitted", "importer", "provider_switches", "n_frames", "_grade"]
_KINDS = {**dict.fromkeys(_TEXT, _S), **dict.fromkeys(_NUM, _F), **dict.fromkeys([*_COUNT, *_USAGE], _I)}
_KINDS |= {"auto_submitted": _B, "importer": _S, "provider_switches": _I, "n_frames": _I, "_grade": _BIN}
_FRAME = attrgetter("frame")


def _lines(buf: bytes | bytearray, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (without the newline) of every line of `buf[:n]`, as `for raw in f` splits a file."""
    n = len(buf) if n is None else n
    # bytes.find is a memchr per line: on a 700 MB trace, ~10x faster than comparing every byte in numpy.
    found, find = [], buf.find
    i = find(b"\n", 0, n)
    while i != -1:
        found.append(i)
        i = find(b"\n", i + 1, n)
    nl = np.array(found, np.int64)
    starts = np.concatenate([[0], nl + 1])
    ends = np.concatenate([nl, [n]])
    if starts[-1] == n:  # it ends with a newline: no fragment after it
        starts, ends = starts[:-1], ends[:-1]
    return starts.astype(np.int64), ends.astype(np.int64)


def _not_utf8(buf: bytes | bytearray, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
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


class _Part:
    """What the fast path read of the lines that start in one stretch of a trace: the fields of the records
    it decoded (`_take`), where each of their lines starts, and where every line it leaves to the reference
    starts and ends (not UTF-8, refused by msgspec, or the file's last line without its newline)."""

    def __init__(self, lo: int) -> None:
        self.lo = self.end = lo  # end: after the last newline read
        self.cols: dict[str, list] = {k: [] for k in _TAKEN}
        self.offsets: list[int] = []
        self.slow: list[int] = []  # start, end, start, end, ...

    def frame(self) -> pl.DataFrame:
        """Its fields as `_frame` gives them (the frame a `load` of its `dump` gives)."""
        cols = {k: pl.Series(self.cols[k], dtype=t) for k, t in _KINDS.items()}
        cols["_grade"] = cols["_grade"].cast(
            _S
        )  # lines were checked to be UTF-8, and a grade is a part of one
        return _frame(self.offsets, cols)

    def dump(self) -> list:
        """The part as the process beside sends it: each column packed (`_pack`), which msgpack carries as a
        few long strings where a list of values each cost this process ~0.2 s to decode and build."""
        packed = {k: _pack(self.cols[k], t) for k, t in _KINDS.items()}
        return [self.lo, self.end, packed, np.array(self.offsets, np.int64).tobytes(), self.slow]

    @classmethod
    def load(cls, got: Any, lo: int) -> tuple[_Part, pl.DataFrame]:
        """The part the process beside read from `lo` and its fields as `_frame` gives them, from what
        `dump` sent; ValueError when it is not that."""
        try:
            part = cls(got[0])
            part.end, packed, offsets, part.slow = got[1:]
            part.offsets = np.frombuffer(offsets, np.int64)
            if part.lo != lo or list(packed) != list(_KINDS) or len(part.slow) % 2:
                raise ValueError(part.lo)
            n = len(part.offsets)
            return part, _frame(part.offsets, {k: _unpack(packed[k], t, n) for k, t in _KINDS.items()})
        except (TypeError, ValueError, IndexError, AttributeError, pl.exceptions.PolarsError) as e:
            raise ValueError("not the part asked for") from e


_SEP = "\x00"  # between the texts of a packed column: a text holding it is sent as a list instead


def _pack(col: list, kind: Any) -> Any:
    """A column of `_take` in a form msgpack carries, and `_unpack` reads, fast: None when it is all null;
    numbers as the bytes of a numpy array (a null count or flag as 0, as `_fast_columns` reads it; a null
    float as NaN, which no field msgspec read can hold); texts joined by `_SEP`, with where their nulls are
    (their place in the text holds "None")."""
    nulls = col.count(None)
    if nulls == len(col):
        return None
    if kind is _F:
        return np.array(col, np.float64).tobytes()
    if kind is _I or kind is _B:
        return np.array([v or 0 for v in col] if nulls else col, np.int64 if kind is _I else bool).tobytes()
    if kind is _BIN:  # JSON (a grade) never holds a NUL byte, nor is it empty
        return b"\x00".join([v or b"" for v in col] if nulls else col)
    where = list(compress(count(), map(is_, col, repeat(None)))) if nulls else []
    text = _SEP.join(map(str, col) if nulls else col)
    return [text, where] if text.count(_SEP) == len(col) - 1 else [None, col]


def _unpack(packed: Any, kind: Any, n: int) -> pl.Series:
    if packed is None:
        return pl.repeat(None, n, dtype=_S if kind is _BIN else kind, eager=True)
    if kind is _F:
        return pl.Series(np.frombuffer(packed, np.float64)).fill_nan(None)
    if kind is _I:
        return pl.Series(np.frombuffer(packed, np.int64))
    if kind is _B:
        return pl.Series(np.frombuffer(packed, bool))
    if kind is _BIN:
        text = packed.decode()  # lines were checked to be UTF-8, and a grade is a part of one
        return pl.Series([text]).str.split("\x00").explode().replace("", None)
    text, nulls = packed
    if text is None:
        return pl.Series(nulls, dtype=_S)
    out = pl.Series([text], dtype=_S).str.split(_SEP).explode()
    return out.scatter(nulls, None) if nulls else out


def _part(fd: int, lo: int, hi: int) -> _Part:
    """The lines of the file `fd` that start in [lo, hi) (lo a line start; hi a line start or the end of
    the file as it was), read `_CHUNK` bytes at a time."""
    part = _Part(lo)
    buf = bytearray(max(min(_CHUNK, hi - lo), 1))
    at = lo
    while at < hi:
        want = min(hi - at, len(buf))
        n = os.preadv(fd, [memoryview(buf)[:want]], at)
        if n <= 0:  # the file was cut since
            break
        last = n < want or at + n >= hi
        end = buf.rfind(b"\n", 0, n) + 1
        if not end and not last:  # a line longer than the buffer: read it again, whole
            buf = bytearray(len(buf) * 2)
            continue
        if n < len(buf):  # what an earlier chunk left after these bytes is no part of them
            buf[n:] = bytes(len(buf) - n)
        if end:
            _chunk(buf, end, at, part)
            part.end = at + end
        if last:
            if end < n:  # a last line without its newline: written just now, or torn by a kill
                part.slow += [at + end, at + n]
            break
        at += end
    return part


def _chunk(buf: bytearray, n: int, at: int, part: _Part) -> None:
    """Read the lines of `buf[:n]` (which ends with a newline; `at` its place in the file) into `part`."""
    starts, ends = _lines(buf, n)
    arr = np.frombuffer(buf, np.uint8, n)
    ok = ~_not_utf8(buf, arr, starts, ends)
    view = memoryview(buf)
    # A block of lines that each open with "{" and close with "}" is decoded in one call: each of them
    # holds at least one value, so as many values as lines means one each (and no value across lines,
    # which would need a line ending in ":", "," or "["). Any other block is decoded line by line.
    whole = ok & (ends > starts)
    whole &= (arr[np.minimum(starts, n - 1)] == ord("{")) & (arr[np.maximum(ends - 1, 0)] == ord("}"))
    s, e = starts.tolist(), ends.tolist()
    read: list[int] = []
    for lo in range(0, len(s), _BLOCK):
        hi = min(lo + _BLOCK, len(s))
        got: list = []
        if whole[lo:hi].all():
            try:
                got = _DECODE_LINES(view[s[lo] : e[hi - 1]])
            except _REFUSED:
                pass
        if len(got) == hi - lo:
            read += range(lo, hi)
        else:
            got = []
            for i in range(lo, hi):
                if ok[i]:
                    try:
                        got.append(_DECODE(view[s[i] : e[i]]))
                    except _REFUSED:
                        continue
                    read.append(i)
        _take(got, part.cols)
    if len(read) < len(s):
        slow = np.ones(len(s), bool)
        slow[read] = False
        part.slow += np.column_stack([starts[slow] + at, ends[slow] + at]).ravel().tolist()
    part.offsets += (starts[read] + at).tolist()


def _cut(fd: int, lo: int, hi: int) -> int:
    """The first line start at or after `lo` (`hi` if there is none before it)."""
    if lo <= 0:
        return 0
    at = lo - 1  # a newline just before it makes `lo` itself a line start
    while at < hi:
        head = os.pread(fd, 1 << 16, at)
        if not head:
            break
        i = head.find(b"\n")
        if i != -1:
            return min(at + i + 1, hi)
        at += len(head)
    return hi


def _scan(fd: int, lo: int, hi: int) -> list[tuple[_Part, pl.DataFrame]]:
    """The lines that start in [lo, hi) of the file `fd` (lo a line start) as one `_Part` and its frame, or
    as two when the stretch is large and this process may use a second CPU: the later part read by a fork
    (`beside`) while this process reads the first and builds its frame. Whatever goes wrong beside, this
    process reads that part itself: the same parts, later."""
    if hi - lo < _BESIDE_BYTES or not beside.spare_cpu():
        return [_framed(_part(fd, lo, hi))]
    cut = _cut(fd, lo + int((hi - lo) * (1 - _BESIDE_SHARE)), hi)
    if cut in (lo, hi):
        return [_framed(_part(fd, lo, hi))]
    with beside.beside(lambda: _part(fd, cut, hi).dump()) as theirs:
        mine = _framed(_part(fd, lo, cut))
        got = theirs()
    try:
        part, frame = _Part.load(got, cut)
        other = part, _fast_columns(frame)
    except ValueError:
        log.debug("read here what the process beside did not give")
        other = _framed(_part(fd, cut, hi))
    return [mine, other]


def _framed(part: _Part) -> tuple[_Part, pl.DataFrame]:
    return part, _fast_columns(part.frame())


_ROW = attrgetter(*_FIELDS, "usage", "auto_submitted", "info", "provider_switches", "turns", "grade")
_USAGE_ROW = attrgetter(*_USAGE)
_NO_USAGE = (None,) * len(_USAGE)
_ENCODE = msgspec.json.encode


def _take(eps: list, cols: dict[str, list]) -> None:
    """Append the fields the index needs of the decoded records `eps` to `cols`."""
    if not eps:
        return
    # A tuple of fields per record and one transposition: ~20% less than an attribute lookup per field.
    table = list(zip(*map(_ROW, eps), strict=True))
    for k, col in zip(_FIELDS, table, strict=False):
        cols[k] += col
    usage, auto, info, switches, turns, grade = table[len(_FIELDS) :]
    usage = [_NO_USAGE if u is None else _USAGE_ROW(u) for u in usage]
    for k, col in zip(_USAGE, zip(*usage, strict=True), strict=True):
        cols[k] += col
    cols["auto_submitted"] += auto
    cols["importer"] += [None if i is None else i.importer for i in info]
    cols["provider_switches"] += [len(x) if x else 0 for x in switches]
    cols["n_frames"] += [sum(map(bool, map(_FRAME, t))) if t else 0 for t in turns]
    cols["_grade"] += [None if g is None else _ENCODE(g) for g in grade]


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


# A grade whose `json.dumps` text is its compact text (`_take`: each key once) with a space after each ","
# and ":": a flat, non-empty object of plain keys whose values are numbers as Python writes them back (an
# int but "-0"; a float with no exponent, no trailing zero but in ".0", at most 15 digits, not below 1e-4),
# true, false, null or plain strings (ASCII, no quote, escape, comma or colon), and whose total is a number
# or null. The profile of a cold load of 100,000 episodes had ~40% of its time in json.loads and json.dumps
# of the grades; a grade like these takes a vectorised string edit instead, any other the exact path.
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
    plain = (raw.str.contains(_PLAIN_GRADE) & ~raw.str.contains(_NOT_REPR)).fill_null(False)
    text = raw.str.replace_all(",", ", ", literal=True).str.replace_all(":", ": ", literal=True)
    total = raw.str.extract(r'"total":(-?[0-9][0-9.]*)').cast(_F, strict=False)
    return plain, text, total


def _frame(offsets: Any, cols: dict[str, pl.Series]) -> pl.DataFrame:
    """A part's fields as a frame, `offset` where each of its lines starts."""
    n = len(offsets)
    if any(len(c) != n for c in cols.values()):
        raise ValueError("columns of unequal lengths")
    return pl.DataFrame([pl.Series("offset", offsets, _I), *[c.alias(k) for k, c in cols.items()]])


def _fast_columns(df: pl.DataFrame) -> pl.DataFrame:
    """The reference's columns from `_values`."""
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
        pl.col("offset"),
        pl.when(importer != "").then(importer).otherwise(pl.lit("evalkit")).alias("source"),
        pl.col("key").replace("", None),  # as rundir.record_key: an empty key is no key
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


def records(
    src: BinaryIO,
    episode_row: Callable[[dict, int | None], tuple],
    schema: pl.Schema,
    trace: Any = "trace",
    counts: dict | None = None,
) -> pl.DataFrame:
    """Every readable record of the open native trace `src`, read from its position (its start, or a line
    start) to its end as it is now, in order, as the columns of `schema`
    (`episode_row`'s), `offset` relative to that position. `counts`, when given, gets `unreadable` (complete
    lines that hold no JSON object), `torn` (1 when the last line, without its newline, holds none) and
    `complete` (the bytes up to the end of the last line with its newline), and `bad_at` (where each of
    the unreadable lines starts, relative to that position)."""
    fd, pos = src.fileno(), src.tell()
    hi = os.fstat(fd).st_size
    # 100,000 records make millions of objects, none in a cycle: with the collector on, it walked them over
    # and over (~9% of a cold load's profile).
    was = gc.isenabled()
    gc.disable()
    try:
        parts = _scan(fd, pos, hi) if hi > pos else []
        fast = pl.concat([f for _, f in parts], rechunk=False) if parts else None
        parts = [p for p, _ in parts]
    finally:
        if was:
            gc.enable()
    if counts is not None:  # an empty trace (a kill between its creation and its first line) counts nothing
        counts.update(
            unreadable=0, torn=0, bad_at=[], complete=max((p.end for p in parts), default=pos) - pos
        )
    if fast is None:
        return schema.to_frame()
    slow = [(a, b) for p in parts for a, b in zip(p.slow[::2], p.slow[1::2], strict=True)]
    return _records(fd, pos, hi, fast, slow, episode_row, schema, trace, counts)


def _records(
    fd: int,
    pos: int,
    hi: int,
    fast: pl.DataFrame,
    slow: list[tuple[int, int]],
    episode_row: Callable[[dict, int | None], tuple],
    schema: pl.Schema,
    trace: Any,
    counts: dict | None,
) -> pl.DataFrame:
    """The rows of the lines the fast path read (`fast`) and of those it left to the reference (`slow`:
    start and end of each, in order), in order."""
    cols = list(schema)
    rows, bad_at = [], []
    torn = 0
    for start, end in slow:
        raw = os.pread(fd, end - start, start)
        try:
            d = json.loads(raw)
        except NOT_JSON:
            d = None if raw.strip() else {}
        if isinstance(d, dict) and (d or raw.strip()):
            rows.append(episode_row(d, start - pos))
        elif raw.strip():
            if start + len(raw) >= hi:  # no newline after it: a write still going on, or
                torn = 1  # cut by a kill
            else:
                bad_at.append(start - pos)
    bad = len(bad_at)
    if counts is not None:
        counts.update(unreadable=bad, torn=torn, bad_at=bad_at)
    if bad or torn:
        log.debug("%s: %d unreadable line(s) left out of the index", trace, bad + torn)
    parts = [fast.with_columns(pl.col("offset") - pos)] if fast.height else []
    if rows:
        parts.append(pl.DataFrame(rows, schema=schema, orient="row"))
    if not parts:
        return schema.to_frame()
    df = pl.concat([p.select(cols) for p in parts], how="vertical")
    return df.sort("offset") if len(parts) > 1 else df
