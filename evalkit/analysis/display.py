"""Rich notebook display of episodes and runs: outcome, grade, usage and a strip of frames as thumbnails.

A record's pictures are paths relative to its run directory, which a record read from a run or written by an
episode knows (`run_dir`); for one made otherwise, pass it (`episode_html(run_dir, rec)`). The record's
notebook display is `record_html`, which `import evalkit` registers with IPython by the record type's name:
`evalkit.types` never imports this module. Frames are only read through `rundir.safe_path`, so a hostile
trace cannot pull in files from outside its run. Everything the model wrote is escaped.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalkit.analysis.tables import method_note, table_html, usd
from evalkit.records import rundir, viewer_marks
from evalkit.types import EpisodeRecord

STYLE = (
    "<style>.ek{font-family:system-ui,sans-serif;font-size:13px;line-height:1.35}"
    ".ek table{border-collapse:collapse;margin:4px 0}.ek td,.ek th{border:1px solid #ddd;padding:2px 6px;"
    "text-align:left}.ek .strip{display:flex;gap:4px;overflow-x:auto;padding:4px 0}.ek figure{margin:0;"
    "text-align:center;font-size:11px;color:#555}.ek img{border:1px solid #ccc;display:block}"
    ".ek .ok{color:#17803d}.ek .bad{color:#b42318}.ek .muted{color:#777}</style>"
)


def load(run_dir: str | Path, key: str | None = None, offset: int | None = None) -> EpisodeRecord:
    """One episode of a run by key or by index offset (it knows its run: its display shows its frames)."""
    return rundir.read_at(run_dir, offset) if offset is not None else rundir.find_record(run_dir, str(key))


def thumbnail(
    run_dir: str | Path | None,
    rel: str | None,
    width: int = 160,
    turn: Any = None,
    coordinates: str | None = None,
) -> str | None:
    """An <img> of the run file `rel` as inline base64, scaled to `width`; None if it is missing or unsafe.
    With a turn, its computer-use actions are drawn where they landed."""
    if run_dir is None or not rel:
        return None
    path = rundir.safe_path(run_dir, rel)
    if path is None:
        return None
    try:
        # start-up: Pillow and the marks only for a record with frames
        from PIL import Image

        from evalkit.records.viewer_marks import marked

        data = path.read_bytes()
        data = (marked(data, turn.calls, coordinates) if turn is not None else None) or data
        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB")
            if im.width > width:
                im = im.resize((width, max(1, round(im.height * width / im.width))))
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=80)
    except Exception:  # an unreadable image is shown as missing, never breaks the display
        return None
    b64 = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/jpeg;base64,{b64}" width="{width}" alt="{html.escape(rel)}">'


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return _e(v)


def _kv_table(d: dict) -> str:
    cells = "".join(f"<th>{_e(k)}</th>" for k in d)
    vals = "".join(
        f"<td>{_fmt(v) if not isinstance(v, dict | list) else _e(json.dumps(v))[:200]}</td>"
        for v in d.values()
    )
    return f"<table><tr>{cells}</tr><tr>{vals}</tr></table>"


def _figure(
    run_dir: Any, rel: str | None, caption: str, width: int, turn: Any = None, coords: str | None = None
) -> str:
    img = thumbnail(run_dir, rel, width, turn, coords)
    why = "(no run dir)" if run_dir is None else "(missing)"
    body = img if img else f'<div class="muted" style="width:{width}px">{why}</div>'
    return f"<figure>{body}<figcaption>{_e(caption)}</figcaption></figure>"


def record_html(
    rec: EpisodeRecord | dict, run_dir: str | Path | None = None, max_frames: int = 12, width: int = 140
) -> str:
    """HTML for one episode: identity, outcome, grade, usage, a strip of target, frames and final render."""
    if isinstance(rec, dict):
        rec = EpisodeRecord.from_dict(rec)
    run_dir = run_dir if run_dir is not None else rec.run_dir
    if rec.scored:
        outcome = f'<b class="ok">reward {rec.reward:.3f}</b>'
    elif rec.error_class:
        outcome = (
            f'<b class="bad">unscored: {_e(rec.error_class)}</b> '
            f'<span class="muted">{_e((rec.error or "")[:300])}</span>'
        )
    else:
        outcome = '<b class="muted">no reward</b>'
    head = (
        f"<div><b>{_e(rec.model)}</b> · {_e(rec.env)} / {_e(rec.surface)} / {_e(rec.mode)} · task "
        f"<code>{_e(rec.task_id)}</code> ({_e(rec.tier or '-')}) · repeat {rec.repeat} · "
        f"key <code>{_e(rec.key)}</code></div>"
        f"<div>{outcome} · end: {_e(rec.end_reason)}{' (auto-submitted)' if rec.auto_submitted else ''} · "
        f"{rec.n_turns} turns, {rec.tool_calls} calls, {rec.tool_errors} tool errors, "
        f"{rec.parse_errors} parse errors · "
        f"{rec.seconds:.1f}s" + (f" · {usd(rec.cost_usd)}" if rec.cost_usd is not None else "") + "</div>"
    )
    grade = {k: v for k, v in (rec.grade or {}).items() if not isinstance(v, dict | list)}
    parts = [head]
    if grade:
        parts.append("<div>grade " + _kv_table(grade) + "</div>")
    if rec.usage:
        parts.append("<div>usage " + _kv_table(rec.usage) + "</div>")
    figs = []
    if rec.target:
        figs.append(_figure(run_dir, rec.target, "target", width))
    # A turn's picture: the frame it left; for an agent acting on screens, the screen it acted on, its actions
    # drawn there (`viewer_marks.acted_on`), never on the screen after them.
    screens = viewer_marks.acts_on_screens(rec)
    shown = [(t, viewer_marks.acted_on(rec, n) if screens else t.frame) for n, t in enumerate(rec.turns, 1)]
    frames = [(t, rel) for t, rel in shown if rel]
    if len(frames) > max_frames:  # first and last frames tell most; the middle is sampled evenly
        step = (len(frames) - 1) / (max_frames - 1)
        frames = [frames[round(i * step)] for i in range(max_frames)]
    space = viewer_marks.space_of(rec)
    figs += [
        _figure(run_dir, rel, f"turn {t.turn}", width, t if screens else None, space) for t, rel in frames
    ]
    if rec.render:
        figs.append(_figure(run_dir, rec.render, "final render", width))
    if figs:
        parts.append('<div class="strip">' + "".join(figs) + "</div>")
    if rec.turns:
        last = rec.turns[-1]
        calls = ", ".join(f"{c.name}{'' if c.ok else ' ✗'}" for c in last.calls)
        parts.append(
            f'<div class="muted">last turn: {_e(last.text[:300])} '
            f"{('· calls: ' + _e(calls)) if calls else ''}</div>"
        )
    return STYLE + '<div class="ek">' + "".join(parts) + "</div>"


def episode_html(run_dir: str | Path, rec: EpisodeRecord | dict, **kw: Any) -> str:
    """`record_html` with the record's pictures read from `run_dir`."""
    return record_html(rec, run_dir=run_dir, **kw)


def run_html(
    paths: str | Path | Iterable[str | Path], max_episodes: int = 0, ran: int | None = None,
    kept: int | None = None,
) -> str:  # fmt: skip
    """HTML for one or more runs: whether each is complete, episode counts, the summary table and the
    per-tier table. `ran` / `kept`: what the batch that returned it did (a re-run of a notebook resumes its
    run: it says how many episodes it kept from before and ran now)."""
    # start-up: Polars and the statistics only for a run's display, not a record's
    from evalkit.analysis import stats
    from evalkit.records.loading import incomplete_lines, load_runs, run_status

    df = load_runs(paths)
    said = ""
    if kept:
        said = (f'<div class="muted">Kept {kept} episode(s) this run already had and ran {ran or 0}: a run '
                "directory that exists is resumed, not started again (give another out= for a fresh "
                "run).</div>")  # fmt: skip
    if df.height == 0:
        return STYLE + f'<div class="ek">{said}<div class="muted">no episodes</div></div>'
    said += "".join(f'<div><b class="bad">{_e(line)}</b></div>' for line in incomplete_lines(run_status(df)))
    summ = table_html(stats.summarise(df), [
        ("model", "model", "text"), ("surface", "surface", "text"), ("mode", "mode", "text"),
        ("n", "episodes", "int"), ("scored", "scored", "int"), ("unscored", "unscored", "int"),
        ("no_reward", "no reward", "int"), ("mean_reward", "reward (scored)", "reward"),
        ("mean_reward_unscored_as_0", "reward (unscored = 0)", "reward"), ("mean_turns", "turns", ".1f"),
        ("mean_tool_errors", "tool errors", ".2f"), ("mean_tokens", "tokens", ",.0f"),
        ("cost_usd", "cost", "usd"),
    ])  # fmt: skip
    by_tier = stats.by_tier(df)
    tiers = table_html(by_tier, [
        ("model", "model", "text"), ("surface", "surface", "text"), ("mode", "mode", "text"),
        ("tier", "tier", "text"), ("n", "episodes", "int"), ("n_tasks", "tasks", "int"),
        ("n_cells_scored", "cells scored", "int"), ("mean_reward", "reward (scored)", "reward"),
        ("ci", "95% CI", "ci"),
    ])  # fmt: skip
    runs = ", ".join(_e(r) for r in df["run"].unique(maintain_order=True).to_list())
    method = method_note(by_tier["ci_method"].to_list())
    parts = [
        said,
        f"<div><b>{df.height}</b> episodes in {runs} · "
        f"{int(df['error_class'].is_not_null().sum())} unscored (infrastructure errors)</div>",
        summ,
        tiers,
        f'<div class="muted">{_e(method)}</div>',
    ]
    if max_episodes:
        for row in df.head(max_episodes).iter_rows(named=True):
            if row["offset"] is not None:
                parts.append(record_html(rundir.read_at(row["run"], row["offset"]), row["run"]))
    return STYLE + '<div class="ek">' + "".join(parts) + "</div>"


class RunView:
    """A run (or several) for a notebook: `RunView("runs/demo")` displays its summary; `.df` is the episode
    frame, `.episode(i)` the i-th episode with its frames."""

    def __init__(self, paths: str | Path | Iterable[str | Path]):
        # start-up (as above)
        from evalkit.records.loading import load_runs

        self.paths = [paths] if isinstance(paths, str | Path) else list(paths)
        self.df = load_runs(self.paths)

    def episode(self, i: int) -> EpisodeRecord:
        row = self.df.row(i, named=True)
        return load(row["run"], row["key"], row["offset"])

    def _repr_html_(self) -> str:
        return run_html(self.paths)

    def __len__(self) -> int:
        return self.df.height


TEXT_SHOWN = 3000
"""Characters of one message shown in a notebook; the rest is behind "more"."""
ROLE_COLOURS = {"system": "#6b7280", "user": "#2563eb", "assistant": "#b45309", "tool": "#047857"}
CONVERSATION_STYLE = (
    "<style>.ek .msg{border-left:4px solid #999;padding:4px 8px;margin:6px 0;background:#fafafa}"
    ".ek .msg .who{font-weight:600}.ek .msg pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;"
    "font-size:12px}.ek .msg .call{font-family:ui-monospace,monospace;font-size:12px;color:#7c2d12}"
    ".ek .msg.err{background:#fff1f0}</style>"
)


def _long_text(text: str) -> str:
    """Escaped text in a <pre>, the part past TEXT_SHOWN behind a "more" that opens in place."""
    if len(text) <= TEXT_SHOWN:
        return f"<pre>{_e(text)}</pre>"
    rest = len(text) - TEXT_SHOWN
    return (
        f"<pre>{_e(text[:TEXT_SHOWN])}</pre><details><summary>{rest:,} more characters</summary>"
        f"<pre>{_e(text[TEXT_SHOWN:])}</pre></details>"
    )


def conversation_html(msgs: Any, run_dir: str | Path | None = None, width: int = 160) -> str:
    """A conversation (`ek.transcripts.messages(rec, run)`) as a notebook shows it: each message a box with
    its role, turn and note; the text (escaped, long ones folded); the assistant's tool calls as
    `name(args)`; its reasoning folded; images as thumbnails (pruned ones said so)."""
    run_dir = run_dir if run_dir is not None else getattr(msgs, "run", None)
    parts = []
    for m in msgs:
        colour = ROLE_COLOURS.get(m.role, "#999")
        head = [f'<span class="who" style="color:{colour}">{_e(m.role)}</span>', f"turn {_e(m.turn)}"]
        if m.name:
            head.append(f"<code>{_e(m.name)}</code>")
        if m.error:
            head.append('<b class="bad">error</b>')
        if m.stop:
            head.append(f"stop {_e(m.stop)}")
        if m.note:
            head.append(f'<i class="muted">{_e(m.note)}</i>')
        body = [" · ".join(head)]
        if m.text:
            body.append(_long_text(m.text if isinstance(m.text, str) else json.dumps(m.text)))
        for c in m.calls or []:
            c = c if isinstance(c, dict) else {}
            args = json.dumps(c.get("args"), ensure_ascii=False)
            args = args if len(args) <= 300 else args[:300] + "…"
            body.append(f'<div class="call">→ {_e(c.get("name"))}({_e(args)})</div>')
        if m.reasoning:
            body.append(
                f"<details><summary>reasoning ({len(m.reasoning):,} characters)</summary>"
                f"{_long_text(m.reasoning)}</details>"
            )
        figs = []
        for j, img in enumerate(m.images or []):
            img = img if isinstance(img, dict) else {}
            label = f"image {j + 1}" + (" (pruned later)" if img.get("pruned") else "")
            figs.append(_figure(run_dir, img.get("path"), label, width))
        if figs:
            body.append('<div class="strip">' + "".join(figs) + "</div>")
        cls = "msg err" if m.error else "msg"
        parts.append(f'<div class="{cls}" style="border-left-color:{colour}">' + "".join(body) + "</div>")
    return STYLE + CONVERSATION_STYLE + '<div class="ek">' + "".join(parts) + "</div>"
