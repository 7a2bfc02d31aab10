"""What repeats of a task tell: pass@k and pass^k (`pass_at_k`, `pass_hat_k`), and how many tasks and
repeats a difference needs (`plan`, from a pilot run's between- and within-task variance).

Both estimators are per task first (the task is the unit, as everywhere in `evalkit.analysis.stats`), then a
task-weighted mean with the interval of `stats.mean_interval` over tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from math import comb

import numpy as np
import polars as pl

from evalkit.analysis import power
from evalkit.analysis.power import beta_fit
from evalkit.analysis.stats import (
    ALPHA,
    GROUP,
    MIN_TASKS,
    TASK,
    TASK_KEYS,
    TIER_ORDER,
    Z_80,
    Z_975,
    _present,
    _select,
    _t_quantile,
    _tier_rank,
    mean_interval,
    task_column,
)
from evalkit.analysis.tables import METHODS
from evalkit.records.columns import eager

_F, _I, _S = pl.Float64, pl.Int64, pl.Utf8


def _pass_at(n: int, c: int, k: int) -> float:
    # Unbiased: the chance that k of the n repeats drawn without replacement hold at least one success.
    return 1.0 - comb(n - c, k) / comb(n, k)


def _pass_hat(n: int, c: int, k: int) -> float:
    # Unbiased: the chance that k of the n repeats drawn without replacement are all successes.
    return comb(c, k) / comb(n, k)


def _per_task_k(
    df: pl.DataFrame, k: int, threshold: float, by: list[str], fn, name: str, cluster: str = TASK
) -> pl.DataFrame:
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    df = eager(df, name)
    by = _present(by, df)
    if cluster == TASK:
        df = task_column(df)
    scored = df.filter(pl.col("scored") & ~pl.col("reward").is_nan())
    both = pl.concat([scored, scored.with_columns(pl.lit("all", _S).alias("tier"))], how="vertical")
    keys = [*by, "tier"]
    per = (
        both.group_by([*keys, cluster], maintain_order=True)
        .agg(pl.len().alias("n"), (pl.col("reward") >= threshold).sum().cast(_I).alias("c"))
        .sort([*keys, cluster], nulls_last=True)
    )
    rows = []
    for key, g in per.group_by(keys, maintain_order=True):
        ok = g.filter(pl.col("n") >= k)
        v = np.array([fn(n, c, k) for n, c in ok.select("n", "c").iter_rows()], float)
        # Pass/fail per task only when every task's estimate is 0 or 1 (k = 1 with one repeat each).
        pf = bool(len(v)) and bool(np.isin(v, (0.0, 1.0)).all())
        lo, hi = mean_interval(v, int(ok["n"].sum()), pf) if len(v) else (None, None)
        rows.append((*key, k, len(v), g.height - len(v), float(v.mean()) if len(v) else None, lo, hi))
    schema = [(c, both.schema[c]) for c in keys] + [
        ("k", _I), ("n_tasks", _I), ("n_tasks_short", _I), (name, _F), ("ci_low", _F), ("ci_high", _F)
    ]  # fmt: skip
    out = pl.DataFrame(rows, schema=schema, orient="row").with_columns(
        pl.lit(METHODS["bayes"]).alias("ci_method")
    )
    return out.with_columns(_tier_rank().alias("_r")).sort([*by, "_r", "tier"], nulls_last=True).drop("_r")


def pass_at_k(df: pl.DataFrame, k: int, threshold: float = 1.0, by: Iterable[str] = GROUP) -> pl.DataFrame:
    """pass@k per model × env × surface × mode (`by`) and tier, plus tier "all": the chance that at least one
    of k attempts at a task succeeds (reward ≥ `threshold`), from each task's n scored repeats with c
    successes by the unbiased estimator 1 − C(n − c, k) / C(n, k), then averaged over tasks, with a 95% CI
    over tasks (`stats.mean_interval`; none below MIN_TASKS tasks). Tasks with fewer than k scored repeats are
    left out and counted (`n_tasks_short`). Two successes in four repeats:
    pass@2 = 1 − C(2, 2)/C(4, 2) = 5/6."""
    return _per_task_k(df, k, threshold, list(by), _pass_at, "pass_at_k")


def pass_hat_k(df: pl.DataFrame, k: int, threshold: float = 1.0, by: Iterable[str] = GROUP) -> pl.DataFrame:
    """pass^k per model × env × surface × mode (`by`) and tier, plus tier "all": the chance that all k
    attempts at a task succeed (reward ≥ `threshold`), C(c, k) / C(n, k) per task (unbiased), averaged over
    tasks with a 95% CI over tasks, as `pass_at_k`. Two successes in four repeats: pass^2 = C(2, 2)/C(4, 2) =
    1/6."""
    return _per_task_k(df, k, threshold, list(by), _pass_hat, "pass_hat_k")


def pass_ks(top: int) -> list[int]:
    """The k shown for a run whose tasks have at most `top` scored repeats: 2, the middle and `top` (at most
    three values); none below two repeats."""
    if top < 2:
        return []
    return sorted({2, (top + 2) // 2, top})


def pass_k_table(df: pl.DataFrame, threshold: float = 1.0, ks: Iterable[int] | None = None) -> pl.DataFrame:
    """pass@k and pass^k side by side per model × env × surface × mode and k (tier "all"): the table the
    summary, the report and the viewer show, for `ks` (default `pass_ks(max_repeats(df))`; empty when no
    task has two scored repeats). Columns: k, n_tasks, n_tasks_short, pass_at_k, ci_low, ci_high,
    pass_hat_k, hat_low, hat_high."""
    ks = pass_ks(max_repeats(df)) if ks is None else list(ks)
    keys = _present(GROUP, df)
    rows = []
    for k in ks:
        at = pass_at_k(df, k, threshold).filter(pl.col("tier") == "all").drop("tier")
        hat = pass_hat_k(df, k, threshold).filter(pl.col("tier") == "all")
        hat = hat.select(*keys, "pass_hat_k", hat_low="ci_low", hat_high="ci_high")
        at = at.drop("ci_method")
        rows.append(at.join(hat, on=keys, nulls_equal=True, how="left"))
    if not rows:
        return pl.DataFrame(schema={**{c: _S for c in keys}, "k": _I, "n_tasks": _I, "n_tasks_short": _I,
                                    "pass_at_k": _F, "ci_low": _F, "ci_high": _F, "pass_hat_k": _F,
                                    "hat_low": _F, "hat_high": _F, "ci_method": _S})  # fmt: skip
    out = pl.concat(rows).with_columns(pl.lit(METHODS["bayes"]).alias("ci_method"))
    return out.sort([*keys, "k"], nulls_last=True)


def max_repeats(df: pl.DataFrame) -> int:
    """The most scored repeats any model has of one task on one surface and mode: pass@k is shown for k up
    to this (two surfaces of a task are not two attempts at the same thing)."""
    s = df.filter(pl.col("scored"))
    if not s.height:
        return 0
    return int(s.group_by(*_present(GROUP, s), "task_id").len()["len"].max())


PLAN_REPEATS = (1, 2, 3, 5, 10)


def plan(
    df: pl.DataFrame,
    a: str,
    b: str,
    delta: float,
    power: float = 0.8,
    alpha: float = ALPHA,
    repeats: Iterable[int] = PLAN_REPEATS,
) -> pl.DataFrame:
    """How many tasks a true difference of `delta` between `a` and `b` needs to be detected with `power` by
    the paired sign-flip test at `alpha` that `compare` runs, for each number of repeats, from a pilot run.

    From the pilot's paired tasks: the within-task variance σ²_w (pooled over both sides' repeats of each
    task; needs some task with two scored repeats) and the between-task variance of the true per-task
    difference σ²_b = var(d) − mean within-variance of d (floored at 0); the intraclass correlation is
    σ²_b / (σ²_b + σ²_w). A task run r times gives a difference of variance σ²_b + σ²_w / r. `n_tasks` is
    the fewest tasks (never below MIN_TASKS) at which the sign-flip test itself, simulated
    (`power.tasks_needed`), has `power`: on normal differences of that variance around delta, or, where
    every pilot reward is 0 or 1, on the pass/fail model of `power` (tasks' success rates from a Beta
    fitted to the pilot's pooled rates, r Bernoulli episodes a side, one side's rates moved by delta), which
    also plans repeats from a one-repeat pilot. At few tasks and for pass/fail rewards this is more than the
    paired t-test's count ((t₁₋α/₂ + t_power)² (σ²_b + σ²_w / r) / delta², where the search starts). Null
    where delta is beyond the rates' room or 100,000 tasks fall short. One row per repeats, with the
    variances, the ICC and `power_model` beside it.

    The pilot's own noise is allowed for: its variance is an estimate from a few tasks, so each simulated
    run draws the variance from its distribution given the estimate (`power.normal_model`), and a pilot
    whose differences show no spread at all plans with the spread such a pilot could have missed
    (`_hidden_variance`, `var_planned`), never with none (which said six tasks, whatever delta)."""
    if delta <= 0:
        raise ValueError(f"delta must be above 0, not {delta}")
    df = eager(df, "plan")
    keys = [k for k in TASK_KEYS if k in df.columns]

    def side(who: str) -> pl.DataFrame:
        s = _select(df, who).filter(pl.col("scored") & ~pl.col("reward").is_nan())
        return s.group_by(keys).agg(
            pl.col("reward").mean().alias("m"),
            pl.col("reward").var(ddof=1).alias("v"),
            pl.len().alias("r"),
            pl.col("reward").is_in([0.0, 1.0]).all().alias("pf"),
        )

    j = side(a).join(side(b), on=keys, suffix="_b", nulls_equal=True)
    n_pilot = j.height
    if n_pilot < 2:
        raise ValueError(f"plan: {a!r} and {b!r} share {n_pilot} scored task(s); a pilot needs at least 2")
    var_d, var_b, w, icc = _variances(j)
    z_a = Z_975 if abs(alpha - 0.05) < 1e-12 else _z_two_sided(alpha)
    z_p = Z_80 if abs(power - 0.8) < 1e-12 else _z_one_sided(power)
    pilot_r = float(np.mean(np.concatenate([j["r"].to_numpy(), j["r_b"].to_numpy()])))
    pf = bool((j["pf"] & j["pf_b"]).all())
    rates = None
    if pf:  # the tasks' success rates, both sides pooled, for the pass/fail model of the test's power
        ra, rb = j["r"].to_numpy(), j["r_b"].to_numpy()
        pooled = (j["m"].to_numpy() * ra + j["m_b"].to_numpy() * rb) / (ra + rb)
        rates = beta_fit(pooled, ra + rb)
    rows = []
    hidden = _hidden_variance(n_pilot)
    for r in repeats:
        if w is None and not pf:
            if abs(r - pilot_r) > 1e-9:
                continue
            var = var_d
        else:
            var = var_d if w is None else var_b + w / r
        # No spread seen is not no spread: the spread a pilot this small could have missed.
        var = max(var, hidden) if not pf and var_d <= 1e-12 else var
        start = _tasks_needed(var, delta, z_a, z_p)
        need = _sign_flip_tasks(delta, int(r), var, rates, start, alpha, power, n_pilot)
        rows.append((int(r), need, var_b, w, icc, var_d, n_pilot, var))
    model = "pass/fail rates" if pf else "normal differences"
    return pl.DataFrame(
        rows,
        schema={"repeats": _I, "n_tasks": _I, "var_between": _F, "var_within": _F, "icc": _F,
                "var_diff_pilot": _F, "n_pilot_tasks": _I, "var_planned": _F},  # fmt: skip
        orient="row",
    ).with_columns(pl.lit(a).alias("a"), pl.lit(b).alias("b"), pl.lit(float(delta)).alias("delta"),
                   pl.lit(float(power)).alias("power"), pl.lit(model).alias("power_model"))  # fmt: skip


def _hidden_variance(n: int, alpha: float = ALPHA) -> float:
    """The variance of per-task differences a pilot of `n` tasks that all showed the same difference could
    have missed: a share q = 1 − (α/2)^(1/n) of tasks (the Clopper–Pearson bound on none of n) a whole
    reward range away, q (1 − q). Six such tasks allow q = 0.46: a spread as wide as any."""
    q = 1 - (alpha / 2) ** (1 / n)
    return q * (1 - q)


def _variances(j: pl.DataFrame) -> tuple[float, float | None, float | None, float | None]:
    """(var of the per-task difference, σ²_b, σ²_w, ICC) of a pilot's paired tasks (`plan`); the last three
    None without a task with two scored repeats on some side."""
    var_d = float(np.var((j["m"] - j["m_b"]).to_numpy(), ddof=1))
    both = (
        j.filter(pl.col("r") > 1).select("v", "r"),
        j.filter(pl.col("r_b") > 1).select(pl.col("v_b").alias("v"), pl.col("r_b").alias("r")),
    )
    pooled = pl.concat(both)
    if not pooled.height:  # one repeat each: the two parts cannot be told apart
        return var_d, None, None, None
    # Pooled within-task variance of one episode, per side, summed: the two sides' noise adds.
    dof = (pooled["r"] - 1).cast(_F)
    w = float((pooled["v"] * dof).sum() / dof.sum()) * 2
    noise = float(np.mean(w / 2 / j["r"].to_numpy() + w / 2 / j["r_b"].to_numpy()))
    var_b = max(0.0, var_d - noise)
    return var_d, var_b, w, (var_b / (var_b + w) if var_b + w > 0 else None)


def _sign_flip_tasks(
    delta: float,
    r: int,
    var: float,
    rates: tuple[float, float] | None,
    start: int,
    alpha: float,
    target: float,
    pilot: int | None = None,
) -> int | None:
    """The tasks the sign-flip test needs (`power.tasks_needed`): pass/fail pilots by the pass/fail model
    (tasks' rates from the Beta fitted to the pilot, r episodes a side, one side's rates moved by delta),
    others by normal differences of variance `var` around delta, the variance itself drawn from what a
    pilot of `pilot` tasks leaves uncertain (`power.normal_model`). None past 100,000 tasks (or, pass/fail,
    where delta is beyond what the rates allow)."""
    if rates is None:
        sd = math.sqrt(var)

        def normal(n: int, rng: np.random.Generator) -> tuple[power.Model, float, None]:
            return power.normal_model(sd, n, rng, pilot=pilot), 1.0, None

        return power.tasks_needed(delta, normal, start, MIN_TASKS, alpha, target)

    def make(n: int, rng: np.random.Generator) -> tuple[power.Model, float, int]:
        reps = np.full(n, r)
        model, direction, _ = power.pass_fail_model(*rates, reps, reps, rng)
        return model, direction, r

    m = rates[0]
    if delta >= (m if m >= 0.5 else 1 - m):
        return None
    return power.tasks_needed(delta, make, start, MIN_TASKS, alpha, target)


def _tasks_needed(var: float, delta: float, z_a: float, z_p: float) -> int:
    if var <= 0:
        return MIN_TASKS
    n = max(MIN_TASKS, math.ceil((z_a + z_p) ** 2 * var / delta**2))
    # t instead of z: a few tasks more at small n; iterate to the fixed point.
    for _ in range(100):
        t = _t_quantile(z_a, n - 1) + _t_quantile(z_p, n - 1)
        need = max(MIN_TASKS, math.ceil(t**2 * var / delta**2))
        if need == n:
            break
        n = need
    return n


def _z_one_sided(q: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 0.5 * math.erfc(-mid / math.sqrt(2)) < q else (lo, mid)
    return (lo + hi) / 2


def _z_two_sided(alpha: float) -> float:
    return _z_one_sided(1 - alpha / 2)


def format_plan(p: pl.DataFrame) -> str:
    """`evalkit plan`'s text: the pilot's variances and ICC, then tasks needed per number of repeats."""
    r = p.row(0, named=True)
    head = (f"Plan: {r['a']} vs {r['b']}, a true difference of {r['delta']:g} in task-weighted mean "
            f"reward, {r['power']:.0%} power, two-sided α = 0.05, "
            "the paired sign-flip test evalkit runs.")  # fmt: skip
    pf = r.get("power_model") == "pass/fail rates"
    if r["var_within"] is None:
        why = ("; the pass/fail model plans repeats from the tasks' success rates" if pf
               else "; run a pilot with --repeats 2 or more to plan repeats")  # fmt: skip
        pilot = (f"Pilot: {r['n_pilot_tasks']} paired tasks, one repeat each: variance of the per-task "
                 f"difference {r['var_diff_pilot']:.4f} (between and within tasks cannot be told apart "
                 f"without repeats{why}).")  # fmt: skip
    else:
        icc = "–" if r["icc"] is None else f"{r['icc']:.2f}"
        pilot = (f"Pilot: {r['n_pilot_tasks']} paired tasks; between-task variance of the difference "
                 f"{r['var_between']:.4f}, within-task (one episode, both sides) {r['var_within']:.4f}, "
                 f"intraclass correlation {icc}.")  # fmt: skip
    how = (
        "Sized by simulating that test on pass/fail episodes of tasks with the pilot's success rates, one "
        "model's rates moved by the difference."
        if pf
        else "Sized by simulating that test on normal per-task differences with the pilot's variance."
    )
    if not pf and r["var_diff_pilot"] <= 1e-12:
        missed = f"variance {r['var_planned']:.3f}"
        pilot += (" Its tasks showed no spread of differences at all; planned with the spread "
                  f"{r['n_pilot_tasks']} such tasks could have missed ({missed}).")  # fmt: skip
    else:
        how += " The pilot's variance is itself an estimate: the count allows for its uncertainty."
    lines = [head, pilot, how, ""]
    for row in p.iter_rows(named=True):
        if row["n_tasks"] is None:
            lines.append(f"  {row['repeats']:>2} repeat(s) per task: out of reach (beyond the success rates' "
                         "room, or more than 100,000 tasks)")  # fmt: skip
            continue
        lines.append(f"  {row['repeats']:>2} repeat(s) per task: {row['n_tasks']:,} tasks "
                     f"({row['n_tasks'] * row['repeats']:,} episodes per model)")  # fmt: skip
    lines.append(f"\n(Never fewer than {MIN_TASKS} tasks: below that no difference can be detected at 5%.)")
    return "\n".join(lines)


__all__ = ["TIER_ORDER", "format_plan", "max_repeats", "pass_at_k", "pass_hat_k", "plan"]
