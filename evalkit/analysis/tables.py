"""How a number is shown, wherever it is shown: one rule for a confidence interval, a p-value, a minimum
detectable effect and a reward no one gave (as text, and as Polars expressions for text tables), and HTML
tables of Polars frames for notebooks and reports (readable headings, escaped text, a style that fits a
1280 px page). No evalkit import: statistics, summaries, reports, the viewer and the bundle all say their
numbers here, so a run reads the same in each.

The rule: a CI that `evalkit.analysis.stats` left out beside a mean it gave is "too few tasks" (its
MIN_TASKS), never an interval of zero width; a p-value is "< 0.001" only when it is; an MDE left out is
"too few tasks"; a model with no scored episode and some never graded reads "no grades", not 0."""

from __future__ import annotations

import math
from html import escape
from typing import Any

STYLE = (
    "<style>.ekr{font-family:system-ui,sans-serif;font-size:13px;max-width:1240px}"
    ".ekr table{border-collapse:collapse;margin:6px 0 14px;font-size:12.5px}"
    ".ekr th,.ekr td{border-bottom:1px solid #e3e3e3;padding:3px 6px;text-align:right;white-space:nowrap}"
    ".ekr th{background:#f5f5f5;font-weight:600;white-space:normal;vertical-align:bottom}"
    ".ekr td.t,.ekr th.t{text-align:left;white-space:normal;overflow-wrap:break-word}"
    ".ekr .head{font-size:17px;line-height:1.45;margin:4px 0 10px}.ekr .muted{color:#666;font-size:13px}"
    ".ekr .ex{display:flex;gap:14px;flex-wrap:wrap}.ekr figure{margin:0;text-align:center;font-size:12px}"
    ".ekr img{border:1px solid #ccc}</style>"
)


def esc(v: Any) -> str:
    return escape("" if v is None else str(v))


def usd(v: float) -> str:
    """Dollars: cents, or two significant digits below a cent (a small run's cost must not read as 0.00)."""
    if v == 0 or abs(v) >= 0.01:
        return f"${v:,.2f}"
    return f"${v:.{1 - math.floor(math.log10(abs(v)))}f}"


def _num(v: Any, spec: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if spec == "usd":
        return usd(v)
    if spec == "signed":
        return f"{v:+.3f}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return format(v, spec)
    return esc(v)


_MEAN_OF = {"ci": ("diff", "mean_reward"), "ci0": ("mean_reward_unscored_as_0",)}
"""The mean a CI column is the interval of: a CI left out beside a mean is "too few tasks"."""


def table_html(df: Any, columns: list[tuple[str, str, str]]) -> str:
    """A real HTML table of a Polars frame: (column, heading, format) per column, format one of `text`, a
    float spec (`.3f`), `int`, `usd`, `signed`, `ci` (the pair ci_low/ci_high, or `<col>_low/_high`), `p`,
    `mde` (beside `n_tasks`), `reward` (a mean beside `scored` and `no_reward`: "no grades"), `link` (text
    that links to the row's `href` when it has one: `report.with_links`). Text is escaped."""
    head = "".join(
        f'<th class="t">{esc(h)}</th>' if f in ("text", "link") else f"<th>{esc(h)}</th>"
        for _, h, f in columns
    )
    rows = []
    for r in df.iter_rows(named=True):
        cells = []
        for col, _, fmt in columns:
            if fmt == "text":
                cells.append(f'<td class="t">{esc(r.get(col))}</td>')
            elif fmt == "link":
                text = esc(r.get(col))
                cells.append(f'<td class="t"><a href="{esc(r["href"])}">{text}</a></td>' if r.get("href")
                             else f'<td class="t">{text}</td>')  # fmt: skip
            elif fmt == "ci":
                lo, hi = (
                    r.get("ci_low" if col == "ci" else col + "_low"),
                    r.get("ci_high" if col == "ci" else col + "_high"),
                )
                mean = next((r[m] for m in _MEAN_OF.get(col, ()) if m in r), 0.0)
                cells.append(f"<td>{esc(ci_text(lo, hi, mean, signed='diff' in r))}</td>")
            elif fmt == "p":
                cells.append(f"<td>{esc(p_text(r.get(col), r.get('p_exact')))}</td>")
            elif fmt == "mde":
                cells.append(f"<td>{esc(mde_text(r.get(col), r.get('n_tasks')))}</td>")
            elif fmt == "reward":
                cells.append(f"<td>{esc(reward_text(r.get(col), r.get('scored'), r.get('no_reward')))}</td>")
            else:
                cells.append(f"<td>{_num(r.get(col), fmt if fmt != 'int' else '')}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'{STYLE}<div class="ekr"><table><tr>{head}</tr>{"".join(rows)}</table></div>'


COMPARE_TABLE = [
    ("a", "A", "text"), ("b", "B", "text"), ("group", "group", "text"), ("n_tasks", "tasks", "int"),
    ("n_cells", "cells", "int"), ("n_cells_a_only", "cells A only", "int"),
    ("n_cells_b_only", "cells B only", "int"), ("n_dropped", "tasks dropped", "int"),
    ("n_unpaired", "unpaired episodes", "int"), ("mean_a", "mean A", ".3f"),
    ("mean_b", "mean B", ".3f"), ("diff", "A − B", "signed"), ("ci", "95% CI", "ci"), ("p_value", "p", "p"),
    ("wins", "A better", "int"), ("ties", "ties", "int"), ("losses", "B better", "int"),
    ("mde", "MDE (80%)", "mde"),
]  # fmt: skip
_P = next(i for i, c in enumerate(COMPARE_TABLE) if c[0] == "p_value") + 1
COMPARE_MANY_TABLE = [*COMPARE_TABLE[:_P], ("p_holm", "p (Holm)", "p"), *COMPARE_TABLE[_P:]]
"""`compare_many`'s columns: beside p, the Holm-adjusted p over the models compared with the reference."""
"""The columns of a `compare` frame as a report shows them."""


METHODS = {
    "bayes": "Bayesian bootstrap over tasks",
    "wilson": "Wilson score interval over tasks",
    "bootstrap": "studentized bootstrap over tasks",
    "t+mover": "paired t, widened part-way to MOVER",
    "t": "paired t over tasks",
    "mover": "MOVER of the two sides' Bayesian bootstraps",
    "sign-flip": "sign-flip test inverted",
}
"""Every interval method by its one name, the name each table, chart, report, the viewer and the docs
show beside the interval it made (`ci_method` in the frames; `evalkit.analysis.intervals` says what each
is). The defaults: "bayes" for a mean, "t+mover" for a paired difference."""
METHOD_OF = {v: k for k, v in METHODS.items()}
MEAN_METHODS = ("bayes", "wilson", "bootstrap")
"""Methods of a mean's interval (`intervals.mean_interval`); the first is the default."""
PAIRED_METHODS = ("t+mover", "t", "mover", "sign-flip", "bootstrap")
"""Methods of a paired difference's interval (`intervals.paired_interval`); the first is the default."""


def method_note(names: Any) -> str:
    """The interval methods of a frame's `ci_method` values as one phrase: "95% CI: Bayesian bootstrap over
    tasks" ("; "-joined where rows differ)."""
    seen = [n for n in dict.fromkeys(names) if n]
    return "95% CI: " + "; ".join(seen) if seen else ""


MIN_TASKS = 6
"""Fewest tasks behind an interval or an MDE (why: `evalkit.analysis.stats`); below it they read TOO_FEW."""
TOO_FEW = "too few tasks"
OUT_OF_REACH = "beyond the reward range"
"""An MDE where no difference within the reward range gives the sign-flip test 80% power (six pass/fail
tasks: it would take A right and B wrong on all six nearly every time)."""
NO_GRADES = "no grades"


def ci_text(lo: float | None, hi: float | None, mean: float | None = 0.0, signed: bool = False) -> str:
    """`[0.412, 0.588]`; "too few tasks" where the statistics gave a mean but no interval; "–" where there is
    no mean either."""
    if lo is None or hi is None:
        return TOO_FEW if mean is not None else "–"
    f = "+.3f" if signed else ".3f"
    return f"[{lo:{f}}, {hi:{f}}]"


def p_text(p: float | None, exact: bool | None = True) -> str:
    """`0.031`, or "< 0.001" only when p is below it; "–" for none; "≈ 0.031" when the p is approximate
    (random sign assignments, above 16 tasks: `exact` false). Exact small-sample p-values (1, 0.5,
    0.0625, …) are shown as they are: with three decimals they are never rounded to zero."""
    if p is None:
        return "–"
    t = "< 0.001" if p < 0.001 else f"{p:.3f}"
    return t if exact is not False or t.startswith("<") else "≈ " + t


def p_phrase(p: float | None, exact: bool | None = True) -> str:
    """`p_text` in a sentence: "p = 0.031", "p < 0.001", "p ≈ 0.031"."""
    t = p_text(p, exact)
    return f"p {t}" if t.startswith(("<", "≈")) else f"p = {t}"


def mde_text(mde: float | None, n_tasks: int | None = None) -> str:
    """The smallest difference this many tasks would detect with the sign-flip test (80% power, α = 0.05),
    "too few tasks" below six, or OUT_OF_REACH where `compare` found none within the reward range."""
    if mde is None:
        if not n_tasks:
            return "–"
        return TOO_FEW if n_tasks < MIN_TASKS else OUT_OF_REACH
    return f"{mde:.3f}"


def reward_text(mean: float | None, scored: int | None = None, no_reward: int | None = None) -> str:
    """A mean reward, or "no grades" for a model none of whose episodes was graded (rather than 0.000)."""
    if mean is None:
        return NO_GRADES if not scored and no_reward else "–"
    return f"{mean:.3f}"


def ci_column(df: Any, lo: str, hi: str, mean: str, signed: bool = False) -> Any:
    """`ci_text` of every row of a Polars frame, as a string Series (for text tables)."""
    # start-up: tables imports nothing heavy; Polars only for a frame's table
    import polars as pl

    rows = zip(df[lo].to_list(), df[hi].to_list(), df[mean].to_list(), strict=True)
    return pl.Series([ci_text(a, b, m, signed) for a, b, m in rows], dtype=pl.String)


def p_column(df: Any, col: str) -> Any:
    """`p_text` of every row of a Polars frame, as a string Series ("≈" where `p_exact` says so)."""
    # start-up (as above)
    import polars as pl

    exact = df["p_exact"].to_list() if "p_exact" in df.columns else [True] * df.height
    return pl.Series([p_text(p, e) for p, e in zip(df[col].to_list(), exact, strict=True)], dtype=pl.String)


def lost_cells_text(r: dict, a: str = "A", b: str = "B") -> str:
    """What a paired comparison left out because a side has no score there (`compare`'s `n_cells_a_only`,
    `n_cells_b_only`), in words; "" when both sides scored every cell either has."""
    parts = []
    if r.get("n_cells_a_only"):
        parts.append(f"{b} has no score in {r['n_cells_a_only']} cell(s) {a} scored")
    if r.get("n_cells_b_only"):
        parts.append(f"{a} has no score in {r['n_cells_b_only']} cell(s) {b} scored")
    if not parts:
        return ""
    return ("Left out: " + "; ".join(parts) + " (lost or never run); the difference compares only cells both "
            "scored.")  # fmt: skip


def incomplete_text(r: dict, a: str = "A", b: str = "B") -> str:
    """A side whose run planned episodes it never ran (`compare`'s `not_run_a`, `not_run_b`), in words."""
    parts = [f"{who}: {r[k]} planned episode(s) not run" for who, k in ((a, "not_run_a"), (b, "not_run_b"))
             if r.get(k)]  # fmt: skip
    if not parts:
        return ""
    return "Incomplete: " + "; ".join(parts) + " — rerun the same command to resume."


def headline_text(r: dict) -> str:
    """A `compare` row as the sentence a notebook, the report and the viewer lead with: the difference, its
    interval and method, p, wins and losses, the smallest detectable difference, then what was left out."""
    a, b, n = str(r["a"]), str(r["b"]), r.get("n_tasks") or 0
    if not n:
        line = f"{a} and {b} share no scored cell of a task."
    else:
        ci = ci_text(r["ci_low"], r["ci_high"], r["diff"], signed=True)
        if r["ci_low"] is None:
            ci = f"no CI: {ci}"
        else:
            ci = f"95% CI {ci}, {r.get('ci_method') or ''}".rstrip(", ")
        line = (f"{a} − {b} = {r['diff']:+.3f} task-weighted mean reward ({ci}, "
                f"{p_phrase(r['p_value'], r.get('p_exact'))}) over {n} paired task(s), like with like "
                f"({r.get('n_cells') or n} cell(s) both scored): {a} better on {r['wins']}, {b} better on "
                f"{r['losses']}, {r['ties']} tied; smallest detectable difference "
                f"{mde_text(r['mde'], n)}.")  # fmt: skip
        if r["ci_low"] is None:
            line = f"No conclusion: only {n} task(s). " + line
    return " ".join(t for t in (line, lost_cells_text(r, a, b), incomplete_text(r, a, b)) if t)
