"""How the viewer shows trace text: cut to fit a cell or a page, escaped for the few Streamlit elements that
read Markdown, tool calls on one line. Trace content is hostile until shown otherwise: nothing here lets it
become a link, an image, HTML or a 10 MB table cell."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

NONE_LABEL = "(none)"

TEXT_LIMIT = 20_000
"""Characters of one field shown at once; longer fields are paged (a 10 MB field would stall the browser)."""
CELL_LIMIT = 200
"""Characters of a table cell, header or label; longer values are cut with an ellipsis."""


def clip(value: Any, limit: int = CELL_LIMIT) -> str:
    """`value` as text of at most `limit` characters, cut with an ellipsis: for cells, labels and headers."""
    s = "" if value is None else str(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


LABEL_COLUMNS = (
    "model",
    "env",
    "surface",
    "mode",
    "task_id",
    "skin",
    "tier",
    "end_reason",
    "error_class",
    "run_name",
    "run_label",
)
"""The text columns of the episode frame that name things (and end up in table cells and chart legends)."""


def clip_columns(
    df: pl.DataFrame, limit: int = CELL_LIMIT, columns: Iterable[str] | None = None
) -> pl.DataFrame:
    """The text columns of `df` (or just `columns`) with cells cut to `limit` characters (ellipsis), before
    they go to the browser: a 10 MB model name or task id in a trace must not travel with every table."""
    wanted = None if columns is None else set(columns)
    exprs = [
        pl.when(pl.col(c).str.len_chars() > limit)
        .then(pl.col(c).str.slice(0, limit - 1) + "…")
        .otherwise(pl.col(c))
        .alias(c)
        for c, dtype in df.schema.items()
        if dtype == pl.String and (wanted is None or c in wanted)
    ]
    return df.with_columns(exprs) if exprs else df


def short_id(value: Any) -> str:
    """A short stable id for trace text used in widget keys (which the browser receives)."""
    return hashlib.sha256(str(value).encode("utf-8", "replace")).hexdigest()[:12]


def field_rows(values: Any, limit: int = CELL_LIMIT) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """A grade or usage dict as (name, value) rows of text, each cell clipped to `limit`; and (name, whole
    text) of every value that was clipped, for the page-by-page view of long fields."""
    if not isinstance(values, dict):
        return [], []
    rows, long = [], []
    for k, v in values.items():
        if isinstance(v, float):
            s = f"{v:.4g}"
        elif isinstance(v, (dict, list)):
            s = json.dumps(v, default=str, ensure_ascii=False)
        else:
            s = str(v)
        rows.append({"name": clip(k, limit), "value": clip(s, limit)})
        if len(s) > limit:
            long.append((clip(k, 60), s))
    return rows, long


def as_json(value: Any) -> str:
    """Tool arguments as indented JSON; a string that did not parse is shown as it came."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def page_of(text: str, page: int, size: int = TEXT_LIMIT) -> tuple[str, int]:
    """(the `page`-th chunk of `text`, number of pages)."""
    n = max(1, math.ceil(len(text) / size))
    page = min(max(page, 0), n - 1)
    return text[page * size : (page + 1) * size], n


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^&\"'])")


def md_escape(s: Any, limit: int = 200) -> str:
    """Trace text safe for a label that Streamlit reads as Markdown: every punctuation character escaped, so
    no link, image (a fetch to a foreign host), directive or HTML can come of it; newlines flattened."""
    s = str(s)
    if len(s) > limit:
        s = s[:limit] + "…"
    return _MD_SPECIAL.sub(r"\\\1", s.replace("\n", " ").replace("\r", " "))


def _one_line(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return " ".join(text[: 4 * CELL_LIMIT].split())


def call_line(name: Any, args: Any, result: Any, limit: int = 110) -> str:
    """A tool call on one line, `name(args…) → result…`, each part cut to fit `limit` characters."""
    head = clip(name or "?", 60)
    a = _one_line(args if args not in (None, {}) else "")
    if a.startswith("{") and a.endswith("}"):
        a = a[1:-1]  # name(x: 1, y: 2) reads as a call
    r = _one_line(result or "")
    room = max(10, limit - len(head) - 6)
    a = clip(a, max(8, room // 2) if r else room)
    line = f"{head}({a})"
    return line + (f" → {clip(r, max(8, limit - len(line) - 3))}" if r else "")


def pruned_note(image: Mapping[str, Any]) -> str:
    """What a transcript image's `pruned` mark means, with the turn it was pruned at when known."""
    at = image.get("pruned_at")
    if isinstance(at, int) and not isinstance(at, bool):
        return f"pruned: the requests from turn {at} on no longer carried it"
    return "pruned: a later request no longer carried it"
