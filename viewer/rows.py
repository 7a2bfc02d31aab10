"""A table the browser draws itself: the Episodes table, its matching steps, the A-vs-B tasks.

Streamlit's data grid alone took about a second of the Episodes view's first paint (its code and its
canvas; the script ran in a tenth of that). This one sends the cells as text, each column's repeated values
once (a column of four model names is four strings and 10,000 small numbers), and a small script of ours
draws the rows in view as an HTML table as the user scrolls: a few dozen rows in the page whatever the run's
size. A click on a row (or Enter on it) asks the server to open it; a click on a header sorts by that column
(again: the other way). Each request names the table it was made on, so a click on a table that changed
since (a live run grew, another sort) opens nothing rather than the wrong episode.

Our own code; trace content reaches it only as cell text, set as text (`textContent`), never as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl
import streamlit as st

from viewer.common import S, num_printf
from viewer.packing import UNPACK_JS, pack

ROW_PX = 30
"""One row's height in pixels (the header's too)."""

WIDEST_CH = 48
"""A column is at most this many characters wide; longer cells end in an ellipsis and show whole on hover."""


def rows_height(n: int, most: int) -> int:
    """A table's height in pixels: its rows and a header, up to `most` (then it scrolls)."""
    return min(most, ROW_PX * (n + 1) + 2)


def identity(shown: pl.DataFrame) -> str:
    """What a request from the browser names its table by: the rows it had, in their order (each row is
    hashed with its position)."""
    if shown.is_empty():
        return "0"
    return f"{shown.height}:{shown.with_row_index('_at').hash_rows(seed=7).sum()}"  # the sum wraps, as wanted


def _cells(s: pl.Series, fmt: str | None) -> pl.Series:
    """A column as the text its cells read: numbers in their format; nothing missing reads "None"."""
    if s.dtype.is_numeric() and fmt and "%" in fmt:
        return pl.Series(s.name, [("" if v is None else num_printf(v, fmt)) for v in s.to_list()], pl.String)
    try:
        return s.cast(pl.String).fill_null("")
    except pl.exceptions.PolarsError:  # a nested value: its Python text
        return pl.Series(s.name, ["" if v is None else str(v) for v in s.to_list()], pl.String)


def _column(name: str, s: pl.Series, spec: Mapping[str, Any]) -> dict[str, Any]:
    """One column for the browser: its label, whether it reads right-aligned, its width, and its cells, with
    repeated values sent once (`dict` and a code per row) when that is the shorter."""
    fmt = (spec.get("type_config") or {}).get("format")
    numeric = s.dtype.is_numeric() or spec.get("alignment") == "right"
    text = _cells(s, fmt)
    label = spec.get("label") or name
    longest = int(text.str.len_chars().max() or 0) if len(text) else 0
    col: dict[str, Any] = {
        "id": name, "label": label, "help": spec.get("help") or "", "right": bool(numeric),
        "ch": max(4, min(WIDEST_CH, max(longest, len(label) + 2))),
    }  # fmt: skip
    uniques = text.unique(maintain_order=True)
    if len(uniques) * 2 <= len(text):
        col["dict"] = uniques.to_list()
        col["codes"] = text.cast(pl.Enum(uniques)).to_physical().to_list()
    else:
        col["values"] = text.to_list()
    return col


def _on(key: str, what: str, act: Callable[[dict], None]) -> Callable[[], None]:
    """The callback of a request `what` from table `key`: `act` on it if it was made on the table drawn."""

    def handler() -> None:
        asked = getattr(S.get(key), what, None)
        if isinstance(asked, dict) and asked.get("of") == S.get(f"_{key}_id"):
            act(asked)

    return handler


_component: dict = {}


def row_table(
    df: pl.DataFrame,
    ids: pl.DataFrame,
    *,
    key: str,
    config: Mapping[str, Mapping[str, Any]],
    height: int,
    on_open: Callable[[int], None],
    sort: tuple[str | None, bool] | None = None,
    on_sort: Callable[[str], None] | None = None,
    current: int | None = None,
    empty: str = "No rows.",
    on_painted: Callable[[], None] | None = None,
) -> None:
    """Draw `df` (its columns in order, labelled and formatted as `config`, Streamlit's column config, says).
    `ids` tells its rows apart (the same height: what row i is). A click on row i calls `on_open(i)`; with
    `on_sort`, a click on a header calls `on_sort(column)` and `sort` (column, descending) is marked.
    `current` (a row position) is marked and scrolled into view when the table is first drawn. With
    `on_painted`, the browser calls it (a rerun) once the rows are on screen."""
    if "rows" not in _component:
        # In the page's own DOM (not a shadow root): its styles are all under .ek-rows.
        make = st.components.v2.component
        _component["rows"] = make("evalkit_rows", js=_JS, css=_CSS, isolate_styles=False)
    ident = identity(ids)
    S[f"_{key}_id"] = ident
    data = pack({
        "of": ident, "n": df.height, "row": ROW_PX, "empty": empty, "sortable": on_sort is not None,
        "sort": list(sort) if sort else None, "current": current, "painted": on_painted is not None,
        # As JSON text: Streamlit looks at each value of a component's data to see whether it is a data frame,
        # and took 0.25-0.8 s to decide that 10,000 rows of cells are not one (py-spy: most of the script's
        # time in the table's first paint). Text it passes as it is.
        "columns": json.dumps([_column(c, df.get_column(c), config.get(c) or {}) for c in df.columns]),
    })  # fmt: skip
    callbacks = {"on_open_change": _on(key, "open", lambda a: on_open(int(a.get("row", -1))))}
    if on_sort is not None:
        callbacks["on_sort_change"] = _on(key, "sort", lambda a: on_sort(str(a.get("column"))))
    if on_painted is not None:
        callbacks["on_painted_change"] = on_painted
    _component["rows"](data=data, key=key, height=height, width="stretch", **callbacks)


_CSS = """
.ek-rows { height: 100%; overflow: auto; border: 1px solid var(--st-border-color, #e6e9ef);
  border-radius: 0.5rem; font-family: var(--st-font, sans-serif); font-size: 14px;
  color: var(--st-text-color, #31333f); background: var(--st-background-color, #fff);
  box-sizing: border-box; }
.ek-rows table { border-collapse: separate; border-spacing: 0; table-layout: fixed; width: max-content;
  min-width: 100%; }
.ek-rows th, .ek-rows td { height: var(--ek-row); padding: 0 8px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; border-bottom: 1px solid var(--st-border-color, #e6e9ef); box-sizing: border-box;
  text-align: left; }
.ek-rows th { position: sticky; top: 0; z-index: 1; font-weight: 400;
  background: var(--st-secondary-background-color, #f0f2f6); color: var(--st-text-color, #31333f); }
.ek-rows th.sortable { cursor: pointer; }
.ek-rows th.sortable:hover { background: var(--st-border-color, #e6e9ef); }
.ek-rows .right { text-align: right; }
.ek-rows tbody tr.row { cursor: pointer; }
.ek-rows tbody tr.row:hover td { background: var(--st-secondary-background-color, #f0f2f6); }
.ek-rows tbody tr.row:focus { outline: 2px solid var(--st-primary-color, #c4304b); outline-offset: -2px; }
.ek-rows tbody tr.current td {
  background: color-mix(in srgb, var(--st-primary-color, #c4304b) 10%, transparent); }
.ek-rows td.empty { color: #808495; }
"""

_JS = (
    UNPACK_JS
    + """
const SLACK = 8;  // rows drawn above and below those in view

export default function (component) {
  const { setTriggerValue, parentElement } = component;
  const data = unpack(component.data);
  const state = parentElement.__ek || (parentElement.__ek = {});
  let box = parentElement.querySelector('.ek-rows');
  if (!box) {
    box = document.createElement('div');
    box.className = 'ek-rows';
    box.setAttribute('role', 'grid');
    box.innerHTML = '<table><colgroup></colgroup><thead><tr></tr></thead><tbody></tbody></table>';
    box.addEventListener('scroll', () => draw(state));
    box.addEventListener('click', (e) => pick(state, e.target));
    box.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') pick(state, e.target);
    });
    parentElement.appendChild(box);
  }
  const fresh = state.data === undefined;
  const resorted = !fresh && JSON.stringify(state.data.sort) !== JSON.stringify(data.sort);
  state.box = box;
  state.data = Object.assign({}, data, { columns: JSON.parse(data.columns) });
  state.trigger = setTriggerValue;
  box.style.setProperty('--ek-row', data.row + 'px');
  head(state);
  state.drawn = null;
  if (resorted) box.scrollTop = 0;
  if (fresh && Number.isInteger(data.current)) {
    box.scrollTop = Math.max(0, (data.current - 2) * data.row);
  }
  draw(state);
  if (data.painted && !state.told) {  // once the rows are painted
    state.told = true;
    requestAnimationFrame(() => setTimeout(() => setTriggerValue('painted', true), 0));
  }
}

function cell(col, i) {
  return col.values ? col.values[i] : col.dict[col.codes[i]];
}

function head(state) {
  const d = state.data;
  const cols = state.box.querySelector('colgroup');
  const row = state.box.querySelector('thead tr');
  cols.replaceChildren(...d.columns.map((c) => {
    const el = document.createElement('col');
    el.style.width = (c.ch + 2) + 'ch';
    return el;
  }));
  row.replaceChildren(...d.columns.map((c) => {
    const th = document.createElement('th');
    const sorted = d.sort && d.sort[0] === c.id;
    th.textContent = c.label + (sorted ? (d.sort[1] ? ' ▼' : ' ▲') : '');
    th.dataset.column = c.id;
    if (c.right) th.classList.add('right');
    if (d.sortable) {
      th.classList.add('sortable');
      th.title = (c.help ? c.help + '. ' : '') + 'Click to sort by ' + c.label;
    } else if (c.help) {
      th.title = c.help;
    }
    th.setAttribute('role', 'columnheader');
    if (sorted) th.setAttribute('aria-sort', d.sort[1] ? 'descending' : 'ascending');
    return th;
  }));
}

function draw(state) {
  const d = state.data;
  const box = state.box;
  const body = box.querySelector('tbody');
  if (d.n === 0) {
    const td = document.createElement('td');
    td.className = 'empty';
    td.colSpan = Math.max(1, d.columns.length);
    td.textContent = d.empty;
    const tr = document.createElement('tr');
    tr.appendChild(td);
    body.replaceChildren(tr);
    return;
  }
  const inView = Math.ceil(box.clientHeight / d.row) + 1;
  const first = Math.max(0, Math.min(Math.floor(box.scrollTop / d.row), d.n - inView) - SLACK);
  const last = Math.min(d.n, first + inView + 2 * SLACK);
  if (state.drawn && state.drawn[0] === first && state.drawn[1] === last) return;
  state.drawn = [first, last];
  const rows = [];
  rows.push(spacer(first * d.row, d.columns.length));
  for (let i = first; i < last; i++) {
    const tr = document.createElement('tr');
    tr.className = 'row' + (i === d.current ? ' current' : '');
    tr.dataset.row = String(i);
    tr.tabIndex = 0;
    tr.setAttribute('role', 'row');
    for (const c of d.columns) {
      const td = document.createElement('td');
      const text = cell(c, i);
      td.textContent = text;
      if (text.length > c.ch) td.title = text;
      if (c.right) td.className = 'right';
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  rows.push(spacer((d.n - last) * d.row, d.columns.length));
  body.replaceChildren(...rows);
}

function spacer(px, span) {
  const tr = document.createElement('tr');
  tr.setAttribute('aria-hidden', 'true');
  const td = document.createElement('td');
  td.colSpan = Math.max(1, span);
  td.style.cssText = 'height:' + px + 'px;padding:0;border:0';
  tr.appendChild(td);
  return tr;
}

function pick(state, target) {
  const th = target.closest && target.closest('th');
  if (th) {
    if (state.data.sortable) state.trigger('sort', { column: th.dataset.column, of: state.data.of });
    return;
  }
  const tr = target.closest && target.closest('tr.row');
  if (tr) state.trigger('open', { row: parseInt(tr.dataset.row, 10), of: state.data.of });
}
"""
)
