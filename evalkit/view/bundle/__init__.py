"""`evalkit bundle RUN… -o DIR`: runs as a static site that opens from the file system or any static host,
with no server and nothing fetched from elsewhere: the episode table with filters, the episode view with
its filmstrip and transcript, and A vs B with the paired differences.

What it writes:
```
DIR/index.html, *.js, style.css   the page (evalkit/view/bundle/assets, copied)
DIR/data/index.js                 every episode's table row (with the files of its pieces), the runs, the
                                  paired differences
DIR/data/ep/NNNN.js               episodes in pieces, a few hundred KB of JSON a file: each episode's head
                                  (header, where it opens) then its parts of 48 steps (steps, calls, marks,
                                  the transcript's messages of those turns), in order
DIR/img/ab/<sha256>.<ext>         every image the episodes show, stored once by content
```
An episode of a thousand steps opens as fast as one of twenty: the page loads its head and the part of the
step shown (`episodes.PART`), and draws a page of the filmstrip and of the transcript around the step. The
actions of a step are drawn by the page over the plain frame, from their positions: no picture is written
twice.
Data files are scripts (a page opened from `file://` may not fetch files, but it may load scripts) that
hand the page gzip-compressed base64 JSON, which it inflates with the browser's own DecompressionStream.
Trace text reaches the page only as data: the page puts it in the document with `textContent`, never as
HTML, and images come only from the bundle's own content-addressed copies of files inside each run. Nothing
is written into the runs read, beyond what `evalkit.analysis` caches for any reader.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.errors import ConfigError
from evalkit.records import outputs, rundir
from evalkit.view import support as vs
from evalkit.view.bundle.episodes import Images, detail

ASSETS = Path(__file__).resolve().parent / "assets"
CHUNK_BYTES = 200_000
"""Uncompressed JSON per episode file: a few dozen short episodes, or a few parts of a long one; loaded when a
piece of it is needed."""
MAX_SIDES = 12
"""Paired differences are computed for every pair of sides when there are at most this many."""
MARKER = ".evalkit-bundle"
KEY_LIMIT = 512
"""Characters of an episode key kept in the table (keys evalkit writes are 64; a link names longer ones
nowhere)."""


@dataclass
class Built:
    """What `build` wrote."""

    path: Path
    episodes: int
    files: int
    bytes: int
    seconds: float


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _script(name: str, payload: Any, *args: int) -> bytes:
    """`EK.<name>(args…, "<payload as gzip-compressed base64 JSON>")`; a str payload is JSON already."""
    raw = (payload if isinstance(payload, str) else _json(payload)).encode()
    packed = base64.b64encode(gzip.compress(raw, 6, mtime=0)).decode("ascii")
    head = "".join(f"{int(a)}, " for a in args)
    return f'EK.{name}({head}"{packed}");\n'.encode()


def _check_out(out: Path) -> None:
    """`out` must be new, empty, or an earlier bundle (which is replaced); anything else is refused before
    any work, so that a typo never empties a folder of the user's."""
    if out.exists():
        if not out.is_dir():
            raise ConfigError(f"{out} is a file: give a new or empty directory for the bundle")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise ConfigError(f"{out} is not empty and not an evalkit bundle: give a new or empty directory")


def _prepare(out: Path) -> None:
    (out / MARKER).write_text("written by `evalkit bundle`; the whole folder is replaced when rebuilt\n")


def _table(runs: list[str]) -> pl.DataFrame:
    labels = vs.run_labels(runs)
    tables = []
    for r in runs:
        try:
            tables.append(vs.episode_table(r))
        except (OSError, ValueError, vs.TraceError) as e:
            raise ConfigError(f"{r}: cannot be read ({type(e).__name__}: {e})") from e
    return vs.with_labels(vs.concat_tables(tables), labels)


def _records(run: str, rows: pl.DataFrame) -> dict[str, dict]:
    """The record dicts of `run` the table lists, by key, read in one pass."""
    if rundir.is_native(run):
        wanted = dict(zip(rows["offset"].to_list(), rows["key"].to_list(), strict=True))
        return {wanted[o]: d for o, d in rundir.iter_offsets(run) if o in wanted}
    return vs.imported_records(run)


def _pairs(df: pl.DataFrame) -> list[dict]:
    """The paired comparison of every two sides (both orders follow from one), per tier and over all."""
    sides = vs.ranked_sides(df)
    if len(sides) > MAX_SIDES:
        return []
    tiers = [None, *vs.options(df, "tier")]
    out = []
    for i, a in enumerate(sides):
        for b in sides[i + 1 :]:
            for tier in tiers:
                r = vs.ab_difference(df, a, b, tier)
                if r.get("n_tasks"):
                    # The lines are the viewer's, so both say the same; JavaScript only picks one.
                    line, line_ba = vs.difference_line(r, tier), vs.difference_line(vs.flipped(r), tier)
                    keep = ("n_tasks", "n_dropped", "diff", "ci_low", "ci_high", "p_value", "mde", "wins")
                    row = {"a": a, "b": b, "tier": tier, "ties": r["ties"], "losses": r["losses"]}
                    out.append(row | {k: r[k] for k in keep} | {"line": line, "line_ba": line_ba})
    return out


ROW = ["run_label", "key", "model", "env", "surface", "mode", "task_id", "skin", "tier", "repeat", "reward",
       "end_reason", "error_class", "n_turns", "tool_calls", "cost_usd", "seconds", "env_config"]  # fmt: skip
"""The columns of the bundle's episode table; `key` (with the run's label) is what a report's links name."""


def _cell(value: Any, column: str) -> Any:
    if not isinstance(value, str):
        return value
    return vs.clip(value, KEY_LIMIT if column == "key" else vs.CELL_LIMIT)


class _Pieces:
    """Episode pieces (heads and parts) written in order into files of about CHUNK_BYTES; `add` says which
    file holds a piece."""

    def __init__(self, out: Path):
        self.dir = out / "data" / "ep"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.texts: list[str] = []
        self.size = self.n = 0

    def add(self, piece: dict) -> int:
        text = _json(piece)
        self.texts.append(text)
        self.size += len(text)
        n = self.n
        if self.size >= CHUNK_BYTES:
            self.flush()
        return n

    def flush(self) -> None:
        if self.texts:
            data = "[" + ",".join(self.texts) + "]"
            (self.dir / f"{self.n:04d}.js").write_bytes(_script("chunk", data, self.n))
            self.n += 1
        self.texts, self.size = [], 0


def build(runs: list[str | Path], out: str | Path) -> Built:
    """Write the bundle of `runs` to `out` (see the module docstring); returns what was written. It is built
    in a sibling folder and swapped in whole (`evalkit.records.outputs.building`): a build killed or failed
    at any point leaves the earlier bundle, if there was one, as it was."""
    t0 = time.perf_counter()
    out = Path(out)
    runs = [str(Path(r).resolve()) for r in runs]
    df = _table(runs)  # a run that cannot be read is refused before anything is written
    _check_out(out)
    with outputs.building(out, "bundle") as tmp:
        built = _write(runs, df, tmp)
    return dataclasses.replace(built, path=out.resolve(), seconds=time.perf_counter() - t0)


def _write(runs: list[str], df: pl.DataFrame, out: Path) -> Built:
    """Every file of the bundle, into the (new) folder `out`."""
    t0 = time.perf_counter()
    _prepare(out)
    for f in ASSETS.iterdir():
        if f.is_file():
            shutil.copyfile(f, out / f.name)
    images = Images(out)
    pieces = _Pieces(out)
    rows_out: list[list] = []
    for run in runs:
        rows = df.filter(pl.col("run") == run)
        records = _records(run, rows)
        for row in rows.iter_rows(named=True):
            d = records.get(row["key"])
            if d is None:
                continue
            head, parts = detail(run, d, images)
            ep = len(rows_out)
            at = pieces.add(head | {"id": ep, "part": -1})
            files = [pieces.add(p | {"id": ep}) for p in parts]
            rows_out.append([*(_cell(row.get(c), c) for c in ROW), at, files])
    pieces.flush()
    index = {
        "columns": [*ROW, "chunk", "parts"],
        "rows": rows_out,
        "runs": [vs.run_labels(runs)[r] for r in runs],
        "pairs": _pairs(df),
        "pair_keys": vs.pair_columns(df),
        "incomplete": vs.incomplete_lines(df),
        "built": time.strftime("%Y-%m-%d %H:%M", time.gmtime()) + " UTC",
    }
    (out / "data" / "index.js").write_bytes(_script("index", index))
    files = [p for p in out.rglob("*") if p.is_file()]
    return Built(
        out.resolve(),
        len(rows_out),
        len(files),
        sum(p.stat().st_size for p in files),
        time.perf_counter() - t0,
    )
