"""The settings of a run that change what an episode is (a turn budget, a token limit, the coordinates the
model points in, ...), read from its `run.json`: episodes of runs whose settings differ are not the same
measurement, so summaries keep them apart unless told otherwise. A run evalkit did not write has none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.errors import TraceError
from evalkit.records.rundir import read_run_json

LEGACY_SETTINGS = ("max_turns", "max_steps", "episode_timeout", "coordinates")
"""In a run.json written before it listed its `outcome` settings (which the run's settings declare:
`evalkit.run.settings`, `evalkit.ownloop.settings`): the top-level settings that change an episode."""
LEGACY_OPTIONS = ("max_tokens", "keep_images", "image_window", "temperature", "seed")
"""The same among such a run.json's model `options`."""
OWNLOOP_SETTINGS = ("max_steps", "timeout", "width", "height", "frequency_penalty", "temperature", "top_p",
                    "max_past_steps", "opencua_max_tokens", "fara_retries")  # fmt: skip
"""The same for an own-loop run (`evalkit ownloop`) written before then."""


def outcome_settings(run: str | Path) -> dict[str, Any]:
    """The settings of `run` that change an episode, as its run.json has them ({} for a foreign run or an
    unreadable run.json). A resume compares these."""
    path = Path(run)
    try:
        meta = read_run_json(path) if path.is_dir() else {}
    except TraceError:
        return {}
    if isinstance(meta.get("outcome"), dict):  # what the run declared (`evalkit.values.knobs`)
        return dict(meta["outcome"])
    if meta.get("kind") == "ownloop":
        return {k: meta[k] for k in OWNLOOP_SETTINGS if k in meta}
    out = {k: meta[k] for k in LEGACY_SETTINGS if k in meta}
    options = meta.get("options") if isinstance(meta.get("options"), dict) else {}
    return out | {k: options[k] for k in LEGACY_OPTIONS if k in options}


def differences(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Per run, the settings in which the runs of `settings` (run → its settings) differ, as one short label
    (`max_turns 12`; a setting left to its default reads `default`); "" where no setting differs."""
    keys: list[str] = []
    for s in settings.values():
        keys += [k for k in s if k not in keys]
    varying = [k for k in keys if len({repr(s.get(k)) for s in settings.values()}) > 1]
    return {run: label(s, varying) for run, s in settings.items()}


def label(settings: Mapping[str, Any], keys: Sequence[str] | None = None) -> str:
    """`max_turns 12, coordinates normalized` for the `keys` of `settings` (all by default)."""
    keys = list(settings) if keys is None else keys
    return ", ".join(f"{k} {'default' if settings.get(k) is None else settings.get(k)}" for k in keys)
