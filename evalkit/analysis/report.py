"""`evalkit report`: execute the report notebook on some runs and write one standalone HTML file.

The notebook (`notebooks/02_report.ipynb`) takes its inputs from a cell tagged `parameters`; the values
given here go into a cell inserted right after it (as papermill does), so the notebook also runs as it
is in JupyterLab. Charts render to PNG inside the notebook (Altair's vl-convert renderer), and the
exported page keeps no script that loads from the network, so a colleague can open it offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.analysis import export, stats
from evalkit.analysis.display import thumbnail
from evalkit.analysis.export import execute_notebook, inject_parameters, strip_network
from evalkit.analysis.repeats import pass_k_table
from evalkit.analysis.summary import budget_text
from evalkit.analysis.tables import (
    COMPARE_MANY_TABLE,
    COMPARE_TABLE,
    STYLE,
    ci_text,
    esc,
    incomplete_text,
    lost_cells_text,
    mde_text,
    method_note,
    p_phrase,
    table_html,
)
from evalkit.errors import ConfigError
from evalkit.records.rundir import atomic_write, read_run_json

__all__ = ["COMPARE_MANY_TABLE", "COMPARE_TABLE", "STYLE", "build_report", "episode_link", "esc",
           "examples_html", "pass_k_html", "execute_notebook", "headline_html", "inject_parameters",
           "method_note", "pick_pair", "project_runs", "ranked_models", "report_runs", "settings_html",
           "status_html", "strip_network", "table_html", "to_html", "why_html", "with_links"]  # fmt: skip

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_report.ipynb"


def to_html(nb: Any, show_code: bool = False, title: str | None = None) -> str:
    """The report page: outputs only, nothing fetched from a network (`evalkit.analysis.export.to_html`)."""
    return export.to_html(nb, show_code=show_code, title=title)


def build_report(
    runs: list[str],
    out: str | Path = "report.html",
    a: str | None = None,
    b: str | None = None,
    show_code: bool = False,
    notebook: str | Path = NOTEBOOK,
    method: str | None = None,
    bundle: str | None = None,
) -> Path:
    """Execute the report notebook on `runs` (comparing `a` with `b` when given) and write `out`. With
    `bundle` (the address of a static bundle of the same runs, relative to `out`: `evalkit report
    --bundle` writes one beside it), every task the report lists links to its episode there. `method`:
    the paired interval's (`stats.PAIRED_METHODS`; default its first)."""
    if not runs:
        raise ConfigError("report: give at least one run directory")
    for r in runs:
        if not Path(r).exists():
            raise ConfigError(f"report: no run directory {r!r}")
    params = {
        "runs": [str(Path(r).resolve()) for r in runs],
        "a": a,
        "b": b,
        "method": method,
        "bundle": bundle,
    }
    out = Path(out)
    nb = execute_notebook(notebook, params, cwd=out.resolve().parent if out.parent.exists() else None)
    html = to_html(nb, show_code=show_code, title="evalkit report: " + ", ".join(Path(r).name for r in runs))

    atomic_write(out, html)
    return out


# ------------------------------------------------------------------------------------------ report sections
# The report notebook calls these: each returns an HTML fragment (names escaped, numbers formatted), so the
# exported page reads the same in JupyterLab, in a browser and offline.


def ranked_models(df: Any) -> list[str]:
    """Models by mean reward over scored episodes, best first (ties by name); models with none scored last."""
    # start-up: Polars only where a frame is built (the report's parameters need none)
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


def headline_html(df: Any, a: str | None, b: str | None, method: str | None = None) -> str:
    """Which model is better, by how much, with the paired CI (and its method), p, the smallest detectable
    difference and wins/losses, in one paragraph, then what the comparison left out (cells a side lost, a
    run left incomplete); "no conclusion" when too few tasks are in common to say anything."""

    if a is None or b is None:
        said = f"Only one model in these runs: <b>{esc(a or b)}</b>; nothing to compare."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    # start-up: the sequential design loads scipy (400 modules), which importing this module need not
    from evalkit.analysis import sequential

    look = sequential.recorded(df, a, b)
    if look is not None:
        return _sequential_headline(look)
    row = stats.compare(df, a, b, by=None, method=method).row(-1, named=True)
    n = row["n_tasks"]
    if not n:
        said = f"<b>{esc(a)}</b> and <b>{esc(b)}</b> share no scored cell of a task: no paired comparison."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    d, lo, hi, pv = row["diff"], row["ci_low"], row["ci_high"], row["p_value"]
    p = esc(p_phrase(pv, row.get("p_exact")))
    tally = (f"{esc(a)} better on <b>{row['wins']}</b>, {esc(b)} better on <b>{row['losses']}</b>, "
             f"{row['ties']} tied.")  # fmt: skip
    flips = "exact" if stats.p_is_exact(n) else f"≈: {stats.N_FLIPS:,} random sign assignments"
    how_p = f"p from a sign-flip permutation test over the tasks' differences ({flips})"
    unscored = row["n_unscored_a"] + row["n_unscored_b"]
    means = (f"Task-weighted means {row['mean_a']:.3f} vs {row['mean_b']:.3f}, like with like: within each "
             f"task only the cells (surface × mode × skin) both scored, {row['n_cells']} in all, each the "
             f"mean of its repeats; {unscored} episode(s) without a score left out (unscored is not "
             "zero)")  # fmt: skip
    left = " ".join(t for t in (lost_cells_text(row, a, b), incomplete_text(row, a, b)) if t)
    left = f'<div class="head" style="font-size:15px"><b>{esc(left)}</b></div>' if left else ""
    if lo is None:
        said = (f"No conclusion: only {n} task(s) in common. Mean reward {esc(a)} − {esc(b)} = "
                f"<b>{d:+.3f}</b> ({p}): {tally}")  # fmt: skip
        why = (f"{means}. With fewer than {stats.MIN_TASKS} tasks no difference can be told apart from "
               f"chance at the 5% level (even every task on one side gives p = 2/2ⁿ), so no interval is "
               f"shown; {how_p}.")  # fmt: skip
        return (f'{STYLE}<div class="ekr"><div class="head">{said}<div class="muted">{why}</div></div>'
                f"{left}</div>")  # fmt: skip
    better, worse = (a, b) if d >= 0 else (b, a)
    # The verdict is the test's; the interval is made to agree with it, so it excludes 0 exactly then.
    clear = pv is not None and pv < stats.ALPHA
    what = (f"<b>{esc(better)}</b> scores higher than <b>{esc(worse)}</b>" if clear
            else f"No clear difference between <b>{esc(a)}</b> and <b>{esc(b)}</b>")  # fmt: skip
    return (
        f'{STYLE}<div class="ekr"><div class="head">{what}: mean reward {esc(a)} − {esc(b)} = '
        f"<b>{d:+.3f}</b> "
        f"(95% CI {ci_text(lo, hi, d, signed=True)}, {p}), paired on {n} task(s): {tally} "
        f"The smallest difference these tasks would detect is {mde_text(row['mde'], n)}.</div>{left}"
        f'<div class="muted">{means}. CI: {esc(row["ci_method"])}, made to agree with the test (it '
        f"excludes 0 exactly when p &lt; 0.05); {how_p}; smallest detectable difference: the sign-flip "
        f"test's, at 80% power and α = 0.05.</div></div>"
    )


def _sequential_headline(look: Any) -> str:
    """The headline of a run that stopped by a sequential design (`--until-decided`): its last look's
    decision, difference, repeated interval and p — never a fixed-sample test of the tasks it chose."""
    from evalkit.analysis.sequential import WORDS  # start-up (as in headline_html)

    a, b = esc(look.a), esc(look.b)
    if look.decision in ("a", "b"):
        better, worse = (a, b) if look.decision == "a" else (b, a)
        what = f"<b>{better}</b> scores higher than <b>{worse}</b>"
    elif look.decision == "no_difference":
        what = f"No difference of {look.delta:g} or more between <b>{a}</b> and <b>{b}</b>"
    else:
        words = WORDS[look.decision].format(a=look.a, b=look.b, delta=0)
        what = f"Not decided between <b>{a}</b> and <b>{b}</b>: {esc(words)}"
    p = "" if look.p is None else f", repeated p = {look.p:.3g}"
    stopped = "decided" if look.decision in ("a", "b", "no_difference") else "stopped"
    design = f"O'Brien–Fleming-type alpha spending over {look.max_tasks} planned tasks, α = {look.alpha:g}"
    if look.delta is not None:
        design += f", smallest difference that matters {look.delta:g}"
    return (
        f'{STYLE}<div class="ekr"><div class="head">{what}: mean reward {a} − {b} = <b>{look.diff:+.3f}</b> '
        f"(repeated 95% CI {ci_text(look.ci_low, look.ci_high, look.diff, signed=True)}{p}), {stopped} at "
        f"look {look.look} with {look.n_tasks} of {look.max_tasks} planned tasks paired."
        '<div class="muted">A sequential comparison (--until-decided): the batch ran its tasks in rounds '
        f"and looked between them ({design}). The repeated interval covers the true difference at every look "
        "at once with 95% probability, so this verdict keeps its 5% error rate however early the run "
        "stopped; a fixed-sample p of the tasks the stopping rule chose would not (docs/statistics.md, "
        '"Sequential comparisons").</div></div></div>'
    )


def status_html(df: Any) -> str:
    """Whether each run is complete, per model: planned, recorded and unscored episodes (`run_status`), the
    incomplete ones first and in bold with what to do ("rerun the same command to resume")."""
    from evalkit.records.loading import run_status

    st = run_status(df)
    if not st.height:
        return ""
    bad = st.filter(pl_incomplete())
    head = (f"<p><b>Incomplete:</b> {bad.height} of {st.height} model(s) in these runs lack planned "
            "episodes; their numbers cover what was recorded.</p>" if bad.height
            else "<p>Every planned episode was recorded (unscored ones are counted apart, never as "
            "0).</p>")  # fmt: skip
    table = table_html(st, [
        ("run_name", "run", "text"), ("model", "model", "text"), ("planned", "planned", "int"),
        ("recorded", "recorded", "int"), ("scored", "scored", "int"), ("unscored", "unscored", "int"),
        ("not_run", "not run", "int"), ("status", "status", "text"),
    ])  # fmt: skip
    return f'{STYLE}<div class="ekr">{head}{table}</div>'


def pl_incomplete() -> Any:
    import polars as pl

    return pl.col("writing") | (pl.col("not_run").fill_null(0) > 0)


def pass_k_html(df: Any, threshold: float = 1.0) -> str:
    """pass@k and pass^k per model (tier "all") when a task has at least two scored repeats (the k of the
    summary: 2, the middle and the most repeats); a line saying why not otherwise."""
    t = pass_k_table(df, threshold)
    if t.is_empty():
        return f'{STYLE}<div class="ekr"><p class="muted">One repeat per task: no pass@k or pass^k.</p></div>'
    parts = []
    for (k,), g in t.group_by("k", maintain_order=True):
        short = f"tasks with < {k} repeats"
        cols = [("model", "model", "text"), ("surface", "surface", "text"), ("mode", "mode", "text"),
                ("n_tasks", "tasks", "int"), ("n_tasks_short", short, "int"),
                ("pass_at_k", f"pass@{k}", ".3f"), ("ci", "95% CI", "ci"),
                ("pass_hat_k", f"pass^{k}", ".3f"), ("hat", "95% CI", "ci")]  # fmt: skip
        parts.append(f"<h3>k = {k}</h3>" + table_html(g, cols))
    method = esc(method_note(t["ci_method"]))
    head = (f"<h2>pass@k and pass^k</h2><p>Success: reward ≥ {threshold:g}. pass@k: the chance that "
            "some of k attempts at a task succeed; pass^k: that all k do; unbiased estimators per task from "
            f"its scored repeats, then task-weighted means; {method}.</p>")  # fmt: skip
    return f'{STYLE}<div class="ekr">{head}{"".join(parts)}</div>'


def _thinking(model: str) -> str:
    _, _, level = model.rpartition("@")
    return level if "@" in model else "default"


def settings_html(runs: list[str], df: Any) -> str:
    """What was run: evalset and its id, models and their thinking, env, surfaces, modes, limits, dates."""
    # start-up (as above)
    import polars as pl

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
            *_limits(meta),
        ])  # fmt: skip
    body = "".join(
        "<table>"
        + "".join(f'<tr><th class="t">{esc(k)}</th><td class="t">{esc(v)}</td></tr>' for k, v in r)
        + "</table>"
        for r in rows
    )
    return f'{STYLE}<div class="ekr">{body}</div>'


def _limits(meta: dict) -> list[tuple[str, str]]:
    """The cost limits and the sequential design a run was asked for (`--max-cost`, `--episode-max-cost`,
    `--until-decided`), as rows of its settings; none for a run without them."""
    rows = []
    if meta.get("max_cost") is not None:
        stop = meta.get("budget_stop")
        said = budget_text(stop) if isinstance(stop, dict) else "not reached"
        rows.append(("budget (--max-cost)", f"${meta['max_cost']:g}: {said}"))
    if meta.get("episode_max_cost") is not None:
        rows.append(("cost limit per episode", f"${meta['episode_max_cost']:g} (an episode past it ends as "
                                               "cost_limit)"))  # fmt: skip
    if meta.get("until_decided"):
        delta = f", delta {meta['delta']:g}" if meta.get("delta") is not None else ""
        rows.append(("until decided", f"{meta.get('compare_a')} vs {meta.get('compare_b')}{delta}"))
    return rows


def episode_link(bundle: str | None, run: Any, key: Any, run_b: Any = None, key_b: Any = None) -> str | None:
    """The address of an episode (and with a second one, of the two in A vs B) in the static bundle at
    `bundle`: by run folder name and episode key, which the bundle resolves (`#/find/…`)."""
    if not bundle or not key:
        return None
    parts = [Path(str(run)).name, str(key)] + ([Path(str(run_b)).name, str(key_b)] if key_b else [])
    return f"{bundle}#/find/" + "/".join(quote(p, safe="") for p in parts)


def with_links(df: Any, bundle: str | None) -> Any:
    """`df` (episodes) with an `href` column: each episode's address in the bundle (`table_html` turns a
    `link` column into links to it); unchanged without a bundle."""
    # start-up (as above)
    import polars as pl

    if not bundle or "key" not in df.columns:
        return df
    hrefs = [
        episode_link(bundle, r, k) for r, k in zip(df["run"].to_list(), df["key"].to_list(), strict=True)
    ]
    return df.with_columns(pl.Series("href", hrefs, dtype=pl.String))


def examples_html(df: Any, a: str, b: str, k: int = 2, width: int = 200, bundle: str | None = None) -> str:
    """The tasks behind the headline: the tasks where A did best and worst against B, ranked by the same
    per-task difference the headline averages (`stats.paired_tasks`: the cells both scored), each shown by
    its paired cell furthest in that direction: target, A's final render, B's final render. Only tasks that
    differ are listed (a "worst" at +0.000 says nothing). With a `bundle`, each links to its episode there
    and the task to A vs B on it."""
    import polars as pl

    from evalkit.analysis.stats import CELL_KEYS, TASK_KEYS, _select, paired_tasks

    da, db = _select(df, a), _select(df, b)
    per_task, _ = paired_tasks(da, db)
    if per_task.height == 0:
        return ""
    keys_t = [c for c in TASK_KEYS if c in per_task.columns]
    keys_c = [c for c in CELL_KEYS if c in df.columns]
    cell = pl.concat_str([pl.col(c).cast(pl.String).fill_null("–") for c in keys_c], separator="/")
    ranked = per_task.sort(["d", *keys_t], descending=[True] + [False] * len(keys_t), nulls_last=True)
    # A difference that reads +0.000 is a tie here: it says nothing about where A is better.
    best = ranked.filter(pl.col("d") >= 0.0005).head(k)
    worst = ranked.reverse().filter(pl.col("d") <= -0.0005).head(k)

    def episode(side: pl.DataFrame, r: dict) -> dict:
        hit = side.filter(pl.col("scored"), cell == r["best_cell"],
                          *[pl.col(c).cast(pl.String).eq_missing(r[c]) for c in keys_t])  # fmt: skip
        return hit.sort("repeat", nulls_last=True).row(0, named=True) if hit.height else {}

    picks = [(f"best for {a}", r) for r in best.iter_rows(named=True)]
    picks += [(f"worst for {a}", r) for r in worst.iter_rows(named=True)]
    blocks = []
    for label, r in picks:
        ea, eb = episode(da, r), episode(db, r)
        link_a = episode_link(bundle, ea.get("run"), ea.get("key"))
        link_b = episode_link(bundle, eb.get("run"), eb.get("key"))
        pair = episode_link(bundle, ea.get("run"), ea.get("key"), eb.get("run"), eb.get("key"))
        shown = [("target", ea.get("run"), ea.get("target"), pair),
                 (f"{a}: {ea.get('reward') or 0:.3f}", ea.get("run"), ea.get("render"), link_a),
                 (f"{b}: {eb.get('reward') or 0:.3f}", eb.get("run"), eb.get("render"), link_b)]  # fmt: skip
        figs = []
        for cap, run, rel, href in shown:
            img = (thumbnail(run, rel, width) if run and rel else None) or (
                f'<div class="muted" style="width:{width}px">(no picture)</div>')  # fmt: skip
            img = f'<a href="{esc(href)}">{img}</a>' if href else img
            figs.append(f"<figure>{img}<figcaption>{esc(cap)}</figcaption></figure>")
        cells = f"{r['n_cells']} cell(s) both scored" if r["n_cells"] > 1 else "one cell both scored"
        head = (f"{label}: {r['task_id']} · A − B = {r['d']:+.3f} over {cells} (the headline's unit); "
                f"shown: {r['best_cell']}")  # fmt: skip
        head = f'<a href="{esc(pair)}">{esc(head)}</a>' if pair else esc(head)
        links = (f' <span class="muted">(<a href="{esc(link_a)}">A\'s episode</a>, '
                 f'<a href="{esc(link_b)}">B\'s episode</a>)</span>' if pair else "")  # fmt: skip
        blocks.append(f'<div><div><b>{head}</b>{links}</div><div class="ex">{"".join(figs)}</div></div>')
    if not worst.height:
        blocks.append(f'<p class="muted">No task where {esc(a)} did worse than {esc(b)}.</p>')
    if not best.height:
        blocks.append(f'<p class="muted">No task where {esc(a)} did better than {esc(b)}.</p>')
    return f'{STYLE}<div class="ekr">{"".join(blocks)}</div>'


def why_html(df: Any, scans: Any, a: str | None = None, b: str | None = None) -> str:
    """The report's "why": per model × scanner, the share of tasks where the scanner fired with its 95%
    interval (`analysis.why`), then for A and B the failure modes that separate them (the paired test, Holm
    across the scanners), in words and as a table sorted by the size of the difference. `scans`: the
    scanners' rows (`evalkit.scanners.with_kept(df)`: the keyless rules, and a judge's answers kept by
    `evalkit scan --judge`)."""
    from evalkit.analysis import why as w

    if scans is None or not scans.height:
        return "<p><i>No episode to scan.</i></p>"
    rates = w.why(df, scans)
    table = w.rates_table(rates)
    out = table_html(table, [(c, c, "text") for c in table.columns]) + (
        "<p class='muted'>Each cell: the share of tasks where the scanner fired (a task's episodes averaged "
        f"first), its {esc(w.METHOD)} (none below 6 tasks), and tasks where it fired / tasks counted. "
        "Episodes the infrastructure ended are left out of the model's rates and counted apart "
        "(<code>infra_error</code>). What each scanner looks at: docs/scanners.md.</p>"
    )
    if not (a and b):
        return out
    try:
        diffs = w.why(df, scans, a=a, b=b)
    except ValueError as e:
        return out + f"<p><i>No paired differences: {esc(str(e))}</i></p>"
    sep = diffs.filter(diffs["separates"])
    if sep.height:
        items = "".join(f"<li>{esc(x)}</li>" for x in sep["sentence"].to_list())
        out += f"<p><b>What separates {esc(a)} from {esc(b)}</b> (Holm p &lt; 0.05):</p><ul>{items}</ul>"
    else:
        out += f"<p>No failure mode separates <b>{esc(a)}</b> from <b>{esc(b)}</b> (no Holm p &lt; 0.05).</p>"
    shown = w.differences_table(diffs)
    return (
        out
        + table_html(shown, [(c, c, "text") for c in shown.columns])
        + (
            f"<p class='muted'>A − B in percentage points, the largest first. {esc(w.PAIRED)}; p (Holm) "
            "adjusted across the scanners.</p>"
        )
    )


def project_runs(start: str | Path | None = None) -> Path:
    """The project's `runs/` folder: beside the nearest `pyproject.toml` or `.git` above `start` (default
    the working directory, which for a notebook is its folder), else `start`'s own `runs/`. Notebooks write
    their runs there, and the report notebook reads the newest one from there."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").exists() or (d / ".git").exists():
            return d / "runs"
    return here / "runs"


SAMPLE_RUN = Path(__file__).resolve().parents[2] / "data" / "sample-run"


def report_runs(runs: list[str] | None, start: str | Path | None = None) -> tuple[list[str], str]:
    """The runs a report is about and a line saying which: the runs given (`evalkit report RUN`), else the
    newest run under the project's `runs/` (`project_runs`, by when its trace last changed), else the
    sample run shipped with evalkit, said as such."""
    if runs:
        return [str(r) for r in runs], f"Runs given: {', '.join(str(r) for r in runs)}."
    from evalkit.records import rundir

    folder = project_runs(start)
    found = [p.parent for p in folder.glob("**/" + rundir.TRACE) if p.is_file()] if folder.is_dir() else []
    if found:
        newest = max(found, key=lambda p: (p / rundir.TRACE).stat().st_mtime)
        return [str(newest)], (f"No run given: the newest run under {folder}, {newest} (give runs = [...] or "
                               "`evalkit report RUN` for another).")  # fmt: skip
    return [str(SAMPLE_RUN)], (f"No run given and none under {folder}: the sample run shipped with evalkit, "
                               f"{SAMPLE_RUN} (run `make demo`, or give runs = [...]).")  # fmt: skip
