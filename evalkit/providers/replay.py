"""`replay:<run dir>#<episode key>` — re-drive an environment with the calls of a recorded episode.

Each `step()` hands back one recorded turn: its text, reasoning and the calls that were actually executed
(calls whose arguments failed to parse were never run, so they are left out). When the recorded turns run
out the agent answers with no calls and stop `replay_exhausted`, and the loop ends the episode as it would
for any model that stops calling tools. Nothing the environment answers changes what is replayed: a replay
shows how the same actions fare against the environment as it is now.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, TraceError
from evalkit.records.rundir import find_record, trace_signature
from evalkit.types import Call, EpisodeRecord, Image, ToolOutcome, Turn, Usage

EXHAUSTED = "replay_exhausted"


def parse_target(model: str) -> tuple[Path, str]:
    """Split `<run dir>#<key>`; the key is after the last `#` so run paths may contain one."""
    run, sep, key = model.rpartition("#")
    if not sep or not run or not key:
        raise ConfigError(f"replay needs <run dir>#<episode key>, got {model!r}")
    return Path(run), key


def _load_record(run_dir: Path, key: str) -> EpisodeRecord:
    """The recorded episode, or ConfigError: replaying something that is not there is a mistake in the ask."""
    if not run_dir.is_dir():
        raise ConfigError(f"replay: no run directory {str(run_dir)!r}")
    # Cached on the trace's signature: a batch replays one record per episode and must not re-read the trace.
    return _cached_record(str(run_dir), key, trace_signature(run_dir))


@functools.lru_cache(maxsize=64)
def _cached_record(run_dir: str, key: str, signature: tuple[int, int]) -> EpisodeRecord:
    if not Path(run_dir).is_dir():
        raise ConfigError(f"replay: no run directory {str(run_dir)!r}")
    try:
        return find_record(run_dir, key)
    except (TraceError, OSError, ValueError) as e:
        raise ConfigError(f"replay: episode {key!r} is not in run {str(run_dir)!r} ({e})") from e


def validate(model: str) -> None:
    """Check the target exists before a batch starts (ConfigError otherwise)."""
    _load_record(*parse_target(model))


class ReplayAgent:
    """Plays back the turns of one recorded episode, one per `step()`."""

    def __init__(self, record: EpisodeRecord, label: str):
        self.model = label
        self._turns = list(record.turns)
        self._next = 0
        self._n_calls = 0

    def user(self, text: str, images: Sequence[Image] = ()) -> None:
        pass

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        pass

    def notes(self, text: str) -> None:
        pass

    def prune_images(self, keep: int, window: int | None = None) -> None:
        pass

    def step(self) -> Turn:
        if self._next >= len(self._turns):
            return Turn(text="", stop=EXHAUSTED, usage=Usage())
        rec = self._turns[self._next]
        self._next += 1
        calls = []
        for c in rec.calls:
            if c.parse_error or not isinstance(c.args, dict):
                continue
            self._n_calls += 1
            calls.append(Call(id=c.id or f"replay_{self._n_calls}", name=c.name, args=dict(c.args)))
        return Turn(
            text=rec.text or "",
            reasoning=rec.reasoning or "",
            calls=calls,
            stop=rec.stop or "",
            usage=Usage(),
        )


def create(model: str, thinking: str | None = None, **kw: Any) -> ReplayAgent:
    """The replay of one recorded episode; the system prompt, tools and options a provider's `create` takes
    change nothing in it."""
    run_dir, key = parse_target(model)
    return ReplayAgent(_load_record(run_dir, key), f"replay:{model}")
