"""The Episode view, laid out for stepping at 1280 × 720 with no scrolling: two lines of header, Previous /
Next (← / →) and a slider, then one row with all a step needs: the target and the step's picture at the same
size (for an agent that acts on screenshots, the screen the action was taken on, with the action drawn where
it landed; a click enlarges either), and beside them what the model did: its tool calls with their results,
its text, its reasoning collapsed. Below: the filmstrip and the transcript, the conversation as the model
saw it, from the page holding the step.

An episode without a picture (berth, imported tool-planning runs) is laid out for text: what the model sent
(its text, its calls, the plan's entries) beside what the environment answered (each result, the plan's
verdict and violations). Stepping reruns only the stepper (a fragment), not the page around it."""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl
import streamlit as st

from evalkit.analysis.tables import usd
from evalkit.records import plans, rundir
from evalkit.records.viewer_marks import space_of
from evalkit.types import CallRecord, EpisodeRecord
from evalkit.view import support as vs
from viewer import stepping
from viewer.common import (
    S,
    conversation,
    fields,
    find,
    load,
    no_reward,
    num,
    show_image,
    show_text,
    step_controls,
    thumbnail,
)

FILMSTRIP = 12
"""Thumbnails in the filmstrip: the page of steps holding the current one."""
TRANSCRIPT_TURNS = 4
"""Turns of the transcript shown at once (the page holding the step): every element on the page costs the
browser some time on every step."""
PANEL_PX = 440
"""Height of the step's panel beside the pictures: what fits under the header at 720 px (it scrolls)."""


def identity(rec: EpisodeRecord, label: str) -> str:
    """`model · env surface/mode · task · tier · skin · repeat · run`, leaving out what the episode lacks."""
    c = vs.clip
    where = "/".join(c(p, 60) for p in (rec.surface, rec.mode) if p)
    parts = [c(rec.model), " ".join(p for p in (c(rec.env or "", 60), where) if p), c(rec.task_id)]
    if rec.tier not in (None, ""):
        parts.append(f"tier {c(rec.tier, 40)}")
    if rec.skin not in (None, ""):
        parts.append(f"skin {c(rec.skin, 40)}")
    if isinstance(rec.repeat, int) and not isinstance(rec.repeat, bool):
        parts.append(f"repeat {rec.repeat}")
    return " · ".join(p for p in [*parts, c(label)] if p)


def outcome(rec: EpisodeRecord) -> str:
    cost = rec.cost_usd
    return " · ".join(
        [
            f"Reward {num(rec.reward, '.3f', no_reward(rec.error_class))}",
            f"ended {vs.clip(rec.end_reason or '—', 80)}"
            + (f" ({vs.clip(rec.error_class, 80)})" if rec.error_class else ""),
            f"{num(rec.n_turns or len(rec.turns), 'd')} turns",
            f"{num(rec.tool_calls, 'd')} tool calls",
            f"{num(rec.tool_errors, 'd')} tool errors",
            f"cost {usd(cost) if isinstance(cost, int | float) and math.isfinite(cost) else '—'}",
            f"{num(rec.seconds, '.1f')} s (model {num(rec.model_seconds, '.1f')} s, "
            f"env {num(rec.env_seconds, '.1f')} s)",
        ]
    )


def show_header(rec: EpisodeRecord, label: str) -> None:
    sid = vs.short_id(rec.key)
    st.text(identity(rec, label))
    line, more = st.columns([6, 1], vertical_alignment="center")
    line.text(outcome(rec))
    with more.popover("Grade, usage, details", width="stretch"):
        details(rec, sid)
    if rec.error_class or rec.error:
        said = "The episode ended with an error" + (" and is unscored" if rec.error_class else "")
        with st.expander(f":red[{said}: {vs.md_escape(str(rec.error or rec.error_class), 160)}]"):
            show_text("", str(rec.error or ""), f"err_{sid}", code=True)


def details(rec: EpisodeRecord, sid: str) -> None:
    c1, c2 = st.columns(2)
    grade, long_grade = vs.field_rows(rec.grade)
    usage, long_usage = vs.field_rows(rec.usage)
    fields(c1, grade, "component", "no grade")
    fields(c2, usage, "usage", "no usage")
    # A value cut in the table above is there in full, a page at a time.
    for i, (name, text) in enumerate(long_grade):
        show_text(f"Grade component {vs.md_escape(name, 60)}, whole value", text, f"grade{i}_{sid}", True)
    for i, (name, text) in enumerate(long_usage):
        show_text(f"Usage {vs.md_escape(name, 60)}, whole value", text, f"usage{i}_{sid}", True)
    c = vs.clip
    st.text(
        f"key {c(rec.key, 80)} · started {c(rec.started, 60)} · "
        f"parse errors {num(rec.parse_errors, 'd')} · auto submitted {c(rec.auto_submitted, 20)} · "
        f"prompt {c(rec.prompt_version, 80)}"
    )
    if rec.reset:  # what made the episode: the arguments its env's reset was sent
        show_text("Reset arguments", vs.as_json(rec.reset), f"reset_{sid}", code=True)
    if rec.traceback:
        show_text("Traceback", rec.traceback, f"tb_{sid}", code=True)
    if rec.info:
        show_text("Info", vs.as_json(rec.info), f"info_{sid}", code=True)


def show_call(run: str, call: CallRecord, key: str, ownloop: bool) -> None:
    """One line, `name(args…) → result…` (red when the call failed), that opens to the whole call: its
    arguments (for an own-loop agent, the parsed action), result and returned images."""
    line = vs.md_escape(vs.call_line(call.name, call.args, call.result), 400)
    label = f":red[{line}]" if not call.ok else line
    with st.expander(label, icon=":material/error:" if not call.ok else None):
        args, result = vs.as_json(call.args), str(call.result or "")
        # One element when it fits: each element costs the browser a pass over the page.
        if len(args) + len(result) <= vs.TEXT_LIMIT:
            said = "The arguments did not parse: the call was not run and the model was told.\n\n"
            head = "Parsed action" if ownloop else "Arguments"
            tail = f"\n\nResult{'' if call.ok else ' (error)'}:\n{result}" if result else ""
            st.text(f"{said if call.parse_error else ''}{head}:\n{args}{tail}")
        else:
            show_text("Arguments" if not ownloop else "Parsed action", args, f"{key}_args", True)
            if call.result:
                show_text("Result" + ("" if call.ok else " (error)"), result, f"{key}_res", code=True)
        for j, img in enumerate(call.images or []):
            show_image(run, img, f"Returned image {j + 1}")


def turn_line(step: vs.Step) -> str:
    t = step.turn
    if t is None:
        return (
            "The screen the last action left." if step.end else "Start of the episode: no model output yet."
        )
    return (
        f"Turn {vs.md_escape(t.turn, 20)} · stop {vs.md_escape(t.stop or '—', 60)} · "
        f"model {num(t.model_s, '.2f')} s · env {num(t.env_s, '.2f')} s"
        + (f" · {num(t.attempts, 'd')} requests" if isinstance(t.attempts, int) and t.attempts > 1 else "")
        + (f" · answered by {vs.md_escape(t.provider, 60)}" if t.provider else "")
    )


def show_step(run: str, rec: EpisodeRecord, step: vs.Step, key: str) -> None:
    """What the model did at one step: its tool calls (each with its result), then its text, then its
    reasoning (collapsed)."""
    ownloop = vs.is_ownloop(rec) or rec.mode == "ownloop"
    st.caption(turn_line(step))
    t = step.turn
    if t is None:
        return
    for j, call in enumerate(t.calls):
        show_call(run, call, f"{key}_c{j}", ownloop)
    if not t.calls:
        st.caption("No tool call in this turn.")
    if t.text:
        show_text("Raw model output" if ownloop else "Model text", t.text, f"{key}_text")
    if t.reasoning:
        with st.expander(f"Reasoning ({len(t.reasoning):,} characters)"):
            show_text("", t.reasoning, f"{key}_reason")


def picture_step(run: str, rec: EpisodeRecord, step: vs.Step, tag: str, key: str) -> None:
    """Target and the step's picture at the same size (keyed by `tag`), the step's panel beside them (its
    widgets keyed by `key`)."""
    cols = st.columns([1, 1, 1.15] if rec.target else [2, 1.15], gap="small")
    if rec.target:
        with cols[0]:
            show_image(run, rec.target, "Target", enlarge=f"target_{tag}")
    with cols[-2]:
        turn = step.turn if step.marked else None
        show_image(run, step.frame, step.caption, rec, turn, enlarge=f"frame_{tag}", space=space_of(rec))
    with cols[-1], st.container(height=PANEL_PX, border=False, key=f"panel_{tag}"):
        show_step(run, rec, step, key)


def filmstrip(run: str, rec: EpisodeRecord, steps: list[vs.Step], name: str) -> None:
    """Thumbnails of the pictures around the current step (a button under each jumps to it), and the final
    render at the end."""
    pos = int(S.get(name) or 0)
    window = vs.filmstrip(len(steps), pos, FILMSTRIP)
    if len(window) < 2 and not rec.render:
        return
    cols = st.columns(FILMSTRIP + 1, gap="small")
    for col, i in zip(cols, window, strict=False):
        with col:
            small = thumbnail(run, steps[i].frame, 160)
            if small:
                st.image(small, width="stretch", output_format="JPEG")  # a thumbnail is a JPEG already
            else:
                st.caption("no picture")
            # All alike: the current one is marked by a style (`stepping`), which changes without a redraw.
            st.button(
                "end" if steps[i].end else str(steps[i].index), key=f"{name}_film_{i}", on_click=_jump,
                args=(name, i), type="tertiary", width="stretch",
            )  # fmt: skip
    if rec.render:
        with cols[-1]:
            show_image(run, rec.render, "Final render", enlarge=f"render_{name}")


def _jump(name: str, pos: int) -> None:
    """A thumbnail clicked on the server's side (our script in the browser takes the clicks it can): the
    step above is drawn again too, not only the filmstrip's fragment."""
    _said(name, pos)
    S._jumped = True


def _said(name: str, pos: int) -> None:
    """The server moves to step `pos` (the browser's stepper follows)."""
    S[name] = pos
    S._step_said = True


def _text_table(rows: list[dict]) -> pl.DataFrame:
    """Rows of a plan table with every cell as clipped text: trace content is never trusted to be typed."""
    cols = list(rows[0]) if rows else []
    return pl.DataFrame(
        {c: [vs.clip(r.get(c)) if r.get(c) is not None else "" for r in rows] for c in cols},
        schema={c: pl.String for c in cols},
    )


def _turn_plans(rec: EpisodeRecord, turn: int) -> list[tuple[int, object, dict]]:
    heads = plans.plan_summary(rec)
    return [(i, p, heads[i - 1]) for i, p in enumerate(rec.plans, 1) if p.turn == turn]


def plan_entries(rec: EpisodeRecord, turn: int, key: str) -> None:
    """The plans sent in this turn (berth's check_plan / submit_plan), each as a table of its entries with
    the end, waiting and problems the environment reported."""
    for i, p, _ in _turn_plans(rec, turn):
        rows = plans.plan_rows(p)
        st.markdown(f"**Plan {i}** ({vs.md_escape(p.tool, 60)}): {len(rows)} entries")
        if rows:
            st.dataframe(_text_table(rows), hide_index=True, key=f"{key}_plan{i}")


def plan_verdicts(rec: EpisodeRecord, turn: int, key: str) -> None:
    """What the environment said of each plan sent in this turn: verdict, objective, then its violations."""
    for i, p, head in _turn_plans(rec, turn):
        verdict = (
            "feasible" if head["feasible"] else ("infeasible" if head["feasible"] is False else "no verdict")
        )
        st.markdown(
            f"**Plan {i}** ({vs.md_escape(p.tool, 60)}): {verdict}, objective "
            f"{vs.md_escape(head['objective'] if head['objective'] is not None else '—', 40)}, "
            f"{vs.md_escape(head['violations'] or 0, 20)} violation(s)"
            + (f", reward {num(head['reward'], '.3f')}" if head["reward"] is not None else "")
        )
        if head["answer"]:
            show_text("Answer", head["answer"], f"{key}_plan{i}_answer", code=True)
        bad = plans.violation_rows(p)
        if bad:
            st.dataframe(_text_table(bad), hide_index=True, key=f"{key}_plan{i}_violations")


def text_step(run: str, rec: EpisodeRecord, step: vs.Step, key: str) -> None:
    """A step of an episode without pictures: what the model sent beside what the environment answered."""
    st.caption(turn_line(step))
    t = step.turn
    if t is None:
        return
    sent, answered = st.columns(2, gap="medium")
    with sent:
        st.markdown("**What the model sent**")
        if t.text:
            with st.expander("Model text", expanded=True):
                show_text("", t.text, f"{key}_text")
        for j, call in enumerate(t.calls):
            show_call(run, call, f"{key}_c{j}", False)
        if not t.calls:
            st.caption("No tool call in this turn.")
        plan_entries(rec, t.turn, key)
        if t.reasoning:
            with st.expander(f"Reasoning ({len(t.reasoning):,} characters)"):
                show_text("", t.reasoning, f"{key}_reason")
    with answered:
        st.markdown("**What the environment answered**")
        plan_verdicts(rec, t.turn, key)  # its verdict on each plan first, then the replies as they came
        for j, call in enumerate(t.calls):
            if call.result:
                show_text(
                    vs.md_escape(f"{vs.clip(call.name or '?', 60)}" + ("" if call.ok else " (error)"), 80),
                    call.result, f"{key}_r{j}", code=True,
                )  # fmt: skip
        if not any(c.result for c in t.calls):
            st.caption("Nothing came back in this turn.")


ROLE_NAMES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _message_head(m) -> str:
    parts = [f"**{ROLE_NAMES.get(m.role, vs.md_escape(m.role, 20))}**"]
    if m.role == "tool":
        parts.append(vs.md_escape(m.name or "?", 80))
        if m.call_id:
            parts.append(vs.md_escape(m.call_id, 60))
        if getattr(m, "error", False):
            parts.append(":red[error]")
    parts.append(f"turn {num(m.turn, 'd')}")
    if m.role == "assistant":
        if m.stop:
            parts.append(f"stop {vs.md_escape(m.stop, 40)}")
        if isinstance(m.latency_s, (int, float)):
            parts.append(f"{m.latency_s:.2f} s")
        usage = m.usage if isinstance(m.usage, dict) else {}
        if usage.get("input") or usage.get("output"):
            parts.append(f"{num(usage.get('input'), ',')} in / {num(usage.get('output'), ',')} out")
    if m.note:
        parts.append(f"_{vs.md_escape(m.note, 80)}_")
    return " · ".join(parts)


def show_message(run: str, m, key: str) -> None:
    """One message in a box keyed by its turn (the stepper marks the step's messages by that key)."""
    turn = int(m.turn) if isinstance(m.turn, int) else 0
    with st.container(border=True, key=f"tr_turn_{turn}_{key}"):
        st.markdown(_message_head(m))
        # The text and the calls as one element: every element of the page costs the browser a little on
        # every step, drawn again or not.
        calls = [c if isinstance(c, dict) else {} for c in m.calls or []]
        lines = "\n".join("→ " + vs.call_line(c.get("name"), c.get("args"), None, 300) for c in calls)
        body = m.text if isinstance(m.text, str) else vs.as_json(m.text) if m.text else ""
        if len(body) + len(lines) <= vs.TEXT_LIMIT:
            if body or lines:
                st.text("\n\n".join(p for p in (body, lines) if p))
        else:
            show_text("", body, f"{key}_t", code=m.role == "tool")
            if lines:
                st.text(lines)
        if m.reasoning:
            with st.expander(f"Reasoning ({len(m.reasoning):,} characters)"):
                show_text("", m.reasoning, f"{key}_r")
        pics = [img if isinstance(img, dict) else {} for img in m.images or []]
        cols = st.columns(4) if pics else []
        for j, img in enumerate(pics):  # a quarter of the width each, a click enlarges
            label = f"Image {j + 1}" + (f" · {vs.pruned_note(img)}" if img.get("pruned") else "")
            with cols[j % 4]:
                if img.get("path"):
                    show_image(run, img.get("path"), label, enlarge=f"{key}_{j}")
                else:
                    st.caption(f"{label}: not stored")
        raw = m.raw if isinstance(m.raw, dict) else None
        if raw:
            cols = st.columns(2)
            for col, part in zip(cols, ("request", "response"), strict=True):
                path = vs.safe_image(run, raw.get(part))
                if path is not None:
                    col.download_button(
                        f"Raw {part}", data=lambda p=path: p.read_bytes(), file_name=path.name,
                        key=f"{key}_raw_{part}", on_click="ignore",
                    )  # fmt: skip


def show_transcript(run: str, page_of: Callable[[int, int], list | str], last: int, current_turn: int,
                    sid: str) -> None:  # fmt: skip
    """The conversation as the model saw it, a few turns at a time (the page holding the current step):
    `page_of(lo, hi)` gives the messages of turns lo to hi, `last` is the episode's last turn."""
    pages = max(last, 0) // TRANSCRIPT_TURNS + 1
    follow = S.get("_tr_follow") != (sid, current_turn)
    if follow:  # the step moved (or another episode): show the page that holds it
        S._tr_follow = (sid, current_turn)
        S.tr_page = min(current_turn // TRANSCRIPT_TURNS + 1, pages)
    S.tr_page = min(max(int(S.get("tr_page") or 1), 1), pages)
    page = int(S.tr_page) - 1
    lo, hi = page * TRANSCRIPT_TURNS, (page + 1) * TRANSCRIPT_TURNS - 1
    msgs = page_of(lo, hi)
    if isinstance(msgs, str):
        st.error(vs.md_escape(f"The transcript could not be read: {msgs}", 500))
        return
    if not msgs:
        st.caption("No transcript.")
        return
    if any(m.note == "reconstructed" for m in msgs):
        st.caption(
            "Rebuilt from the record (it keeps no transcript): the opening message and the prompt the model "
            "saw are not in it; tool results are as recorded (capped)."
        )
    if pages > 1:
        st.number_input(f"Page (of {pages}, {TRANSCRIPT_TURNS} turns each)", 1, pages, key="tr_page")
    for i, m in enumerate(msgs):
        turn = int(m.turn) if isinstance(m.turn, int) else 0
        if lo <= turn <= hi:
            show_message(run, m, f"tr_{i}")


def _search_hits(run: str, key: str, name: str, steps: list[vs.Step]) -> None:
    found = S.get("_found")
    if found is None:
        return
    hits = found.filter((pl.col("run") == run) & (pl.col("key") == key)).get_column("step").to_list()
    if not hits:
        return
    row = st.container(horizontal=True, vertical_alignment="center")
    row.caption(f"Search hits at {len(hits)} step(s):")
    for s in hits[:30]:
        pos = next((i for i, x in enumerate(steps) if x.index == s), None)
        if pos is not None:
            row.button(f"step {s}", key=f"hit_{s}", type="tertiary", on_click=_said, args=(name, pos))


def _pages(steps: list[vs.Step], pos: int) -> tuple[int, int]:
    """The filmstrip page and the transcript page that hold step `pos`: what is drawn below the step."""
    turn = steps[pos].turn
    return vs.filmstrip(len(steps), pos, FILMSTRIP).start, _turn(turn) // TRANSCRIPT_TURNS


def _turn(turn) -> int:
    return turn.turn if turn is not None and isinstance(turn.turn, int) else 0


def _goto(component: str) -> None:
    """Our stepper asked for a step it has not got on the page (`evalkit_stepper`), or for the filmstrip and
    transcript of the step it shows (`evalkit_below`), or says the step it shows before something else
    pressed reaches the server (`evalkit_keeper`)."""
    goto = getattr(S.get(component), "goto", None)
    if isinstance(goto, int):
        S.step = goto


@st.fragment
def stepper(run: str, key: str, rec: EpisodeRecord, steps: list[vs.Step]) -> None:
    """Step controls and the steps around the current one, the others hidden: the browser steps among them by
    itself (`viewer.stepping`), and asks for this fragment again beyond them."""
    indices = [s.index for s in steps]
    row = st.container(horizontal=True, vertical_alignment="center", gap="small")
    pos = step_controls("step", indices, row=row, said=not stepping.active())
    drawn = S._below_drawn
    if _pages(steps, pos) != drawn and not stepping.active():  # our script asks for `below` by itself
        st.rerun(scope="app")
    shown = stepping.window(pos, len(steps))
    said = S.pop("_step_said", False)
    if stepping.active():
        pages = [_pages(steps, i) for i in range(len(steps))]
        turns = [_turn(s.turn) if s.turn is not None else None for s in steps]
        with row:
            stepping.mount(key, pos, said, shown, indices, pages, drawn, turns,
                           lambda: _goto("evalkit_stepper"))  # fmt: skip
    _search_hits(run, key, "step", steps)
    stepping.hide_others(pos, _turn(steps[pos].turn) if steps[pos].turn is not None else None)
    pictures = vs.has_pictures(rec)
    # One block with no gap between its children: the hidden steps are still flex items, and each one's gap
    # pushed the step on screen down by 16 px for every hidden step above it.
    with st.container(key="steps", gap=None):
        for i in shown:
            with st.container(key=f"stepv_{i}"):
                if pictures:
                    picture_step(run, rec, steps[i], f"ep{i}", f"ep_{steps[i].index}")
                else:
                    text_step(run, rec, steps[i], f"ep_{i}")
    stepping.written(indices[pos])


@st.fragment
def below(run: str, key: str, rec: EpisodeRecord, steps: list[vs.Step], offset: int | None) -> None:
    """The filmstrip and the transcript page holding the step: drawn again alone when the browser's stepper
    steps onto another page of them."""
    if S.pop("_jumped", False):
        st.rerun(scope="app")
    pos = min(max(int(S.step), 0), len(steps) - 1)
    S._below_drawn = _pages(steps, pos)
    if stepping.active():
        stepping.mount_below(S._below_drawn, lambda: _goto("evalkit_below"))
    if vs.has_pictures(rec):
        filmstrip(run, rec, steps, "step")
    st.subheader("Transcript")
    sig = rundir.trace_signature(run)
    last = max((t.turn for t in rec.turns if isinstance(t.turn, int)), default=0)
    page_of = lambda lo, hi: conversation(run, sig, key, offset, (lo, hi))  # noqa: E731
    show_transcript(run, page_of, last, _turn(steps[pos].turn), vs.short_id(key))


def view_episode(df_all: pl.DataFrame, labels: dict[str, str]) -> None:
    ep = S.get("ep")
    if not ep:
        st.info("Pick an episode in the Episodes view (click a row of the table).")
        return
    run, key = ep
    rec = load(df_all, run, key)
    if isinstance(rec, str):
        st.error(vs.md_escape(rec, 500))
        return
    if rec.problems:
        st.warning(vs.md_escape("This record is malformed: " + "; ".join(rec.problems), 500))
    show_header(rec, labels.get(run, run))
    steps = vs.steps_of(rec)
    if S.get("step") is None:
        S.step = vs.first_step(steps)
    S._below_drawn = _pages(steps, min(max(int(S.step), 0), len(steps) - 1))
    if stepping.active():
        stepping.mount_keeper(lambda: _goto("evalkit_keeper"))
    stepper(run, key, rec, steps)
    below(run, key, rec, steps, (find(df_all, run, key) or {}).get("offset"))
