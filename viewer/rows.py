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
import secrets
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


CODE_DIGITS = "".join(chr(c) for c in range(35, 127) if c != 92)[:90]
"""The digits of a column's codes sent as text: printable ASCII with no quote or backslash (nothing to escape
in JSON), one digit a row for up to 90 distinct values, two for up to 8,100. As a list of numbers, 10,000
codes were 30-60 KB a column, most of the table's message (368 KB for 10,000 episodes)."""
_PAIRS: list[str] = []


def _codes(codes: pl.Series, distinct: int) -> tuple[str | list[int], int]:
    """`codes` as text of `CODE_DIGITS` and its digits a code (or as a list, 0, beyond 8,100 values)."""
    if distinct > len(CODE_DIGITS) ** 2:
        return codes.to_list(), 0
    if distinct <= len(CODE_DIGITS):
        table = list(CODE_DIGITS)
    else:
        if not _PAIRS:
            _PAIRS.extend(a + b for a in CODE_DIGITS for b in CODE_DIGITS)
        table = _PAIRS
    return pl.Series(table[:distinct], dtype=pl.String).gather(codes).str.join("").item(), len(table[0])


def _sequence(s: pl.Series, fmt: str | None) -> tuple[int, int] | None:
    """(first, step) when the column is integers one apart (the table's "#" in the trace's order, or its
    reverse), sent as those two numbers."""
    if fmt or not s.dtype.is_integer() or s.len() < 2 or s.null_count():
        return None
    step = int(s[1]) - int(s[0])
    return (int(s[0]), step) if step in (1, -1) and bool((s.diff().drop_nulls() == step).all()) else None


def _column(name: str, s: pl.Series, spec: Mapping[str, Any]) -> dict[str, Any]:
    """One column for the browser: its label, whether it reads right-aligned, its width, and its cells:
    integers one apart as the first and the step (`from`, `by`), repeated values sent once (`dict` and a
    code per row, as text of `w` digits a code: `cells` reads them) when that is the shorter."""
    fmt = (spec.get("type_config") or {}).get("format")
    numeric = s.dtype.is_numeric() or spec.get("alignment") == "right"
    label = spec.get("label") or name
    col: dict[str, Any] = {"id": name, "label": label, "help": spec.get("help") or "", "right": bool(numeric)}
    seq = _sequence(s, fmt)
    if seq is not None:
        longest = max(len(str(s[0])), len(str(s[-1])))
        col |= {"ch": max(4, min(WIDEST_CH, max(longest, len(label) + 2))), "from": seq[0], "by": seq[1]}
        return col
    text = _cells(s, fmt)
    longest = int(text.str.len_chars().max() or 0) if len(text) else 0
    col["ch"] = max(4, min(WIDEST_CH, max(longest, len(label) + 2)))
    uniques = text.unique(maintain_order=True)
    if len(uniques) * 2 <= len(text):
        col["dict"] = uniques.to_list()
        col["codes"], col["w"] = _codes(text.cast(pl.Enum(uniques)).to_physical(), len(uniques))
    else:
        col["values"] = text.to_list()
    return col


def cells(col: Mapping[str, Any], n: int) -> list[str]:
    """The `n` cells of a column as `_column` sends it, read as the browser reads them (`cell` in `_JS`)."""
    if "from" in col:
        return [str(col["from"] + col["by"] * i) for i in range(n)]
    if "values" in col:
        return list(col["values"])
    codes, w = col["codes"], col.get("w", 0)
    if w:
        digit = {c: i for i, c in enumerate(CODE_DIGITS)}
        codes = [sum(digit[codes[i + k]] * len(CODE_DIGITS) ** (w - 1 - k) for k in range(w))
                 for i in range(0, len(codes), w)]  # fmt: skip
    return [col["dict"][c] for c in codes]


def _digest(df: pl.DataFrame, config: Mapping[str, Any]) -> tuple:
    """What a table's cells are made of: its columns, their settings and its rows in order (two 64-bit sums
    of the rows' hashes with their positions)."""
    at = df.with_row_index("_at")
    sums = tuple(int(at.hash_rows(seed=seed).sum()) for seed in (7, 11))  # the sums wrap, as wanted
    return df.height, tuple(df.columns), json.dumps(config, sort_keys=True, default=str), sums


@st.cache_resource(max_entries=32, show_spinner=False)
def _columns_text(digest: tuple, _df: pl.DataFrame, _config: Mapping[str, Any]) -> str:
    """The columns' JSON text, made once for every page that shows those cells (`digest`): each new page of
    a 10,000-episode run made it again, 12-17 ms of the script's ~40 ms."""
    return json.dumps([_column(c, _df.get_column(c), _config.get(c) or {}) for c in _df.columns])


def _on(key: str, what: str, act: Callable[[dict], None]) -> Callable[[], None]:
    """The callback of a request `what` from table `key`: `act` on it if it was made on the table drawn."""

    def handler() -> None:
        asked = getattr(S.get(key), what, None)
        if isinstance(asked, dict) and asked.get("of") == S.get(f"_{key}_id"):
            act(asked)

    return handler


_component: dict = {}


def _paint_request(key: str, on_painted: Callable[[], None] | None) -> str | None:
    """What table `key`'s data asks the browser for once its rows are on screen: a name made by the first
    run that asks (`on_painted`) and sent by every run of the session after it, so that the run the answer
    starts sends the table's data as it was, byte for byte: Streamlit then leaves the table as it is (with a
    `painted` flag that changed, the browser parsed the 120 KB again and drew the rows again, after the
    paint, as the sidebar's widgets came). The browser answers each name once a page (`TOLD` in `_JS`), so
    a table drawn again after another view does not ask again."""
    name = f"_{key}_paint_request"
    if on_painted is not None and name not in S:
        S[name] = secrets.token_hex(6)
    return S.get(name)


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
    `on_painted`, the browser calls it (a rerun) once the rows are on screen (`_paint_request`)."""
    if "rows" not in _component:
        # In the page's own DOM (not a shadow root): its styles are all under .ek-rows.
        make = st.components.v2.component
        _component["rows"] = make("evalkit_rows", js=_JS, css=_CSS, isolate_styles=False)
    ident = identity(ids)
    S[f"_{key}_id"] = ident
    data = pack({
        "of": ident, "n": df.height, "row": ROW_PX, "empty": empty, "sortable": on_sort is not None,
        "sort": list(sort) if sort else None, "current": current, "painted": _paint_request(key, on_painted),
        # As JSON text: Streamlit looks at each value of a component's data to see whether it is a data frame,
        # and took 0.25-0.8 s to decide that 10,000 rows of cells are not one (py-spy: most of the script's
        # time in the table's first paint). Text it passes as it is.
        "columns": _columns_text(_digest(df, config), df, config),
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
const DIGITS = __DIGITS__, BASE = DIGITS.length, DIGIT = {};
const TOLD = new Set();  // the requests to say the rows are painted answered on this page (`_paint_request`)
for (let i = 0; i < BASE; i++) DIGIT[DIGITS.charCodeAt(i)] = i;

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
  state.data = Object.assign({}, data, { columns: JSON.parse(data.columns).map(codes) });
  state.trigger = setTriggerValue;
  box.style.setProperty('--ek-row', data.row + 'px');
  head(state);
  state.drawn = null;
  if (resorted) box.scrollTop = 0;
  if (fresh && Number.isInteger(data.current)) {
    box.scrollTop = Math.max(0, (data.current - 2) * data.row);
  }
  draw(state);
  if (data.painted && !TOLD.has(data.painted)) {  // once the rows are painted
    TOLD.add(data.painted);
    requestAnimationFrame(() => setTimeout(() => setTriggerValue('painted', true), 0));
  }
}

function cell(col, i) {
  if (col.from !== undefined) return String(col.from + col.by * i);
  return col.values ? col.values[i] : col.dict[col.codes[i]];
}

function codes(col) {  // a column's codes sent as text of `w` digits each (`_codes`), as numbers
  if (typeof col.codes !== 'string') return col;
  const text = col.codes, w = col.w, out = new Uint16Array(text.length / w);
  for (let i = 0; i < out.length; i++) {
    let v = 0;
    for (let k = 0; k < w; k++) v = v * BASE + DIGIT[text.charCodeAt(i * w + k)];
    out[i] = v;
  }
  return Object.assign(col, { codes: out });
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
).replace("__DIGITS__", json.dumps(CODE_DIGITS))
