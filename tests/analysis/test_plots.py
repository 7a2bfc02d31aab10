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


def _encodings(spec: dict) -> list[dict]:
    """Every encoding of a chart spec, layers included."""
    found = [spec["encoding"]] if "encoding" in spec else []
    for layer in spec.get("layer", []):
        found += _encodings(layer)
    return found


@pytest.mark.parametrize(
    "fn", [plots.reward_by_tier, plots.reward_vs_cost, plots.reward_vs_turns, plots.grade_components]
)
def test_models_in_colours_that_tell_apart_named_whole_on_words_not_columns(df, fn):
    spec = fn(df).to_dict()
    colours = [e["color"] for e in _encodings(spec) if "color" in e]
    assert colours and all(c["scale"]["scheme"] == plots.MODEL_SCHEME for c in colours)
    assert all(c["legend"]["labelLimit"] == 0 and c["legend"]["orient"] == "bottom" for c in colours)
    titles = [e[a].get("title") for e in _encodings(spec) for a in ("x", "y") if isinstance(e.get(a), dict)]
    assert not any(t in ("cost_usd", "n_turns", "tokens") or "_" in str(t or "") for t in titles), titles


def test_axis_titles_are_words(df):
    x = plots.reward_vs_turns(df).to_dict()["encoding"]["x"]["title"]
    assert x == "mean turns per episode"
    assert (
        "cost (USD)" in plots.reward_vs(df, "cost_usd").to_dict()["title"]
        or "tokens" in plots.reward_vs(df, "cost_usd").to_dict()["title"]
    )


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
