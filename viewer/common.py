"""What every view of the viewer uses: the caches, session state helpers, and how trace fields, images and
step controls are drawn.

Caches are keyed on the trace's signature (size, mtime_ns): an appended episode invalidates, nothing else
re-reads. They are `cache_resource`, not `cache_data`: a 10,000-row frame or a record with a 10 MB field is
shared, not re-pickled on every rerun. Trace content is shown as text: nothing from a trace reaches
Markdown unescaped (`vs.md_escape`) or HTML at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from evalkit import analysis
from evalkit.records import rundir, transcripts
from evalkit.records.viewer_marks import image_size, overlay
from evalkit.types import EpisodeRecord
from evalkit.view import support as vs
from viewer.packing import UNPACK_JS, pack

S = st.session_state


# ---------------------------------------------------------------------------------------------- caches


@st.cache_resource(max_entries=64, show_spinner="Loading episode index…")
def table(run: str, signature: tuple[int, int]) -> pl.DataFrame | str:
    try:
        return vs.episode_table(run)
    except (OSError, ValueError, vs.TraceError) as e:
        return f"{type(e).__name__}: {e}"


@st.cache_resource(max_entries=64, show_spinner=False)
def malformed(run: str, signature: tuple[int, int]) -> str | None:
    """One line on the run's records that analysis leaves out (wrongly typed fields), or None."""
    try:
        bad = analysis.malformed([run])
    except (OSError, ValueError, vs.TraceError):
        return None
    return f"{bad.height} malformed record(s) left out (first: {bad['problem'][0]})" if bad.height else None


def text_index(run: str) -> pl.DataFrame:
    """The run's search index, kept (and grown with its trace) by `evalkit.view.search`."""
    try:
        with st.spinner("Indexing what the model said and did…", show_time=True):
            return vs.text_index(run)
    except (OSError, ValueError, vs.TraceError):
        return pl.DataFrame(schema=vs.text_search.INDEX_SCHEMA)


@st.cache_resource(max_entries=48, show_spinner=False)
def record(run: str, signature: tuple[int, int], key: str, offset: int | None) -> EpisodeRecord | str:
    try:
        return vs.open_record(run, key, offset, signature)
    except (OSError, ValueError, TypeError, vs.TraceError) as e:
        return f"{type(e).__name__}: {e}"


@st.cache_resource(max_entries=48, show_spinner=False)
def conversation(
    run: str, signature: tuple[int, int], key: str, offset: int | None, turns: tuple[int, int] | None = None
) -> list | str:
    """The episode's conversation as the model saw it; with `turns` (lo, hi), the opening and the messages of
    those turns only: a page of the transcript of a long episode reads the turns it shows."""
    rec = record(run, signature, key, offset)
    if isinstance(rec, str):
        return rec
    if turns is not None:
        lo, hi = turns
        rec = dataclasses.replace(
            rec, turns=[t for t in rec.turns if isinstance(t.turn, int) and lo <= t.turn <= hi]
        )
    try:
        return transcripts.messages(rec, Path(run))
    except (OSError, ValueError, TypeError, KeyError) as e:  # a transcript the reader cannot follow
        return f"{type(e).__name__}: {e}"


@st.cache_resource(max_entries=4096, show_spinner=False)
def thumb(path: str, mtime_ns: int, width: int) -> bytes | None:
    return vs.thumbnail(Path(path), width)


def thumbnail(run: str, rel: str | None, width: int = 160) -> bytes | None:
    path = vs.safe_image(run, rel)
    if path is None:
        return None
    try:
        return thumb(str(path), path.stat().st_mtime_ns, width)
    except OSError:
        return None


def find(df_all: pl.DataFrame, run: str, key: str) -> dict | None:
    rows = df_all.filter((pl.col("run") == run) & (pl.col("key") == key)).head(1).to_dicts()
    return rows[0] if rows else None


def load(df_all: pl.DataFrame, run: str, key: str) -> EpisodeRecord | str:
    row = find(df_all, run, key)
    if row is None:
        return f"No episode {key!r} in this run."
    return record(run, rundir.trace_signature(run), key, row.get("offset"))


@st.cache_resource(max_entries=64, show_spinner=False)
def _shared(key: tuple, _make: Callable[[], Any]) -> Any:
    return _make()


def shared(key: tuple, make: Callable[[], Any]) -> Any:
    """`memo` for every page of this server: a value of the runs alone (`key` names them), not of a
    session's filters or choices, made once rather than by each page that opens (the Episodes table's
    first paint). The value is shared: it is never changed in place."""
    return _shared(key, make)


def memo(key: tuple, make: Callable[[], Any], keep: int = 4) -> Any:
    """A value computed once per session for `key` (which must name everything it depends on; its first
    item names the kind). A few values of each kind are kept: a run being written makes a new one with
    every trace change, and the old ones must not pile up."""
    box = S.setdefault("_memo", {}).setdefault(key[0], {})
    if key not in box:
        while len(box) >= keep:
            box.pop(next(iter(box)))
        box[key] = make()
    return box[key]


# ----------------------------------------------------------------------------------------------- state


def open_episode(run: str, key: str, step: int | None = None, view: str = "Episode") -> None:
    S.ep = (run, key)
    S.step = step
    S._step_said = True  # the browser's stepper takes this step, not the one it last showed
    S.view = view


def move(name: str, delta: int, hi: int) -> None:
    S[name] = min(max(int(S.get(name) or 0) + delta, 0), hi)


def set_value(name: str, value: Any) -> None:
    S[name] = value


# --------------------------------------------------------------------------------------------- drawing


def no_reward(error_class: object) -> str:
    """What a missing reward means: unscored (the infrastructure failed), or none given (never graded)."""
    return "unscored" if error_class else "no reward"


def num(x: object, fmt: str, missing: str = "—") -> str:
    """A number from a trace, formatted; whatever else a hostile or foreign trace put there, as short text."""
    if x is None:
        return missing
    try:
        return format(x, fmt)
    except (TypeError, ValueError):
        return str(x)[:40]


def show_text(label: str, text: str, key: str, code: bool = False) -> None:
    """A trace field as text (`code`: in a code block); beyond TEXT_LIMIT characters, one page at a time plus
    a download of it all."""
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


@st.cache_resource(max_entries=4096, show_spinner=False)
def _size(path: str, mtime_ns: int) -> tuple[int, int] | None:
    return image_size(path)


def show_image(
    run: str,
    rel: str | None,
    caption: str,
    rec: EpisodeRecord | None = None,
    turn=None,
    enlarge: str = "",
    space: str | None = None,
) -> None:
    """An image from inside the run, or a note saying why there is none; files outside the run are refused.
    With a turn, its computer-use actions are drawn where they landed (`rel` must be the screen they were
    taken on, read in coordinate `space`), by the browser over the picture sent as it is (`marks_layer`).
    With `enlarge` (a unique name), a click shows it at full size."""
    if not rel:
        st.caption(f"{caption}: none")
        return
    path = vs.safe_image(run, rel)
    if path is None:
        st.caption(f"{caption}: missing or outside the run")
        st.text(str(rel)[:300])
        return
    try:
        layer = None
        if turn is not None and rec is not None:
            layer = overlay(turn.calls, space, _size(str(path), path.stat().st_mtime_ns))
        where = st.container(key=f"enlarge_{enlarge}") if enlarge else st.container()
        where.image(path.read_bytes(), caption=caption + (" · actions marked" if layer else ""),
                    width="stretch", output_format=image_format(path))  # fmt: skip
        if layer:
            with where:
                marks_layer(layer, f"marks_{enlarge or vs.short_id(rel)}")
    except Exception as e:  # a corrupt or non-image file inside the run must not take the page down
        st.caption(f"{caption}: unreadable image ({type(e).__name__})")


# The marks of a step's actions as an SVG layer over its picture, drawn as `viewer_marks.draw_marks` draws
# them into a picture, from their positions (`evalkit.records.viewer_marks.overlay`). Decoding a screenshot,
# drawing on it and encoding it again on the server was a third of the CPU of opening an episode (py-spy):
# the browser draws them for nothing. Our own code: it draws numbers, never trace text.
_MARKS_JS = (
    UNPACK_JS
    + """
const NS = 'http://www.w3.org/2000/svg';
const RED = 'rgb(230,30,60)';

function node(tag, attrs) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  return n;
}

export default function (component) {
  const { parentElement } = component;
  const data = unpack(component.data);
  const r = data.r, thin = Math.max(2, Math.floor(r / 3)), wide = Math.max(3, Math.floor(r / 2));
  const svg = node('svg', { class: 'ek-marks', viewBox: '0 0 ' + data.w + ' ' + data.h,
    preserveAspectRatio: 'xMidYMid meet', role: 'img', 'aria-label': 'actions marked' });
  for (const m of data.marks) {
    const [[x, y], end] = m.points;
    if (end) {
      const [x2, y2] = end, a = Math.atan2(y2 - y, x2 - x);
      const tip = (s) => (x2 - 2 * r * Math.cos(a + s)) + ',' + (y2 - 2 * r * Math.sin(a + s));
      svg.append(node('line', { x1: x, y1: y, x2, y2, stroke: RED, 'stroke-width': thin }),
        node('polygon', { points: x2 + ',' + y2 + ' ' + tip(0.45) + ' ' + tip(-0.45), fill: RED }));
    }
    const ring = (rr, stroke, w) =>
      node('circle', { cx: x, cy: y, r: rr, fill: 'none', stroke, 'stroke-width': w });
    svg.append(ring(r, '#fff', wide), ring(r, RED, thin));
    if (m.double) svg.append(ring(r / 2, RED, 2));
    const label = node('text', { x: x + r + 2, y: y - r - 2, 'font-size': 2 * r, 'font-family': 'sans-serif',
      'dominant-baseline': 'hanging', fill: RED, stroke: '#fff', 'stroke-width': 2,
      'paint-order': 'stroke' });
    label.textContent = String(m.n);
    svg.append(label);
  }
  parentElement.replaceChildren(svg);
}
"""
)

_marks: list = []


def marks_layer(layer: dict, key: str) -> None:
    """Mount the SVG layer of `layer` (an `overlay`) over the picture drawn just before it, in the same
    keyed container (the page's style lays it over the picture, `_LAYOUT_CSS`)."""
    if not _marks:
        _marks.append(st.components.v2.component("evalkit_marks", js=_MARKS_JS, isolate_styles=False))
    _marks[0](data=pack(layer), key=key, width="stretch")


def no_none(
    df: pl.DataFrame, config: dict[str, Any], reasons: pl.Series | None = None
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`df` and its column config as a table should show them, with no cell reading "None": a missing text
    is empty, a missing reward says why (`reasons`, the episodes' error classes: unscored or no reward), any
    other missing number is empty. A numeric column with a gap becomes text, formatted as its config says."""
    exprs, config = [], dict(config)
    for name, dtype in df.schema.items():
        if df.get_column(name).null_count() == 0:
            continue
        if dtype in (pl.String, pl.Categorical):
            exprs.append(pl.col(name).cast(pl.String).fill_null(""))
            continue
        if not dtype.is_numeric():
            continue
        cfg = config.get(name) or {}
        fmt = (cfg.get("type_config") or {}).get("format") or "%s"
        missing = [""] * df.height
        if name == "reward" and reasons is not None:
            missing = [no_reward(r) for r in reasons.to_list()]
        values = df.get_column(name).to_list()
        text = [num_printf(v, fmt) if v is not None else m for v, m in zip(values, missing, strict=True)]
        exprs.append(pl.Series(name, text, dtype=pl.String))
        config[name] = st.column_config.TextColumn(cfg.get("label") or name, help=cfg.get("help"),
                                                   alignment="right")  # fmt: skip
    return (df.with_columns(exprs) if exprs else df), config


def num_printf(v: Any, fmt: str) -> str:
    try:
        return fmt % v if "%" in fmt else str(v)
    except (TypeError, ValueError):
        return str(v)


FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}


def image_format(path: Path) -> str:
    """The format to send a picture in: its own. Left to guess ("auto"), Streamlit re-encodes every PNG
    screenshot as a JPEG on every rerun (tens of milliseconds a step, and marks blurred)."""
    return FORMATS.get(path.suffix.lower(), "auto")


def fields(box, rows: list[dict[str, str]], name: str, empty: str) -> None:
    """A grade or usage table (cells already clipped by `vs.field_rows`)."""
    if rows:
        box.dataframe(
            pl.DataFrame(rows, schema={"name": pl.String, "value": pl.String}).rename({"name": name}),
            hide_index=True,
        )
    else:
        box.caption(empty)


def step_controls(name: str, steps: list[int], label: str = "Step", row=None, said: bool = True) -> int:
    """Previous / Next (also the ← and → keys) and a slider over step positions, in `row` (a horizontal
    container; a new one by default), and "Step i of n" unless not `said` (a script of ours says it);
    returns the position."""
    hi = len(steps) - 1
    S[name] = min(max(int(S.get(name) or 0), 0), hi)
    # One row, as few elements as can be: each is a message the browser applies to the whole page.
    row = row if row is not None else st.container(horizontal=True, vertical_alignment="center", gap="small")
    row.button(
        "◀ Previous", key=f"{name}_prev", on_click=move, args=(name, -1, hi), disabled=S[name] <= 0,
        shortcut="Left", help="Previous step (← key)",
    )  # fmt: skip
    row.button(
        "Next ▶", key=f"{name}_next", on_click=move, args=(name, 1, hi), disabled=S[name] >= hi,
        shortcut="Right", help="Next step (→ key)",
    )  # fmt: skip
    if hi > 0:
        row.slider(label, 0, hi, key=name, format="%d", label_visibility="collapsed", width="stretch")
    if said:
        row.container(key=f"{name}_label", width="content").text(f"{label} {steps[S[name]]} of {steps[-1]}")
    return S[name]


# The page's own layout: less padding around the page so that a step fits 1280 × 720 without scrolling, and
# the step's pictures no taller than the room under the header (a tall screenshot is scaled, not cropped).
_LAYOUT_CSS = (
    '[data-testid="stMainBlockContainer"] { padding: 2.75rem 1.5rem 3rem; }'
    '[class*="st-key-enlarge_"] img { cursor: zoom-in; }'
    '[class*="st-key-enlarge_frame_ep"] img, [class*="st-key-enlarge_target_ep"] img, '
    '[class*="st-key-enlarge_ab_"] img '
    "{ max-height: 58vh; object-fit: contain; }"
    # A step's marks over its picture: the layer as wide as the picture's column and as high as the picture
    # (the same max-height; its viewBox fitted as object-fit: contain fits the picture).
    '[class*="st-key-enlarge_"]:has(> [class*="st-key-marks_"]) { position: relative; }'
    '[class*="st-key-marks_"] { position: absolute; top: 0; left: 0; width: 100%; pointer-events: none; }'
    "svg.ek-marks { display: block; width: 100%; max-height: 58vh; }"
)

# A click on an image inside a container keyed `enlarge_…` shows it over the page at full size; a click or
# Esc closes it. Our own code, mounted once per page: no trace content ever reaches it.
_ENLARGE_JS = (
    f"const LAYOUT = {_LAYOUT_CSS!r};"
    + """
export default function () {
  if (window.__evalkitEnlarge) return;
  window.__evalkitEnlarge = true;
  const style = document.createElement('style');
  style.textContent = LAYOUT;
  document.head.appendChild(style);
  const close = () => document.querySelectorAll('[data-testid="evalkit-lightbox"]').forEach(e => e.remove());
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') close(); });
  document.addEventListener('click', (e) => {
    const img = e.target.closest && e.target.closest('[class*="st-key-enlarge_"] img');
    if (!img) return;
    e.preventDefault();
    e.stopPropagation();
    close();
    const box = document.createElement('div');
    box.setAttribute('data-testid', 'evalkit-lightbox');
    box.style.cssText = 'position:fixed;inset:0;z-index:1000000;background:rgba(20,20,20,.85);' +
      'display:flex;align-items:center;justify-content:center;cursor:zoom-out';
    const big = document.createElement('img');
    big.src = img.src;
    big.alt = img.alt || '';
    // Small pictures are drawn at half the window at least: enlarging must enlarge.
    const w = Math.min(innerWidth * 0.96, Math.max(img.naturalWidth, innerWidth * 0.5));
    big.style.cssText = 'display:block;width:' + w + 'px;max-height:96vh;object-fit:contain;background:#fff';
    const shot = document.createElement('div');
    shot.style.cssText = 'position:relative';
    shot.appendChild(big);
    // The step's marks, over the enlarged picture as over the small one.
    const marks = img.closest('[class*="st-key-enlarge_"]').querySelector('svg.ek-marks');
    if (marks) {
      const layer = marks.cloneNode(true);
      layer.style.cssText = 'position:absolute;inset:0;width:100%;height:100%;max-height:none';
      shot.appendChild(layer);
    }
    box.appendChild(shot);
    box.addEventListener('click', close);
    document.body.appendChild(box);
  }, true);
}
"""
)


_enlarge: list = []


def enlarge_support() -> None:
    """Mount the click-to-enlarge behaviour (registered once per process, mounted once per page)."""
    if not _enlarge:
        _enlarge.append(st.components.v2.component("evalkit_enlarge", js=_ENLARGE_JS, isolate_styles=False))
    _enlarge[0](key="evalkit_enlarge")
