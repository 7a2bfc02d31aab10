"""Deep links: the viewer's URL holds the view, the run (by label), the episode (by key), the step and, for A
vs B, the second episode; a link never opens a directory that was not offered to the viewer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VIEWS = ("Episodes", "Episode", "A vs B", "Why", "Summary")
VIEW_SLUGS = {"Episodes": "table", "Episode": "episode", "A vs B": "ab", "Why": "why", "Summary": "summary"}


@dataclass
class DeepLink:
    """What a shared URL points at: a view, an episode (run + key), a step, for A vs B a second episode."""

    view: str | None = None
    run: str | None = None
    episode: str | None = None
    step: int | None = None
    brun: str | None = None
    bepisode: str | None = None


def _first(v: Any) -> str | None:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return None if v is None else str(v)


def resolve_run(value: str | None, runs: Sequence[str], labels: Mapping[str, str]) -> str | None:
    """The offered run a link names (by label or path); None for anything else, so a URL cannot open a
    directory that was not given to the viewer."""
    if not value:
        return None
    for r in runs:
        if value == labels.get(r) or value == r:
            return r
    try:
        resolved = str(Path(value).resolve())
    except (OSError, RuntimeError, ValueError):
        return None
    return resolved if resolved in runs else None


def parse_link(params: Mapping[str, Any], runs: Sequence[str], labels: Mapping[str, str]) -> DeepLink:
    """Read `?view=…&run=…&episode=<key>&step=N[&brun=…&b=<key>]`; whatever is malformed is dropped."""
    link = DeepLink()
    view = _first(params.get("view"))
    slugs = {v: k for k, v in VIEW_SLUGS.items()}
    link.view = slugs.get(view or "", None)
    link.run = resolve_run(_first(params.get("run")), runs, labels)
    key = _first(params.get("episode"))
    link.episode = key if link.run and key and len(key) < 512 else None
    try:
        step = int(_first(params.get("step")) or "")
        link.step = step if 0 <= step < 1_000_000 else None
    except ValueError:
        link.step = None
    link.brun = resolve_run(_first(params.get("brun")), runs, labels) or (
        link.run if params.get("b") else None
    )
    bkey = _first(params.get("b"))
    link.bepisode = bkey if link.brun and bkey and len(bkey) < 512 else None
    if link.view is None and link.episode:
        link.view = "A vs B" if link.bepisode else "Episode"
    return link


def make_link(link: DeepLink, labels: Mapping[str, str]) -> dict[str, str]:
    """The query parameters for `link` (runs by label)."""
    out: dict[str, str] = {}
    if link.view:
        out["view"] = VIEW_SLUGS[link.view]
    if link.run and link.episode:
        out["run"] = labels.get(link.run, link.run)
        out["episode"] = link.episode
    if link.step is not None and link.episode:
        out["step"] = str(link.step)
    if link.brun and link.bepisode:
        out["brun"] = labels.get(link.brun, link.brun)
        out["b"] = link.bepisode
    return out
