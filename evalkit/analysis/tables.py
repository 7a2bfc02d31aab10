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
    ("n_dropped", "dropped", "int"), ("n_unpaired", "unpaired", "int"), ("mean_a", "mean A", ".3f"),
    ("mean_b", "mean B", ".3f"), ("diff", "A − B", "signed"), ("ci", "95% CI", "ci"), ("p_value", "p", "p"),
    ("wins", "A better", "int"), ("ties", "ties", "int"), ("losses", "B better", "int"),
    ("mde", "MDE (80%)", "mde"),
]  # fmt: skip
COMPARE_MANY_TABLE = [*COMPARE_TABLE[:11], ("p_holm", "p (Holm)", "p"), *COMPARE_TABLE[11:]]
"""`compare_many`'s columns: beside p, the Holm-adjusted p over the models compared with the reference."""
"""The columns of a `compare` frame as a report shows them."""


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
