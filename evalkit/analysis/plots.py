"""Altair charts of analysis frames. Each function takes a DataFrame (episodes from `load_runs`, or the
result of `by_tier` / `compare`) and returns a chart; aggregation happens in Polars first, so a chart embeds
a few rows, not a run. `to_png` / `to_svg` render a chart with no browser and no network (vl-convert), and
so does a chart shown in a notebook once this module is imported (`evalkit.analysis.offline`)."""

from __future__ import annotations

import hashlib

import altair as alt
import polars as pl

from evalkit.analysis import offline, stats
from evalkit.analysis.tables import NO_GRADES, ci_column, mde_text, method_note, p_column
from evalkit.records.columns import eager

offline.use()

TIER_SORT = [*stats.TIER_ORDER, "all"]
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1f1f1f", "#5d2e8c"]  # fmt: skip
"""Colours of models (and other series): Tableau's ten and two dark ones, twelve a reader tells apart (no two
closer than 25 in CIE Lab). Streamlit's own theme drew two models in two blues of one hue; a scheme of ten
gave the eleventh series the first one's colour."""
REASON_SCHEME = "set2"
"""Colours of end reasons: another palette, so that a reason is never read as a model."""
NAMES = {"cost_usd": "cost (USD)", "tokens": "tokens", "n_turns": "turns", "seconds": "seconds",
         "tool_calls": "tool calls"}  # fmt: skip
"""Axis titles of the columns a chart plots: words, not column names."""
PLOT_HEIGHT = 240
"""Height of a chart's plot area in pixels (axes, title and legend come on top of it)."""


def legend(title: str | None) -> alt.Legend:
    """A legend under the chart, one entry a line, names whole (up to LABEL_CAP characters, as `label`
    cuts them), every entry shown: at the right, long model names squeezed the plot and were cut at 160
    pixels."""
    return alt.Legend(
        title=title, orient="bottom", direction="vertical", labelLimit=0, symbolLimit=0, columns=1
    )


def colour(field: str, title: str | None, scheme: str | None = None, sort: list | None = None) -> alt.Color:
    """A colour per value of `field`: PALETTE, or a named Vega `scheme`."""
    scale = alt.Scale(scheme=scheme) if scheme else alt.Scale(range=PALETTE)
    return alt.Color(field, title=title, legend=legend(title), scale=scale, sort=sort)


LABEL_CAP = 60
"""Characters of a label (a model name, a task id) a chart shows: longer ones are cut (`label`)."""


def label(text: str) -> str:
    """`text` cut to LABEL_CAP characters, ending in a short hash of the whole so that two long labels with
    the same beginning stay two series. Vega measures a label's width to fit it, character by character:
    a 100,000-character model name took the PNG renderer minutes per chart."""
    if len(text) <= LABEL_CAP:
        return text
    return f"{text[: LABEL_CAP - 8]}…{hashlib.sha1(text.encode()).hexdigest()[:6]}"


def _data(df: pl.DataFrame) -> alt.Data:
    text = [c for c, t in df.schema.items() if t == pl.String]
    long = [c for c in text if (df[c].str.len_chars().max() or 0) > LABEL_CAP]
    if long:
        df = df.with_columns(pl.col(c).map_elements(label, return_dtype=pl.String) for c in long)
    return alt.Data(values=df.to_dicts())


def _tiers(df: pl.DataFrame) -> pl.DataFrame:
    df = eager(df, "this chart")
    return df if "ci_low" in df.columns else stats.by_tier(df)


def reward_domain(frame: pl.DataFrame, *cols: str) -> list[float]:
    """A reward axis: [0, 1], widened to whatever the rewards (and their intervals) reach, so that a reward
    of 7.5 or −3 is drawn, not clipped off the chart."""
    vals = [v for c in cols if c in frame.columns for v in frame[c].drop_nulls().drop_nans().to_list()]
    return [min([0.0, *vals]), max([1.0, *vals])]


def reward_by_tier(df: pl.DataFrame, unscored_as_zero: bool = False) -> alt.Chart:
    """Mean reward per tier with 95% CI bars, one colour per model (and surface/mode when several). A tier
    with too few tasks for a CI has its point alone; a model none of whose episodes was graded is written
    "no grades" at the foot of its tier, never drawn at 0."""
    t = _tiers(df)
    # A table from an older by_tier (or built by hand) may not say its method.
    method = method_note(t["ci_method"]) if "ci_method" in t.columns else "95% CI over tasks"
    y, lo, hi = ("mean_reward", "ci_low", "ci_high")
    if unscored_as_zero:
        y, lo, hi = ("mean_reward_unscored_as_0", "ci_low_unscored_as_0", "ci_high_unscored_as_0")
    many = t.select("surface", "mode").unique().height > 1
    label = pl.col("model") + (
        pl.lit(" · ") + pl.col("surface") + pl.lit("/") + pl.col("mode") if many else pl.lit("")
    )
    t = t.with_columns(label.alias("series"), pl.col("tier").fill_null("(none)"))
    t = t.with_columns(ci_column(t, lo, hi, y).alias("ci"))
    ungraded = (pl.col("scored") == 0) & (pl.col("no_reward") > 0)
    t = t.select(
        "series",
        "tier",
        "n",
        pl.col(y).alias("mean"),
        pl.col(lo).alias("lo"),
        pl.col(hi).alias("hi"),
        "ci",
        pl.when(ungraded).then(pl.lit(NO_GRADES)).alias("note"),
    )
    base = alt.Chart(_data(t)).encode(
        x=alt.X("tier:N", sort=TIER_SORT, title="tier", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("series:N"),
        color=colour("series:N", "model"),
    )
    title = (
        "Mean reward per tier (unscored as 0)"
        if unscored_as_zero
        else "Mean reward per tier (scored episodes)"
    )
    points = base.mark_point(filled=True, size=60).encode(
        y=alt.Y("mean:Q", title="mean reward", scale=alt.Scale(domain=reward_domain(t, "mean", "lo", "hi"))),
        tooltip=[
            "series:N",
            "tier:N",
            "n:Q",
            alt.Tooltip("mean:Q", format=".3f"),
            alt.Tooltip("ci:N", title="95% CI"),
        ],
    )
    bars = (
        base.transform_filter("isValid(datum.lo)")
        .mark_rule(strokeWidth=2)
        .encode(y=alt.Y("lo:Q", title="mean reward"), y2="hi:Q")
    )
    notes = (
        base.transform_filter("isValid(datum.note)")
        .mark_text(angle=270, align="left", dy=0, fontSize=11, color="#555")
        .encode(y=alt.datum(0.02), text="note:N")
    )
    chart = bars + points + notes
    title += f", {method} (none below {stats.MIN_TASKS} tasks)"
    return chart.properties(title=title, width=360, height=PLOT_HEIGHT)


def forest(cmp: pl.DataFrame) -> alt.Chart:
    """Paired differences (A − B) per group with their CIs, from `compare` or `compare_many`; a group with
    too few tasks for a CI has its point alone (its tooltip says so)."""
    c = eager(cmp, "forest").filter(pl.col("diff").is_not_null())
    c = c.with_columns(
        ci_column(c, "ci_low", "ci_high", "diff", signed=True).alias("ci"),
        p_column(c, "p_value").alias("p"),
        pl.Series(
            [mde_text(m, n) for m, n in zip(c["mde"], c["n_tasks"], strict=True)], dtype=pl.String
        ).alias("smallest detectable"),
    ).with_columns(
        (
            pl.col("a") + pl.lit(" − ") + pl.col("b") + pl.lit(" · ") + pl.col("group").fill_null("(none)")
        ).alias("row")
    )
    order = c["row"].to_list()
    shown = c.select("row", "diff", "ci_low", "ci_high", "ci", "n_tasks", "p", "smallest detectable")
    base = alt.Chart(_data(shown)).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    )
    zero = (
        alt.Chart(alt.Data(values=[{"x": 0}]))
        .mark_rule(color="#888", strokeDash=[4, 3])
        .encode(x=alt.X("x:Q", title="difference in mean reward (A − B)"))
    )
    rule = (
        base.transform_filter("isValid(datum.ci_low)")
        .mark_rule(strokeWidth=2)
        .encode(
            x=alt.X("ci_low:Q", title="difference in mean reward (A − B)", axis=alt.Axis(tickCount=6)),
            x2="ci_high:Q",
        )
    )
    pt = base.mark_point(filled=True, size=70, color="black").encode(
        x=alt.X("diff:Q", title="difference in mean reward (A − B)"),
        tooltip=[
            "row:N",
            alt.Tooltip("diff:Q", format="+.3f"),
            alt.Tooltip("ci:N", title="95% CI"),
            alt.Tooltip("n_tasks:Q", title="tasks"),
            "p:N",
            "smallest detectable:N",
        ],
    )
    method = method_note(c["ci_method"]) if "ci_method" in c.columns else "95% CI"
    title = f"Paired difference per task, {method} (none below {stats.MIN_TASKS} tasks)"
    # Never under 120 px: one comparison in 24 px was a line with a dot, its axis crowded.
    return (zero + rule + pt).properties(title=title, width=360, height=max(120, 24 * len(order)))


def reward_vs(df: pl.DataFrame, x: str = "cost_usd") -> alt.Chart:
    """Mean reward against mean `x` (cost_usd, tokens, n_turns, seconds) per model and tier."""
    df = eager(df, "reward_vs")
    col = x
    if x == "cost_usd" and df["cost_usd"].drop_nulls().len() == 0:
        col = "tokens"  # offline agents and imported runs often carry no price; tokens are the next best cost
    # Task-weighted like every reward mean: each task's scored episodes become one value first.
    per_task = (
        stats.task_column(df)
        .with_columns(pl.col("tier").fill_null("(none)"))
        .group_by("model", "tier", stats.TASK)
        .agg(
            pl.col("reward").filter(pl.col("scored") & ~pl.col("reward").is_nan()).mean().alias("r"),
            pl.col(col).cast(pl.Float64).sum().alias("xs"),
            pl.len().alias("n"),
        )
    )
    agg = (
        per_task.group_by("model", "tier")
        .agg(
            pl.col("r").mean().alias("mean_reward"),
            (pl.col("xs").sum() / pl.col("n").sum()).alias("x"),
            pl.col("n").sum().alias("n"),
        )  # fmt: skip
        .sort("model", "tier")
    )
    name = NAMES.get(col, col.replace("_", " "))
    return (
        alt.Chart(_data(agg))
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("x:Q", title=f"mean {name} per episode"),
            y=alt.Y(
                "mean_reward:Q",
                title="mean reward (scored, task-weighted)",
                scale=alt.Scale(domain=reward_domain(agg, "mean_reward")),
            ),
            color=colour("model:N", "model"),
            shape=alt.Shape("tier:N", sort=TIER_SORT, legend=legend("tier")),
            tooltip=[
                "model:N",
                "tier:N",
                "n:Q",
                alt.Tooltip("x:Q", format=".3f", title=name),
                alt.Tooltip("mean_reward:Q", format=".3f", title="mean reward"),
            ],
        )
        .properties(title=f"Reward vs {name} (per model × tier)", width=320, height=PLOT_HEIGHT)
    )


def reward_vs_cost(df: pl.DataFrame) -> alt.Chart:
    return reward_vs(df, "cost_usd")


def reward_vs_turns(df: pl.DataFrame) -> alt.Chart:
    return reward_vs(df, "n_turns")


def end_reasons(df: pl.DataFrame) -> alt.Chart:
    """Share of episodes per end reason (errors split by error class), one bar per model."""
    d = (
        eager(df, "end_reasons")
        .with_columns(
            pl.when(pl.col("error_class").is_not_null())
            .then(pl.lit("error: ") + pl.col("error_class"))
            .otherwise(pl.col("end_reason").fill_null("?"))
            .alias("reason")
        )
        .group_by("model", "reason")
        .len()
        .sort("model", "reason")
    )
    return (
        alt.Chart(_data(d))
        .mark_bar()
        .encode(
            y=alt.Y("model:N", title="model", axis=alt.Axis(labelLimit=0)),
            x=alt.X(
                "len:Q",
                stack="normalize",
                title="share of episodes",
                axis=alt.Axis(format=".0%", tickCount=5),
            ),
            color=colour("reason:N", "end reason", REASON_SCHEME),
            tooltip=["model:N", "reason:N", alt.Tooltip("len:Q", title="episodes")],
        )
        # A band of 28 px per model, never under 120 px in all: a fixed total height with a legend and
        # title left the bars no room, and the chart collapsed in Streamlit ("Infinite extent for field x").
        .properties(title="How episodes ended", width=360, height=max(120, 28 * d["model"].n_unique()))
    )


def grade_components(df: pl.DataFrame) -> alt.Chart:
    """Mean of each grade component (structure, visual, coverage, order, background, ...) per model."""
    g = (
        stats.grade_components(df)
        .group_by("model", "component")
        .agg(pl.col("value").mean())
        .sort("model", "component")
    )
    return (
        alt.Chart(_data(g))
        .mark_bar()
        .encode(
            x=alt.X("component:N", title="grade component", axis=alt.Axis(labelAngle=0)),
            xOffset="model:N",
            y=alt.Y("value:Q", title="mean score", scale=alt.Scale(domain=[0, 1])),
            color=colour("model:N", "model"),
            tooltip=["model:N", "component:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(title="Grade components (scored episodes)", width=360, height=PLOT_HEIGHT)
    )


def to_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    # start-up: vl-convert only to draw a chart as a picture
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_json(), scale=scale)


def to_svg(chart: alt.TopLevelMixin) -> str:
    # start-up (as above)
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_json())


def frontier_table(df: pl.DataFrame) -> pl.DataFrame:
    """Per model: task-weighted mean reward with its 95% CI over tasks (`by_tier`, tier "all", over every
    surface and mode), mean cost per episode with a 95% t interval over the tasks' mean costs, and
    `on_frontier`: no other model has at least its reward for at most its cost (and better on one)."""
    df = eager(df, "frontier_table")
    t = stats.by_tier(df, by=["model"]).filter(pl.col("tier") == "all")
    per_task = (
        stats.task_column(df)
        .filter(pl.col("cost_usd").is_not_null())
        .group_by("model", stats.TASK)
        .agg(pl.col("cost_usd").mean().alias("c"))
    )
    rows = []
    for (model,), g in per_task.group_by("model", maintain_order=True):
        c = g["c"].to_numpy()
        mean = float(c.mean())
        half = None
        if len(c) >= stats.MIN_TASKS:
            half = stats._t_quantile(stats.Z_975, len(c) - 1) * float(c.std(ddof=1)) / len(c) ** 0.5
        rows.append((model, mean, None if half is None else max(0.0, mean - half),
                     None if half is None else mean + half))  # fmt: skip
    cost = pl.DataFrame(rows, schema={"model": pl.Utf8, "cost": pl.Float64, "cost_low": pl.Float64,
                                      "cost_high": pl.Float64}, orient="row")  # fmt: skip
    cols = ["model", "n_tasks", "mean_reward", "ci_low", "ci_high", "ci_method"]
    out = t.select(cols).join(cost, on="model", how="inner")
    out = out.filter(pl.col("mean_reward").is_not_null())
    pts = list(zip(out["model"], out["mean_reward"], out["cost"], strict=True))

    def dominated(m: str, r: float, c: float) -> bool:
        return any(r2 >= r and c2 <= c and (r2 > r or c2 < c) for m2, r2, c2 in pts if m2 != m)

    front = [not dominated(*p) for p in pts]
    return out.with_columns(pl.Series("on_frontier", front, dtype=pl.Boolean)).sort("cost")


def cost_frontier(df: pl.DataFrame) -> alt.Chart:
    """Reward against cost per model, each with its 95% interval (reward: over tasks, task-weighted; cost:
    mean per episode, over tasks), and the Pareto frontier (models no other beats on both) drawn as a line.
    Models without a price for any episode are left out (an unknown cost is not a small one)."""
    t = frontier_table(df)
    t = t.with_columns(
        ci_column(t, "ci_low", "ci_high", "mean_reward").alias("reward_ci"),
        pl.when(pl.col("on_frontier"))
        .then(pl.lit("on the frontier"))
        .otherwise(pl.lit("dominated"))
        .alias("frontier"),
    )
    base = alt.Chart(_data(t)).encode(
        x=alt.X("cost:Q", title="mean cost (USD) per episode"),
        y=alt.Y(
            "mean_reward:Q",
            title="mean reward (task-weighted)",
            scale=alt.Scale(domain=reward_domain(t, "mean_reward", "ci_low", "ci_high")),
        ),  # fmt: skip
        color=colour("model:N", "model"),
    )
    points = base.mark_point(filled=True, size=90).encode(
        shape=alt.Shape("frontier:N", legend=legend("frontier")),
        tooltip=["model:N", "n_tasks:Q", alt.Tooltip("mean_reward:Q", format=".3f"),
                 alt.Tooltip("reward_ci:N", title="95% CI"), alt.Tooltip("cost:Q", format=".4f"),
                 "frontier:N"],
    )  # fmt: skip
    ybars = base.transform_filter("isValid(datum.ci_low)").mark_rule().encode(y="ci_low:Q", y2="ci_high:Q")
    xbars = (
        base.transform_filter("isValid(datum.cost_low)").mark_rule().encode(x="cost_low:Q", x2="cost_high:Q")
    )
    line = (
        alt.Chart(_data(t.filter(pl.col("on_frontier"))))
        .mark_line(color="#888", strokeDash=[4, 3])
        .encode(x="cost:Q", y="mean_reward:Q", order="cost:Q")
    )
    return (line + ybars + xbars + points).properties(
        title=f"Reward vs cost per model, {method_note(t['ci_method'])} (none below {stats.MIN_TASKS} "
        "tasks); dashed: the frontier",
        width=360,
        height=260,
    )
