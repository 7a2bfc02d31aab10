"""Stepping in the browser, without asking the server.

Streamlit draws a step by running the script (a fragment) and sending its elements, and the browser then
renders the whole page again for each of them: with the step's calls and a transcript on the page, most of a
step's time went there (Chromium's profile: React rendering, once per element), several times the time of a
bare Streamlit step. So the stepper draws the steps around the current one at once, hidden (`PREFETCH` on
each side), and a small script of ours shows one and hides the others when ← / → or Previous / Next are
used: no round trip. It keeps the address's `step` up to date (history.replaceState), which the next run of
the page reads back (`adopt`). A step beyond what was drawn is asked of the server (`goto`), which draws
around it; one whose filmstrip or transcript page is not the one below is shown at once, and the server is
asked to draw those pages (a step taken meanwhile is kept). With `EVALKIT_VIEWER_PREFETCH=0` there is no
script: the server draws each step (Streamlit's own slider and label).

Our own code, no trace content: it moves elements Streamlit drew, and writes only step numbers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import streamlit as st

S = st.session_state

PREFETCH_ENV = "EVALKIT_VIEWER_PREFETCH"
PREFETCH = 8
"""Steps drawn, hidden, on each side of the current one (`EVALKIT_VIEWER_PREFETCH`; 0 draws the current step
alone and asks the server for every other)."""


def prefetch() -> int:
    try:
        return max(0, int(os.environ.get(PREFETCH_ENV, PREFETCH)))
    except ValueError:
        return PREFETCH


def active() -> bool:
    """Whether the browser steps by itself (our script), or the server draws each step."""
    return prefetch() > 0


def window(pos: int, n: int, each: int | None = None) -> range:
    """The positions drawn around `pos` (of `n`): `each` on both sides, more on one where the other ends."""
    each = prefetch() if each is None else each
    lo = max(0, min(pos - each, n - 1 - 2 * each))
    return range(lo, min(n, lo + 2 * each + 1))


def adopt(name: str, indices: Sequence[int]) -> None:
    """Take the step the browser moved to by itself (the address says it) since this session last drew it."""
    said = st.query_params.get("step")
    if said is None or said == S.get("_step_in_url"):
        return
    try:
        pos = list(indices).index(int(said))
    except ValueError:
        return
    S[name] = pos
    S._step_in_url = said


def written(index: int) -> None:
    """The step the address holds after this run (what `adopt` compares with)."""
    S._step_in_url = str(index)
    if st.query_params.get("view") == "episode" and st.query_params.get("step") != str(index):
        st.query_params["step"] = str(index)


MARK_FILM = "background: #c4304b; color: #fff;"
MARK_TURN = "border-left: 4px solid #f08c00; background: #fff8ee;"


def hide_others(pos: int, turn: int | None) -> None:
    """Show the step at `pos` alone, its thumbnail in the filmstrip and its turn's messages in the transcript
    marked, before (or without) our script: a style of our own."""
    css = f'[class*="st-key-stepv_"] {{ display: none; }} .st-key-stepv_{pos} {{ display: block; }}'
    if active():  # our script's slider and label stand for Streamlit's
        css += " .st-key-step { display: none; }"
    css += f" .st-key-step_film_{pos} button {{ {MARK_FILM} }}"
    if turn is not None:
        css += f' [class*="st-key-tr_turn_{turn}_"] {{ {MARK_TURN} }}'
    st.html(f"<style>{css}</style>")


_JS = """
const BUTTONS = '.st-key-step_prev button, .st-key-step_next button';

export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  const S = window.__evalkitStepper || (window.__evalkitStepper = {});
  // The user stepped on while the server drew the step we asked for: keep the step on screen.
  const onward = S.asked === data.pos && Number.isInteger(S.pos) && S.pos !== data.pos ? S.pos : null;
  S.asked = null;
  S.data = data;
  S.pos = data.pos;
  S.trigger = setTriggerValue;
  let box = parentElement.querySelector('.ek-stepper');
  if (!box) {
    box = document.createElement('div');
    box.className = 'ek-stepper';
    box.style.cssText = 'display:flex;align-items:center;gap:12px;width:100%';
    const range = document.createElement('input');
    range.type = 'range';
    range.min = '0';
    range.setAttribute('aria-label', 'step');
    range.style.cssText = 'flex:1;accent-color:#c4304b';
    range.addEventListener('input', () => move(window.__evalkitStepper, parseInt(range.value, 10)));
    const label = document.createElement('span');
    label.className = 'ek-step-label';
    label.style.cssText = 'white-space:nowrap;min-width:8em;text-align:right';
    box.append(range, label);
    parentElement.appendChild(box);
  }
  S.range = box.querySelector('input');
  S.label = box.querySelector('span');
  S.range.max = String(data.indices.length - 1);
  if (!S.style) {
    S.style = document.createElement('style');
    document.head.appendChild(S.style);
  }
  if (!S.installed) {
    S.installed = true;
    const here = () => S.range && document.body.contains(S.range);
    window.addEventListener('keydown', (e) => {
      if (!here() || (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight')) return;
      if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
      const t = e.target;
      const typing = t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName));
      if (typing && t !== S.range) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      move(S, S.pos + (e.key === 'ArrowLeft' ? -1 : 1));
    }, true);
    document.addEventListener('click', (e) => {
      const b = here() && e.target.closest && e.target.closest(BUTTONS);
      if (!b) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      move(S, S.pos + (b.closest('.st-key-step_prev') ? -1 : 1));
    }, true);
  }
  show(S, S.pos, false);
  if (onward !== null) move(S, onward);
  return () => { if (S.style) S.style.textContent = ''; };  // another view: no step of ours to show
}

function move(S, p) {
  const d = S.data;
  p = Math.max(0, Math.min(d.indices.length - 1, p));
  if (p === S.pos) return;
  if (p >= d.lo && p < d.hi) {
    show(S, p, true);
    const pages = d.pages[p];
    // The filmstrip or the transcript below is another page: the server draws them, the step is shown now.
    if (pages[0] !== d.drawn[0] || pages[1] !== d.drawn[1]) ask(S, p);
  } else {  // not drawn on this page: the server draws around it
    S.pos = p;
    S.label.textContent = 'Step ' + d.indices[p] + ' of ' + d.indices[d.indices.length - 1] + ' …';
    ask(S, p);
  }
}

function ask(S, p) {
  S.asked = p;
  S.trigger('goto', p);
}

function show(S, p, mine) {
  const d = S.data;
  const last = d.indices.length - 1;
  S.pos = p;
  let css = '[class*="st-key-stepv_"] { display: none !important; } .st-key-stepv_' + p +
    ' { display: block !important; } .st-key-step, .st-key-step_label { display: none !important; }' +
    ' .st-key-step_film_' + p + ' button { background: #c4304b; color: #fff; }';
  if (d.turns[p] !== null) {
    css += ' [class*="st-key-tr_turn_' + d.turns[p] + '_"] { border-left: 4px solid #f08c00;' +
      ' background: #fff8ee; }';
  }
  S.style.textContent = css;
  S.label.textContent = 'Step ' + d.indices[p] + ' of ' + d.indices[last];
  S.range.value = String(p);
  const prev = document.querySelector('.st-key-step_prev button');
  const next = document.querySelector('.st-key-step_next button');
  if (prev) prev.disabled = p <= 0;
  if (next) next.disabled = p >= last;
  if (mine) {
    const u = new URL(window.location.href);
    u.searchParams.set('step', String(d.indices[p]));
    history.replaceState(history.state, '', u);
  }
}
"""

_component: list = []


def mount(pos: int, shown: range, indices: Sequence[int], pages: Sequence[tuple[int, int]],
          drawn: tuple[int, int], turns: Sequence[int | None], goto: Callable[[], None]) -> None:  # fmt: skip
    """Our stepper for the steps `shown` (positions) around `pos`; `goto` is called (before the rerun it
    asks for) when the browser wants a step beyond them: `S["evalkit_stepper"].goto` holds its position."""
    if not _component:
        _component.append(st.components.v2.component("evalkit_stepper", js=_JS, isolate_styles=False))
    data = {
        "pos": pos, "lo": shown.start, "hi": shown.stop, "indices": list(indices),
        "pages": [list(p) for p in pages], "drawn": list(drawn), "turns": list(turns),
    }  # fmt: skip
    _component[0](data=data, key="evalkit_stepper", on_goto_change=goto, width="stretch")
