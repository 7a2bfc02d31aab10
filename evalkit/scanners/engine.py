"""`scan(runs, scanners)`: every scanner over every episode, one row per episode × scanner (`SCAN_COLUMNS`).

The episodes are those `load_runs` counts (each key's latest record, malformed ones left out), or exactly
those of a frame it returned. A run's records are read once: a native trace from its bytes, each line at the
offset its index holds, decoded by msgspec into a light record with the fields the built-in scanners read
(`_Record`, the same names as `EpisodeRecord`'s, so the rules read either); a line msgspec refuses, and every
record a user's own scanner reads, becomes a whole `EpisodeRecord`. A run another harness wrote is read
through its importer. Judged scanners (`evalkit.scanners.judge`) then ask their model, episode by episode.

10,000 episodes (80 MB), keyless, profiled with py-spy (benchmarks/scan.py): of a 2.3 s scan with its index
cached, msgspec's decode ~25%, the rules ~35% (walking the calls, the canonical JSON of arguments), imports
~20%. The `steps` column had cost ~1 s of it through Polars' constructor of lists: it is built from offsets
through Arrow (`_lists`).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from evalkit.errors import NOT_JSON, TraceError
from evalkit.records import rundir
from evalkit.records import scans as store
from evalkit.records.columns import EPISODE_OF, eager
from evalkit.records.loading import load_runs
from evalkit.scanners.base import Context, Finding, Scanner, as_scanner
from evalkit.scanners.rules import BUILTIN
from evalkit.types import EpisodeRecord

log = logging.getLogger(__name__)

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean
SCAN_COLUMNS: dict[str, Any] = {
    **EPISODE_OF,  # the run as given to load_runs, the episode's key, model, env, surface, mode and task
    "repeat": _I,
    "scanner": _S,
    "kind": _S,  # "model" or "infra"
    "phrase": _S,  # how its rate is said after a model's name ("repeats the same call")
    "fired": _B,  # null: a judge that gave no answer (unscored, never "no")
    "steps": pl.List(_I),  # the turns where it fired, the first where to look
    "evidence": _S,  # one line: the call, the error, the text
    "judge": _S,  # a judged scanner's model spec; null for rules
    "answer": _S,  # the judge's answer (yes / no, or one of its categories)
    "explanation": _S,  # the judge's short reason
    "cost_usd": _F,  # what the judge's answer cost when it was asked; null when unknown
    "cached": _B,  # the answer came from the run's cache: nothing paid for it now
}
"""The columns of `scan`'s frame, in order (`env_config` after `env` when the episodes have it)."""
_HEAD = ("run", "key", "model", "env", "surface", "mode", "task_id", "repeat")


# ------------------------------------------------------------------------------------------- fast records


class _Call(msgspec.Struct, gc=False):
    id: str = ""
    name: str = ""
    args: Any = None
    ok: bool = True
    result: str = ""
    parse_error: bool = False


class _Turn(msgspec.Struct, gc=False):
    turn: int = 0
    text: str = ""
    stop: str = ""
    usage: Any = None
    calls: list[_Call] = []


class _Entry(msgspec.Struct, gc=False):
    role: Any = None
    note: Any = None
    text: Any = None


class _Transcript(msgspec.Struct, gc=False):
    tools: Any = None
    after: dict[str, list[_Entry]] | None = None


class _Info(msgspec.Struct, gc=False):
    failed_turn: Any = None
    rejected_prompt_prunes: Any = None


class _Record(msgspec.Struct, gc=False):
    """The fields of an EpisodeRecord the built-in scanners read."""

    key: str | None = None
    env: str = ""
    reward: float | None = None
    end_reason: str = ""
    error_class: str | None = None
    error: str | None = None
    grade: dict | None = None
    info: _Info | None = None
    transcript: _Transcript | None = None
    turns: list[_Turn] = []


_DECODE = msgspec.json.Decoder(_Record).decode
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class _Episode:
    """One episode of a run: its line (native) or dict (imported), read as a fast record or a whole one."""

    __slots__ = ("raw", "run", "_fast", "_full")

    def __init__(self, raw: Any, run: str):
        self.raw, self.run = raw, run
        self._fast: Any = None
        self._full: EpisodeRecord | None = None

    @property
    def fast(self) -> Any:
        if self._fast is None:
            try:
                self._fast = (
                    _DECODE(self.raw)
                    if not isinstance(self.raw, dict)
                    else msgspec.convert(self.raw, _Record)
                )
            except _REFUSED:  # what msgspec will not read, the record's own reader does (with its defaults)
                self._fast = self.full
        return self._fast

    @property
    def full(self) -> EpisodeRecord:
        if self._full is None:
            try:
                d = self.raw if isinstance(self.raw, dict) else json.loads(bytes(self.raw))
            except NOT_JSON:
                d = None
            if not isinstance(d, dict):  # the trace changed under a frame read from it earlier
                raise TraceError(
                    f"{self.run}: an episode of the frame is no longer where it was; load the run again "
                    "(ek.load_runs) and scan that"
                )
            self._full = EpisodeRecord.from_dict(d)
            self._full.run_dir = self.run
        return self._full


def _episodes(run: str, sub: pl.DataFrame) -> list[_Episode | None]:
    """The episodes of `sub` (rows of one run), in its order; None for one no longer in the run."""
    path = Path(run)
    offsets = "offset" in sub.columns and sub["offset"].is_not_null().all()
    if offsets and path.is_dir() and rundir.is_native(path):
        data = memoryview(rundir.trace_file(path).read_bytes())
        raw = data.obj
        out: list[_Episode | None] = []
        for off in sub["offset"].to_list():
            end = raw.find(b"\n", off)
            out.append(_Episode(data[off : end if end >= 0 else len(raw)], run))
        return out
    wanted = {k: i for i, k in enumerate(sub["key"].to_list())}
    found: list[_Episode | None] = [None] * sub.height
    for d in rundir.iter_dicts(path):
        i = wanted.get(rundir.record_key(d))
        if i is not None:
            found[i] = _Episode(d, run)
    return found


# ---------------------------------------------------------------------------------------------- contexts


def _declared(run: str, ref: Any, cache: dict) -> frozenset[str] | None:
    """The names of the tools a record says were declared to the model (its transcript's `tools`: a text
    of the run's store, or a list kept inline by an importer)."""
    if isinstance(ref, list):
        return frozenset(t["name"] for t in ref if isinstance(t, dict) and isinstance(t.get("name"), str))
    if not isinstance(ref, str):
        return None
    if ref not in cache:
        text = rundir.read_text(run, ref)
        try:
            tools = json.loads(text) if text else None
        except ValueError:
            tools = None
        names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None
        cache[ref] = frozenset(n for n in names if isinstance(n, str)) if names is not None else None
    return cache[ref]


def _contexts(run: str, eps: list[_Episode | None]) -> list[Context | None]:
    declared: dict = {}
    refs = []
    succeeded: dict[str, set[str]] = defaultdict(set)
    for ep in eps:
        if ep is None:
            refs.append(None)
            continue
        rec = ep.fast
        tx = rec.transcript
        refs.append(tx.get("tools") if isinstance(tx, dict) else getattr(tx, "tools", None))
        names = succeeded[rec.env]
        for t in rec.turns:
            for c in t.calls:
                if c.ok:
                    names.add(c.name)
    frozen = {env: frozenset(v) for env, v in succeeded.items()}
    return [
        None
        if ep is None
        else Context(run, _declared(run, ref, declared), frozen.get(ep.fast.env, frozenset()))
        for ep, ref in zip(eps, refs, strict=True)
    ]


# -------------------------------------------------------------------------------------------------- scan


def scanners_of(scanners: Any = None) -> list[Scanner]:
    """The scanners asked for: None for every built-in rule; else names of built-ins, Scanners (judged ones
    from `ask` among them) and plain functions of a record."""
    if scanners is None:
        return list(BUILTIN.values())
    if isinstance(scanners, str | Scanner) or callable(scanners):
        scanners = [scanners]
    out = [as_scanner(s, BUILTIN) for s in scanners]
    names = [s.name for s in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two scanners are named {', '.join(twice)}: give one of them another name")
    return out


def scan(
    runs: Any,
    scanners: Any = None,
    *,
    save: bool = False,
    progress: Callable[[str], None] | None = None,
) -> pl.DataFrame:
    """Run `scanners` (default: every built-in rule, `evalkit.scanners.rules.BUILTIN`) over every episode of
    `runs` (run directories, runs another harness wrote, or a frame from `load_runs`: exactly its episodes).
    One row per episode × scanner, with the columns of SCAN_COLUMNS: `fired`, the turns it points to
    (`steps`), a line of `evidence`; for judged scanners (`ek.scanners.ask`) the judge's `answer`,
    `explanation` and `cost_usd`, asked once per episode and question and kept beside the run, so that a
    rerun pays nothing. `save`: also keep the rows beside each run (`evalkit.records.scans`), where
    `evalkit scan` keeps them and the viewer reads them (as that run's rows of these scanners: scan the
    whole run to keep them all). `progress` gets a line now and then."""
    chosen = scanners_of(scanners)
    if isinstance(runs, pl.DataFrame | pl.LazyFrame) or "pandas" in type(runs).__module__:
        episodes = eager(runs, "scan")
    else:
        episodes = load_runs(runs)
    rules = [s for s in chosen if not s.judged]
    asked = [s for s in chosen if s.judged]
    for s in asked:
        s.check()  # a missing key or an unknown judge is said before any work
    extra = {"env_config": episodes.schema["env_config"]} if "env_config" in episodes.columns else {}
    parts = []
    for (run,), sub in episodes.group_by("run", maintain_order=True):
        part = _scan_run(str(run), sub, rules, asked, extra, progress)
        if save:
            store.write_scan(run, part)
        parts.append(part)
    if not parts:
        return pl.DataFrame(schema=_schema(extra))
    return pl.concat(parts, how="vertical")


def _schema(extra: dict[str, Any]) -> dict[str, Any]:
    """SCAN_COLUMNS, with the episodes' own `env_config` (of their type) after `env` where they have it."""
    items = list(SCAN_COLUMNS.items())
    at = [k for k, _ in items].index("env") + 1
    return dict(items[:at] + list(extra.items()) + items[at:])


def _scan_run(
    run: str,
    sub: pl.DataFrame,
    rules: list[Scanner],
    asked: list[Scanner],
    extra: dict[str, Any],
    progress: Callable[[str], None] | None,
) -> pl.DataFrame:
    try:
        eps = _episodes(run, sub)
    except (OSError, TraceError) as e:
        raise TraceError(f"{run}: cannot be read for a scan ({e})") from e
    missing = sum(ep is None for ep in eps)
    if missing:
        log.warning("%s: %d episode(s) of the frame are no longer in the run; not scanned", run, missing)
    ctxs = _contexts(run, eps) if rules else [None] * len(eps)
    present = [i for i, ep in enumerate(eps) if ep is not None]
    base = sub.select(list(_HEAD) + list(extra))[present].with_row_index("_i")
    schema = _schema(extra)
    parts = []
    for s in rules + asked:
        if s.judged:
            got = s.answer_all(run, [eps[i] for i in present], progress)
            cols = {c: [g.get(c) for g in got] for c in _JUDGED if c != "steps"}
            steps = [g["steps"] for g in got]
        else:
            found = _rule_pass(s, [eps[i] for i in present], [ctxs[i] for i in present])
            cols = {"fired": [f.fired for f in found], "evidence": [f.evidence or None for f in found]}
            steps = [f.steps for f in found]
        series = [pl.Series(c, v, schema[c]) for c, v in cols.items()] + [_lists("steps", steps)]
        parts.append(
            base.with_columns(
                pl.lit(s.name, _S).alias("scanner"),
                pl.lit(s.kind, _S).alias("kind"),
                pl.lit(s.phrase, _S).alias("phrase"),
                *series,
            )
        )
    if not parts:
        return pl.DataFrame(schema=schema)
    out = pl.concat(parts, how="diagonal_relaxed").sort("_i", maintain_order=True)
    return out.select([pl.col(c).cast(t) if c in out.columns else pl.lit(None, t).alias(c)
                       for c, t in schema.items()])  # fmt: skip


def _lists(name: str, values: list) -> pl.Series:
    """A column of integer lists, built through Arrow from offsets: Polars' own constructor walked 100,000
    mostly empty lists in ~1 s, this in ~0.02 s. From buffers, not `pa.array`, which imports pandas (seconds
    of a scan's start)."""
    # start-up: numpy and pyarrow only to write the scan's rows
    import numpy as np
    import pyarrow as pa

    lengths = np.fromiter(map(len, values), np.int64, len(values))
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((x for v in values for x in v), np.int64, int(offsets[-1]))
    items = pa.Array.from_buffers(pa.int64(), len(flat), [None, pa.py_buffer(flat)])
    starts = pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)])
    return pl.Series(name, pl.from_arrow(pa.ListArray.from_arrays(starts, items)))


_JUDGED = ("fired", "steps", "evidence", "judge", "answer", "explanation", "cost_usd", "cached")


def _rule_pass(s: Scanner, eps: list[_Episode], ctxs: list[Context | None]) -> list[Finding]:
    """One scanner over a run's episodes; a scanner that raises on an episode is a bug of the scanner's,
    said with the episode it raised on."""
    out: list[Finding] = []
    for ep, ctx in zip(eps, ctxs, strict=True):
        rec = ep.fast if s.fast else ep.full
        try:
            out.append(s(rec, ctx))
        except Exception as e:
            key = getattr(rec, "key", "?")
            raise RuntimeError(f"scanner {s.name!r} raised on episode {key} of {ep.run}: {e!r}") from e
    return out
