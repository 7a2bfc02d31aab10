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

from evalkit.analysis import export
from evalkit.analysis.export import execute_notebook, inject_parameters, strip_network
from evalkit.analysis.stats import N_BOOT
from evalkit.analysis.tables import (
    COMPARE_MANY_TABLE,
    COMPARE_TABLE,
    STYLE,
    ci_text,
    esc,
    mde_text,
    p_phrase,
    table_html,
)
from evalkit.errors import ConfigError

__all__ = ["COMPARE_MANY_TABLE", "COMPARE_TABLE", "STYLE", "build_report", "episode_link", "esc",
           "examples_html", "pass_k_html", "execute_notebook", "headline_html", "inject_parameters",
           "pick_pair", "ranked_models", "settings_html", "strip_network", "table_html", "to_html",
           "with_links"]  # fmt: skip

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
    n_boot: int = N_BOOT,
    bundle: str | None = None,
) -> Path:
    """Execute the report notebook on `runs` (comparing `a` with `b` when given) and write `out`. With
    `bundle` (the address of a static bundle of the same runs, relative to `out`: `evalkit report
    --bundle` writes one beside it), every task the report lists links to its episode there."""
    if not runs:
        raise ConfigError("report: give at least one run directory")
    for r in runs:
        if not Path(r).exists():
            raise ConfigError(f"report: no run directory {r!r}")
    params = {
        "runs": [str(Path(r).resolve()) for r in runs],
        "a": a,
        "b": b,
        "n_boot": n_boot,
        "bundle": bundle,
    }
    out = Path(out)
    nb = execute_notebook(notebook, params, cwd=out.resolve().parent if out.parent.exists() else None)
    html = to_html(nb, show_code=show_code, title="evalkit report: " + ", ".join(Path(r).name for r in runs))
    from evalkit.records.traces import atomic_write

    atomic_write(out, html)
    return out


# ------------------------------------------------------------------------------------------ report sections
# The report notebook calls these: each returns an HTML fragment (names escaped, numbers formatted), so the
# exported page reads the same in JupyterLab, in a browser and offline.


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


def headline_html(df: Any, a: str | None, b: str | None, n_boot: int = N_BOOT) -> str:
    """Which model is better, by how much, with the paired CI, p, the smallest detectable difference and
    wins/losses, in one paragraph; "no conclusion" when too few tasks are in common to say anything."""
    from evalkit.analysis import stats

    if a is None or b is None:
        said = f"Only one model in these runs: <b>{esc(a or b)}</b>; nothing to compare."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    from evalkit.analysis import sequential

    look = sequential.recorded(df, a, b)
    if look is not None:
        return _sequential_headline(df, look)
    row = stats.compare(df, a, b, by=None, n_boot=n_boot).row(-1, named=True)
    n = row["n_tasks"]
    if not n:
        said = f"<b>{esc(a)}</b> and <b>{esc(b)}</b> share no scored task: no paired comparison."
        return f'{STYLE}<div class="ekr"><div class="head">{said}</div></div>'
    d, lo, hi, pv = row["diff"], row["ci_low"], row["ci_high"], row["p_value"]
    p = esc(p_phrase(pv, row.get("p_exact")))
    tally = (f"{esc(a)} better on <b>{row['wins']}</b>, {esc(b)} better on <b>{row['losses']}</b>, "
             f"{row['ties']} tied.")  # fmt: skip
    flips = "exact" if stats.p_is_exact(n) else f"≈: {stats.N_FLIPS:,} random sign assignments"
    how_p = f"p from a sign-flip permutation test over the tasks' differences ({flips})"
    unscored = row["n_unscored_a"] + row["n_unscored_b"]
    means = (f"Task-weighted means {row['mean_a']:.3f} vs {row['mean_b']:.3f} over the paired tasks (each "
             "model's episodes of a task averaged first, all repeats); "
             f"{unscored} episode(s) without a score left out (unscored is not zero)")  # fmt: skip
    if lo is None:
        said = (f"No conclusion: only {n} task(s) in common. Mean reward {esc(a)} − {esc(b)} = "
                f"<b>{d:+.3f}</b> ({p}): {tally}")  # fmt: skip
        why = (f"{means}. With fewer than {stats.MIN_TASKS} tasks no difference can be told apart from "
               f"chance at the 5% level (even every task on one side gives p = 2/2ⁿ), so no interval is "
               f"shown; {how_p}.")  # fmt: skip
        return f'{STYLE}<div class="ekr"><div class="head">{said}<div class="muted">{why}</div></div></div>'
    better, worse = (a, b) if d >= 0 else (b, a)
    # The verdict is the test's; the interval is that test inverted, so it excludes 0 exactly then.
    clear = pv is not None and pv < stats.ALPHA
    what = (f"<b>{esc(better)}</b> scores higher than <b>{esc(worse)}</b>" if clear
            else f"No clear difference between <b>{esc(a)}</b> and <b>{esc(b)}</b>")  # fmt: skip
    return (
        f'{STYLE}<div class="ekr"><div class="head">{what}: mean reward {esc(a)} − {esc(b)} = '
        f"<b>{d:+.3f}</b> "
        f"(95% CI {ci_text(lo, hi, d, signed=True)}, {p}), paired on {n} task(s): {tally} "
        f"The smallest difference these tasks would detect is {mde_text(row['mde'], n)}."
        f'<div class="muted">{means}; CI: the sign-flip test inverted (the shifts it does not reject), so it '
        f"excludes 0 exactly when p &lt; 0.05; {how_p}; smallest detectable difference: the sign-flip "
        f"test's, at 80% power and α = 0.05.</div></div></div>"
    )


def _sequential_headline(df: Any, look: Any) -> str:
    """The headline of a run that stopped by a sequential design (`--until-decided`): its last look's
    decision, difference, repeated interval and p — never a fixed-sample test of the tasks it chose."""
    from evalkit.analysis.sequential import WORDS

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


def pass_k_html(df: Any, threshold: float = 1.0) -> str:
    """pass@k and pass^k per model (tier "all") when a task has at least two scored repeats (the k of the
    summary: 2, the middle and the most repeats); a line saying why not otherwise."""
    from evalkit.analysis.repeats import pass_k_table

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
    head = (f"<h2>pass@k and pass^k</h2><p>Success: reward ≥ {threshold:g}. pass@k: the chance that "
            "some of k attempts at a task succeed; pass^k: that all k do; unbiased estimators per task from "
            "its scored repeats, then task-weighted means with 95% CIs over tasks.</p>")  # fmt: skip
    return f'{STYLE}<div class="ekr">{head}{"".join(parts)}</div>'


def _thinking(model: str) -> str:
    _, _, level = model.rpartition("@")
    return level if "@" in model else "default"


def settings_html(runs: list[str], df: Any) -> str:
    """What was run: evalset and its id, models and their thinking, env, surfaces, modes, limits, dates."""
    import polars as pl

    from evalkit.records.traces import read_run_json

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
    from evalkit.analysis.summary import budget_text

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
    import polars as pl

    if not bundle or "key" not in df.columns:
        return df
    hrefs = [
        episode_link(bundle, r, k) for r, k in zip(df["run"].to_list(), df["key"].to_list(), strict=True)
    ]
    return df.with_columns(pl.Series("href", hrefs, dtype=pl.String))


def examples_html(df: Any, a: str, b: str, k: int = 2, width: int = 200, bundle: str | None = None) -> str:
    """The best and worst paired tasks for A against B: target, A's final render, B's final render; with a
    `bundle`, each links to its episode there and the task to A vs B on it."""
    import polars as pl

    from evalkit.analysis.display import thumbnail

    keys = ["env", "surface", "mode", "task_id"]
    sides = []
    for who in (a, b):
        s = (
            df.filter(pl.col("model") == who)
            .filter(pl.col("scored"))
            .sort("repeat", nulls_last=True, maintain_order=True)
            .group_by(keys, maintain_order=True)
            .agg(
                pl.col("reward").mean(),
                pl.col("run").first(),
                pl.col("key").first(),
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
    j = j.sort(["d", *keys], descending=[True, False, False, False, False])
    # A task (in any surface or mode) is shown once: the best its k first, the worst from the tasks left.
    best = j.unique("task_id", keep="first", maintain_order=True).head(k)
    rest = j.filter(~pl.col("task_id").is_in(best["task_id"].implode()))
    worst = rest.reverse().unique("task_id", keep="first", maintain_order=True).head(k)
    picks = [("best for " + a, r) for r in best.iter_rows(named=True)]
    picks += [("worst for " + a, r) for r in worst.iter_rows(named=True)]
    blocks = []
    for label, r in picks:
        figs = []
        link_a, link_b = (
            episode_link(bundle, r["run"], r["key"]),
            episode_link(bundle, r["run_b"], r["key_b"]),
        )
        pair = episode_link(bundle, r["run"], r["key"], r["run_b"], r["key_b"])
        shown = [("target", r["run"], r["target"], pair),
                 (f"{a}: {r['reward']:.3f}", r["run"], r["render"], link_a),
                 (f"{b}: {r['reward_b']:.3f}", r["run_b"], r["render_b"], link_b)]  # fmt: skip
        for cap, run, rel, href in shown:
            img = (
                thumbnail(run, rel, width) or f'<div class="muted" style="width:{width}px">(no picture)</div>'
            )
            img = f'<a href="{esc(href)}">{img}</a>' if href else img
            figs.append(f"<figure>{img}<figcaption>{esc(cap)}</figcaption></figure>")
        head = f"{label}: {r['task_id']} · {r['surface']}/{r['mode']} · A − B = {r['d']:+.3f}"
        head = f'<a href="{esc(pair)}">{esc(head)}</a>' if pair else esc(head)
        links = (f' <span class="muted">(<a href="{esc(link_a)}">A\'s episode</a>, '
                 f'<a href="{esc(link_b)}">B\'s episode</a>)</span>' if pair else "")  # fmt: skip
        blocks.append(f'<div><div><b>{head}</b>{links}</div><div class="ex">{"".join(figs)}</div></div>')
    return f'{STYLE}<div class="ekr">{"".join(blocks)}</div>'
