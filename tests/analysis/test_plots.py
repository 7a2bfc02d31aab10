"""Each chart takes a frame, returns an Altair chart, and renders offline."""

from __future__ import annotations

import altair as alt
import pytest
from fixtures.synth import make_run

from evalkit import analysis as A
from evalkit.analysis import plots


@pytest.fixture(scope="module")
def df(tmp_path_factory):
    return A.load_runs(make_run(tmp_path_factory.mktemp("p") / "r", n_tasks=9, frames=False))


@pytest.mark.parametrize(
    "fn",
    [
        plots.reward_by_tier,
        plots.reward_vs_cost,
        plots.reward_vs_turns,
        plots.end_reasons,
        plots.grade_components,
    ],
)
def test_episode_charts(df, fn):
    chart = fn(df)
    assert isinstance(chart, alt.TopLevelMixin)
    spec = chart.to_dict()
    assert "data" in spec or "layer" in spec or "datasets" in spec


def test_reward_by_tier_accepts_by_tier_frames(df):
    chart = plots.reward_by_tier(A.by_tier(df), unscored_as_zero=True)
    assert "unscored as 0" in chart.to_dict()["title"]


def test_forest_and_offline_rendering(df):
    chart = plots.forest(A.compare(df, "baseline:tracer", "baseline:random"))
    png = plots.to_png(chart)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert plots.to_svg(plots.end_reasons(df)).lstrip().startswith("<svg")


def test_long_labels_are_cut_and_stay_apart(df):
    """A 100,000-character model name is cut to LABEL_CAP characters in a chart; two that begin alike stay
    two series (and the chart renders: Vega fitted the whole label, minutes per chart)."""
    import polars as pl

    long = "m" * 100_000
    names = {"baseline:tracer": long + "a", "baseline:random": long + "b"}
    renamed = df.with_columns(pl.col("model").replace(names))
    for chart in (plots.end_reasons(renamed), plots.reward_by_tier(renamed)):
        values = chart.to_dict()["data"]["values"] if "data" in chart.to_dict() else []
        shown = {v.get("model") or v.get("series") for v in values}
        assert len(shown) == 2 and all(len(s) <= plots.LABEL_CAP for s in shown), shown
    assert plots.label("short") == "short"
    assert plots.to_svg(plots.end_reasons(renamed)).lstrip().startswith("<svg")
