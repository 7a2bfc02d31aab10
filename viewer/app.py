"""evalkit trace viewer: `streamlit run viewer/app.py -- RUN…` (or `evalkit view RUN…`).

Four views over one or more run directories: the episode table (filters, text search, sort, click to open),
one episode step by step (frame next to the target and final render, text, reasoning, tool calls), two
episodes of a task side by side (A vs B), and the analysis summary. The URL holds view, run, episode and step.

It reads runs only through `evalkit.traces` / `evalkit.analysis` (via `evalkit.viewer_support`), reads only
files inside the offered runs, and shows trace content as text: nothing from a trace reaches Markdown
unescaped or HTML at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import evalkit  # noqa: F401
except ImportError:  # `streamlit run viewer/app.py` from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polars as pl
import streamlit as st

from evalkit import analysis, plans, traces
from evalkit import viewer_support as vs
from evalkit.marks import marked
from evalkit.types import CallRecord, EpisodeRecord

# ---------------------------------------------------------------------------------------------- caches
# Everything keyed on the trace's (size, mtime_ns): an appended episode invalidates, nothing else re-reads.
# cache_resource, not cache_data: a 10,000-row frame or a record with a 10 MB field is shared, not
# re-pickled on every rerun.


@st.cache_resource(max_entries=64, show_spinner="Loading episode index…")
def _table(run: str, signature: tuple[int, int]) -> pl.DataFrame | str:
    try:
        return vs.episode_table(run)
    except (OSError, ValueError, vs.TraceError) as e:
        return f"{type(e).__name__}: {e}"


@st.cache_resource(max_entries=64, show_spinner=False)
def _malformed(run: str, signature: tuple[int, int]) -> str | None:
    try:
        bad = analysis.malformed([run])
    except (OSError, ValueError, vs.TraceError):
        return None
    return f"{bad.height} malformed record(s) left out (first: {bad['problem'][0]})" if bad.height else None


@st.cache_resource(max_entries=64, show_spinner="Indexing model text…")
def _text_index(run: str, signature: tuple[int, int]) -> pl.DataFrame:
    try:
        return vs.text_index(run)
    except (OSError, ValueError, vs.TraceError):
        return pl.DataFrame(schema={"run": pl.String, "key": pl.String, "text": pl.String})


@st.cache_resource(max_entries=48, show_spinner=False)
def _record(run: str, signature: tuple[int, int], key: str, offset: int | None) -> EpisodeRecord | str:
    try:
        return vs.open_record(run, key, offset, signature)
    except (OSError, ValueError, TypeError, vs.TraceError) as e:
        return f"{type(e).__name__}: {e}"


# ----------------------------------------------------------------------------------------------- state


def _script_args() -> list[str]:
    # Under AppTest sys.argv is pytest's; only `streamlit run this-file -- ARGS` passes arguments for us.
    if sys.argv and Path(sys.argv[0]).resolve() == Path(__file__).resolve():
        return sys.argv[1:]
    return []


S = st.session_state


def _open(run: str, key: str, step: int | None = None, view: str = "Episode") -> None:
    S.ep = (run, key)
    S.step = step
    S.view = view


def _on_table_select() -> None:
    rows = S.table.selection.rows if "table" in S else []
    shown = S.get("_shown", [])
    if rows and rows[0] < len(shown):
        _open(*shown[rows[0]])


def _on_open_row() -> None:
    shown = S.get("_shown", [])
    i = int(S.get("open_row") or 1) - 1
    if 0 <= i < len(shown):
        _open(*shown[i])


def _move(name: str, delta: int, hi: int) -> None:
    S[name] = min(max(int(S.get(name) or 0) + delta, 0), hi)


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


# --------------------------------------------------------------------------------------------- drawing


def _no_reward(error_class: object) -> str:
    """What a missing reward means: unscored (the infrastructure failed), or none given (never graded)."""
    return "unscored" if error_class else "no reward"


def _num(x: object, fmt: str, missing: str = "—") -> str:
    """A number from a trace, formatted; whatever else a hostile or foreign trace put there, as short text."""
    if x is None:
        return missing
    try:
        return format(x, fmt)
    except (TypeError, ValueError):
        return str(x)[:40]


def show_text(label: str, text: str, key: str, code: bool = False) -> None:
    """A trace field as text; beyond TEXT_LIMIT characters, one page at a time plus a download of it all."""
    text = text if isinstance(text, str) else vs.as_json(text)
    if label:
        st.caption(label)
    if len(text) <= vs.TEXT_LIMIT:
        if code:
            st.code(text, language=None, wrap_lines=True)
        else:
            st.text(text)
        return
    chunk, pages = vs.page_of(text, int(S.get(f"page_{key}") or 1) - 1)
    st.warning(f"Long field: {len(text):,} characters, shown {vs.TEXT_LIMIT:,} at a time.")
    c1, c2 = st.columns([1, 1])
    c1.number_input("Part", 1, pages, key=f"page_{key}")
    c2.download_button(
        "Download the whole field",
        data=lambda: text,
        file_name=f"{key}.txt",
        mime="text/plain",
        key=f"dl_{key}",
        on_click="ignore",
    )
    st.code(chunk, language=None, wrap_lines=True)


def show_image(run: str, rel: str | None, caption: str, rec: EpisodeRecord | None = None, turn=None) -> None:
    """An image from inside the run, or a note saying why there is none; files outside the run are refused.
    With a turn, its computer-use actions are drawn where they landed."""
    if not rel:
        st.caption(f"{caption}: none")
        return
    path = vs.safe_image(run, rel)
    if path is None:
        st.caption(f"{caption}: missing or outside the run")
        st.code(str(rel)[:300], language=None)
        return
    try:
        data = path.read_bytes()
        shown = marked(data, turn.calls, rec.coordinates) if turn is not None and rec is not None else None
        st.image(shown or data, caption=caption + (" · actions marked" if shown else ""), width="stretch")
    except Exception as e:  # a corrupt or non-image file inside the run must not take the page down
        st.caption(f"{caption}: unreadable image ({type(e).__name__})")


def show_call(run: str, call: CallRecord, key: str, ownloop: bool) -> None:
    status = "ok" if call.ok else "error"
    name = vs.md_escape(call.name or "?", 80)
    with st.container(border=True):
        st.markdown(
            f"**{'Action' if ownloop else 'Tool call'}** {name} — {status}"
            + (" (arguments did not parse)" if call.parse_error else "")
        )
        show_text(
            "Arguments" if not ownloop else "Parsed action", vs.as_json(call.args), f"{key}_args", code=True
        )
        if call.result:
            show_text("Result", call.result, f"{key}_res", code=True)
        for j, img in enumerate(call.images or []):
            show_image(run, img, f"Returned image {j + 1}")


def _fields(box, rows: list[dict[str, str]], name: str, empty: str) -> None:
    """A grade or usage table (cells already clipped by `vs.field_rows`)."""
    if rows:
        box.dataframe(
            pl.DataFrame(rows, schema={"name": pl.String, "value": pl.String}).rename({"name": name}),
            hide_index=True,
        )
    else:
        box.caption(empty)


def show_header(rec: EpisodeRecord, label: str) -> None:
    c = vs.clip
    st.text(
        f"{c(rec.model)} · {c(rec.env or '', 60)} {c(rec.surface, 60)}/{c(rec.mode, 60)} · "
        f"{c(rec.task_id)} · tier {c(rec.tier, 40)} · repeat {_num(rec.repeat, 'd')} · {c(label)}"
    )
    cols = st.columns(5)
    cols[0].metric("Reward", _num(rec.reward, ".3f", _no_reward(rec.error_class)))
    cols[1].metric("Turns", _num(rec.n_turns or len(rec.turns), "d"))
    cols[2].metric("Tool calls", _num(rec.tool_calls, "d"))
    cols[3].metric("Tool errors", _num(rec.tool_errors, "d"))
    cols[4].metric("Cost", "$" + _num(rec.cost_usd, ".4f") if rec.cost_usd is not None else "—")
    st.text(
        f"End reason: {c(rec.end_reason or '—', 80)}"
        + (f" · error class: {c(rec.error_class, 80)}" if rec.error_class else "")
        + f" · {_num(rec.seconds, '.1f')} s (model {_num(rec.model_seconds, '.1f')} s, "
        f"env {_num(rec.env_seconds, '.1f')} s)"
    )
    sid = vs.short_id(rec.key)
    if rec.error_class or rec.error:
        st.error("The episode ended with an error" + (" and is unscored." if rec.error_class else "."))
        show_text("", str(rec.error or ""), f"err_{sid}", code=True)
    with st.expander("Grade, usage, details"):
        c1, c2 = st.columns(2)
        grade, long_grade = vs.field_rows(rec.grade)
        usage, long_usage = vs.field_rows(rec.usage)
        _fields(c1, grade, "component", "no grade")
        _fields(c2, usage, "usage", "no usage")
        # A value cut in the table above is there in full, a page at a time.
        for i, (name, text) in enumerate(long_grade):
            show_text(f"Grade component {vs.md_escape(name, 60)}, whole value", text, f"grade{i}_{sid}", True)
        for i, (name, text) in enumerate(long_usage):
            show_text(f"Usage {vs.md_escape(name, 60)}, whole value", text, f"usage{i}_{sid}", True)
        st.text(
            f"key {c(rec.key, 80)} · started {c(rec.started, 60)} · "
            f"parse errors {_num(rec.parse_errors, 'd')} · auto submitted {c(rec.auto_submitted, 20)} · "
            f"prompt {c(rec.prompt_version, 80)}"
        )
        if rec.traceback:
            show_text("Traceback", rec.traceback, f"tb_{sid}", code=True)
        if rec.info:
            show_text("Info", vs.as_json(rec.info), f"info_{sid}", code=True)


def show_step(run: str, rec: EpisodeRecord, step: vs.Step, key: str, pictures: bool = True) -> None:
    """One step: the frame beside the target and final render, then what the model said and did."""
    ownloop = vs.is_ownloop(rec)
    caption = f"{'Screenshot' if ownloop else 'Frame'} at step {step.index}"
    if pictures:
        c1, c2, c3 = st.columns(3)
        with c1:
            show_image(run, step.frame, caption, rec, step.turn)
        with c2:
            show_image(run, rec.target, "Target")
        with c3:
            show_image(run, rec.render, "Final render")
    else:
        show_image(run, step.frame, caption, rec, step.turn)
    t = step.turn
    if t is None:
        st.caption("Start of the episode: no model output yet.")
        return
    st.caption(
        f"Turn {vs.md_escape(t.turn, 20)} · stop {vs.md_escape(t.stop or '—', 60)} · "
        f"model {_num(t.model_s, '.2f')} s · env {_num(t.env_s, '.2f')} s"
    )
    if t.text:
        show_text("Raw model output" if ownloop else "Model text", t.text, f"{key}_text")
    if t.reasoning:
        with st.expander(f"Reasoning ({len(t.reasoning):,} characters)"):
            show_text("", t.reasoning, f"{key}_reason")
    for j, call in enumerate(t.calls):
        show_call(run, call, f"{key}_c{j}", ownloop)
    if not t.calls:
        st.caption("No tool call in this turn.")


def _text_table(rows: list[dict]) -> pl.DataFrame:
    """Rows of a plan table with every cell as clipped text: trace content is never trusted to be typed."""
    cols = list(rows[0]) if rows else []
    return pl.DataFrame(
        {c: [vs.clip(r.get(c)) if r.get(c) is not None else "" for r in rows] for c in cols},
        schema={c: pl.String for c in cols},
    )


def show_plans(rec: EpisodeRecord, turn: int | None, key: str) -> None:
    """The plans sent in this turn (berth's check_plan / submit_plan), each as a table of its entries with
    the end, waiting and problems the environment reported, then its violations."""
    for i, p in enumerate(rec.plans, 1):
        if turn is None or p.turn != turn:
            continue
        head = plans.plan_summary(rec)[i - 1]
        verdict = (
            "feasible" if head["feasible"] else ("infeasible" if head["feasible"] is False else "no verdict")
        )
        st.markdown(
            f"**Plan {i}** ({vs.md_escape(p.tool, 60)}): {verdict}, objective "
            f"{vs.md_escape(head['objective'] if head['objective'] is not None else '—', 40)}, "
            f"{vs.md_escape(head['violations'] or 0, 20)} violation(s)"
            + (f", reward {_num(head['reward'], '.3f')}" if head["reward"] is not None else "")
        )
        if head["answer"]:
            show_text("Answer", head["answer"], f"{key}_plan{i}_answer", code=True)
        rows = plans.plan_rows(p)
        if rows:
            st.dataframe(_text_table(rows), hide_index=True, key=f"{key}_plan{i}")
        bad = plans.violation_rows(p)
        if bad:
            st.dataframe(_text_table(bad), hide_index=True, key=f"{key}_plan{i}_violations")


def step_controls(name: str, steps: list[int], label: str = "Step") -> int:
    """A slider with previous / next buttons over step positions; returns the position."""
    hi = len(steps) - 1
    S[name] = min(max(int(S.get(name) or 0), 0), hi)
    c1, c2, c3 = st.columns([1.4, 1.1, 7])
    c1.button("◀ Previous", key=f"{name}_prev", on_click=_move, args=(name, -1, hi), disabled=S[name] <= 0)
    c2.button("Next ▶", key=f"{name}_next", on_click=_move, args=(name, 1, hi), disabled=S[name] >= hi)
    if hi > 0:
        c3.slider(label, 0, hi, key=name, format="%d")
    st.text(f"{label} {steps[S[name]]} of {steps[-1]}")
    return S[name]


# ----------------------------------------------------------------------------------------------- views


def view_table(df: pl.DataFrame, total: int) -> None:
    st.text(f"{df.height:,} of {total:,} episodes")
    cols = [c for c in vs.DISPLAY_COLUMNS if c in df.columns]
    c1, c2 = st.columns([3, 1])
    by = c1.selectbox("Sort by", ["(trace order)", *cols], key="sort_by")
    desc = c2.toggle("Descending", key="sort_desc")
    df = vs.sort_table(df, None if by == "(trace order)" else by, desc).with_row_index("#", offset=1)
    S._shown = list(zip(df.get_column("run").to_list(), df.get_column("key").to_list(), strict=True))
    # Repeated strings go as Arrow dictionaries: a third of the bytes to the browser for 10,000 rows.
    shown = vs.clip_columns(df.select("#", *cols)).with_columns(pl.col(pl.String).cast(pl.Categorical))
    st.dataframe(
        shown,
        key="table",
        on_select=_on_table_select,
        selection_mode="single-row",
        hide_index=True,
        height=520,
        column_config={
            "reward": st.column_config.NumberColumn("reward", format="%.3f"),
            "cost_usd": st.column_config.NumberColumn("cost", format="$%.4f"),
            "run_label": st.column_config.TextColumn("run"),
            "task_id": st.column_config.TextColumn("task"),
            "n_turns": st.column_config.NumberColumn("turns"),
        },
    )
    c1, c2 = st.columns([1, 3])
    c1.number_input("Row", 1, max(1, df.height), key="open_row", help="The # column of the table above")
    c2.button("Open episode", key="open_btn", on_click=_on_open_row, disabled=df.is_empty())


def _find(df_all: pl.DataFrame, run: str, key: str) -> dict | None:
    rows = df_all.filter((pl.col("run") == run) & (pl.col("key") == key)).head(1).to_dicts()
    return rows[0] if rows else None


def _load(df_all: pl.DataFrame, run: str, key: str) -> EpisodeRecord | str:
    row = _find(df_all, run, key)
    if row is None:
        return f"No episode {key!r} in this run."
    return _record(run, traces.trace_signature(run), key, row.get("offset"))


def view_episode(df_all: pl.DataFrame, labels: dict[str, str]) -> None:
    ep = S.get("ep")
    if not ep:
        st.info("Pick an episode in the Episodes view (click a row, or give its row number and press Open).")
        return
    run, key = ep
    rec = _load(df_all, run, key)
    if isinstance(rec, str):
        st.error(vs.md_escape(rec, 500))
        return
    if rec.problems:
        st.warning(vs.md_escape("This record is malformed: " + "; ".join(rec.problems), 500))
    show_header(rec, labels.get(run, run))
    steps = vs.steps_of(rec)
    if S.get("step") is None:
        S.step = 0
    pos = step_controls("step", [s.index for s in steps])
    show_step(run, rec, steps[pos], f"ep_{pos}")
    if rec.plans and steps[pos].turn is not None:
        show_plans(rec, steps[pos].turn.turn, f"ep_{pos}")


def _choices(rows: pl.DataFrame) -> tuple[list[tuple[str, str]], list[str]]:
    items = list(zip(rows.get_column("run").to_list(), rows.get_column("key").to_list(), strict=True))
    desc = [
        f"{vs.clip(r['surface'], 40)}/{vs.clip(r['mode'], 40)} · repeat {r['repeat']} · "
        f"reward {_num(r['reward'], '.3f', _no_reward(r['error_class']))}"
        for r in rows.iter_rows(named=True)
    ]
    return items, desc


def _episode_choice(rows: pl.DataFrame, key: str) -> tuple[str, str] | None:
    if rows.is_empty():
        return None
    items, desc = _choices(rows)
    if len(items) == 1:
        return items[0]
    if not isinstance(S.get(key), int) or not 0 <= S[key] < len(items):
        S[key] = 0
    i = st.selectbox("Episode", range(len(items)), format_func=lambda i: desc[i], key=key)
    return items[i or 0]


def _apply_pin(pin: tuple[str, str, str, str], df: pl.DataFrame, labels: dict[str, str]) -> None:
    """A deep link to A vs B: select the sides, pair and episodes that hold the two linked episodes."""
    ra, ka, rb, kb = pin
    a_row, b_row = _find(df, ra, ka), _find(df, rb, kb)
    if not (a_row and b_row):
        return
    S.ab_a = vs.side_label(a_row["model"] or vs.NONE_LABEL, labels[ra])
    S.ab_b = vs.side_label(b_row["model"] or vs.NONE_LABEL, labels[rb])
    S.ab_task = vs.pair_id(a_row, vs.pair_columns(df))
    S.ab_only = False
    for tag, side, want in (("a", S.ab_a, (ra, ka)), ("b", S.ab_b, (rb, kb))):
        items, _ = _choices(vs.pair_rows(df, side, S.ab_task))
        S[f"ab_ep_{tag}"] = items.index(want) if want in items else 0
    S._ab_follow = (S.ab_task, (ra, ka), S.ab_b)  # the link chose B's episode: do not re-match it to A


def _ab_side(rec: EpisodeRecord, run: str, labels: dict[str, str], name: str) -> None:
    c = vs.clip
    st.subheader(name)
    st.text(f"{c(rec.model)} · {c(labels.get(run, run))}")
    st.text(f"{c(rec.task_id)} · {c(rec.surface, 60)}/{c(rec.mode, 60)} · repeat {_num(rec.repeat, 'd')}")
    st.metric("Reward", _num(rec.reward, ".3f", _no_reward(rec.error_class)))
    st.text(
        f"end {c(rec.end_reason, 80)} · turns {_num(rec.n_turns or len(rec.turns), 'd')}"
        + (f" · {c(rec.error_class, 80)}" if rec.error_class else "")
    )
    rows, long = vs.field_rows(rec.grade)
    if rows:
        _fields(st, rows, "component", "no grade")
    if long:
        st.caption("Long grade values are cut here; the Episode view shows them whole.")
    show_image(run, rec.render, "Final render")


def view_ab(df: pl.DataFrame, df_all: pl.DataFrame, labels: dict[str, str]) -> None:
    pin = S.pop("ab_pin", None)
    if pin:
        _apply_pin(pin, df, labels)
    sides = vs.sides(df)
    if not sides:
        st.info("No episodes under the current filters.")
        return
    keys = vs.pair_columns(df)
    c1, c2, c3 = st.columns([2, 2, 1])
    open_row = _find(df, *S.ep) if S.get("ep") and "ab_a" not in S else None
    if open_row:  # coming from an open episode: it is A, on its task, surface and mode
        S.ab_a = vs.side_label(open_row["model"] or vs.NONE_LABEL, labels[open_row["run"]])
        S.ab_task = vs.pair_id(open_row, keys)
        S._ab_open = (open_row["run"], open_row["key"])
    if S.get("ab_a") not in sides:
        S.ab_a = sides[0]
    if S.get("ab_b") not in sides:
        S.ab_b = vs.best_opponent(df, S.ab_a) or next((x for x in sides if x != S.ab_a), sides[0])
    a = c1.selectbox("A", sides, key="ab_a", format_func=vs.clip)
    b = c2.selectbox("B", sides, key="ab_b", format_func=vs.clip)
    thr = c3.number_input("Solved if reward ≥", 0.0, 1e9, 0.5, 0.05, key="ab_thr")
    pairs = vs.ab_tasks(df, a, b, thr)
    if pairs.is_empty():
        st.info("A and B share no task on the same surface and mode.")
        return
    counts = pairs.group_by("outcome").len().sort("outcome")
    st.text("  ·  ".join(f"{o}: {n}" for o, n in counts.iter_rows()))
    only = st.toggle("Only tasks A solved and B failed", key="ab_only")
    shown = pairs.filter(pl.col("outcome") == "A solved, B failed") if only else pairs
    st.dataframe(
        vs.ab_table(shown),
        hide_index=True,
        height=220,
        column_config={
            "task_id": st.column_config.TextColumn("task"),
            "a_best": st.column_config.NumberColumn("A best", format="%.3f"),
            "b_best": st.column_config.NumberColumn("B best", format="%.3f"),
            "difference": st.column_config.NumberColumn("A − B", format="%+.3f"),
        },
    )
    ids = shown.get_column("pair").to_list() or pairs.get_column("pair").to_list()
    if S.get("ab_task") not in ids:
        S.ab_task = ids[0]
    pid = st.selectbox("Task", ids, key="ab_task", format_func=lambda p: vs.pair_label(p, keys))
    a_rows, b_rows = vs.pair_rows(df, a, pid), vs.pair_rows(df, b, pid)
    opened = S.pop("_ab_open", None)
    if opened:
        items, _ = _choices(a_rows)
        S.ab_ep_a = items.index(opened) if opened in items else 0
    ca, cb = st.columns(2)
    with ca:
        pick_a = _episode_choice(a_rows, "ab_ep_a")
    # B follows A: on a new pair, A episode or B side, B shows its episode of the same surface, mode and
    # repeat; an episode the user picks for B stays until one of those changes.
    if S.get("_ab_follow") != (pid, pick_a, b):
        S._ab_follow = (pid, pick_a, b)
        S.ab_ep_b = vs.matching_episode(_find(df, *pick_a) if pick_a else None, b_rows)
    with cb:
        pick_b = _episode_choice(b_rows, "ab_ep_b")
    picks = [pick_a, pick_b]
    if pick_a is None or pick_b is None:
        st.info("One side has no episode of this task.")
        return
    recs = [_load(df_all, r, k) for r, k in picks]
    S._ab_pair = (*pick_a, *pick_b)
    for col, rec, (r, _k), name in ((ca, recs[0], pick_a, "A"), (cb, recs[1], pick_b, "B")):
        with col:
            if isinstance(rec, str):
                st.error(vs.md_escape(rec, 500))
            else:
                _ab_side(rec, r, labels, name)
    if any(isinstance(x, str) for x in recs):
        return
    show_image(pick_a[0], recs[0].target, "Target")
    aligned = vs.align_steps(recs[0], recs[1])
    pos = step_controls("ab_step", [max(x.index for x in p if x is not None) for p in aligned])
    sa, sb = aligned[pos]
    for col, rec, (r, _k), s, tag in ((ca, recs[0], pick_a, sa, "a"), (cb, recs[1], pick_b, sb, "b")):
        with col:
            if s is None:
                st.caption("(this episode has ended)")
            else:
                show_step(r, rec, s, f"ab{tag}_{pos}", pictures=False)


def view_summary(df: pl.DataFrame) -> None:
    # Model and task names reach the tables and the charts' data: cut first (the grade JSON is left whole).
    df = vs.clip_columns(df, columns=vs.LABEL_COLUMNS)
    from evalkit import analysis, plots

    def shown(title: str, make) -> object | None:
        try:
            return make()
        except Exception as e:  # one table or chart that does not apply to this selection leaves the rest
            st.warning(vs.md_escape(f"{title} could not be computed: {type(e).__name__}: {e}", 500))
            return None

    tiers = None
    for title, make in (
        ("Summary", lambda: analysis.summarise(df)),
        ("By tier", lambda: analysis.by_tier(df)),
    ):
        st.subheader(title)
        table = shown(title, make)
        if table is not None:
            st.dataframe(table, hide_index=True)
        if title == "By tier":
            tiers = table
    st.subheader("Charts")
    charts = {
        # the per-tier chart draws the table above rather than bootstrapping it again
        "reward_by_tier": lambda: plots.reward_by_tier(tiers if tiers is not None else df),
        "end_reasons": lambda: plots.end_reasons(df),
        "reward_vs_cost": lambda: plots.reward_vs_cost(df),
        "reward_vs_turns": lambda: plots.reward_vs_turns(df),
        "grade_components": lambda: plots.grade_components(df),
    }
    for name, make in charts.items():
        chart = shown(f"Chart {name}", make)
        if chart is not None:
            st.altair_chart(chart, width="stretch")


# ------------------------------------------------------------------------------------------------ main


def sidebar(df: pl.DataFrame) -> vs.Filters:
    f = vs.Filters()
    with st.sidebar:
        st.header("Filters")
        for col, label in vs.FILTER_COLUMNS.items():
            opts = vs.options(df, col)
            if len(opts) > 1 or S.get(f"f_{col}"):
                S[f"f_{col}"] = [v for v in S.get(f"f_{col}", []) if v in opts]
                f.include[col] = st.multiselect(label, opts, key=f"f_{col}", format_func=vs.clip)
        rewards = (
            df.get_column("reward").drop_nulls()
            if "reward" in df.columns
            else pl.Series([], dtype=pl.Float64)
        )
        if rewards.len():
            # Rewards are usually in [0, 1]: a fixed scale reads the same across runs; wider data widens it.
            lo, hi = min(0.0, float(rewards.min())), max(1.0, float(rewards.max()))
            rng = st.slider("Reward", lo, hi, (lo, hi), key="f_reward")
            if tuple(rng) != (lo, hi):
                f.reward = (float(rng[0]), float(rng[1]))
                f.unscored = st.checkbox("Keep unscored episodes", value=False, key="f_unscored")
        f.search = st.text_input("Search model text and reasoning", key="f_search").strip()
    return f


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
    with st.sidebar:
        st.title("evalkit viewer")
        if "runs_sel" not in S:
            S.runs_sel = list(runs)
        chosen = st.multiselect("Runs", runs, format_func=lambda r: labels[r], key="runs_sel")
    tables, problems = [], []
    for r in chosen:
        t = _table(r, traces.trace_signature(r))
        if isinstance(t, str):
            problems.append((r, t))
        else:
            tables.append(t)
        if note := _malformed(r, traces.trace_signature(r)):
            problems.append((r, note))
    for r, msg in problems:
        st.sidebar.warning(vs.md_escape(f"{labels[r]}: {msg}", 300))
    df_all = vs.with_labels(vs.concat_tables(tables), labels)
    f = sidebar(df_all)
    hits = None
    if f.search:
        idx = [_text_index(r, traces.trace_signature(r)) for r in chosen]
        hits = vs.concat_tables([vs.search(i, f.search) for i in idx]) if idx else None
    df = vs.apply_filters(df_all, f, hits)

    if S.get("view") not in vs.VIEWS:
        S.view = vs.VIEWS[0]
    st.radio("View", vs.VIEWS, key="view", horizontal=True, label_visibility="collapsed")
    view = S.view
    if view == "Episodes":
        view_table(df, df_all.height)
    elif view == "Episode":
        view_episode(df_all, labels)
    elif view == "A vs B":
        view_ab(df, df_all, labels)
    else:
        view_summary(df)
    _sync_link(labels)


main()
