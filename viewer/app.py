"""evalkit trace viewer: `streamlit run viewer/app.py -- RUN…` (or `evalkit view RUN…`).

Five views over one or more run directories: the episode table (filters, search, sort, click to open), one
episode step by step (`viewer.episode`), two episodes of a task side by side (`viewer.ab`), why models fail
(`viewer.why`: the scanners' rates, what separates two models, the episodes a scanner fired on, opened at
its step and labelled there) and the summary (`viewer.summary`). The URL holds view, run, episode and
step. A run still being written is polled (`viewer.live`).

It reads runs only through `evalkit.records.rundir` / `evalkit.analysis` (via `evalkit.view.support`), reads
only files inside the offered runs, and shows trace content as text: nothing from a trace reaches Markdown
unescaped or HTML at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # `streamlit run viewer/app.py` puts viewer/ on the path, not the checkout
    sys.path.insert(0, _ROOT)

import polars as pl  # noqa: E402
import streamlit as st  # noqa: E402

from evalkit.view import streamlit_main  # noqa: E402
from evalkit.view import support as vs  # noqa: E402
from viewer import live  # noqa: E402
from viewer.common import S, enlarge_support, malformed, shared, table, text_index  # noqa: E402
from viewer.table import table_first, view_table  # noqa: E402

# The Episode and A-vs-B views are imported when drawn (and, once the first page is out, in a thread: see
# the end of `main`): the first page of a run, the Episodes table, is not kept waiting for them.
streamlit_main.no_use_warning()


def _script_args() -> list[str]:
    # Under AppTest sys.argv is pytest's; only `streamlit run this-file -- ARGS` passes arguments for us.
    if sys.argv and Path(sys.argv[0]).resolve() == Path(__file__).resolve():
        return sys.argv[1:]
    return []


def _seed_from_link(runs: list[str], labels: dict[str, str]) -> None:
    """First run of a session: take view, episode and step from the URL."""
    if S.get("_seeded"):
        return
    S._seeded = True
    link = vs.parse_link(st.query_params.to_dict(), runs, labels)
    if link.view:
        S.view = link.view
    if link.run and link.episode:
        S.ep = (link.run, link.episode)
        S.step = link.step
    if link.brun and link.bepisode:
        S.ab_pin = (link.run, link.episode, link.brun, link.bepisode)
        S.ab_step = link.step or 0
        if link.step is not None:
            S._ab_linked_step = link.step  # the linked step, not the first with pictures


def _sync_link(labels: dict[str, str]) -> None:
    ep = S.get("ep")
    link = vs.DeepLink(view=S.get("view"), run=ep[0] if ep else None, episode=ep[1] if ep else None)
    if S.get("view") == "Episode":
        link.step = S.get("step")
    if S.get("view") == "A vs B" and S.get("_ab_pair"):
        ra, ka, rb, kb = S._ab_pair
        link.run, link.episode, link.brun, link.bepisode, link.step = ra, ka, rb, kb, S.get("ab_step")
    want = vs.make_link(link, labels)
    if want != st.query_params.to_dict():
        st.query_params.from_dict(want)


TITLE = "evalkit viewer"
RADIO_PX = 40  # the views' radio's height: a page's first run keeps its room (see `main`)

SIDEBAR_KEYS = ("runs_sel", "f_reward", "f_unscored", "f_search", *(f"f_{c}" for c in vs.FILTER_COLUMNS))


def keep_sidebar() -> None:
    """The Episode view draws no sidebar (its room goes to the step); the filters and runs chosen are kept
    for the views that draw it again: Streamlit forgets a widget's value in a run that does not draw it,
    unless the value was set by the script."""
    for k in SIDEBAR_KEYS:
        if k in S:
            S[k] = S[k]


def _painted() -> None:
    S._painted = True


def filters(df: pl.DataFrame, drawn: tuple) -> vs.Filters:
    """The filters the sidebar's widgets hold, read from their state before they are drawn (`sidebar`
    draws them after the view, so that the page's table or chart is not kept waiting by a dozen widgets
    the browser must build first); values no longer offered by the runs are dropped."""
    f = vs.Filters()
    # The choices change only with the runs: computed once per trace change, not on every step.
    choices = shared(("options", drawn), lambda: {c: vs.options(df, c) for c in vs.FILTER_COLUMNS})
    for col in vs.FILTER_COLUMNS:
        opts = choices[col]
        if len(opts) > 1 or S.get(f"f_{col}"):
            S[f"f_{col}"] = [v for v in S.get(f"f_{col}", []) if v in opts]
            f.include[col] = list(S[f"f_{col}"])
    lo, hi = shared(("reward_range", drawn), lambda: _reward_range(df))
    if lo is not None:
        rng = S.get("f_reward")
        if not (isinstance(rng, tuple | list) and len(rng) == 2 and lo <= min(rng) <= max(rng) <= hi):
            S.f_reward = (lo, hi)
        if tuple(S.f_reward) != (lo, hi):
            f.reward = (float(S.f_reward[0]), float(S.f_reward[1]))
            S.setdefault("f_unscored", False)
            f.unscored = bool(S.f_unscored)
    f.search = str(S.get("f_search") or "").strip()
    return f


def sidebar(
    df: pl.DataFrame, drawn: tuple, f: vs.Filters, runs: list[str], labels: dict[str, str], problems: list
) -> None:
    """The runs, what is wrong with them, and the filter widgets (`filters` read their values)."""
    choices = shared(("options", drawn), lambda: {c: vs.options(df, c) for c in vs.FILTER_COLUMNS})
    with st.sidebar:
        st.title(TITLE)
        st.multiselect("Runs", runs, format_func=lambda r: labels[r], key="runs_sel")
        for r, msg in problems:
            st.warning(vs.md_escape(f"{labels[r]}: {msg}", 300))
        st.header("Filters")
        for col, label in vs.FILTER_COLUMNS.items():
            if col in f.include:
                st.multiselect(label, choices[col], key=f"f_{col}", format_func=vs.clip)
        lo, hi = shared(("reward_range", drawn), lambda: _reward_range(df))
        if lo is not None:
            st.slider("Reward", lo, hi, key="f_reward")
            if f.reward is not None:
                st.checkbox("Keep unscored episodes", key="f_unscored")
        st.text_input(
            "Search what the model said and did",
            key="f_search",
            help="Whole words and phrases, any case: `round 2` finds those words in a row; quote phrases to "
            'ask for several: `"round 2" "red circle"`. Searches model text, reasoning and tool calls.',
        )


def _reward_range(df: pl.DataFrame) -> tuple[float | None, float | None]:
    """The reward slider's ends: rewards are usually in [0, 1], and a fixed scale reads the same across runs;
    wider data widens it. (None, None) when no episode has a reward."""
    rewards = (
        df.get_column("reward").drop_nulls() if "reward" in df.columns else pl.Series([], dtype=pl.Float64)
    )
    if not rewards.len():
        return None, None
    return min(0.0, float(rewards.min())), max(1.0, float(rewards.max()))


def search(chosen: list[str], query: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(episodes that match with their first hit, matching steps with a snippet) over the chosen runs."""
    index = vs.concat_tables([text_index(r) for r in chosen]) if chosen else None
    if index is None or index.is_empty():
        S._found = None
        hits = pl.DataFrame(
            schema={"run": pl.String, "key": pl.String, "first_hit": pl.Int32, "hits": pl.UInt32}
        )
        steps = pl.DataFrame(
            schema={"run": pl.String, "key": pl.String, "step": pl.Int32, "snippet": pl.String}
        )
        return hits, steps
    found = vs.text_search.matching_steps(index, query)
    S._found = found
    return vs.text_search.search(index, query), vs.text_search.hit_rows(index, found, query)


def main() -> None:
    st.set_page_config(page_title="evalkit viewer", layout="wide")
    runs = [str(p) for p in vs.discover_runs(_script_args())]
    if not runs:
        st.title("evalkit viewer")
        st.info(
            "No runs. Pass run directories (`evalkit view RUN…`), set EVALKIT_RUNS, or put runs in ./runs/."
        )
        return
    labels = vs.run_labels(runs)
    _seed_from_link(runs, labels)
    keep_sidebar()
    if S.get("view") not in vs.VIEWS:
        S.view = vs.VIEWS[0]
    if "runs_sel" not in S:
        S.runs_sel = list(runs)
    episode_view = S.view == "Episode"
    chosen = [r for r in S.runs_sel if r in runs]
    sigs = live.drawn(chosen)
    tables, problems = [], []
    for r in chosen:
        t = table(r, sigs[r])
        if isinstance(t, str):
            problems.append((r, t))
        else:
            tables.append(t)
        if not episode_view and (note := malformed(r, sigs[r])):
            problems.append((r, note))
        if not episode_view and not isinstance(t, str):  # a run lacking planned or scored episodes says so
            said = shared(("incomplete", r, sigs[r]), lambda t=t: vs.incomplete_lines(t))
            problems += [(r, line.split(": ", 1)[-1]) for line in said]
    drawn = (tuple(sigs.items()), tuple(problems))
    df_all = shared(
        ("episodes", drawn, tuple(labels.items())), lambda: vs.with_labels(vs.concat_tables(tables), labels)
    )
    # The view's choice is on top, drawn last: what the view shows is not kept waiting for it. A page's first
    # run on the Episodes view draws the table and no Markdown (the radio's options, titles and captions are
    # Markdown): the browser builds its Markdown renderer on the first such element, ~25-120 ms of its main
    # thread before the table's rows were painted (Chrome's CPU profile of the page); they come with the
    # sidebar's widgets, once the rows are on screen.
    views = st.container()
    wait = False  # a page's first run of the Episodes view: the table alone, no Markdown
    if episode_view:  # the Episode view reads one row of the table: no filter, search or sidebar to draw
        from viewer.episode import view_episode

        enlarge_support()
        view_episode(df_all, labels)
    else:
        f = filters(df_all, drawn)
        hits = steps = None
        if f.search:
            hits, steps = search(chosen, f.search)
        else:
            S._found = None
        df = vs.apply_filters(df_all, f, hits)
        # What the other views' results are computed from (the Episodes table is keyed by what made `df`)
        fingerprint = (tuple(sigs.items()), vs.fingerprint(df)) if S.view != "Episodes" else None
        wait = S.view == "Episodes" and table_first() and not S.get("_painted")
        if S.view == "Episodes":
            live.updates(chosen, labels)
            names = (drawn, tuple(labels.items()), repr(f))
            view_table(df, df_all, hits, steps, on_painted=_painted if wait else None, names=names)
        elif S.view == "A vs B":
            from viewer.ab import view_ab

            enlarge_support()
            view_ab(df, df_all, labels, fingerprint)
        elif S.view == "Why":
            from viewer.why import view_why

            view_why(df, df_all, chosen, drawn, fingerprint)
        else:
            # Imported here: its charts' library (Altair, with jsonschema's grammars) took seconds to import,
            # and was most of the first open of a run, on any view (py-spy, benchmarks/viewer.py).
            from viewer.summary import view_summary

            live.updates(chosen, labels)
            view_summary(df, fingerprint, df_all)
        if wait:  # the sidebar is there (nothing moves when its widgets come), its title as plain text
            st.sidebar.text(TITLE)
        else:
            sidebar(df_all, drawn, f, runs, labels, problems)
    if wait:  # the views' radio comes with the sidebar's widgets; its room is kept
        views.container(height=RADIO_PX, border=False)
    else:
        views.radio("View", vs.VIEWS, key="view", horizontal=True, label_visibility="collapsed")
    _sync_link(labels)
    streamlit_main.warm_later()


main()
