"""Statistics over episode frames: summaries, per-tier bootstrap CIs, paired comparison of two models.

An unscored episode (`reward` null, `error_class` set: the infrastructure failed) is never read as a zero:
summaries give the mean over scored episodes and, labelled, the mean with unscored counted as zero. An
episode with no reward and no error (an env that gives no reward, or a run graded elsewhere and not merged)
is neither: summaries count it as `no_reward` and leave it out of both means. Frames come from
`evalkit.records.loading`; their text and files from `evalkit.analysis.summary`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

N_BOOT = 2000
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143
TIER_ORDER = ("easy", "medium", "hard")
GROUP = ("model", "env", "surface", "mode")

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64


def _aggs() -> list[pl.Expr]:
    r = pl.col("reward")
    scored = pl.col("scored")
    failed = pl.col("error_class").is_not_null()
    turns_ = pl.col("n_turns").cast(_F)
    return [
        pl.len().alias("n"),
        scored.sum().cast(_I).alias("scored"),
        failed.sum().cast(_I).alias("unscored"),
        (~scored & ~failed).sum().cast(_I).alias("no_reward"),
        r.filter(scored).mean().alias("mean_reward"),
        # No scored episode, no grades: "unscored as zero" would read as a model that scored 0.
        pl.when(scored.any())
        .then(pl.when(scored).then(r).when(failed).then(0.0).mean())
        .alias("mean_reward_unscored_as_0"),
        r.filter(scored).min().alias("min_reward"),
        r.filter(scored).max().alias("max_reward"),
        pl.col("n_turns").mean().alias("mean_turns"),
        pl.col("tool_calls").mean().alias("mean_tool_calls"),
        pl.col("tool_errors").mean().alias("mean_tool_errors"),
        pl.col("parse_errors").mean().alias("mean_parse_errors"),
        pl.col("tokens").mean().alias("mean_tokens"),
        (pl.col("reasoning_tokens").sum() / turns_.sum()).alias("reasoning_tokens_per_turn"),
        (pl.col("reasoning_chars").sum() / turns_.sum()).alias("reasoning_chars_per_turn"),
        # A price missing for any episode makes the total unknown, not smaller: null, never a guess.
        pl.when(pl.col("cost_usd").null_count() == 0).then(pl.col("cost_usd").sum()).alias("cost_usd"),
        pl.col("cost_usd").mean().alias("mean_cost_usd"),
        pl.col("seconds").mean().alias("mean_seconds"),
    ]


def summarise(df: pl.DataFrame, by: Iterable[str] = GROUP, as_harness: bool = False) -> pl.DataFrame:
    """Per model × env × surface × mode: counts, reward (scored mean, and with unscored counted as zero),
    turns, tool calls and errors, tokens, reasoning per turn, cost.

    `n` = `scored` + `unscored` + `no_reward`: `unscored` are infrastructure errors (`error_class` set, no
    reward); `no_reward` are episodes that ended without error and without a reward (an env that gives
    none). `mean_reward` is over scored episodes; `mean_reward_unscored_as_0` also counts the unscored as
    zero. No-reward episodes are in neither mean: there is no score to take, and no failure to charge. A
    group with no scored episode (an ungraded run) has both means null: no grades, not a zero.

    `as_harness`: instead, each imported run's numbers as its own harness summarised them
    (`evalkit.analysis.harness`)."""
    if as_harness:
        from evalkit.analysis import harness

        return harness.summarise(df, by)
    by = list(by)
    return df.group_by(by, maintain_order=True).agg(_aggs()).sort(by, nulls_last=True)


def _tier_rank() -> pl.Expr:
    t = pl.col("tier")
    return (
        pl.when(t == "all")
        .then(99)
        .when(t.is_in(list(TIER_ORDER)))
        .then(t.replace_strict(list(TIER_ORDER), list(range(len(TIER_ORDER))), default=50))
        .otherwise(50)
    )


def _chunks(n_boot: int, width: int, budget: int = 250_000) -> Iterator[int]:
    # Resamples in blocks of ~budget draws: a block's buffers stay in cache, several times faster than one
    # 2,000 × n matrix on this machine, and memory stays flat for any n.
    step = max(1, min(n_boot, budget // max(1, width)))
    done = 0
    while done < n_boot:
        yield min(step, n_boot - done)
        done += step


def cluster_bootstrap(
    sums: np.ndarray, counts: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
) -> np.ndarray:
    """Bootstrap means of a ratio estimator over clusters: resample clusters (tasks) with replacement and
    return sum(sums)/sum(counts) per resample. With one episode per cluster this is the plain bootstrap.

    `sums` may be 2-D (k statistics × clusters) sharing one `counts` row each ((k × clusters) too); the same
    resamples serve all k, returned as (n_boot × k). Each distinct input row is gathered by the resampled
    indices and summed per resample; a matrix product of cluster multiplicities gave the same sums but went
    through multi-threaded BLAS, which on a busy two-core machine cost several times the whole loop."""
    s2 = np.atleast_2d(np.asarray(sums, float))
    c2 = np.atleast_2d(np.asarray(counts, float))
    rng = np.random.default_rng(seed)
    n = s2.shape[1]
    if n == 0:
        out = np.full((n_boot, s2.shape[0]), np.nan)
        return out if np.ndim(sums) > 1 else out[:, 0]
    k = s2.shape[0]
    # by_tier passes the reward sums twice (once per mean): gather each distinct row once.
    rows: list[np.ndarray] = []
    inv = []
    for r in np.concatenate([s2, c2]):
        same = [j for j, u in enumerate(rows) if np.array_equal(u, r)]
        if not same:
            rows.append(np.ascontiguousarray(r))
        inv.append(same[0] if same else len(rows) - 1)
    # A constant row (episodes per task when every task has the same repeats) sums to the same every time.
    const = [bool((r == r[0]).all()) for r in rows]
    tot = np.empty((n_boot, len(rows)))
    done = 0
    for b in _chunks(n_boot, n):
        # intp draws are the int32 stream for n < 2**32, and indexing with them needs no conversion.
        idx = rng.integers(0, n, size=(b, n), dtype=np.intp)
        for j, r in enumerate(rows):
            tot[done : done + b, j] = r[0] * n if const[j] else r[idx].sum(1)
        done += b
    tot = tot[:, inv]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = tot[:, :k] / tot[:, k:]
    return out if np.ndim(sums) > 1 else out[:, 0]


def _ci(boot: np.ndarray) -> tuple[float | None, float | None]:
    boot = boot[np.isfinite(boot)]
    if not len(boot):
        return None, None
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(lo), float(hi)


def by_tier(
    df: pl.DataFrame, by: Iterable[str] = GROUP, n_boot: int = N_BOOT, seed: int = 0, cluster: str = "task_id"
) -> pl.DataFrame:
    """`summarise` per group and tier, plus tier "all", with 95% percentile bootstrap CIs on both reward
    means. The bootstrap resamples tasks (repeats of a task move together), vectorised over resamples."""
    by = list(by)
    keys = by + ["tier"]
    both = pl.concat([df, df.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    table = both.group_by(keys, maintain_order=True).agg(_aggs())
    per_task = both.group_by(keys + [cluster], maintain_order=True).agg(
        pl.col("reward").filter(pl.col("scored")).sum().alias("s"),
        pl.col("scored").sum().cast(_F).alias("c"),
        (pl.col("scored") | pl.col("error_class").is_not_null()).sum().cast(_F).alias("nz"),
    )
    ci_rows = []
    for n, (k, sub) in enumerate(per_task.group_by(keys, maintain_order=True)):
        s, c, nz = (sub[col].to_numpy() for col in ("s", "c", "nz"))
        # Both means share resamples; a task whose episodes are all unscored adds nothing to the scored mean.
        boot = cluster_bootstrap(np.stack([s, s]), np.stack([c, nz]), n_boot, seed + n)
        lo, hi = _ci(boot[:, 0])
        zlo, zhi = _ci(boot[:, 1])
        ci_rows.append((*k, lo, hi, zlo, zhi))
    ci = pl.DataFrame(
        ci_rows,
        schema=[(k, both.schema[k]) for k in keys]
        + [("ci_low", _F), ("ci_high", _F), ("ci_low_unscored_as_0", _F), ("ci_high_unscored_as_0", _F)],
        orient="row",
    )
    out = table.join(ci, on=keys, how="left", nulls_equal=True)
    # A group with no scored episode has no mean to bound (its resamples are all 0 / n): no CI, not [0, 0].
    none = pl.col("scored") == 0
    out = out.with_columns(pl.when(~none).then(pl.col(c)).alias(c) for c in ci.columns[len(keys) :])
    cols = list(table.columns)
    i = cols.index("mean_reward") + 1
    cols[i:i] = ["ci_low", "ci_high"]
    j = cols.index("mean_reward_unscored_as_0") + 1
    cols[j:j] = ["ci_low_unscored_as_0", "ci_high_unscored_as_0"]
    return (
        out.select(cols)
        .with_columns(_tier_rank().alias("_r"))
        .sort(by + ["_r", "tier"], nulls_last=True)
        .drop("_r")
    )


# ---------------------------------------------------------------- paired comparison

PAIR_KEYS = ("env", "surface", "mode", "task_id", "skin")


def _select(df: pl.DataFrame, who: str) -> pl.DataFrame:
    """Episodes of `who`: a model label, a run as given to load_runs, or a run's name."""
    for col in ("model", "run", "run_name"):
        sub = df.filter(pl.col(col) == who)
        if sub.height:
            return sub
    raise ValueError(f"{who!r} is neither a model nor a run in this frame")


def paired_bootstrap(d: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Bootstrap distribution of the mean of per-task differences `d`: tasks are resampled (the cluster) and
    each carries its own difference, so the repeats behind it travel with it. Resampling the repeats again
    inside each drawn task would count the within-task noise twice (it is already in the spread of `d`)."""
    d = np.asarray(d, float)
    return cluster_bootstrap(d, np.ones_like(d), n_boot, seed)


COMPARE_COLUMNS = (
    "a",
    "b",
    "by",
    "group",
    "n_tasks",
    "n_dropped",
    "n_unpaired",
    "n_unscored_a",
    "n_unscored_b",
    "mean_a",
    "mean_b",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "wins",
    "ties",
    "losses",
    "sd_diff",
    "mde",
)


def _per_task_differences(
    a_df: pl.DataFrame, b_df: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, int]:
    """Per task with at least one repeat scored on both sides: the mean over those repeats of A, of B, and of
    their difference (repeat r of A against repeat r of B). Also the number of scored episodes of those tasks
    left out because the other side has no scored episode with the same repeat."""
    rk = keys + ["repeat"]

    def cells(d: pl.DataFrame) -> pl.DataFrame:
        # One value per task and repeat (a model found in two runs may have both at the same repeat).
        return (
            d.filter(pl.col("scored"))
            .group_by(rk)
            .agg(pl.col("reward").mean().alias("r"), pl.len().alias("k"))
        )

    ca, cb = cells(a_df), cells(b_df)
    # Sorted, so that sums (and the seeded bootstrap over them) come out the same on every call.
    j = ca.join(cb, on=rk, how="inner", suffix="_b", nulls_equal=True).sort(rk, nulls_last=True)
    per_task = (
        j.group_by(keys, maintain_order=True)
        .agg(
            pl.col("r").mean().alias("mean_a"),
            pl.col("r_b").mean().alias("mean_b"),
            (pl.col("r") - pl.col("r_b")).mean().alias("d"),
        )
        .sort(keys, nulls_last=True)
    )
    paired = per_task.select(keys)
    scored_in_paired = sum(
        int(c.join(paired, on=keys, how="semi", nulls_equal=True)["k"].sum()) for c in (ca, cb)
    )
    return per_task, scored_in_paired - int(j["k"].sum() + j["k_b"].sum())


def _compare_block(a_df: pl.DataFrame, b_df: pl.DataFrame, n_boot: int, seed: int) -> dict:
    keys = [k for k in PAIR_KEYS if k in a_df.columns]
    per_task, unpaired = _per_task_differences(a_df, b_df, keys)
    n = per_task.height
    row: dict[str, Any] = {
        "n_tasks": n,
        "n_dropped": pl.concat([a_df.select(keys), b_df.select(keys)]).unique().height - n,
        "n_unpaired": unpaired,
        "n_unscored_a": int((~a_df["scored"]).sum()),  # no score: an infrastructure error or no reward
        "n_unscored_b": int((~b_df["scored"]).sum()),
    }
    if n == 0:
        return (
            row
            | {
                k: None
                for k in ("mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value", "sd_diff", "mde")
            }
            | {"wins": 0, "ties": 0, "losses": 0}
        )
    d = per_task["d"].to_numpy()
    boot = paired_bootstrap(d, n_boot, seed)
    lo, hi = _ci(boot)
    le, ge = int((boot <= 0).sum()), int((boot >= 0).sum())
    p = min(1.0, (2 * min(le, ge) + 1) / (len(boot) + 1))
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    tie = np.isclose(d, 0, atol=1e-9)
    return row | {
        "mean_a": float(per_task["mean_a"].mean()),
        "mean_b": float(per_task["mean_b"].mean()),
        "diff": float(d.mean()),
        "ci_low": lo,
        "ci_high": hi,
        "p_value": p,
        "wins": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "losses": int(((d < 0) & ~tie).sum()),
        "sd_diff": sd,
        "mde": None if sd is None else (Z_975 + Z_80) * sd / math.sqrt(n),
    }


def compare(
    df: pl.DataFrame, a: str, b: str, by: str | None = "tier", n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """Paired comparison of `a` against `b` (models, or runs): episodes paired by task (env, surface, mode,
    task, skin) and repeat. Each task gives one difference d, the mean over its paired repeats of
    (A − B); `diff` is the mean of d over tasks, `sd_diff` its SD. The bootstrap resamples tasks only, each
    with its d (a task-clustered bootstrap: repeats travel with their task); `p_value` is two-sided from
    that distribution; `mde` is the smallest true difference this many tasks would detect with 80% power
    at α = 0.05, from `sd_diff`. Left out and counted: episodes without a score (`n_unscored_*`: an
    infrastructure error or no reward), tasks without a repeat scored on both sides (`n_dropped`), and
    scored episodes of the other tasks whose repeat has no scored partner on the other side
    (`n_unpaired`). One row per value of `by` plus "all"."""
    da, db = _select(df, a), _select(df, b)
    groups: list[tuple[str, pl.DataFrame, pl.DataFrame]] = []
    if by:
        values = [v for v in pl.concat([da[by], db[by]]).unique().to_list()]
        rank = {t: i for i, t in enumerate(TIER_ORDER)}
        values.sort(key=lambda v: (v is None, rank.get(v, 50), str(v)))
        for v in values:
            f = pl.col(by).is_null() if v is None else pl.col(by) == v
            groups.append((None if v is None else str(v), da.filter(f), db.filter(f)))
    groups.append(("all", da, db))
    rows = []
    for n, (g, xa, xb) in enumerate(groups):
        rows.append({"a": a, "b": b, "by": by or "", "group": g} | _compare_block(xa, xb, n_boot, seed + n))
    schema = {c: (_S if c in ("a", "b", "by", "group") else _F) for c in COMPARE_COLUMNS}
    for c in ("n_tasks", "n_dropped", "n_unpaired", "n_unscored_a", "n_unscored_b", "wins", "ties", "losses"):
        schema[c] = _I
    return Comparison(pl.DataFrame(rows, schema=schema).select(COMPARE_COLUMNS))


class Comparison(pl.DataFrame):
    """The frame `compare` returns, which a notebook shows as a sentence (the overall difference, its CI,
    p, wins and losses) above the table per group. Anything done to it is a plain Polars frame again."""

    def _repr_html_(self, **kw: Any) -> str:
        if not set(COMPARE_COLUMNS) <= set(self.columns) or self.height == 0:
            return pl.DataFrame(self)._repr_html_(**kw)
        from html import escape

        from evalkit.analysis.tables import COMPARE_TABLE, table_html

        r = self.row(-1, named=True)
        a, b = escape(str(r["a"])), escape(str(r["b"]))
        if not r["n_tasks"]:
            line = f"<b>{a}</b> and <b>{b}</b> share no scored task."
        else:
            p = "p &lt; 0.001" if r["p_value"] < 0.001 else f"p = {r['p_value']:.3f}"
            ci = f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
            line = (f"<b>{a}</b> − <b>{b}</b> = <b>{r['diff']:+.3f}</b> mean reward (95% CI {ci}, {p}) over "
                    f"{r['n_tasks']} paired task(s): A better on <b>{r['wins']}</b>, B better on "
                    f"<b>{r['losses']}</b>, {r['ties']} tied.")  # fmt: skip
        table = table_html(pl.DataFrame(self), COMPARE_TABLE)
        return f'<div style="font-size:14px;margin:4px 0">{line}</div>{table}'


def compare_many(
    df: pl.DataFrame, ref: str, by: str | None = None, n_boot: int = N_BOOT, seed: int = 0
) -> pl.DataFrame:
    """`compare(df, m, ref)` for every other model m: one table of each model against the reference."""
    _select(df, ref)
    others = [m for m in df["model"].unique(maintain_order=True).to_list() if m != ref]
    if not others:
        return pl.DataFrame(schema=compare(df, ref, ref, by=None, n_boot=10).schema)
    return pl.concat([compare(df, m, ref, by=by, n_boot=n_boot, seed=seed) for m in others], how="vertical")


def grade_components(df: pl.DataFrame) -> pl.DataFrame:
    """Long frame (model, component, value) of the numeric grade entries in [0, 1] other than `total` —
    for canvas: structure, visual, coverage, order, background — over scored episodes."""
    rows = []
    for model, g in (
        df.filter(pl.col("scored") & pl.col("grade").is_not_null()).select("model", "grade").iter_rows()
    ):
        for k, v in json.loads(g).items():
            if (
                k != "total"
                and not k.startswith("n_")
                and isinstance(v, int | float)
                and not isinstance(v, bool)
            ):
                rows.append((model, k, float(v)))
    return pl.DataFrame(rows, schema={"model": _S, "component": _S, "value": _F}, orient="row")
