"""`build_report` executes the report notebook and writes a page that renders with no network."""

from __future__ import annotations

import re

import nbformat
import polars as pl
import pytest
from fixtures.synth import make_run

from evalkit import analysis as A
from evalkit.analysis import report
from evalkit.errors import ConfigError


def test_report_is_standalone_html(tmp_path):
    run = make_run(
        tmp_path / "run", models={"m-good": 0.7, "m-bad": 0.3, "m-mid": 0.5}, n_tasks=9, frames=False
    )
    out = report.build_report([str(run)], tmp_path / "report.html", a="m-good", b="m-bad")
    html = out.read_text()
    assert re.search(r"<script[^>]*src=[\"']?(https?:)?//", html) is None
    assert re.search(r"<link[^>]*href=[\"']?(https?:)?//", html) is None
    assert re.search(r"import[^;]*from\s*[\"']https?://", html) is None
    assert html.count("data:image/png;base64,") >= 5  # tiers, forest ×2, cost/turns, endings, grades
    assert "Traceback" not in html and "CellExecutionError" not in html
    assert "m-good" in html and "A − B" in html and "unscored" in html
    # the headline comes first and says which model is better; tables are HTML with readable headings
    head = html.index('class="head"')
    assert head < html.index("What was run") < html.index("reward (scored)") < html.index("Paired comparison")
    assert "<b>m-good</b> scores higher than <b>m-bad</b>" in html[head : head + 2000]
    assert "<th>reward (unscored = 0)</th>" in html and "<th>95% CI</th>" in html
    assert "shape: (" not in html and "&quot;m-good&quot;" not in html  # no Polars text tables, no quotes
    # the two tasks where A did best, by the headline's unit: each target shown (these synthetic episodes
    # have no final render); m-good is better on every task, so no "worst" at +0.000 is listed
    assert "The tasks behind the headline" in html and html.count("data:image/jpeg;base64,") == 2
    assert html.count("(no picture)") == 4 and "No task where m-good did worse than m-bad" in html
    # why: the scanners' rates per model with their intervals, then what separates A from B (issue 54)
    why = html.index("Why: failure modes per model")
    assert html.index("The tasks behind the headline") < why < html.index("Episodes without a score")
    assert "<th>early_finish</th>" not in html and ">early_finish</td>" in html[why:]
    assert "Bayesian bootstrap over tasks" in html[why:]
    assert "paired t, widened part-way to MOVER" in html[why:]
    assert "No failure mode separates <b>m-good</b> from <b>m-bad</b>" in html[why:]  # 9 tasks: too few


def test_parameters_are_injected_after_the_tagged_cell():
    nb = nbformat.read(str(report.NOTEBOOK), as_version=4)
    n = len(nb.cells)
    report.inject_parameters(nb, {"runs": ["x"], "a": None})
    assert len(nb.cells) == n + 1
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    assert nb.cells[i + 1].source.endswith("runs = ['x']\na = None\n")


def test_missing_run_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        report.build_report([str(tmp_path / "nope")], tmp_path / "r.html")


def test_strip_network():
    page = (
        '<script src="https://cdn.example/require.js"></script><p>keep</p>'
        '<script type="module">import m from "https://cdn.example/m.mjs";</script><script>var x=1;</script>'
    )
    out = report.strip_network(page)
    assert out == "<p>keep</p><script>var x=1;</script>"


EXTERNAL = re.compile(r"<[a-z][^>]*\b(?:src|href|srcset|action|data)\s*=\s*[\"']?\s*(?:https?:)?//", re.I)


def test_only_a_is_compared_with_the_most_frequent_other_model(tmp_path):
    run = make_run(tmp_path / "run", models={"m-good": 0.7, "m-bad": 0.3}, n_tasks=6, frames=False)
    html = report.build_report([str(run)], tmp_path / "r.html", a="m-bad").read_text()
    assert "nothing to compare" not in html
    assert (
        "A − B" in html and '<td class="t">m-bad</td><td class="t">m-good</td><td class="t">easy</td>' in html
    )


def test_hostile_model_and_run_names_stay_text(tmp_path):
    evil = 'x` <img src="https://evil.example/p.png"> [l](https://evil.example/) <a href=//evil.example>a</a>'
    run = make_run(tmp_path / "run` <b>x", models={evil: 0.7, "m-bad": 0.3}, n_tasks=6, frames=False)
    html = report.build_report([str(run)], tmp_path / "r.html", a=evil, b="m-bad").read_text()
    assert "evil.example" in html  # the name is shown...
    assert EXTERNAL.search(html) is None, EXTERNAL.search(html)  # ...never as a tag that fetches or links
    assert "run` <b>x" not in html and "run` &lt;b&gt;x" in html


def test_a_report_on_foreign_runs_writes_nothing_into_them(seed_runs, tmp_path):
    from tests.support.snapshot import snapshot

    runs = [seed_runs[k] for k in ("canvas", "uitars", "planning_jsonl")]
    before = [snapshot(r) for r in runs]
    out = report.build_report([str(r) for r in runs], tmp_path / "report.html")
    html = out.read_text()
    assert "Traceback" not in html and "CellExecutionError" not in html and "uitars:uitars15-7b" in html
    df = A.load_runs(runs)
    unscored, no_reward = (
        df["error_class"].is_not_null().sum(),
        (~df["scored"] & df["error_class"].is_null()).sum(),
    )
    assert no_reward >= 7  # the own-loop run is ungraded: none of it is unscored or zero
    assert f"<b>{df.height}</b> episodes from 3 run(s)" in html
    assert f"{unscored} unscored (infrastructure errors), {no_reward} without a reward" in html
    assert [snapshot(r) for r in runs] == before


def test_the_default_pair_is_the_best_model_against_the_runner_up(tmp_path):
    run = make_run(tmp_path / "run", models={"m-mid": 0.5, "m-good": 0.8, "m-bad": 0.2}, n_tasks=9,
                   frames=False, unscored=0)  # fmt: skip
    df = A.load_runs([run])
    assert report.ranked_models(df) == ["m-good", "m-mid", "m-bad"]
    assert report.pick_pair(df) == ("m-good", "m-mid")
    assert report.pick_pair(df, b="m-good") == ("m-mid", "m-good")
    assert report.pick_pair(df.filter(pl.col("model") == "m-bad")) == ("m-bad", None)
    line = report.headline_html(df, "m-good", "m-mid")
    assert "<b>m-good</b> scores higher than <b>m-mid</b>" in line and "paired on 9 task(s)" in line
    assert "m-good better on <b>9</b>" in line
    assert "nothing to compare" in report.headline_html(df, "m-bad", None)


def test_compare_shows_itself_in_a_notebook(tmp_path):
    run = make_run(tmp_path / "run", models={"m-good": 0.8, "<i>m-bad</i>": 0.2}, n_tasks=9, frames=False)
    cmp = A.compare(A.load_runs([run]), "m-good", "<i>m-bad</i>")
    page = cmp._repr_html_()
    assert page.startswith("<div") and "m-good − &lt;i&gt;m-bad&lt;/i&gt; = +0." in page
    assert "95% CI [+0." in page and "m-good better on 8" in page and "<th>A − B</th>" in page
    assert "p = 0.008" in page and "smallest detectable difference 0." in page  # exact: 2/2^8
    line, table = page.split("<table")
    assert "No conclusion" not in line and "too few tasks" in table  # 3 tasks a tier; 8 in all
    # One episode unscored leaves 5 paired tasks: the exact p can be no lower than 2/2^5, and no CI is shown.
    few = make_run(tmp_path / "few", n_tasks=6, frames=False)
    few = A.compare(A.load_runs([few]), "baseline:tracer", "baseline:random")
    page = few._repr_html_()
    assert "No conclusion: only 5 task(s)." in page and "p = 0.062" in page
    assert "95% CI" not in page.split("<table")[0] and page.count("too few tasks") >= 2  # CI and MDE cells
    assert "\nA " in A.format_compare(cmp)  # still a frame for everything else
    assert "shape:" in cmp.select("a", "diff")._repr_html_() or "<table" in cmp.select("a")._repr_html_()


def test_the_why_section_says_what_separates_a_from_b(tmp_path):
    """The report's why (`why_html`): every cell of the rates table and every sentence of what separates
    the two are `ek.why`'s."""
    import evalkit as ek

    run = make_run(tmp_path / "run", models={"m-good": 0.7, "m-bad": 0.3}, n_tasks=18, frames=False)
    df = ek.load_runs(run)
    scans = ek.scanners.with_kept(df)
    html = report.why_html(df, scans, "m-bad", "m-good")
    rates = ek.why(df, scans)
    for r in rates.iter_rows(named=True):
        cell = f"{A.why.pct(r['rate'])}% [{A.why.pct(r['ci_low'])}%, {A.why.pct(r['ci_high'])}%]"
        assert cell in html, (r["scanner"], r["model"], cell)
    diffs = ek.why(df, scans, a="m-bad", b="m-good")
    sep = diffs.filter(pl.col("separates"))
    assert sep["scanner"].to_list() == ["early_finish"]  # m-bad submits early with a low reward
    assert "<b>What separates m-bad from m-good</b>" in html
    assert report.esc(sep["sentence"][0]) in html and "m-bad finishes early with a low reward in 100%" in html
    order = [html.index(f">{s}</td>", html.index("What separates")) for s in diffs["scanner"].to_list()]
    assert order == sorted(order)  # the differences by size, as why sorts them
