"""Why a model fails, in numbers: how often each scanner fires per model, with the tier table's intervals;
which failure modes separate two models, with the paired test evalkit runs everywhere (Holm across the
scanners); how right each scanner is against a person's labels, and its rates corrected for that; and, for
two models on one task, the first step where their trajectories part.

The task is the unit, as everywhere (docs/statistics.md): a model's counted episodes of one task (env, its
configuration where the frame has one, and task id) become one value, the share of them where the scanner
fired; a rate is the mean of those values over the tasks, and its interval `stats.mean_interval` over them
(the tier table's: `tables.METHODS`'s default, a Bayesian bootstrap over the tasks).
Counted: an episode the scanner answered for (a judge that gave no answer leaves it out, never "no"), and
for a scanner of the model's failures, one the infrastructure did not end (an `infra` scanner fired, or
`error_class` where no such scanner ran): unscored episodes are apart, here too.

Scan frames come from `evalkit.scanners.engine.scan`; labels from `evalkit.records.scans.read_labels`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from evalkit.analysis.stats import ALPHA, PAIR_KEYS, TASK_KEYS, Z_975, compare, holm, mean_interval
from evalkit.analysis.summary import _table
from evalkit.analysis.tables import MEAN_METHODS, METHODS, PAIRED_METHODS, p_text
from evalkit.records import rundir
from evalkit.records.calls import identity, shown
from evalkit.records.columns import eager
from evalkit.types import EpisodeRecord

_S, _I, _F, _B = pl.Utf8, pl.Int64, pl.Float64, pl.Boolean
METHOD = f"95% CI: {METHODS[MEAN_METHODS[0]]} (as the tier table)"
PAIRED = (
    "Paired by task: the sign-flip test over the tasks' differences in the share of episodes where the "
    f"scanner fired; 95% CI: {METHODS[PAIRED_METHODS[0]]} (as compare)"
)


def task_keys(df: pl.DataFrame) -> list[str]:
    """What makes a task, among the frame's columns: env (its configuration too, where the frame has one)
    and task id."""
    keys = [k for k in TASK_KEYS if k in df.columns]
    if "env_config" in df.columns and "env_config" not in keys:
        keys.insert(keys.index("task_id") if "task_id" in keys else len(keys), "env_config")
    return keys


def _counted(df: pl.DataFrame, scans: pl.DataFrame) -> pl.DataFrame:
    """One row per scanner × episode of `df` that `scans` holds: the task columns, `value` (1.0 fired, 0.0
    not, null: no answer) and `counted`."""
    df, scans = eager(df, "why"), eager(scans, "why")
    keys = task_keys(df)
    side = [c for c in ("model", "run", "run_name", "error_class") if c in df.columns]
    eps = df.select(["run", "key", *[c for c in (*keys, *side) if c not in ("run", "key")]])
    s = scans.select("run", "key", "scanner", "kind", "phrase" if "phrase" in scans.columns else
                     pl.col("scanner").alias("phrase"), "fired")  # fmt: skip
    joined = s.join(eps, on=["run", "key"], how="inner", nulls_equal=True)
    infra_rows = joined.filter(pl.col("kind") == "infra")
    if infra_rows.height:
        ended = infra_rows.group_by("run", "key").agg(pl.col("fired").fill_null(False).any().alias("_ended"))
        joined = joined.join(ended, on=["run", "key"], how="left", nulls_equal=True)
        joined = joined.with_columns(pl.col("_ended").fill_null(False))
    else:
        joined = joined.with_columns(pl.col("error_class").is_not_null().alias("_ended"))
    counted = pl.col("fired").is_not_null() & ((pl.col("kind") == "infra") | ~pl.col("_ended"))
    task = pl.concat_str([pl.col(k).cast(_S).fill_null("\x00") for k in keys], separator="\x1f")
    return joined.with_columns(
        pl.col("fired").cast(_F).alias("value"), counted.alias("counted"), task.alias("_task")
    )


RATE_COLUMNS = ("scanner", "phrase", "kind", "model", "n_tasks", "tasks_fired", "n_episodes", "left_out",
                "rate", "ci_low", "ci_high")  # fmt: skip


def _rates(per: pl.DataFrame) -> pl.DataFrame:
    tasks = (
        per.filter(pl.col("counted"))
        .group_by("scanner", "model", "_task", maintain_order=True)
        .agg(pl.col("value").mean().alias("v"), pl.len().alias("c"), (pl.col("value") > 0).any().alias("hit"))
    )
    left = per.group_by("scanner", "model").agg((~pl.col("counted")).sum().cast(_I).alias("left_out"))
    heads = per.select("scanner", "phrase", "kind", "model").unique(maintain_order=True)
    rows = []
    for r in heads.iter_rows(named=True):
        sub = tasks.filter((pl.col("scanner") == r["scanner"]) & (pl.col("model") == r["model"]))
        y = sub["v"].to_numpy()
        lo, hi = mean_interval(y, int(sub["c"].sum()), pass_fail=True) if len(y) else (None, None)
        rows.append({**r, "n_tasks": sub.height, "tasks_fired": int(sub["hit"].sum()),
                     "n_episodes": int(sub["c"].sum()), "rate": float(y.mean()) if len(y) else None,
                     "ci_low": lo, "ci_high": hi})  # fmt: skip
    schema = {"scanner": _S, "phrase": _S, "kind": _S, "model": _S, "n_tasks": _I, "tasks_fired": _I,
              "n_episodes": _I, "rate": _F, "ci_low": _F, "ci_high": _F}  # fmt: skip
    out = pl.DataFrame(rows, schema=schema, orient="row")
    out = out.join(left, on=["scanner", "model"], how="left").with_columns(pl.col("left_out").fill_null(0))
    return out.select(RATE_COLUMNS)


def why(
    df: pl.DataFrame,
    scans: pl.DataFrame,
    a: str | None = None,
    b: str | None = None,
    labels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per model × scanner, the share of tasks where the scanner fired (`rate`, task-weighted), with the
    tier table's 95% interval over tasks; `tasks_fired` of `n_tasks`, from `n_episodes` counted episodes
    (`left_out`: infrastructure-ended or unanswered). Model scanners first, the infrastructure's last.

    With `a` and `b` (models, or runs): per scanner the paired difference A − B of the two rates over the
    tasks both sides have (`ek.compare`'s test and interval, `PAIRED`), `p_holm` adjusted across the
    scanners, sorted by the size of the difference, each with a `sentence` ("A repeats the same call in 31%
    of tasks, B in 8% (+23 points, …)"); `separates` where p_holm < 0.05.

    With `labels` (`ek.scanners.read_labels`): each scanner's precision and recall against them, and its
    rate corrected for its measured error (Rogan–Gladen), the interval widened by it (`corrected`)."""
    per = _counted(df, scans)
    if a is not None or b is not None:
        if a is None or b is None:
            raise ValueError("why: give both a and b to compare two models")
        return _differences(per, a, b)
    out = _rates(per)
    order = {"model": 0, "infra": 1}
    out = (
        out.with_columns(pl.col("kind").replace_strict(order, default=2).alias("_k"))
        .sort("_k", maintain_order=True)
        .drop("_k")
    )
    if labels is not None:
        out = _with_labels(out, check(scans, labels))
    return out


# ----------------------------------------------------------------------------------- paired differences


def _differences(per: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
    rows = []
    for (scanner,), sub in per.group_by("scanner", maintain_order=True):
        first = sub.row(0, named=True)
        pseudo = sub.filter(pl.col("counted")).select(
            *[c for c in ("model", "run", "run_name") if c in sub.columns],
            *[c for c in task_keys(sub) if c in sub.columns],
            pl.col("value").alias("reward"),
            pl.lit(True).alias("scored"),
            # compare counts a run's unrun episodes from these (`loading.run_status`); `why` shows none of it
            pl.col("error_class") if "error_class" in sub.columns else pl.lit(None, _S).alias("error_class"),
        )
        if "run" in pseudo.columns and "run_name" not in pseudo.columns:
            pseudo = pseudo.with_columns(pl.col("run").alias("run_name"))
        if not pseudo.height:
            continue
        try:
            got = compare(pseudo, a, b, by=None).row(-1, named=True)
        except ValueError:
            continue  # one side has no counted episode for this scanner
        rows.append({"scanner": scanner, "phrase": first["phrase"], "kind": first["kind"], **got})
    cols = ["scanner", "phrase", "kind", "a", "b", "n_tasks", "mean_a", "mean_b", "diff", "ci_low", "ci_high",
            "p_value", "p_exact", "wins", "ties", "losses", "mde"]  # fmt: skip
    if not rows:
        raise ValueError(f"why: {a!r} and {b!r} share no task a scanner counted")
    out = pl.DataFrame(rows).select(cols).rename({"mean_a": "rate_a", "mean_b": "rate_b"})
    # Typed whatever the rows hold: a column that is null in every row (no task both scored) is still a number
    out = out.with_columns(pl.col(c).cast(_F) for c in ("rate_a", "rate_b", "diff", "p_value", "mde"))
    # Two shares differ by at most 100 points: the paired interval (paired t, widened part-way to MOVER) can
    # reach past that near the bound, and a bound no rate can reach is not a number to print.
    out = out.with_columns(pl.col(c).cast(_F).clip(-1.0, 1.0) for c in ("ci_low", "ci_high"))
    out = out.with_columns(pl.Series("p_holm", holm(out["p_value"].to_list()), _F))
    out = out.with_columns((pl.col("p_holm") < ALPHA).fill_null(False).alias("separates"))
    out = out.with_columns(pl.Series("sentence", [sentence(r) for r in out.iter_rows(named=True)], _S))
    return out.sort(pl.col("diff").abs(), descending=True, nulls_last=True, maintain_order=True)


def pct(x: float | None, signed: bool = False) -> str:
    """A share as a percentage (one decimal below 10%); a difference in percentage points."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    v = 100 * x
    spec = "+" if signed else ""
    return f"{v:{spec}.0f}" if abs(v) >= 10 or v == 0 else f"{v:{spec}.1f}"


def sentence(r: dict) -> str:
    """`A repeats the same call in 31% of tasks, B in 8% (+23 points, 95% CI [+10, +35], p = 0.002)`."""
    ci = (f"95% CI [{pct(r['ci_low'], True)}, {pct(r['ci_high'], True)}]" if r.get("ci_low") is not None
          else "too few tasks for an interval")  # fmt: skip
    p = p_text(r.get("p_value"), r.get("p_exact"))
    holm_p = p_text(r.get("p_holm"), r.get("p_exact"))
    ps = f"p {p}" if p.startswith(("<", "≈")) else f"p = {p}"
    ps += f", Holm {holm_p}" if r.get("p_holm") is not None and r.get("p_holm") != r.get("p_value") else ""
    return (f"{r['a']} {r['phrase']} in {pct(r['rate_a'])}% of tasks, {r['b']} in {pct(r['rate_b'])}% "
            f"({pct(r['diff'], True)} points, {ci}, {ps}; {r['n_tasks']} tasks)")  # fmt: skip


# ------------------------------------------------------------------------------------- against a person


def _labelled(scans: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """The scan rows a person labelled, with their `label` (and note)."""
    scans, labels = eager(scans, "check"), eager(labels, "check")
    lab = labels.select("run", "key", "scanner", "label", *[c for c in ("note",) if c in labels.columns])
    with_run = lab.filter(pl.col("run").is_not_null())
    no_run = lab.filter(pl.col("run").is_null()).drop("run")
    parts = []
    if with_run.height:
        parts.append(scans.join(with_run, on=["run", "key", "scanner"], how="inner"))
    if no_run.height:
        parts.append(scans.join(no_run, on=["key", "scanner"], how="inner"))
    if not parts:
        return scans.head(0).with_columns(pl.lit(None, _B).alias("label"), pl.lit(None, _S).alias("note"))
    return pl.concat(parts, how="diagonal_relaxed").filter(pl.col("fired").is_not_null())


CHECK_COLUMNS = ("scanner", "labelled", "tp", "fp", "fn", "tn", "precision", "precision_low",
                 "precision_high", "recall", "recall_low", "recall_high", "specificity")  # fmt: skip


def _share(hits: int, n: int) -> tuple[float | None, float | None, float | None]:
    """A share of labelled episodes with its interval (`mean_interval`'s default over the labelled
    episodes, each one unit; none below its minimum count)."""
    if not n:
        return None, None, None
    y = np.array([1.0] * hits + [0.0] * (n - hits))
    lo, hi = mean_interval(y, n, pass_fail=True)
    return hits / n, lo, hi


def check(scans: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """Each scanner against a person's labels (yes: the failure is there): counts of true and false
    positives and negatives, precision (of the episodes it fired on, the share the person said yes to) and
    recall (of those the person said yes to, the share it fired on), each with a 95% interval (`_share`: over
    the labelled episodes; none below 6), and specificity. Label a random sample of episodes, not only the
    ones a scanner fired on, or recall and specificity say nothing."""
    got = _labelled(scans, labels)
    rows = []
    for (scanner,), sub in got.group_by("scanner", maintain_order=True):
        f, y = sub["fired"], sub["label"]
        tp, fp = int((f & y).sum()), int((f & ~y).sum())
        fn, tn = int((~f & y).sum()), int((~f & ~y).sum())
        prec, pl_, ph = _share(tp, tp + fp)
        rec, rl, rh = _share(tp, tp + fn)
        spec = tn / (tn + fp) if tn + fp else None
        rows.append((scanner, sub.height, tp, fp, fn, tn, prec, pl_, ph, rec, rl, rh, spec))
    schema = dict(zip(CHECK_COLUMNS, (_S, *[_I] * 5, *[_F] * 7), strict=True))
    return pl.DataFrame(rows, schema=schema, orient="row")


def disagreements(scans: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """The labelled episodes where a scanner and the person disagree, for the person to look at again: the
    scan row (steps, evidence) with the `label` and its note."""
    got = _labelled(scans, labels).filter(pl.col("fired") != pl.col("label"))
    wanted = ("run", "key", "model", "task_id", "scanner", "fired", "label", "steps", "evidence", "note")
    cols = [c for c in wanted if c in got.columns]
    return got.select(cols)


def corrected(
    rate: float | None,
    lo: float | None,
    hi: float | None,
    tp: int,
    fp: int,
    fn: int,
    tn: int,
    z: float = Z_975,
) -> tuple[float | None, float | None, float | None]:
    """A rate corrected for the scanner's measured error (Rogan–Gladen: (p + Sp − 1) / (Se + Sp − 1), with
    sensitivity Se = recall and specificity Sp from the labels), and its interval: the rate's own interval
    carried through the same correction, each side widened in quadrature by the labels' uncertainty (the
    delta method's terms for Se and Sp, their binomial variances at (x + ½) / (n + 1)). None where the labels
    hold no positive or no negative, or the scanner is no better than chance (Se + Sp ≤ 1)."""
    pos, neg = tp + fn, tn + fp
    if rate is None or not pos or not neg:
        return None, None, None
    se, sp = tp / pos, tn / neg
    j = se + sp - 1
    if j <= 0:
        return None, None, None
    pi = min(1.0, max(0.0, (rate + sp - 1) / j))
    sa, pa = (tp + 0.5) / (pos + 1), (tn + 0.5) / (neg + 1)
    extra = (pi * pi * sa * (1 - sa) / pos + (1 - pi) ** 2 * pa * (1 - pa) / neg) / (j * j)
    if lo is None or hi is None:
        return pi, None, None
    low = pi - math.sqrt((pi - (lo + sp - 1) / j) ** 2 + z * z * extra)
    high = pi + math.sqrt(((hi + sp - 1) / j - pi) ** 2 + z * z * extra)
    return pi, max(0.0, low), min(1.0, high)


def _with_labels(rates: pl.DataFrame, checked: pl.DataFrame) -> pl.DataFrame:
    out = rates.join(checked.select("scanner", "labelled", "tp", "fp", "fn", "tn", "precision", "recall"),
                     on="scanner", how="left")  # fmt: skip
    fixed = [
        corrected(r["rate"], r["ci_low"], r["ci_high"], *(r[k] or 0 for k in ("tp", "fp", "fn", "tn")))
        for r in out.iter_rows(named=True)
    ]
    cols = ("rate_corrected", "ci_low_corrected", "ci_high_corrected")
    return out.with_columns(pl.Series(c, [f[i] for f in fixed], _F) for i, c in enumerate(cols))


# ------------------------------------------------------------------------------ where two trajectories part


@dataclass(frozen=True)
class Parting:
    """The first turn at which two episodes of one task did different things."""

    step: int | None
    """The turn (from 1) where they part; None when they did the same all through."""
    a: str
    """What A did at that turn (its calls), or how it had ended."""
    b: str


def _did(rec: Any, i: int) -> str:
    if i >= len(rec.turns):
        return f"had ended ({rec.end_reason or 'no more turns'})"
    calls = rec.turns[i].calls
    return "; ".join(shown(c, 60) for c in calls) if calls else "no tool call"


def parting(a: EpisodeRecord | dict, b: EpisodeRecord | dict) -> Parting:
    """The first turn where the trajectories of two episodes (of one task, by two models) part: the first
    whose tool calls (names and arguments, in order) differ, or where one episode had already ended. Turns
    without a call are alike whatever their text."""
    a = a if isinstance(a, EpisodeRecord) else EpisodeRecord.from_dict(a)
    b = b if isinstance(b, EpisodeRecord) else EpisodeRecord.from_dict(b)
    for i in range(max(len(a.turns), len(b.turns))):
        ta = a.turns[i] if i < len(a.turns) else None
        tb = b.turns[i] if i < len(b.turns) else None
        if ta is None or tb is None or [identity(c) for c in ta.calls] != [identity(c) for c in tb.calls]:
            step = (ta or tb).turn or i + 1
            return Parting(step, _did(a, i), _did(b, i))
    return Parting(None, "", "")


def _records(df: pl.DataFrame) -> dict[tuple[str, str], EpisodeRecord]:
    """The records of a frame's episodes by (run, key), each run read once."""
    out = {}
    for (run,), sub in df.group_by("run", maintain_order=True):
        keys = set(sub["key"].drop_nulls().to_list())
        native = rundir.is_native(run) if isinstance(run, str) else False
        if native and sub["offset"].is_not_null().all():
            for key, off in sub.select("key", "offset").iter_rows():
                out[(run, key)] = rundir.read_at(run, off)
        else:
            for d in rundir.iter_dicts(run):
                if rundir.record_key(d) in keys:
                    out[(run, rundir.record_key(d))] = EpisodeRecord.from_dict(d)
    return out


def partings(df: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
    """For models (or runs) `a` and `b`, per task they both ran (env, surface, mode, task, skin: one pair of
    episodes each, each side's first repeat), the turn where their trajectories part (`parting`) and what
    each did there."""
    df = eager(df, "partings")
    keys = [k for k in PAIR_KEYS if k in df.columns]

    def side(who: str) -> pl.DataFrame:
        for col in ("model", "run", "run_name"):
            sub = df.filter(pl.col(col) == who)
            if sub.height:
                return sub.sort("repeat").unique(keys, keep="first", maintain_order=True)
        raise ValueError(f"{who!r} is neither a model nor a run in this frame")

    pairs = side(a).join(side(b), on=keys, how="inner", suffix="_b", nulls_equal=True)
    recs = _records(pl.concat([side(a), side(b)], how="vertical"))
    rows = []
    for r in pairs.iter_rows(named=True):
        ra, rb = recs.get((r["run"], r["key"])), recs.get((r["run_b"], r["key_b"]))
        if ra is None or rb is None:
            continue
        p = parting(ra, rb)
        rows.append((*[r[k] for k in keys], r["key"], r["key_b"], p.step, p.a, p.b))
    schema = {
        **{k: df.schema[k] for k in keys},
        "key_a": _S,
        "key_b": _S,
        "step": _I,
        "a_did": _S,
        "b_did": _S,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


# ----------------------------------------------------------------------------------------------- as text


def _rate_cell(r: dict) -> str:
    if r["rate"] is None:
        return "–"
    ci = f"[{pct(r['ci_low'])}%, {pct(r['ci_high'])}%]" if r["ci_low"] is not None else "(too few tasks)"
    cell = f"{pct(r['rate'])}% {ci} {r['tasks_fired']}/{r['n_tasks']}"
    if r.get("rate_corrected") is not None:
        fixed = r["ci_low_corrected"]
        cell += f"; corrected {pct(r['rate_corrected'])}%" + (
            f" [{pct(fixed)}%, {pct(r['ci_high_corrected'])}%]" if fixed is not None else ""
        )
    return cell


def _rate(r: dict) -> str:
    return _rate_cell(r)


def rates_table(rates: pl.DataFrame) -> pl.DataFrame:
    """`why`'s rates as a table of text: a row per scanner (what it means in words beside it), a column per
    model (share of tasks where it fired, its 95% CI, tasks where it fired / tasks counted); with labels,
    each scanner's precision / recall against them. The infrastructure's scanners last."""
    models = rates.get_column("model").unique(maintain_order=True).to_list()
    table: dict[str, dict[str, Any]] = {}
    for r in rates.iter_rows(named=True):
        row = table.setdefault(r["scanner"], {"scanner": r["scanner"], "what": r["phrase"]})
        row[r["model"]] = _rate_cell(r)
        if r.get("labelled"):
            row["precision / recall"] = f"{pct(r['precision'])}% / {pct(r['recall'])}%"
    cols = ["scanner", "what", *models]
    if any("precision / recall" in row for row in table.values()):
        cols.append("precision / recall")
    data = {c: [row.get(c, "–") for row in table.values()] for c in cols}
    return pl.DataFrame(data, schema=dict.fromkeys(cols, _S))


def differences_table(diffs: pl.DataFrame) -> pl.DataFrame:
    """`why(…, a=, b=)` as a table of text, sorted by the size of the difference as `why` sorts it."""
    rows = []
    for r in diffs.iter_rows(named=True):
        ci = (f"[{pct(r['ci_low'], True)}, {pct(r['ci_high'], True)}]" if r["ci_low"] is not None
              else "too few tasks")  # fmt: skip
        rows.append({
            "scanner": r["scanner"], "A": f"{pct(r['rate_a'])}%", "B": f"{pct(r['rate_b'])}%",
            "A − B (points)": pct(r["diff"], True), "95% CI": ci,
            "p": p_text(r["p_value"], r["p_exact"]), "p (Holm)": p_text(r["p_holm"], r["p_exact"]),
            "tasks": str(r["n_tasks"]), "separates": "yes" if r["separates"] else "",
        })  # fmt: skip
    cols = ["scanner", "A", "B", "A − B (points)", "95% CI", "p", "p (Holm)", "tasks", "separates"]
    return pl.DataFrame(rows, schema=dict.fromkeys(cols, _S), orient="row")


def format_rates(rates: pl.DataFrame) -> str:
    """`why`'s rates as the CLI prints them: a row per scanner, a column per model (rate, 95% CI, tasks where
    it fired of the tasks counted), the infrastructure's apart."""
    models = rates["model"].unique(maintain_order=True).to_list()
    parts = []
    for kind, title in (("model", "The model's failures"), ("infra", "Infrastructure (apart: unscored)")):
        sub = rates.filter(pl.col("kind") == kind)
        if not sub.height:
            continue
        table: dict[str, dict] = {}
        for r in sub.iter_rows(named=True):
            row = table.setdefault(r["scanner"], {"scanner": r["scanner"]})
            row[f"m{models.index(r['model'])}"] = _rate_cell(r)
            if r.get("labelled"):
                row["pr"] = f"{pct(r['precision'])}% / {pct(r['recall'])}%"
        cols = [("scanner", "scanner"), *[(f"m{i}", m) for i, m in enumerate(models)]]
        if any("pr" in row for row in table.values()):
            cols.append(("pr", "precision / recall"))
        frame = pl.DataFrame([{c: row.get(c, "–") for c, _ in cols} for row in table.values()])
        parts.append(f"{title}\n" + _table(frame, cols))
    note = (
        "Each cell: the share of tasks where the scanner fired (task-weighted: a task's episodes averaged "
        f"first), its {METHOD} (none below 6 tasks), and tasks where it fired / tasks counted. Left out of "
        "the model's rates: episodes the infrastructure ended, and judged episodes with no answer."
    )
    return "\n\n".join(parts) + "\n" + note


def format_differences(diffs: pl.DataFrame) -> str:
    """`why(…, a=, b=)` as sentences, the modes that separate the two models first."""
    sep = diffs.filter(pl.col("separates"))
    lines = []
    if sep.height:
        lines.append(f"What separates {diffs['a'][0]} from {diffs['b'][0]} (Holm p < 0.05):")
        lines += [f"  - {s}" for s in sep["sentence"]]
    else:
        lines.append(f"No scanner separates {diffs['a'][0]} from {diffs['b'][0]} (no Holm p < 0.05).")
    rest = diffs.filter(~pl.col("separates") & (pl.col("diff").fill_null(0) != 0))
    if rest.height:
        lines.append("Not clear (the difference may be chance):")
        lines += [f"  - {s}" for s in rest["sentence"]]
    lines.append(f"{PAIRED}; Holm across scanners.")
    return "\n".join(lines)


def format_check(checked: pl.DataFrame) -> str:
    """`check`'s table as text: each scanner's precision and recall against the labels, with intervals."""

    def share(r: dict, k: str) -> str:
        if r[k] is None:
            return "–"
        ci = (
            f" [{pct(r[k + '_low'])}%, {pct(r[k + '_high'])}%]" if r[k + "_low"] is not None else " (too few)"
        )
        return f"{pct(r[k])}%{ci}"

    rows = checked.with_columns(
        pl.Series("p", [share(r, "precision") for r in checked.iter_rows(named=True)], _S),
        pl.Series("r", [share(r, "recall") for r in checked.iter_rows(named=True)], _S),
        pl.format("{}/{}/{}/{}", "tp", "fp", "fn", "tn").alias("counts"),
        pl.col("labelled").cast(_S),
    )
    cols = [("scanner", "scanner"), ("labelled", "labelled"), ("counts", "tp/fp/fn/tn"),
            ("p", "precision (95% CI)"), ("r", "recall (95% CI)")]  # fmt: skip
    return _table(rows, cols) + (
        "\nPrecision: of the labelled episodes a scanner fired on, the share the person said yes to; recall: "
        "of those the person said yes to, the share it fired on. 95% CI: "
        f"{METHODS[MEAN_METHODS[0]]}, over the labelled episodes (none below 6)."
    )
