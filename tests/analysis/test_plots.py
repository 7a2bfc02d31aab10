"""Each chart takes a frame, returns an Altair chart, and renders offline."""

from __future__ import annotations

import altair as alt
import polars as pl
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
    assert colours and all(c["scale"]["range"] == plots.PALETTE for c in colours)
    assert all(c["legend"]["labelLimit"] == 0 and c["legend"]["orient"] == "bottom" for c in colours)
    titles = [e[a].get("title") for e in _encodings(spec) for a in ("x", "y") if isinstance(e.get(a), dict)]
    assert not any(t in ("cost_usd", "n_turns", "tokens") or "_" in str(t or "") for t in titles), titles
    fields = [
        e[a] for e in _encodings(spec) for a in ("x", "y") if isinstance(e.get(a), dict) and "field" in e[a]
    ]
    assert all(f.get("title") for f in fields), fields  # every axis drawn from a column says what it measures


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a #rrggbb colour, computed here independently of any library."""
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in rgb)
    xyz = ((r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047, r * 0.2126 + g * 0.7152 + b * 0.0722,
           (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883)  # fmt: skip
    fx, fy, fz = (v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_the_palette_keeps_twelve_series_apart():
    import itertools
    import math

    assert len(set(plots.PALETTE)) >= 12
    closest = min(math.dist(_lab(a), _lab(b)) for a, b in itertools.combinations(plots.PALETTE, 2))
    assert closest >= 20, closest


def test_plot_areas_are_tall_enough(df):
    """A plot area under 120 px is a line with dots on it (one model's end reasons were 28 px)."""
    one = df.filter(pl.col("model") == df["model"][0])
    for chart in (plots.reward_by_tier(df), plots.end_reasons(one), plots.grade_components(df),
                  plots.reward_vs_turns(df)):  # fmt: skip
        assert chart.to_dict()["height"] >= 120


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
