"""A foreign run's numbers as its own harness summarised them, and where evalkit's differ.

evalkit's rule (an episode the infrastructure broke is unscored, never 0; one without a reward is "no reward")
can make a run's mean differ from the one its harness printed. Every imported episode keeps the harness's
own reward and error (`harness_reward`, `harness_error`), and this module rebuilds each harness's summary
from them, rule for rule (`summarise(df, as_harness=True)`, `evalkit summarise --as-harness`):

- design-canvas rollouts (seed 000): every job's latest record counts; a missing reward (a failed job, a
  submit that returned no grade) counts 0.0, an errored episode its grade; per model × surface × mode, `n`,
  the mean reward, min and max rounded to 4 places, turns and tool calls per episode to 1, tool errors and
  tokens summed, `failed` the records with an error. Per tier (`tiers`): the mean (fmean) to 4 places and the
  seed's 95% CI, a bootstrap over episodes (Python's `random.Random(0)`, 2,000 resamples) in the order its
  summary met them: each job where it first appears in the trace.
- tool-planning rollouts (seed 003): the seed writes no summary; each record's reward as it stands (0.0 for an
  episode an error ended), averaged exactly, unrounded.
- own-loop GUI runs (seed 001): the files hold no reward; the harness's numbers are its grader's, over the
  episodes a grades file gave a `harness_reward` (`evalkit.records.grades`), unrounded. Without one: no
  grades (`n` 0, reward null).
- τ²-bench results: its metrics count every simulation with a reward (an infrastructure error has none),
  each reward as it stands (a user-simulator error included, which evalkit leaves unscored), unrounded.
- evalkit's own runs: evalkit's rule (the mean over scored episodes).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable

import polars as pl

from evalkit.errors import TraceError
from evalkit.records import rundir
from evalkit.records.importers import canvas_rollout, ownloop, tau2, tool_planning

GROUP = ("model", "env", "surface", "mode")
_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64
_STATS = {
    "n": _I, "failed": _I, "mean_reward": _F, "min_reward": _F, "max_reward": _F, "mean_turns": _F,
    "mean_tool_calls": _F, "tool_errors": _I, "input_tokens": _I, "output_tokens": _I, "reasoning_tokens": _I,
    "reasoning_chars": _I,
}  # fmt: skip
SEED_BOOT = 2000
"""Resamples of the design-canvas seed's tier CI (its `bootstrap_ci`)."""
SEED_TIERS = ("easy", "medium", "hard")
"""The design-canvas seed's tiers, in the order its tier table lists them (then "all")."""


def counted() -> tuple[pl.Expr, pl.Expr]:
    """(whether the episode's harness counts it in its mean, the reward it counts), per the rules above."""
    src, own = pl.col("source"), pl.col("harness_reward")
    as_is, graded = src.is_in([canvas_rollout.NAME, tool_planning.NAME]), src.is_in([ownloop.NAME, tau2.NAME])
    count = pl.when(as_is).then(True).when(graded).then(own.is_not_null()).otherwise(pl.col("scored"))
    value = pl.when(as_is).then(own.fill_null(0.0)).when(graded).then(own).otherwise(pl.col("reward"))
    return count, value


def _exact_mean(xs: list) -> float | None:
    # statistics.mean sums exactly: the same to the last digit in whatever order the rows come.
    return float(statistics.mean(xs)) if xs else None


def _group(source: str, rows: list[dict]) -> dict:
    canvas = source == canvas_rollout.NAME
    rs = [r for r in rows if r["_counted"]]
    rewards = [r["_h"] for r in rs]
    r4 = (lambda v: None if v is None else round(v, 4)) if canvas else (lambda v: v)
    r1 = (lambda v: None if v is None else round(v, 1)) if canvas else (lambda v: v)
    return {
        "n": len(rs),
        "failed": sum(1 for r in rs if (r["harness_error"] if source != "evalkit" else r["error_class"])),
        "mean_reward": r4(_exact_mean(rewards)),
        "min_reward": r4(min(rewards)) if rewards else None,
        "max_reward": r4(max(rewards)) if rewards else None,
        "mean_turns": r1(_exact_mean([r["n_turns"] for r in rs])),
        "mean_tool_calls": r1(_exact_mean([r["tool_calls"] for r in rs])),
        "tool_errors": sum(r["tool_errors"] for r in rs),
        "input_tokens": sum(r["input_tokens"] for r in rs),
        "output_tokens": sum(r["output_tokens"] for r in rs),
        "reasoning_tokens": sum(r["reasoning_tokens"] for r in rs),
        "reasoning_chars": sum(r["reasoning_chars"] for r in rs),
    }


def summarise(df: pl.DataFrame, by: Iterable[str] = GROUP) -> pl.DataFrame:
    """Per `by` group and harness (`source`), the numbers that harness's own summary gives (see the module
    docstring): `n` the episodes it counts, `failed` those it recorded an error for, the mean, min and max
    reward, turns and tool calls per episode, tool errors, tokens and reasoning in all."""
    by = [c for c in by if c != "source"]
    count, value = counted()
    rows = df.with_columns(count.alias("_counted"), value.alias("_h"))
    out = []
    for key, sub in rows.group_by(by + ["source"], maintain_order=True):
        out.append({**dict(zip(by + ["source"], key, strict=True)), **_group(key[-1], sub.to_dicts())})
    schema = {**{c: df.schema[c] for c in by}, "source": _S, **_STATS}
    return pl.DataFrame(out, schema=schema, orient="row").sort(by + ["source"], nulls_last=True)


def _first_seen(run: str) -> dict[str, int]:
    """Each key's position where it first appears in a run: the order the canvas seed's summary meets jobs
    (it keeps a dict of the latest record per job, which holds each job where it was first inserted)."""
    seen: dict[str, int] = {}
    try:
        for d in rundir.iter_dicts(run, latest=False):
            if isinstance(d.get("key"), str):
                seen.setdefault(d["key"], len(seen))
    except (OSError, TraceError):  # gone since it was loaded: the frame's own order, and a CI that may differ
        pass
    return seen


def seed_ci(values: list[float], n: int = SEED_BOOT, seed: int = 0) -> tuple[float, float]:
    """The design-canvas seed's 95% CI of a mean: `n` resamples of the episodes with Python's random, the
    2.5th and 97.5th of the sorted means as it indexes them, to 4 places; a single value is its own CI."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(n))
    return round(means[int(0.025 * n)], 4), round(means[int(0.975 * n) - 1], 4)


def tiers(df: pl.DataFrame) -> pl.DataFrame:
    """The design-canvas seed's tier table for the canvas rollouts in `df`: per model × surface × mode and
    tier (then "all", over the episodes that have a tier), `n`, the mean reward (fmean, 4 places) and its
    95% CI (`seed_ci`), from the episodes in the order that seed's summary met them."""
    rows = df.filter((pl.col("source") == canvas_rollout.NAME) & pl.col("tier").is_not_null())
    seen = [
        pl.DataFrame({"run": run, "key": list(first), "_o": list(first.values())},
                     schema={"run": _S, "key": _S, "_o": _I})
        for run in rows["run"].unique(maintain_order=True).to_list()
        if (first := _first_seen(run))
    ]  # fmt: skip
    order = pl.concat(seen) if seen else pl.DataFrame(schema={"run": _S, "key": _S, "_o": _I})
    ranked = (
        rows.join(order, on=["run", "key"], how="left", maintain_order="left")
        .with_columns(pl.col("harness_reward").fill_null(0.0).alias("_h"))
        .sort("run", "_o", maintain_order=True, nulls_last=True)
    )
    groups: dict[tuple, list[float]] = {}
    for r in ranked.iter_rows(named=True):
        for tier in (r["tier"], "all"):
            groups.setdefault((r["model"], r["surface"], r["mode"], tier), []).append(r["_h"])
    rank = {t: i for i, t in enumerate((*SEED_TIERS, "all"))}
    out = []
    for (m, s, mode, t), v in sorted(groups.items(), key=lambda kv: (*kv[0][:3], rank.get(kv[0][3], 50))):
        lo, hi = seed_ci(v)
        out.append((m, s, mode, t, len(v), round(statistics.fmean(v), 4), float(lo), float(hi)))
    schema = {"model": _S, "surface": _S, "mode": _S, "tier": _S, "n": _I, "mean_reward": _F,
              "ci_low": _F, "ci_high": _F}  # fmt: skip
    return pl.DataFrame(out, schema=schema, orient="row")


def differences(df: pl.DataFrame) -> str | None:
    """One line: how many episodes a foreign harness scored that evalkit does not, and why; None when its
    numbers and evalkit's count the same episodes."""
    count, _ = counted()
    off = df.filter((pl.col("source") != "evalkit") & count & ~pl.col("scored"))
    if not off.height:
        return None
    parts = []
    failed = off.filter(pl.col("error_class").is_not_null())
    if failed.height:
        kinds = failed.group_by("error_class").agg(pl.len(), pl.col("harness_error").drop_nulls().first())
        said = []
        for r in kinds.sort("len", "error_class", descending=[True, False]).iter_rows(named=True):
            example = f': "{_cut(r["harness_error"])}"' if r["harness_error"] else ""
            said.append(f"{r['error_class']} ×{r['len']}{example}")
        parts.append(f"{failed.height} unscored by an infrastructure error ({'; '.join(said)})")
    quiet = off.height - failed.height
    if quiet:
        parts.append(f"{quiet} without a reward, which the harness counted as 0.0")
    return (f"{off.height} episode(s) the harness scored are not scored here: {', '.join(parts)}; "
            "`--as-harness` gives the harness's own numbers")  # fmt: skip


def _cut(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"
