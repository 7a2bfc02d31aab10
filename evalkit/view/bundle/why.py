"""The bundle's "why": what the scanners found, as the viewer's Why view shows it, computed when the bundle
is built. The numbers are `evalkit.analysis.why`'s (the same tables of text the viewer and the report show);
each scanner's episodes name their episode in the bundle and the position of the step it points to, so the
page links straight to that step."""

from __future__ import annotations

import logging
from typing import Any

import polars as pl

from evalkit.analysis import why as w
from evalkit.errors import TraceError
from evalkit.view import why as vw
from evalkit.view.text import clip

log = logging.getLogger(__name__)

MAX_MODELS = 12
"""Paired differences for every two models when there are at most this many."""
MAX_FIRED = 2000
"""Episodes listed per scanner (the most a page lists at once stays readable; the rates count them all)."""


def _table(df: pl.DataFrame) -> dict[str, Any]:
    return {"columns": df.columns, "rows": [list(r) for r in df.iter_rows()]}


def _position(turns: list, step: int | None) -> int | None:
    """The bundle's step position (0: the start; i: the i-th turn) of the turn numbered `step`."""
    if step is None:
        return None
    for i, t in enumerate(turns, 1):
        if t == step:
            return i
    return step if 0 < step <= len(turns) else None


def why_section(df: pl.DataFrame, found: dict[tuple[str, str], tuple[int, list]]) -> dict[str, Any] | None:
    """The rates (per model × scanner, with intervals), the paired differences of every two models (sorted
    by size, Holm across scanners, with the sentences of those that separate them) and, per scanner, the
    episodes it fired on: [id, step position, steps, evidence]. None when the episodes cannot be scanned
    (said in the log: the rest of the bundle is still worth having)."""
    from evalkit.scanners.engine import with_kept

    try:
        scans = with_kept(df.drop("run_label", strict=False))
    except (OSError, ValueError, RuntimeError, TraceError) as e:
        log.warning("bundle: the episodes could not be scanned (%s); no why section", e)
        return None
    if not scans.height:
        return None
    rates = _table(vw.rates_table(w.why(df, scans)))
    out: dict[str, Any] = {"rates": rates, "method": w.METHOD, "paired": w.PAIRED}
    models = df.get_column("model").drop_nulls().unique().sort().to_list()
    pairs = []
    if 2 <= len(models) <= MAX_MODELS:
        for i, a in enumerate(models):
            for b in models[i + 1 :]:
                try:
                    diffs = w.why(df, scans, a=a, b=b)
                except ValueError:
                    continue
                sep = diffs.filter(pl.col("separates"))["sentence"].to_list()
                pairs.append({"a": clip(a), "b": clip(b), "table": _table(vw.differences_table(diffs)),
                              "separates": [clip(x, 2000) for x in sep]})  # fmt: skip
    out["pairs"] = pairs
    fired: dict[str, list] = {}
    got = scans.filter(pl.col("fired").fill_null(False))
    got = got.sort(["scanner", "model", "task_id"], nulls_last=True)
    for r in got.select("scanner", "run", "key", "steps", "evidence").iter_rows(named=True):
        ep = found.get((r["run"], r["key"]))
        listed = fired.setdefault(r["scanner"], [])
        if ep is None or len(listed) >= MAX_FIRED:
            continue
        steps = [int(s) for s in r["steps"] or []]
        listed.append([ep[0], _position(ep[1], steps[0] if steps else None), steps[:50],
                       clip(r["evidence"] or "", 400)])  # fmt: skip
    phrases = dict(scans.select("scanner", "phrase").unique("scanner").iter_rows())
    out["scanners"] = [{"name": clip(s), "phrase": clip(phrases.get(s) or s), "episodes": fired.get(s, [])}
                       for s in scans["scanner"].unique(maintain_order=True).to_list()]  # fmt: skip
    return out
