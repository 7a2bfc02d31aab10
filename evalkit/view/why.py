"""The "why" the viewer and the bundle show: what the scanners found over the runs on view, as tables of text.

The rows are a keyless scan of the episodes on view (`evalkit.scanners.scan`: ten rules, a few seconds for
10,000 episodes), with the rows of the judged scanners `evalkit scan --judge` kept beside each run (a judge
is never asked from here: that costs money). The numbers are `evalkit.analysis.why`'s, so the viewer, the
bundle, the report and `evalkit scan` say the same; this module only lays them out and finds, for an episode
a scanner fired on, the position of the step it points to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.analysis import why as w
from evalkit.analysis.tables import p_text
from evalkit.records import scans as store

_S = pl.String


def scan_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per episode of `df` × scanner: the built-in rules run now, and for each run the judged
    scanners' rows its last `evalkit scan` kept (their `run` as `df` names it)."""
    from evalkit.scanners.engine import scan
    from evalkit.scanners.rules import BUILTIN

    rows = scan(df.drop("run_label", strict=False))
    parts = [rows]
    for run in df.get_column("run").unique(maintain_order=True).to_list():
        saved = store.read_scan(run)
        if saved is None or not saved.height:
            continue
        judged = saved.filter(~pl.col("scanner").is_in(list(BUILTIN)))
        if judged.height:
            parts.append(judged.with_columns(pl.lit(run, _S).alias("run")))
    return pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else rows


def labels_signature(runs: Sequence[str]) -> tuple:
    """What changes when a label is written: each run's labels file's size and time."""
    out = []
    for r in runs:
        p = store.labels_path(r)
        try:
            st = p.stat()
            out.append((r, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((r, 0, 0))
    return tuple(out)


def read_labels(runs: Sequence[str]) -> pl.DataFrame | None:
    """The labels kept for `runs` (each run's own file), or None when there are none."""
    got = store.read_labels(list(runs))
    return got if got.height else None


def _rate(r: dict) -> str:
    return w._rate_cell(r)


def rates_table(rates: pl.DataFrame) -> pl.DataFrame:
    """`why`'s rates as a table of text: a row per scanner (what it means in words beside it), a column per
    model (share of tasks where it fired, its 95% CI, tasks where it fired / tasks counted); with labels,
    each scanner's precision / recall against them. The infrastructure's scanners last."""
    models = rates.get_column("model").unique(maintain_order=True).to_list()
    table: dict[str, dict[str, Any]] = {}
    for r in rates.iter_rows(named=True):
        row = table.setdefault(r["scanner"], {"scanner": r["scanner"], "what": r["phrase"]})
        row[r["model"]] = _rate(r)
        if r.get("labelled"):
            row["precision / recall"] = f"{w.pct(r['precision'])}% / {w.pct(r['recall'])}%"
    cols = ["scanner", "what", *models]
    if any("precision / recall" in row for row in table.values()):
        cols.append("precision / recall")
    data = {c: [row.get(c, "–") for row in table.values()] for c in cols}
    return pl.DataFrame(data, schema={c: _S for c in cols})


def differences_table(diffs: pl.DataFrame) -> pl.DataFrame:
    """`why(…, a=, b=)` as a table of text, sorted by the size of the difference as `why` sorts it."""
    rows = []
    for r in diffs.iter_rows(named=True):
        ci = (f"[{w.pct(r['ci_low'], True)}, {w.pct(r['ci_high'], True)}]" if r["ci_low"] is not None
              else "too few tasks")  # fmt: skip
        rows.append({
            "scanner": r["scanner"], "A": f"{w.pct(r['rate_a'])}%", "B": f"{w.pct(r['rate_b'])}%",
            "A − B (points)": w.pct(r["diff"], True), "95% CI": ci,
            "p": p_text(r["p_value"], r["p_exact"]), "p (Holm)": p_text(r["p_holm"], r["p_exact"]),
            "tasks": str(r["n_tasks"]), "separates": "yes" if r["separates"] else "",
        })  # fmt: skip
    cols = ["scanner", "A", "B", "A − B (points)", "95% CI", "p", "p (Holm)", "tasks", "separates"]
    return pl.DataFrame(rows, schema={c: _S for c in cols}, orient="row")


def fired(scans: pl.DataFrame, scanner: str, df: pl.DataFrame) -> pl.DataFrame:
    """The episodes of `df` where `scanner` fired: run, key, model, task, surface, mode, repeat, the steps
    (turns) it points to and its evidence, by model then task."""
    keep = df.select("run", "key")
    got = scans.filter((pl.col("scanner") == scanner) & pl.col("fired").fill_null(False))
    got = got.join(keep, on=["run", "key"], how="semi")
    cols = [c for c in ("run", "key", "model", "task_id", "surface", "mode", "repeat", "steps", "evidence")
            if c in got.columns]  # fmt: skip
    return got.select(cols).sort(["model", "task_id"], nulls_last=True, maintain_order=True)


def step_position(turns: Sequence[int | None], indices: Sequence[int], turn: int | None) -> int | None:
    """The position among an episode's steps (`turns`: each step's turn number, None for the start and the
    end; `indices`: each step's index) of the step showing turn `turn`; by index where no turn says it."""
    if turn is None:
        return None
    for i, t in enumerate(turns):
        if t == turn:
            return i
    for i, x in enumerate(indices):
        if x == turn:
            return i
    return None


def label_of(labels: pl.DataFrame | None, run: str, key: str, scanner: str) -> bool | None:
    """The person's latest label of one episode for one scanner, or None."""
    if labels is None:
        return None
    got = labels.filter((pl.col("run") == run) & (pl.col("key") == key) & (pl.col("scanner") == scanner))
    return got.get_column("label")[-1] if got.height else None


def labels_file(run: str) -> Path:
    return store.labels_path(run)
