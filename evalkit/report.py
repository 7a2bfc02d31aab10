"""`evalkit report`: execute the report notebook on some runs and write one standalone HTML file.

The notebook (`notebooks/02_report.ipynb`) takes its inputs from a cell tagged `parameters`; the values
given here go into a cell inserted right after it (as papermill does), so the notebook also runs as it
is in JupyterLab. Charts render to PNG inside the notebook (Altair's vl-convert renderer), and the
exported page keeps no script that loads from the network, so a colleague can open it offline.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_report.ipynb"
CELL_TIMEOUT = 600

# nbconvert's templates load require.js, MathJax and mermaid from a CDN; the report needs none of them.
_EXTERNAL_SCRIPT = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I | re.S
)
_NETWORK_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/(?:(?!</script>).)*</script>",
    re.I | re.S,
)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)


def parameter_cell_source(params: dict[str, Any]) -> str:
    return "# Injected by evalkit.report\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())


def inject_parameters(nb: Any, params: dict[str, Any]) -> Any:
    """Insert a cell setting `params` after the cell tagged `parameters` (or first, if none is tagged)."""
    import nbformat

    cell = nbformat.v4.new_code_cell(parameter_cell_source(params))
    cell.metadata["tags"] = ["injected-parameters"]
    at = next(
        (i + 1 for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), 0
    )
    nb.cells.insert(at, cell)
    return nb


def execute_notebook(
    path: str | Path,
    params: dict[str, Any] | None = None,
    cwd: str | Path | None = None,
    timeout: int = CELL_TIMEOUT,
) -> Any:
    """Run a notebook on a kernel of this Python (the `python3` spec resolves to sys.executable) and return
    the executed notebook; raises nbclient's CellExecutionError on a failing cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    if params:
        inject_parameters(nb, params)
    env = dict(os.environ)
    # The kernel must import this evalkit even when it is not installed (a checkout run in place).
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or Path(path).parent)}},
    )
    client.km = client.create_kernel_manager()
    # A user-installed `python3` kernelspec may point at another interpreter; run ours.
    client.km.kernel_spec.argv[0] = sys.executable
    client.execute(env=env)
    return nb


def to_html(nb: Any, show_code: bool = False, title: str | None = None) -> str:
    """A standalone HTML page of an executed notebook, with no script or stylesheet fetched from a network
    (`evalkit.export`)."""
    from evalkit.export import to_html as offline_html

    return offline_html(nb, show_code=show_code, title=title)


def strip_network(html: str) -> str:
    html = _EXTERNAL_SCRIPT.sub("", html)
    html = _NETWORK_SCRIPT.sub("", html)
    return _EXTERNAL_LINK.sub("", html)


def build_report(
    runs: list[str],
    out: str | Path = "report.html",
    a: str | None = None,
    b: str | None = None,
    show_code: bool = False,
    notebook: str | Path = NOTEBOOK,
    n_boot: int = 2000,
) -> Path:
    """Execute the report notebook on `runs` (comparing `a` with `b` when given) and write `out`."""
    if not runs:
        raise ConfigError("report: give at least one run directory")
    for r in runs:
        if not Path(r).exists():
            raise ConfigError(f"report: no run directory {r!r}")
    params = {"runs": [str(Path(r).resolve()) for r in runs], "a": a, "b": b, "n_boot": n_boot}
    out = Path(out)
    nb = execute_notebook(notebook, params, cwd=out.resolve().parent if out.parent.exists() else None)
    html = to_html(nb, show_code=show_code, title="evalkit report: " + ", ".join(Path(r).name for r in runs))
    from evalkit.traces import atomic_write

    atomic_write(out, html)
    return out


# ------------------------------------------------------------------------------------------ report sections
# The report notebook calls these: each returns an HTML fragment (names escaped, numbers formatted), so the
# exported page reads the same in JupyterLab, in a browser and offline.

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


def _e(v: Any) -> str:
    from html import escape

    return escape("" if v is None else str(v))


def _num(v: Any, spec: str = ".3f") -> str:
    import math

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if spec == "usd":
        return f"${v:,.4f}" if abs(v) < 1 else f"${v:,.2f}"
    if spec == "signed":
        return f"{v:+.3f}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return format(v, spec)
    return _e(v)


def table_html(df: Any, columns: list[tuple[str, str, str]]) -> str:
    """A real HTML table of a Polars frame: (column, heading, format) per column, format one of `text`, a
    float spec (`.3f`), `int`, `usd`, `signed`, `ci` (the pair ci_low/ci_high). Text is escaped."""
    head = "".join(
        f'<th class="t">{_e(h)}</th>' if f == "text" else f"<th>{_e(h)}</th>" for _, h, f in columns
    )
    rows = []
    for r in df.iter_rows(named=True):
        cells = []
        for col, _, fmt in columns:
            if fmt == "text":
                cells.append(f'<td class="t">{_e(r.get(col))}</td>')
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


def ranked_models(df: Any) -> list[str]:
    """Models by mean reward over scored episodes, best first (ties by name); models with none scored last."""
    import polars as pl

    means = (
        df.group_by("model")
        .agg(pl.col("reward").filter(pl.col("scored")).mean().alias("m"))
        .sort(["m", "model"], descending=[True, False], nulls_last=True)
    )
    return means["model"].to_list()


def pick_pair(df: Any, a: str | None = None, b: str | None = None) -> tuple[str | None, str | None]:
    """The default A/B of a report: the better model against the runner-up; one given is kept, and the
    other is the best of the rest."""
    rest = [m for m in ranked_models(df) if m not in (a, b)]
    if a is None and rest:
        a = rest.pop(0)
    if b is None and rest:
        b = rest.pop(0)
    return a, b


def headline_html(df: Any, a: str | None, b: str | None, n_boot: int = 2000) -> str:
    """Which model is better, by how much, with the paired CI, p and wins/losses, in one paragraph."""
    from evalkit import stats

    if a is None or b is None:
        said = f"Only one model in these runs: <b>{_e(a or b)}</b>; nothing to compare."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    row = stats.compare(df, a, b, by=None, n_boot=n_boot).row(-1, named=True)
    if not row["n_tasks"]:
        said = f"<b>{_e(a)}</b> and <b>{_e(b)}</b> share no scored task: no paired comparison."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    d, lo, hi, p = row["diff"], row["ci_low"], row["ci_high"], row["p_value"]
    better, worse = (a, b) if d >= 0 else (b, a)
    clear = lo is not None and (lo > 0 or hi < 0)
    pv = "p &lt; 0.001" if p < 0.001 else f"p = {p:.3f}"
    what = (f"<b>{_e(better)}</b> scores higher than <b>{_e(worse)}</b>" if clear
            else f"No clear difference between <b>{_e(a)}</b> and <b>{_e(b)}</b>")  # fmt: skip
    unscored = row["n_unscored_a"] + row["n_unscored_b"]
    return (
        f'{STYLE}<div class="ekr"><div class="head">{what}: mean reward {_e(a)} − {_e(b)} = <b>{d:+.3f}</b> '
        f"(95% CI [{lo:+.3f}, {hi:+.3f}], {pv}), paired on {row['n_tasks']} task(s): {_e(a)} better on "
        f"<b>{row['wins']}</b>, {_e(b)} better on <b>{row['losses']}</b>, {row['ties']} tied."
        f'<div class="muted">Means {row["mean_a"]:.3f} vs {row["mean_b"]:.3f} over the paired tasks; '
        f"{unscored} episode(s) without a score left out (unscored is not zero); CI and p from a bootstrap "
        f"over tasks ({n_boot:,} resamples).</div></div></div>"
    )


def _thinking(model: str) -> str:
    _, _, level = model.rpartition("@")
    return level if "@" in model else "default"


def settings_html(runs: list[str], df: Any) -> str:
    """What was run: evalset and its id, models and their thinking, env, surfaces, modes, limits, dates."""
    import polars as pl

    from evalkit.traces import read_run_json

    rows = []
    for run in runs:
        try:
            meta = read_run_json(run) if Path(run).is_dir() else {}
        except Exception:  # a foreign or unreadable run.json: the episodes still say what they are
            meta = {}
        sub = df.filter(pl.col("run") == run) if "run" in df.columns else df
        models = meta.get("models") or sub["model"].unique(maintain_order=True).to_list()
        started = [s for s in sub["started"].drop_nulls().to_list()] if "started" in sub.columns else []
        evalset = meta.get("evalset_id") or ""
        if meta.get("evalset"):
            evalset = f"{Path(meta['evalset']).name} (id {meta.get('evalset_id') or '?'})"
        if meta.get("subset"):
            evalset += f", subset {meta['subset']}"
        turns = meta.get("max_turns") or "the env's budget"
        rows.append([
            ("run", Path(run).name),
            ("environment", meta.get("env") or ", ".join(sub["env"].unique().to_list())),
            ("evalset", evalset or "–"),
            ("models (thinking)", ", ".join(f"{m} ({_thinking(m)})" for m in models)),
            ("surfaces", ", ".join(meta.get("surfaces") or sub["surface"].unique().to_list())),
            ("modes", ", ".join(x for x in meta.get("modes") or sub["mode"].unique().to_list() if x) or "–"),
            ("max turns", turns), ("repeats", meta.get("repeats") or 1),
            ("episodes", sub.height),
            ("dates", f"{min(started)[:16]} – {max(started)[:16]} UTC" if started else "–"),
            ("evalkit", meta.get("evalkit_version") or "–"),
        ])  # fmt: skip
    body = "".join(
        "<table>"
        + "".join(f'<tr><th class="t">{_e(k)}</th><td class="t">{_e(v)}</td></tr>' for k, v in r)
        + "</table>"
        for r in rows
    )
    return f'{STYLE}<div class="ekr">{body}</div>'


def examples_html(df: Any, a: str, b: str, k: int = 2, width: int = 200) -> str:
    """The best and worst paired tasks for A against B: target, A's final render, B's final render."""
    import polars as pl

    from evalkit.display import thumbnail

    keys = ["env", "surface", "mode", "task_id"]
    sides = []
    for who in (a, b):
        s = (
            df.filter(pl.col("model") == who)
            .filter(pl.col("scored"))
            .group_by(keys)
            .agg(
                pl.col("reward").mean(),
                pl.col("run").first(),
                pl.col("render").first(),
                pl.col("target").first(),
            )
        )
        sides.append(s)
    j = (
        sides[0]
        .join(sides[1], on=keys, suffix="_b")
        .with_columns((pl.col("reward") - pl.col("reward_b")).alias("d"))
    )
    if j.height == 0:
        return ""
    j = j.sort(["d", "task_id"], descending=[True, False])
    picks = [("best for " + a, r) for r in j.head(k).iter_rows(named=True)]
    picks += [
        ("worst for " + a, r) for r in j.tail(min(k, max(0, j.height - k))).reverse().iter_rows(named=True)
    ]
    blocks = []
    for label, r in picks:
        figs = []
        shown = [("target", r["run"], r["target"]), (f"{a}: {r['reward']:.3f}", r["run"], r["render"]),
                 (f"{b}: {r['reward_b']:.3f}", r["run_b"], r["render_b"])]  # fmt: skip
        for cap, run, rel in shown:
            img = (
                thumbnail(run, rel, width) or f'<div class="muted" style="width:{width}px">(no picture)</div>'
            )
            figs.append(f"<figure>{img}<figcaption>{_e(cap)}</figcaption></figure>")
        head = f"{label}: {r['task_id']} · {r['surface']}/{r['mode']} · A − B = {r['d']:+.3f}"
        blocks.append(f'<div><div><b>{_e(head)}</b></div><div class="ex">{"".join(figs)}</div></div>')
    return f'{STYLE}<div class="ekr">{"".join(blocks)}</div>'
