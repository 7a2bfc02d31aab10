"""Grades from elsewhere, merged into the episodes a run holds no reward for.

Own-loop GUI runs are graded by a separate step that reads their files; its output joins them to everything
else here. A grades file is JSON or CSV:

    task_id,reward[,model][,repeat][,any other field…]          (CSV, a header row first)
    [{"task_id": "t1", "reward": 1.0, "why": "…"}, …]               (JSON: a list of objects)
    {"t1": 1.0, "t2": {"reward": 0.0, "why": "…"}}                   (JSON: task id → reward, or → object)

A reward is a number or a boolean (true is 1.0); an empty one leaves the episode ungraded. The other fields
join the reward in the episode's `grade`. A grade goes to the ungraded episodes only (no reward and no
infrastructure error): it never replaces a reward a run holds, nor scores an episode evalkit leaves unscored.
It is matched by task id, and by `model` and `repeat` when the file has those columns; a grade that could
belong to several episodes is refused before anything is merged.

A run whose harness grades in a separate step (`importers.GRADED_ELSEWHERE`: own-loop GUI runs) also gets
each grade as the `harness_reward` of the one episode it fits, unscored or not: that grader graded what the
harness kept, so its own mean can be rebuilt (`summarise(..., as_harness=True)`).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.errors import ConfigError
from evalkit.records.importers import GRADED_ELSEWHERE

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64
_IDS = ("task_id", "model", "repeat")
NAMED = 5
"""Grade ids a line names before it says "and N more"."""


@dataclass
class Merged:
    """What merging a grades file did."""

    path: str
    graded: int
    """Ungraded episodes that got a reward."""
    left: int
    """Ungraded episodes the file has no grade for."""
    unused: int
    """Grades that matched no ungraded episode (a task not in the runs, or one already scored or unscored)."""
    unmatched: list[str] = field(default_factory=list)
    """The ids of those grades (task id, with model and repeat when the file has them), in file order; one
    kept as the `harness_reward` of an episode evalkit leaves unscored says so."""
    harness_only: int = 0
    """Of those, grades kept only as the `harness_reward` of an episode evalkit leaves unscored."""

    def line(self) -> str:
        text = (
            f"grades from {self.path}: {self.graded} episode(s) graded, {self.left} left without a reward, "
            f"{self.unused} grade(s) matched no ungraded episode"
        )
        if self.unmatched:
            more = len(self.unmatched) - NAMED
            text += ": " + ", ".join(self.unmatched[:NAMED]) + (f" and {more} more" if more > 0 else "")
        return text


def _reward(v: Any, where: str) -> float | None:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return float(v.strip().lower() == "true")
    try:
        r = float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: reward {v!r} is not a number") from None
    if not math.isfinite(r):
        raise ConfigError(f"{where}: reward {v!r} is not a finite number")
    return r


def _value(v: str) -> Any:
    """A CSV cell as the number it spells, else as text."""
    try:
        return float(v) if v.strip() else None
    except ValueError:
        return v


def _rows(path: Path) -> list[dict]:
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"grades file {path}: cannot be read ({e})") from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(raw.splitlines())
        if not reader.fieldnames or "task_id" not in reader.fieldnames or "reward" not in reader.fieldnames:
            raise ConfigError(f"grades file {path}: needs a header row with task_id and reward columns")
        return [{k: (v if k in _IDS or k == "reward" else _value(v or "")) for k, v in r.items() if k}
                for r in reader]  # fmt: skip
    if path.suffix.lower() != ".json":
        raise ConfigError(f"grades file {path}: expected a .json or .csv file")
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"grades file {path}: not valid JSON ({e})") from None
    if isinstance(data, dict):
        return [{"task_id": k, **(v if isinstance(v, dict) else {"reward": v})} for k, v in data.items()]
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    raise ConfigError(f"grades file {path}: expected a list of objects or an object of task id → reward")


def read(path: str | Path) -> pl.DataFrame:
    """A grades file as a frame: task_id, model, repeat (null when the file has none), reward, grade (the
    JSON of the episode's new grade). ConfigError, with one line, for anything it cannot use."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"grades file not found: {path}")
    rows = _rows(path)
    has = {k: any(k in r for r in rows) for k in ("model", "repeat")}
    out = []
    for n, r in enumerate(rows, 1):
        where = f"{path.name}, grade {n}"
        task = r.get("task_id")
        if task is None or str(task).strip() == "":
            raise ConfigError(f"{where}: no task_id")
        reward = _reward(r.get("reward"), where)
        if reward is None:
            continue
        model = r.get("model")
        if has["model"] and (model is None or str(model).strip() == ""):
            raise ConfigError(f"{where}: the file has a model column but this grade names none")
        try:
            repeat = int(float(r["repeat"])) if has["repeat"] else None
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{where}: repeat {r.get('repeat')!r} is not a whole number") from None
        fields = {k: v for k, v in r.items() if k not in _IDS and k != "reward"}
        out.append((str(task), None if model is None else str(model), repeat, reward,
                    json.dumps({"total": reward, **fields}, default=str)))  # fmt: skip
    df = pl.DataFrame(
        out, schema={"task_id": _S, "model": _S, "repeat": _I, "reward": _F, "grade": _S}, orient="row"
    )
    ids = [k for k in _IDS if k == "task_id" or has[k]]
    dup = df.group_by(ids).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ConfigError(f"grades file {path}: {dup.row(0, named=True)['task_id']!r} is graded twice")
    return df.select(ids + ["reward", "grade"])


def _id(row: dict) -> str:
    extra = [f"model {row['model']}" if row.get("model") is not None else "",
             f"repeat {row['repeat']}" if row.get("repeat") is not None else ""]  # fmt: skip
    extra = [e for e in extra if e]
    return str(row["task_id"]) + (f" ({', '.join(extra)})" if extra else "")


def _harness(rows: pl.DataFrame, grades: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """(_row, _h): the grade of each episode of a run graded elsewhere that holds no harness reward yet, for
    the grades that fit exactly one such episode (one that fits several says nothing of which it is)."""
    open_ = pl.col("source").is_in(list(GRADED_ELSEWHERE)) & pl.col("harness_reward").is_null()
    hit = rows.filter(open_).select("_row", *on).join(grades.select(*on, "reward"), on=on, how="inner")
    return hit.filter(pl.len().over(on) == 1).select("_row", pl.col("reward").alias("_h"))


def merge(df: pl.DataFrame, grades: pl.DataFrame, path: str | Path = "grades") -> tuple[pl.DataFrame, Merged]:
    """`df` (episodes, as `load_runs` gives them) with `grades` (from `read`) merged into its ungraded
    episodes, and into the harness rewards of runs graded elsewhere; and what was merged."""
    on = [c for c in _IDS if c in grades.columns]
    open_ = pl.col("reward").is_null() & pl.col("error_class").is_null()
    rows = df.with_row_index("_row")
    ungraded = rows.filter(open_)
    per = ungraded.group_by(on).agg(pl.col("_row"), pl.col("model").unique().alias("_models"))
    clash = per.join(grades.select(on), on=on, how="semi").filter(pl.col("_row").list.len() > 1)
    if clash.height:
        c = clash.row(0, named=True)
        need = "model" if "model" not in on and len(c["_models"]) > 1 else "repeat"
        raise ConfigError(
            f"grades file {path}: the grade of task {c['task_id']!r} fits {len(c['_row'])} ungraded "
            f"episodes ({', '.join(map(str, c['_models']))}); add a {need} column"
        )
    hit = ungraded.select("_row", *on).join(grades, on=on, how="inner")
    own = _harness(rows, grades, on)
    new = rows.join(hit.select("_row", pl.col("reward").alias("_r"), pl.col("grade").alias("_g")),
                    on="_row", how="left", maintain_order="left")  # fmt: skip
    new = new.join(own, on="_row", how="left", maintain_order="left")
    got = pl.col("_r").is_not_null()
    merged = new.with_columns(
        pl.when(got).then(pl.col("_r")).otherwise(pl.col("reward")).alias("reward"),
        pl.when(got).then(pl.col("_r")).otherwise(pl.col("grade_total")).alias("grade_total"),
        pl.when(got).then(pl.col("_g")).otherwise(pl.col("grade")).alias("grade"),
        (pl.col("scored") | got).alias("scored"),
        pl.coalesce("harness_reward", "_h").alias("harness_reward"),
    ).select(df.columns)
    unused = grades.join(hit.select(on).unique(), on=on, how="anti", nulls_equal=True)
    kept = rows.join(own, on="_row").select(on).unique().with_columns(pl.lit(True).alias("_kept"))
    unused = unused.join(kept, on=on, how="left", nulls_equal=True, maintain_order="left")
    names = [_id(r) + (" (unscored here: kept as its harness_reward)" if r["_kept"] else "")
             for r in unused.iter_rows(named=True)]  # fmt: skip
    report = Merged(str(path), hit.height, ungraded.height - hit.height, unused.height, names,
                    int(unused["_kept"].sum()))  # fmt: skip
    return merged, report


def apply(df: pl.DataFrame, path: str | Path) -> tuple[pl.DataFrame, Merged]:
    """`read` then `merge`."""
    return merge(df, read(path), path)
