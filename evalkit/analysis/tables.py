"""HTML tables of Polars frames for notebooks and reports: readable headings, formatted numbers, escaped text,
a style that fits a 1280 px page. No evalkit import: statistics and reports both show their frames here."""

from __future__ import annotations

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
    from html import escape

    return escape("" if v is None else str(v))


def usd(v: float) -> str:
    """Dollars: cents, or two significant digits below a cent (a small run's cost must not read as 0.00)."""
    import math

    if v == 0 or abs(v) >= 0.01:
        return f"${v:,.2f}"
    return f"${v:.{1 - math.floor(math.log10(abs(v)))}f}"


def _num(v: Any, spec: str = ".3f") -> str:
    import math

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


def table_html(df: Any, columns: list[tuple[str, str, str]]) -> str:
    """A real HTML table of a Polars frame: (column, heading, format) per column, format one of `text`, a
    float spec (`.3f`), `int`, `usd`, `signed`, `ci` (the pair ci_low/ci_high). Text is escaped."""
    head = "".join(
        f'<th class="t">{esc(h)}</th>' if f == "text" else f"<th>{esc(h)}</th>" for _, h, f in columns
    )
    rows = []
    for r in df.iter_rows(named=True):
        cells = []
        for col, _, fmt in columns:
            if fmt == "text":
                cells.append(f'<td class="t">{esc(r.get(col))}</td>')
            elif fmt == "ci":
                lo, hi = (
                    r.get("ci_low" if col == "ci" else col + "_low"),
                    r.get("ci_high" if col == "ci" else col + "_high"),
                )
                cells.append(f"<td>[{_num(lo)}, {_num(hi)}]</td>" if lo is not None else "<td>–</td>")
            elif fmt == "p":
                p = r.get(col)
                cells.append(f"<td>{'&lt;0.001' if p is not None and p < 0.001 else _num(p)}</td>")
            else:
                cells.append(f"<td>{_num(r.get(col), fmt if fmt != 'int' else '')}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'{STYLE}<div class="ekr"><table><tr>{head}</tr>{"".join(rows)}</table></div>'


COMPARE_TABLE = [
    ("a", "A", "text"), ("b", "B", "text"), ("group", "group", "text"), ("n_tasks", "tasks", "int"),
    ("n_dropped", "dropped", "int"), ("n_unpaired", "unpaired", "int"), ("mean_a", "mean A", ".3f"),
    ("mean_b", "mean B", ".3f"), ("diff", "A − B", "signed"), ("ci", "95% CI", "ci"), ("p_value", "p", "p"),
    ("wins", "A better", "int"), ("ties", "ties", "int"), ("losses", "B better", "int"),
    ("mde", "MDE (80%)", ".3f"),
]  # fmt: skip
"""The columns of a `compare` frame as a report shows them."""
