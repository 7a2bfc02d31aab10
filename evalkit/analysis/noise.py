"""How noisy a benchmark is, from the repeats of its tasks (`noise`, `evalkit noise`): how often a task's
outcome flips between two runs, how the reward's variance splits between tasks and within them (repeats),
and how large a difference two single runs of this size must show before they differ at α = 0.05.

A model's scored episodes of one task are that task's repeats, whichever run holds them: two runs of one
model (one repeat each) pool into two repeats. The task is the unit, as everywhere in `evalkit.analysis`:
each statistic is a task-weighted mean of one value per task, or the variance of the tasks' means.

Per task i with n_i ≥ 2 scored repeats, mean m_i, unbiased variance s²_i, and c_i successes:

- flip rate: the mean over tasks of 2 c_i (n_i − c_i) / (n_i (n_i − 1)), the share of pairs of repeats that
  disagree: an unbiased estimate of the chance that two runs give the task different outcomes (on pass/fail
  rewards it is 2 s²_i);
- within-task variance σ²_w: the mean of s²_i (the variance of one episode about its task's mean);
- between-task variance σ²_b: var(m_i) − mean(s²_i / n_i), floored at 0 (the variance of the tasks' true
  means: the noise left in each m_i taken out), and the intraclass correlation σ²_b / (σ²_b + σ²_w);
- the difference two single runs must show: z₀.₉₇₅ · sqrt(2 σ²_w / n), n the tasks a run has. Two runs of
  one model, one episode per task, paired by task (as `compare` pairs), differ by D = mean_i(y_i − y'_i):
  its variance is 2 σ²_w / n (the tasks' own difficulty cancels), so noise alone gives |D| above this one
  time in twenty. A smaller difference between two models cannot be told from a rerun.

Intervals (95%), chosen by simulation (benchmarks/noise_coverage.py; figures in docs/statistics.md):
the flip rate and σ²_w are task-weighted means of bounded per-task values, so they get the interval every
task mean gets (`stats.mean_interval`: Wilson's on the values' range with the tasks' design effect), and
the difference needed is σ²_w's interval carried through its formula. σ²_b and the ICC are not means: a
percentile bootstrap over tasks (the clusters). Normal-theory intervals (F for the ICC, χ² for σ²_w) assume
normal rewards, and pass/fail rewards are far from it. None below MIN_TASKS tasks with repeats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import polars as pl

from evalkit.analysis.stats import GROUP, MIN_TASKS, N_BOOT, Z_975, mean_interval
from evalkit.analysis.tables import STYLE, esc, table_html
from evalkit.records.columns import eager

_F, _I, _S = pl.Float64, pl.Int64, pl.Utf8
_CELLS = 1_000_000
"""Resampled task values held at once by the bootstrap (8 MB a array)."""
MEAN_METHOD = "Wilson over tasks (design effect)"
BOOT_METHOD = "task bootstrap (percentile)"
COLUMNS = {
    "n_tasks": _I, "n_tasks_run": _I, "repeats": _F, "threshold": _F,
    "flip_rate": _F, "flip_low": _F, "flip_high": _F, "tasks_mixed": _F,
    "var_between": _F, "between_low": _F, "between_high": _F,
    "var_within": _F, "within_low": _F, "within_high": _F,
    "icc": _F, "icc_low": _F, "icc_high": _F,
    "diff_needed": _F, "diff_low": _F, "diff_high": _F,
}  # fmt: skip
"""The columns `noise` adds to the group's: `n_tasks` the tasks with two or more scored repeats (all the
statistics but the difference needed come from those), `n_tasks_run` the tasks with a scored episode (the
run's size, n of the difference needed), `repeats` the mean scored repeats of the former; `threshold` the
reward counted as a success for flips (null when there is none: continuous rewards and no threshold
given); `tasks_mixed` the share of tasks whose repeats are not all alike (it grows with the repeats);
`*_low` / `*_high` each statistic's 95% interval."""


def _cells(df: pl.DataFrame) -> list[str]:
    """What tells tasks apart: env (and its configuration, where the frame has one), task, skin."""
    return [c for c in ("env", "env_config", "task_id", "skin") if c in df.columns]


def per_task(df: pl.DataFrame, by: Iterable[str] = GROUP, threshold: float | None = None) -> pl.DataFrame:
    """One row per group × task: scored repeats `n`, `mean`, unbiased `var` (null below two), successes `c`
    (reward ≥ threshold; null without one), and whether the group's rewards are all 0 or 1 (`pass_fail`)."""
    df = eager(df, "noise")
    by = list(by)
    keys = list(dict.fromkeys(by + _cells(df)))
    s = df.filter(pl.col("scored") & pl.col("reward").is_not_null() & ~pl.col("reward").is_nan())
    pf = s.group_by(by).agg(pl.col("reward").is_in([0.0, 1.0]).all().alias("pass_fail"))
    out = s.group_by(keys).agg(
        pl.len().alias("n"), pl.col("reward").mean().alias("mean"), pl.col("reward").var(ddof=1).alias("var"),
        pl.col("reward").alias("_r"),
    )  # fmt: skip
    out = out.join(pf, on=by, nulls_equal=True)
    cut = pl.when(pl.col("pass_fail")).then(pl.lit(1.0)).otherwise(pl.lit(None, _F))
    cut = pl.lit(float(threshold)) if threshold is not None else cut
    out = out.with_columns(cut.alias("threshold"))
    c = [
        None if t is None else int(sum(x >= t for x in r))
        for r, t in zip(out["_r"].to_list(), out["threshold"].to_list(), strict=True)
    ]
    return out.with_columns(pl.Series("c", c, _I)).drop("_r").sort(keys, nulls_last=True)


def _flips(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    return 2 * c * (n - c) / (n * (n - 1))


def between_and_icc(m: np.ndarray, v: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """σ²_b and the ICC of each row of tasks: `m`, `v`, `n` hold the tasks' means, unbiased variances and
    repeats, a set of tasks per row (2-D: a resample per row)."""
    k = m.shape[1]
    b = np.maximum(0.0, m.var(axis=1, ddof=1) - (v / n).mean(axis=1)) if k > 1 else np.zeros(len(m))
    w = v.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        icc = np.where(b + w > 0, b / (b + w), np.nan)
    return b, icc


def _boot(m: np.ndarray, v: np.ndarray, n: np.ndarray, n_boot: int, seed: int) -> tuple:
    """Percentile intervals of σ²_b and the ICC over `n_boot` resamples of the tasks."""
    rng = np.random.default_rng(seed)
    step = max(1, _CELLS // len(m))  # resamples at a time: a 10,000-task run would take 160 MB at once
    parts = []
    for start in range(0, n_boot, step):
        idx = rng.integers(0, len(m), size=(min(step, n_boot - start), len(m)))
        parts.append(between_and_icc(m[idx], v[idx], n[idx]))
    b, icc = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    b_lo, b_hi = np.quantile(b, [0.025, 0.975])
    icc = icc[np.isfinite(icc)]
    i_lo, i_hi = np.quantile(icc, [0.025, 0.975]) if len(icc) else (math.nan, math.nan)
    return _num(b_lo), _num(b_hi), _num(i_lo), _num(i_hi)


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _row(t: pl.DataFrame, n_boot: int, seed: int) -> tuple:
    """The statistics of one group's tasks (`per_task` rows)."""
    n_run = t.height
    rep = t.filter(pl.col("n") >= 2)
    k = rep.height
    if k == 0:
        return (0, n_run, None, t["threshold"][0] if n_run else None) + (None,) * 16
    n = rep["n"].to_numpy().astype(float)
    m, v = rep["mean"].to_numpy(), rep["var"].to_numpy()
    threshold = rep["threshold"][0]
    flip = lo = hi = mixed = None
    if threshold is not None:
        f = _flips(n, rep["c"].to_numpy().astype(float))
        flip, mixed = float(f.mean()), float((f > 0).mean())
        pf = bool(np.isin(f, (0.0, 1.0)).all())
        lo, hi = mean_interval(f, k if pf else int(n.sum()), pass_fail=pf)
    w = float(v.mean())
    w_lo, w_hi = mean_interval(v, int(n.sum()))
    b = icc = b_lo = b_hi = i_lo = i_hi = None
    if k >= 2:
        bb, ii = between_and_icc(m[None, :], v[None, :], n[None, :])
        b, icc = float(bb[0]), _num(ii[0])
    if k >= MIN_TASKS:
        b_lo, b_hi, i_lo, i_hi = _boot(m, v, n, n_boot, seed)

    def diff(var: float | None) -> float | None:
        return None if var is None else Z_975 * math.sqrt(2 * max(var, 0.0) / n_run)

    return (k, n_run, float(n.mean()), threshold, flip, lo, hi, mixed, b, b_lo, b_hi, w, w_lo, w_hi,
            icc, i_lo, i_hi, diff(w), diff(w_lo), diff(w_hi))  # fmt: skip


def noise(
    df: pl.DataFrame,
    threshold: float | None = None,
    by: Iterable[str] = GROUP,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> pl.DataFrame:
    """How noisy each model × env × surface × mode (`by`) is, from its tasks' scored repeats (see the module
    docstring for each statistic and its interval): one row per group with `COLUMNS`. Flips count a reward
    ≥ `threshold` as a success; by default 1 where every reward is 0 or 1, and no flip rate otherwise (give
    a threshold for continuous rewards). A group without a task repeated has its counts and nulls."""
    by = list(by)
    t = per_task(df, by, threshold)
    rows = []
    for key, g in t.group_by(by, maintain_order=True):
        rows.append((*key, *_row(g, n_boot, seed)))
    schema = {**{c: eager(df).schema[c] for c in by}, **COLUMNS}
    out = pl.DataFrame(rows, schema=schema, orient="row")
    return out.sort(by, nulls_last=True)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"


def _ci(lo: float | None, hi: float | None, fmt: str) -> str:
    return "" if lo is None or hi is None else f" [{format(lo, fmt)}, {format(hi, fmt)}]"


def _who(r: dict) -> str:
    where = " ".join(x for x in (r.get("env"), r.get("surface"), r.get("mode")) if x)
    return f"{r.get('model')}" + (f" on {where}" if where else "")


def lines(t: pl.DataFrame) -> list[str]:
    """One sentence per group of a `noise` table."""
    out = []
    for r in t.iter_rows(named=True):
        if not r["n_tasks"]:
            out.append(f"{_who(r)}: no task has two scored repeats; run with --repeats 2 or more.")
            continue
        if r["threshold"] is None:
            flip = "no flip rate (rewards are not pass/fail: give --threshold)"
        else:
            ci = _ci(r["flip_low"], r["flip_high"], ".0%")
            flip = (f"outcomes flip between two runs on {_pct(r['flip_rate'])}{ci} of tasks (success: "
                    f"reward ≥ {r['threshold']:g})")  # fmt: skip
        icc = "–" if r["icc"] is None else f"{r['icc']:.2f}"
        between = "–" if r["var_between"] is None else f"{r['var_between']:.4f}"
        out.append(
            f"{_who(r)}: {r['n_tasks']} tasks × {r['repeats']:.1f} repeats; {flip}; variance between tasks "
            f"{between}{_ci(r['between_low'], r['between_high'], '.4f')}, within "
            f"{r['var_within']:.4f}{_ci(r['within_low'], r['within_high'], '.4f')}, intraclass "
            f"correlation {icc}{_ci(r['icc_low'], r['icc_high'], '.2f')}. Two single runs of its "
            f"{r['n_tasks_run']} tasks must differ by {r['diff_needed']:.3f}"
            f"{_ci(r['diff_low'], r['diff_high'], '.3f')} before they differ at α = 0.05."
        )
    return out


HOW = (
    "Flip rate: the chance two runs give a task different outcomes (pairs of repeats that disagree). "
    "Difference needed: 1.96 · sqrt(2 · within-task variance / tasks), what two runs of one model, one "
    f"episode per task, paired by task, exceed one time in twenty. 95% intervals: {MEAN_METHOD} for the flip "
    f"rate, the within-task variance and the difference needed; {BOOT_METHOD} for the between-task variance "
    f"and the intraclass correlation; none below {MIN_TASKS} tasks with repeats."
)


def format_noise(df: pl.DataFrame, threshold: float | None = None, markdown: bool = False) -> str:
    """`evalkit noise`'s text, and the summary's section when a run has repeats: "" when no task has two
    scored repeats."""
    t = noise(df, threshold)
    if not t.height or not (t["n_tasks"] > 0).any():
        return ""
    said = [f"- {x}" for x in lines(t)] if markdown else lines(t)
    return "\n".join(["How noisy is it (from repeats of each task)", *said, HOW])


def noise_html(df: pl.DataFrame, threshold: float | None = None) -> str:
    """The report's section: the table, the sentences and how the numbers were made; a line saying why not
    when no task was repeated."""
    t = noise(eager(df, "noise_html"), threshold)
    if not t.height or not (t["n_tasks"] > 0).any():
        return (
            f'{STYLE}<div class="ekr"><p class="muted">One repeat per task: no flip rate or noise.</p></div>'
        )
    t = t.with_columns(
        pl.struct("flip_low", "flip_high").map_elements(lambda s: _ci(s["flip_low"], s["flip_high"], ".0%"),
                                                        return_dtype=_S).alias("flip_ci"),
        pl.struct("diff_low", "diff_high").map_elements(lambda s: _ci(s["diff_low"], s["diff_high"], ".3f"),
                                                        return_dtype=_S).alias("diff_ci"),
        pl.struct("icc_low", "icc_high").map_elements(lambda s: _ci(s["icc_low"], s["icc_high"], ".2f"),
                                                      return_dtype=_S).alias("icc_ci"),
    )  # fmt: skip
    cols = [("model", "model", "text"), ("env", "env", "text"), ("n_tasks", "tasks", "int"),
            ("repeats", "repeats", ".1f"), ("flip_rate", "flip rate", ".3f"), ("flip_ci", "95% CI", "text"),
            ("icc", "ICC", ".2f"), ("icc_ci", "95% CI", "text"), ("diff_needed", "difference needed", ".3f"),
            ("diff_ci", "95% CI", "text")]  # fmt: skip
    said = "".join(f"<li>{esc(x)}</li>" for x in lines(t))
    return (f'{STYLE}<div class="ekr"><h2>How noisy is it</h2>{table_html(t, cols)}<ul>{said}</ul>'
            f'<p class="muted">{esc(HOW)}</p></div>')  # fmt: skip


__all__ = ["COLUMNS", "format_noise", "noise", "noise_html", "per_task"]
