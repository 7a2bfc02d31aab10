"""A batch that is still running: the Episodes and Summary views poll the chosen runs and redraw when a trace
grew (a finished episode appears within a few seconds), and show each running episode's latest frame and
turn, read from the progress files the batch keeps (`evalkit.view.live`)."""

from __future__ import annotations

import time

import streamlit as st

from evalkit.records import rundir
from evalkit.view import live as running_batches
from evalkit.view import support as vs
from viewer.common import S, show_image

POLL_S = 2.0
"""Seconds between polls of a run that is being written."""
IDLE_POLL_S = 15.0
"""Seconds between polls of runs that look finished (a batch may still start writing into them)."""
SHOWN = 8


def drawn(runs: list[str]) -> dict[str, tuple[int, int]]:
    """The trace signature of each run the page is drawn from (the views load the runs by them)."""
    S._drawn_traces = {r: rundir.trace_signature(r) for r in runs}
    return S._drawn_traces


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _running_panel(runs: list[str], labels: dict[str, str]) -> None:
    now = time.time()
    found = [(r, x) for r in runs for x in running_batches.running(r, now=now)]
    if not found:
        return
    st.subheader(f"Running now: {len(found)} episode{'s' if len(found) != 1 else ''}")
    cols = st.columns(4)
    for i, (run, x) in enumerate(found[:SHOWN]):
        with cols[i % 4]:
            turn = "starting" if not x.turn else f"turn {x.turn}"
            if x.turn and x.max_turns:
                turn += f" of {x.max_turns}"
            where = "/".join(p for p in (x.surface, x.mode) if p)
            st.text(vs.clip(f"{x.model} · {x.task_id}" + (f" · {where}" if where else ""), 120))
            st.caption(f"{turn} · updated {_ago(now - x.updated)} · {vs.md_escape(labels.get(run, run), 60)}")
            if x.frame:  # a starting episode has none yet: no caption for a picture that is not there
                show_image(run, x.frame, "Newest frame", enlarge=f"live_{i}")
            if x.calls:
                st.text(vs.clip(", ".join(n + ("" if ok else " (error)") for n, ok in x.calls), 160))
            if x.text:
                st.text(vs.clip(x.text, 160))
    if len(found) > SHOWN:
        st.caption(f"and {len(found) - SHOWN} more")


def _poll(runs: list[str], labels: dict[str, str]) -> None:
    before = S.get("_drawn_traces") or {}
    if any(r in before and rundir.trace_signature(r) != before[r] for r in runs):
        st.rerun(scope="app")  # a trace grew: redraw the table and charts from it
    _running_panel(runs, labels)


def updates(runs: list[str], labels: dict[str, str]) -> None:
    """Poll `runs` (often while one is being written, rarely otherwise) and show what is running."""
    native = [r for r in runs if rundir.is_native(r)]
    if not native:
        return
    every = POLL_S if any(running_batches.active(r) for r in native) else IDLE_POLL_S
    st.fragment(_poll, run_every=every)(native, labels)
