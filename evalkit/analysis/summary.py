"""Summaries as text and files: the CLI's tables (`format_summary`, `format_compare`, `format_harness`) and a
run's `summary.json` / `summary.md` (`write_summary`), written into an evalkit run, and for a run another
harness wrote to evalkit's cache, never into or beside it (`summary_dir`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.analysis import harness
from evalkit.analysis import noise as noise_
from evalkit.analysis.noise import format_noise
from evalkit.analysis.repeats import pass_k_table
from evalkit.analysis.stats import MIN_TASKS, by_tier, summarise
from evalkit.analysis.tables import (
    ci_column,
    incomplete_text,
    lost_cells_text,
    mde_text,
    method_note,
    p_column,
    reward_text,
    usd,
)
from evalkit.errors import TraceError
from evalkit.records import grades as grades_
from evalkit.records import rundir
from evalkit.records.importers import GRADED_ELSEWHERE
from evalkit.records.loading import incomplete_lines, load_runs, run_status

_S = pl.Utf8


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if spec == "usd" and isinstance(v, (int, float)):
        return usd(float(v))[1:]  # the column's heading says $
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return format(v, spec)
    return str(v)


CELL = 80
"""Characters of a cell in a text or Markdown table: a name longer than this (a trace may hold anything) is
cut with an ellipsis rather than widening every row of its column."""


def _cell(x: str) -> str:
    return x if len(x) <= CELL else x[: CELL - 1] + "…"


def _value(r: dict, c: str) -> str:
    spec = _SPEC.get(c, ".3f")
    if spec == "reward":  # a model none of whose episodes was graded: "no grades", not 0.000 or "-"
        text = reward_text(r.get(c), r.get("scored"), r.get("no_reward"))
        return "-" if text == "–" else text
    if spec == "mde":
        return mde_text(r.get(c), r.get("n_tasks")).replace("–", "-")
    return _fmt(r.get(c), spec)


def _table(df: pl.DataFrame, cols: list[tuple[str, str]], markdown: bool = False) -> str:
    head = [h for _, h in cols]
    body = [[_cell(_value(r, c)) for c, _ in cols] for r in df.iter_rows(named=True)]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        # Only text from the trace (names) can carry Markdown; numbers and CIs we formatted stay readable.
        raw = [isinstance(df.schema.get(c), pl.String) and c not in ("ci", "ci0") for c, _ in cols]
        lines += ["| " + " | ".join(_md_text(x) if r else x for x, r in zip(row, raw, strict=True)) + " |"
                  for row in body]  # fmt: skip
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)


_SPEC = {
    "mean_turns": ".1f", "mean_tool_calls": ".1f", "mean_tool_errors": ".2f", "mean_parse_errors": ".2f",
    "mean_tokens": ".0f", "reasoning_tokens_per_turn": ".0f", "cost_usd": "usd",
    "mean_reward": "reward", "mean_reward_unscored_as_0": "reward", "mde": "mde",
}  # fmt: skip

_SUMMARY_COLS = [
    ("model", "model"),
    ("env", "env"),
    ("surface", "surface"),
    ("mode", "mode"),
    ("n", "n"),
    ("scored", "scored"),
    ("unscored", "unscored"),
    ("no_reward", "no reward"),
    ("mean_reward", "reward (scored)"),
    ("mean_reward_unscored_as_0", "reward (unscored=0)"),
    ("min_reward", "min"),
    ("max_reward", "max"),
    ("mean_turns", "turns"),
    ("mean_tool_calls", "calls"),
    ("mean_tool_errors", "tool err"),
    ("mean_parse_errors", "parse err"),
    ("mean_tokens", "tokens"),
    ("reasoning_tokens_per_turn", "reason tok/turn"),
    ("cost_usd", "cost $"),
]


def _with_ci(df: pl.DataFrame) -> pl.DataFrame:
    if "n_cells" in df.columns:
        df = df.with_columns(pl.format("{}/{}", "n_cells_scored", "n_cells").alias("cells"))
    return df.with_columns(
        ci_column(df, "ci_low", "ci_high", "mean_reward").str.replace("–", "-").alias("ci"),
        ci_column(df, "ci_low_unscored_as_0", "ci_high_unscored_as_0", "mean_reward_unscored_as_0")
        .str.replace("–", "-")
        .alias("ci0"),
    )


def _summary_cols(df: pl.DataFrame) -> list[tuple[str, str]]:
    """The summary's columns, with the env's configuration beside the env where a run recorded one."""
    if "env_config" in df.columns and df["env_config"].drop_nulls().len():
        i = _SUMMARY_COLS.index(("env", "env"))
        return [*_SUMMARY_COLS[: i + 1], ("env_config", "configuration"), *_SUMMARY_COLS[i + 1 :]]
    return _SUMMARY_COLS


_TIER_COLS = [
    ("model", "model"),
    ("surface", "surface"),
    ("mode", "mode"),
    ("tier", "tier"),
    ("n", "n"),
    ("n_tasks", "tasks"),
    ("cells", "cells scored"),
    ("unscored", "unscored"),
    ("mean_reward", "reward (scored)"),
    ("ci", "95% CI"),
    ("mean_reward_unscored_as_0", "reward (unscored=0)"),
    ("ci0", "95% CI (unscored=0)"),
    ("mean_turns", "turns"),
]


def format_pass_k(df: pl.DataFrame, markdown: bool = False, threshold: float = 1.0) -> str:
    """pass@k and pass^k per model (tier "all"), for k = 2 up to the most repeats a task has (at most 3
    values of k), when a run has repeats; "" otherwise."""
    t = pass_k_table(df, threshold)
    if t.is_empty():
        return ""
    t = t.with_columns(
        ci_column(t, "ci_low", "ci_high", "pass_at_k").str.replace("–", "-").alias("ci"),
        ci_column(t, "hat_low", "hat_high", "pass_hat_k").str.replace("–", "-").alias("ci2"),
    )
    cols = [("model", "model"), ("surface", "surface"), ("mode", "mode"), ("k", "k"), ("n_tasks", "tasks"),
            ("n_tasks_short", "tasks < k repeats"), ("pass_at_k", "pass@k"), ("ci", "95% CI"),
            ("pass_hat_k", "pass^k"), ("ci2", "95% CI")]  # fmt: skip
    head = (f"pass@k (some of k attempts succeed) and pass^k (all k do), success = reward ≥ {threshold:g}, "
            f"unbiased estimators per task, task-weighted, {method_note(t['ci_method'])}")  # fmt: skip
    return head + "\n" + _table(t, cols, markdown)


def format_summary(df: pl.DataFrame, tiers: bool = True, markdown: bool = False) -> str:
    """The summary tables of an episode frame as text (the CLI's `evalkit summarise`)."""
    if df.height == 0:
        return "no episodes"
    status = run_status(df)
    parts = [*incomplete_lines(status), *([""] if incomplete_lines(status) else [])]
    parts += ["Per model × env × surface × mode", _table(summarise(df), _summary_cols(df), markdown)]
    if tiers:
        t = by_tier(df)
        parts += [
            "",
            f"Per tier (task-weighted means, {method_note(t['ci_method'])}; none below {MIN_TASKS} tasks; "
            "cells scored: a task's skins with a scored episode, of those recorded)",
            _table(_with_ci(t), _TIER_COLS, markdown),
        ]
    passk = format_pass_k(df, markdown)
    if passk:
        parts += ["", passk]
    noisy = format_noise(df, markdown=markdown)  # "" unless some task has two scored repeats
    if noisy:
        parts += ["", noisy]
    nan = df.filter(pl.col("reward").is_nan().fill_null(False))
    if nan.height:
        counts = nan.group_by("model").len().sort("model")
        parts += [
            "",
            "Reward not a number (counted as no reward, in neither mean): "
            + ", ".join(f"{r['model']} ×{r['len']}" for r in counts.iter_rows(named=True)),
        ]
    errs = df.filter(pl.col("error_class").is_not_null())
    if errs.height:
        counts = errs.group_by("model", "error_class").len().sort("model", "error_class")
        parts += [
            "",
            "Unscored (infrastructure errors): "
            + ", ".join(f"{r['model']} {r['error_class']} ×{r['len']}" for r in counts.iter_rows(named=True)),
        ]
    quiet = df.filter(~pl.col("scored") & pl.col("error_class").is_null())
    if quiet.height:
        counts = quiet.group_by("model").len().sort("model")
        parts += [
            "",
            "No reward (no infrastructure error, and no reward given: not graded, or an env that gives "
            "none; in neither mean): "
            + ", ".join(f"{r['model']} ×{r['len']}" for r in counts.iter_rows(named=True)),
        ]
    differ = harness.differences(df)
    if differ:
        parts += ["", differ]
    return "\n".join(parts)


_HARNESS_COLS = [
    ("model", "model"),
    ("env", "env"),
    ("surface", "surface"),
    ("mode", "mode"),
    ("source", "harness"),
    ("n", "n"),
    ("failed", "failed"),
    ("mean_reward_exact", "mean reward"),
    ("min_reward_exact", "min"),
    ("max_reward_exact", "max"),
    ("mean_turns_exact", "turns"),
    ("mean_tool_calls_exact", "tool calls"),
    ("tool_errors", "tool errors"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
]


def _exact(v: object) -> str:
    """A harness's number as it gave it: every digit (repr), no rounding of ours on top of its own."""
    return "-" if v is None else repr(v)


def format_harness(df: pl.DataFrame, markdown: bool = False) -> str:
    """`evalkit summarise --as-harness`: each imported run's numbers as its own harness summarised them
    (`evalkit.analysis.harness`), every digit shown; the design-canvas seed's tier table after them."""
    if df.height == 0:
        return "no episodes"
    table = harness.summarise(df)
    # As text under names of their own: the table's formats (3 places, "no grades") are evalkit's wording.
    shown = table.with_columns(pl.col(c).map_elements(_exact, _S).alias(f"{c}_exact") for c in ("mean_reward",
                               "min_reward", "max_reward", "mean_turns", "mean_tool_calls"))  # fmt: skip
    parts = ["As each harness summarises its own runs (evalkit's own runs: evalkit's rule)",
             _table(shown, _HARNESS_COLS, markdown)]  # fmt: skip
    if (table["source"].is_in(list(GRADED_ELSEWHERE)) & (table["n"] == 0)).any():
        parts += ["", "n 0: the harness grades in a separate step and no grades were given (--grades)"]
    tiers = harness.tiers(df)
    if tiers.height:
        tiers = tiers.with_columns(
            pl.format("[{}, {}]", "ci_low", "ci_high").alias("ci"),
            pl.col("mean_reward").map_elements(_exact, _S).alias("mean_exact"),
        )
        cols = [("model", "model"), ("surface", "surface"), ("mode", "mode"), ("tier", "tier"), ("n", "n"),
                ("mean_exact", "mean reward"), ("ci", "95% CI (the seed's bootstrap)")]  # fmt: skip
        parts += ["", "Per tier, as the design-canvas harness gives it", _table(tiers, cols, markdown)]
    return "\n".join(parts)


def format_compare(result: pl.DataFrame, markdown: bool = False) -> str:
    """A `compare` / `compare_many` frame as text."""
    if result.height == 0:
        return "nothing to compare"
    r = result.with_columns(
        ci_column(result, "ci_low", "ci_high", "diff").str.replace("–", "-").alias("ci"),
        pl.format("{}/{}/{}", "wins", "ties", "losses").alias("wtl"),
        p_column(result, "p_value").str.replace("–", "-").str.replace(" ", "").alias("p"),
    )
    by = result["by"][0] or "group"
    cols = [
        ("a", "A"),
        ("b", "B"),
        ("group", by),
        ("n_tasks", "tasks"),
        ("n_cells", "cells"),
        ("n_cells_a_only", "cells A only"),
        ("n_cells_b_only", "cells B only"),
        ("n_dropped", "tasks dropped"),
        ("mean_a", "mean A"),
        ("mean_b", "mean B"),
        ("diff", "A − B"),
        ("ci", "95% CI"),
        ("p", "p"),
        ("wtl", "win/tie/loss"),
        ("mde", "MDE (80%)"),
    ]
    if "p_holm" in result.columns:
        r = r.with_columns(
            p_column(result.with_columns(pl.col("p_holm").alias("p_value")), "p_value")
            .str.replace("–", "-")
            .str.replace(" ", "")
            .alias("p_holm_text")
        )
        cols.insert(cols.index(("p", "p")) + 1, ("p_holm_text", "p (Holm)"))
    if "noninferior" in result.columns:
        r = r.with_columns(
            pl.when(pl.col("noninferior").is_null())
            .then(pl.lit("-"))
            .when(pl.col("noninferior"))
            .then(pl.lit("yes"))
            .otherwise(pl.lit("no"))
            .alias("ni"),
        )
        cols += [("ni_upper", "A − B ≤ (98.75%)"), ("ni", f"B non-inferior (margin {result['margin'][0]:g})")]
    note = (
        "Paired like with like: within each task (env, configuration, task id), the cells (surface × mode × "
        "skin) both sides scored, each the mean of its repeats, then A − B per task over those cells; cells "
        "one side lacks are left out and counted (cells A only, cells B only); means are task-weighted. p: "
        "sign-flip permutation test over the tasks' differences (exact up to 16 tasks, ≈ from 20,000 random "
        f"sign assignments above); {method_note(result['ci_method'])}, made to agree with the test: it "
        f"excludes 0 exactly when p < 0.05 (none below {MIN_TASKS} tasks); MDE: the smallest difference that "
        "test would detect with 80% power at α = 0.05; unscored episodes left out."
    )
    last = result.row(-1, named=True)
    a, b = last["a"], last["b"]
    said = [t for t in (lost_cells_text(last, a, b), incomplete_text(last, a, b)) if t]
    if "p_holm" in result.columns:
        note += " p (Holm): p adjusted for the number of models compared with the same reference (Holm)."
    if "noninferior" in result.columns:
        note += (" Non-inferior: the one-sided 98.75% upper bound of A − B (the upper end of its 97.5% "
                 f"interval, by the same method) is below the margin {result['margin'][0]:g}, so B is "
                 "worse than A by less than it.")  # fmt: skip
    return "\n".join([*said, _table(r, cols, markdown), note])


def _md_text(text: str) -> str:
    """A name as literal Markdown text: a run or model name must not become a link, an image or HTML."""
    return "".join("\\" + c if c in "\\`*_[]()<>!|~&" else c for c in text)


def _budget_stop(run_dir: Path) -> dict | None:
    """run.json's `budget_stop` (`evalkit.run.budget`): why the last batch stopped at its `--max-cost`."""
    try:
        stop = rundir.read_run_json(run_dir).get("budget_stop") if rundir.is_native(run_dir) else None
    except TraceError:
        return None
    return stop if isinstance(stop, dict) else None


def _last_look(run_dir: Path) -> str:
    """The sequential comparison a run recorded (`--until-decided`), in a sentence; "" for none."""
    # start-up: the sequential design loads scipy (400 modules), which importing this module need not
    from evalkit.analysis.sequential import WORDS, read_looks

    looks = read_looks(run_dir) if rundir.is_native(run_dir) else []
    if not looks:
        return ""
    x = looks[-1]
    verdict = WORDS[x.decision].format(a=x.a, b=x.b, delta=x.delta or 0)
    return (f"Sequential comparison (--until-decided): {verdict} after {x.look} look(s), {x.n_tasks} of "
            f"{x.max_tasks} planned tasks paired; {x.a} − {x.b} = {x.diff:+.3f}, repeated 95% CI "
            f"[{x.ci_low:+.3f}, {x.ci_high:+.3f}] (evalkit compare reports it)")  # fmt: skip


def budget_text(stop: dict) -> str:
    """The budget stop in a sentence, for summaries and reports."""
    try:
        return (f"The batch stopped at its budget: ${float(stop['max_cost']):g} (--max-cost), "
                f"${float(stop['spent']):.4f} spent when the next episode would have passed it; the episodes "
                "in flight then were finished; a resume with a higher --max-cost runs the rest")  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return "The batch stopped at its budget (--max-cost)"


def summary_dir(run_dir: str | Path) -> Path:
    """Where a run's summary.json and summary.md go: into an evalkit run; for a run another harness wrote,
    which evalkit never writes into nor beside, `rundir.derived_dir` (evalkit's per-user cache)."""
    run = Path(run_dir)
    return run if run.is_dir() and rundir.is_native(run) else rundir.derived_dir(run)


def write_summary(
    run_dir: str | Path, out: str | Path | None = None, grades: str | Path | None = None
) -> dict:
    """Write `summary.json` and `summary.md` of a run to `out` (default `summary_dir(run_dir)`), with the
    grades file `grades` merged (see `evalkit.records.grades`); returns what was written to the JSON."""
    run_dir = Path(run_dir)
    where = Path(out) if out is not None else summary_dir(run_dir)
    df = load_runs([run_dir])
    merged = None
    if grades is not None:
        df, merged = grades_.apply(df, grades)
    summ, tiers = summarise(df), by_tier(df)
    status = run_status(df)
    noisy = noise_.noise(df)  # a row per model × env × surface × mode; its counts 0 where no task repeats
    repeated = bool(noisy.height) and bool((noisy["n_tasks"] > 0).any())
    data = {
        "run": str(run_dir),
        "n_episodes": df.height,
        "n_scored": int(df["scored"].sum()),
        "n_unscored": int(df["error_class"].is_not_null().sum()),
        "n_no_reward": int((~df["scored"] & df["error_class"].is_null()).sum()),
        "grades": merged.line() if merged else None,
        "status": status.to_dicts(),
        "incomplete": incomplete_lines(status),
        "harness_differences": harness.differences(df),
        "notes": "mean_reward is over scored episodes, task-weighted (each task's episodes averaged first); "
        "mean_reward_unscored_as_0 counts unscored (infrastructure errors) as zero; episodes with no reward "
        "and no error are in neither mean (no_reward; nan_reward: a reward that was not a number). CIs: 95% "
        f"over tasks, {method_note(tiers['ci_method'])[len('95% CI: ') :]} (docs/statistics.md).",
        "summary": summ.to_dicts(),
        "by_tier": tiers.to_dicts(),
        "noise": noisy.to_dicts() if repeated else None,  # null: no task has two scored repeats
        "budget_stop": _budget_stop(run_dir),
    }
    rundir.atomic_write(where / "summary.json", json.dumps(data, indent=2, default=str) + "\n")
    md = f"# Summary of {_md_text(run_dir.name)}\n\n"
    md += "".join(f"**{_md_text(line)}**\n\n" for line in data["incomplete"])
    md += f"{df.height} episodes, {data['n_unscored']} unscored"
    md += f", {data['n_no_reward']} without a reward.\n\n" if data["n_no_reward"] else ".\n\n"
    if merged:
        md += _md_text(merged.line()) + ".\n\n"
    if data["budget_stop"]:
        md += _md_text(budget_text(data["budget_stop"])) + ".\n\n"
    if looked := _last_look(run_dir):
        md += _md_text(looked) + ".\n\n"
    if data["harness_differences"]:
        md += _md_text(data["harness_differences"]) + ".\n\n"
    md += "## Per model × env × surface × mode\n\n" + _table(summ, _summary_cols(df), True) + "\n\n"
    md += (
        "## Per tier (task-weighted, 95% CI over tasks)\n\n"
        + _table(_with_ci(tiers), _TIER_COLS, True)
        + "\n\n"
    )
    if repeated:
        md += "## How noisy is it (from repeats of each task)\n\n"
        md += "".join(f"- {_md_text(line)}\n" for line in noise_.lines(noisy)) + "\n"
        md += _md_text(noise_.HOW) + "\n\n"
    md += data["notes"] + "\n"
    rundir.atomic_write(where / "summary.md", md)
    return data
