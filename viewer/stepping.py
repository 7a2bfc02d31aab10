"""Stepping in the browser, without asking the server.

Streamlit draws a step by running the script (a fragment) and sending its elements, and the browser then
renders them: with the step's calls and a transcript on the page, a step took several times a bare Streamlit
step, and the server's profile shows it mostly waiting, so the time is the browser's. So the stepper draws
the steps around the current one at once, hidden (`PREFETCH` on each side), and a small script of ours shows
one and hides the others on ← / →, Previous / Next, a thumbnail or its slider: no round trip. A step beyond
those drawn is asked of the server (the stepper's `goto`), which draws around it; one whose filmstrip or
transcript page is not the one below is shown at once, and the fragment below is asked to draw those pages
alone (`mount_below`), not the steps again. The step on screen is the script's: a step the server drew for
an older request does not take it back, only one the server moved to itself (`said`: a search hit) or
another episode. The script keeps the address's `step` up to date (history.replaceState; Streamlit does not
read it back, so the server learns the step from the requests, and from a word sent before anything else on
the page is pressed: leaving for another view and coming back opens at the step the user left). With
`EVALKIT_VIEWER_PREFETCH=0` there is no script: the server draws each step, with Streamlit's own slider and
label.

Our own code, no trace content: it moves elements Streamlit drew, and writes only step numbers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import streamlit as st

from viewer.packing import UNPACK_JS, pack

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


def written(index: int) -> None:
    """The address follows the step the server drew, unless our script writes it (a step the server drew
    late must not overwrite a later one of the browser's)."""
    if active():
        return
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
    # Our script marks them itself once it runs (the body's class), as the step changes in the browser.
    css += f" body:not(.ek-stepping) .st-key-step_film_{pos} button {{ {MARK_FILM} }}"
    if turn is not None:
        css += f' body:not(.ek-stepping) [class*="st-key-tr_turn_{turn}_"] {{ {MARK_TURN} }}'
    st.html(f"<style>{css}</style>")


_JS = (
    UNPACK_JS
    + """
const BUTTONS = '.st-key-step_prev button, .st-key-step_next button, [class*="st-key-step_film_"] button';
const RETRY_MS = 2000;
const BASE_CSS = '[class*="st-key-stepv_"] { display: none !important; }' +
  ' .st-key-step, .st-key-step_label { display: none !important; }' +
  ' body.ek-stepping .ek-turn { __MARK_TURN__ }';

export default function (component) {
  const { setTriggerValue, parentElement } = component;
  const data = unpack(component.data);
  const S = window.__evalkitStepper || (window.__evalkitStepper = {});
  // The step on screen is ours (the address holds it), unless the server moved it itself or this is another
  // episode: a step the server drew for an older request of ours is not taken back.
  const fresh = data.said || S.key !== data.key || !Number.isInteger(S.pos);
  const want = fresh ? data.pos : Math.max(0, Math.min(data.indices.length - 1, S.pos));
  S.key = data.key;
  S.data = data;
  S.drawn = data.drawn;
  S.askedStep = null;
  S.told = null;
  S.trigger = setTriggerValue;
  S.sync = () => sync(S);
  document.body.classList.add('ek-stepping');
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
  if (!S.style) {  // two sheets: one that never changes, one of class selectors alone that a step rewrites
    S.base = document.createElement('style');
    S.style = document.createElement('style');
    document.head.append(S.base, S.style);
  }
  if (S.base.textContent !== BASE_CSS) S.base.textContent = BASE_CSS;
  S.mark = () => mark(S);
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
    // Anything else pressed (another view, a button of the server's) is told the step on screen first: the
    // server knows only the steps it drew, and would go back to its own.
    const tell = (e) => {
      if (!here() || !Number.isInteger(S.pos) || S.pos === S.data.pos || S.told === S.pos) return;
      const t = e.target;
      if (t === S.range || (t.closest && t.closest(BUTTONS))) return;
      S.told = S.pos;
      if (S.tell) S.tell(S.pos);
    };
    document.addEventListener('pointerdown', tell, true);
    document.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') tell(e); }, true);
    document.addEventListener('click', (e) => {
      const b = here() && e.target.closest && e.target.closest(BUTTONS);
      if (!b) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      const film = b.closest('[class*="st-key-step_film_"]');
      const to = film && /st-key-step_film_(\\d+)/.exec(film.className);
      move(S, to ? parseInt(to[1], 10) : S.pos + (b.closest('.st-key-step_prev') ? -1 : 1));
    }, true);
  }
  S.pos = null;
  move(S, want);
  return () => {  // another view: no step of ours to show
    clearTimeout(S.retry);
    if (S.style) S.style.textContent = S.base.textContent = '';
    unmark(S);
    document.body.classList.remove('ek-stepping');
  };
}

function move(S, p) {
  const d = S.data;
  p = Math.max(0, Math.min(d.indices.length - 1, p));
  if (p === S.pos) return;
  S.pos = p;
  address(d.indices[p]);
  if (p >= d.lo && p < d.hi) show(S, p);
  else S.label.textContent = 'Step ' + d.indices[p] + ' of ' + d.indices[d.indices.length - 1] + ' …';
  sync(S);
}

function sync(S) {
  // Ask the server for what the step needs and the page has not got: the steps around it (`goto` of the
  // stepper), or the filmstrip and transcript pages below (`goto` of the fragment below, drawn alone). Asked
  // again after a while: a request can be dropped when another comes while the server is running.
  clearTimeout(S.retry);
  if (!S.range || !document.body.contains(S.range)) return;  // another view by now
  const d = S.data;
  const p = S.pos;
  const now = Date.now();
  if (p < d.lo || p >= d.hi) {
    if (S.askedStep !== p || now - S.askedStepAt >= RETRY_MS) {
      S.askedStep = p;
      S.askedStepAt = now;
      S.trigger('goto', p);
    }
  } else {
    const pages = d.pages[p];
    const same = (a) => a && pages[0] === a[0] && pages[1] === a[1];
    if (same(S.drawn)) return;
    if (!same(S.askedPages) || now - S.askedPagesAt >= RETRY_MS) {
      S.askedPages = pages;
      S.askedPagesAt = now;
      // Asked once the step is on screen: the server's answer (a filmstrip and a transcript page for the
      // browser to render) kept the step's own paint waiting when it came first.
      requestAnimationFrame(() => setTimeout(() => ask(S), 0));
    }
  }
  S.retry = setTimeout(() => sync(S), RETRY_MS + 50);
}

function ask(S) {
  // The pages below for the step on screen now (it may have moved on since this was asked).
  const want = S.data.pages[S.pos];
  if (!want || (S.drawn && want[0] === S.drawn[0] && want[1] === S.drawn[1])) return;
  if (S.below) S.below('goto', S.pos);
  else S.trigger('goto', S.pos);
}

function address(index) {
  const u = new URL(window.location.href);
  u.searchParams.set('step', String(index));
  history.replaceState(history.state, '', u);
}

function show(S, p) {
  // Only class selectors change: a sheet's change makes the browser recompute the style of every element its
  // rules could match, and an attribute selector ([class*=…]) matches them all (~2,000 elements a step, most
  // of a step's time in the browser). The step's turn is marked by a class set on its messages (`mark`).
  const d = S.data;
  const last = d.indices.length - 1;
  S.style.textContent = '.st-key-stepv_' + p + ' { display: block !important; } .st-key-step_film_' + p +
    ' button { background: #c4304b; color: #fff; }';
  mark(S);
  S.label.textContent = 'Step ' + d.indices[p] + ' of ' + d.indices[last];
  S.range.value = String(p);
  const prev = document.querySelector('.st-key-step_prev button');
  const next = document.querySelector('.st-key-step_next button');
  if (prev) prev.disabled = p <= 0;
  if (next) next.disabled = p >= last;
}

function unmark(S) {
  for (const el of S.marked || []) el.classList.remove('ek-turn');
  S.marked = [];
}

function mark(S) {
  // The messages of the step's turn (in the transcript page below, which the server may draw again).
  unmark(S);
  const turn = S.data && Number.isInteger(S.pos) ? S.data.turns[S.pos] : null;
  if (turn === null || turn === undefined) return;
  S.marked = [...document.querySelectorAll('[class*="st-key-tr_turn_' + turn + '_"]')];
  for (const el of S.marked) el.classList.add('ek-turn');
}
"""
).replace("__MARK_TURN__", MARK_TURN)

_BELOW_JS = (
    UNPACK_JS
    + """
export default function (component) {
  const S = window.__evalkitStepper || (window.__evalkitStepper = {});
  S.below = component.setTriggerValue;
  S.drawn = unpack(component.data).drawn;
  S.askedPages = null;
  if (S.sync) S.sync();  // the step may have moved on while these were drawn
  // The transcript's messages below are new elements: the step's turn is marked on them once they are in.
  if (S.mark) requestAnimationFrame(() => S.mark());
}
"""
)

_KEEPER_JS = """
export default function (component) {
  const S = window.__evalkitStepper || (window.__evalkitStepper = {});
  S.tell = (pos) => component.setTriggerValue('goto', pos);
}
"""

_component: dict = {}


def mount(
    key: str,
    pos: int,
    said: bool,
    shown: range,
    indices: Sequence[int],
    pages: Sequence[tuple[int, int]],
    drawn: tuple[int, int],
    turns: Sequence[int | None],
    goto: Callable[[], None],
) -> None:
    """Our stepper for the steps `shown` (positions) around `pos` of episode `key`; `said`: the server moved
    to `pos` itself (a click it got), else the browser keeps its own step. `goto` is called (before the rerun
    it asks for) when the browser wants a step beyond them: `S["evalkit_stepper"].goto` holds its position."""
    if "stepper" not in _component:
        _component["stepper"] = st.components.v2.component("evalkit_stepper", js=_JS, isolate_styles=False)
    data = pack({
        "key": key, "pos": pos, "said": said, "lo": shown.start, "hi": shown.stop, "indices": list(indices),
        "pages": [list(p) for p in pages], "drawn": list(drawn), "turns": list(turns),
    })  # fmt: skip
    _component["stepper"](data=data, key="evalkit_stepper", on_goto_change=goto, width="stretch")


def mount_below(drawn: tuple[int, int], goto: Callable[[], None]) -> None:
    """In the fragment of the filmstrip and the transcript (pages `drawn`): `goto` is called (before the
    rerun of that fragment alone) when the browser's step is on other pages: `S["evalkit_below"].goto`."""
    if "below" not in _component:
        _component["below"] = st.components.v2.component("evalkit_below", js=_BELOW_JS, isolate_styles=False)
    data = pack({"drawn": list(drawn)})
    _component["below"](data=data, key="evalkit_below", on_goto_change=goto, width="stretch")


def mount_keeper(goto: Callable[[], None]) -> None:
    """Outside the fragments: how our stepper tells the server the step it shows before something else the
    user pressed reaches it (`goto` is called, `S["evalkit_keeper"].goto` holds the position). From inside
    the stepper's fragment the word would take the other widget's change into that fragment's rerun alone:
    the browser sends the two in one batch, run as one fragment's."""
    if "keeper" not in _component:
        make = st.components.v2.component
        _component["keeper"] = make("evalkit_keeper", js=_KEEPER_JS, isolate_styles=False)
    _component["keeper"](key="evalkit_keeper", on_goto_change=goto, width="stretch", height=0)
