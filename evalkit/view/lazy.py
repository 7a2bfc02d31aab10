"""A record read for showing it a step at a time: its turns are decoded when a step asks for one.

Opening one step of a long episode needs, of every turn, only its number and its frame (to lay out the
steps and their pages) and whether its calls act on the screen; the step shown and those drawn around it need
their whole turns, and the transcript's page its turns' messages. So the line is split without building its
turns (msgspec reads each as raw JSON), a light pass reads those three things of every turn, and each turn
becomes a `LazyTurn` that decodes itself, as `TurnRecord.from_dict` reads it, on first use of any other field.

Only records the analysis index read as sound are read so (a table row's offset): a line that does not split
so, or a turn whose light fields are not of their kind, is read the ordinary way (`rundir.read_at`), which
names what is wrong with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from evalkit.records import rundir
from evalkit.records.viewer_marks import has_marks
from evalkit.types import EpisodeRecord, TurnRecord


class _Call(msgspec.Struct):
    name: Any = None
    args: Any = None
    ok: Any = True


class _Light(msgspec.Struct):
    """What every step needs of every turn (other fields are skipped, not built)."""

    turn: Any = None
    frame: Any = None
    calls: list[_Call] = []


class LazyTurn:
    """A turn of a record: `turn`, `frame` and `acts_on_screen` from the light pass, every other field from
    the whole turn, decoded on first use."""

    __slots__ = ("_raw", "_light", "_full", "acts_on_screen")

    def __init__(self, raw: msgspec.Raw, light: _Light):
        self._raw, self._light, self._full = raw, light, None
        self.acts_on_screen = has_marks(light.calls)
        """Whether a call of this turn acts at a position on the screen (`marks.has_marks`)."""

    def _whole(self) -> TurnRecord:
        if self._full is None:
            self._full = TurnRecord.from_dict(msgspec.json.decode(self._raw))
        return self._full

    @property
    def turn(self) -> Any:
        v = self._light.turn
        return v if type(v) is int else self._whole().turn

    @property
    def frame(self) -> Any:
        v = self._light.frame
        return v if v is None or (type(v) is str and v.isascii()) else self._whole().frame

    @property
    def decoded(self) -> bool:
        return self._full is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and the like: not a field
            raise AttributeError(name)
        return getattr(self._whole(), name)


def read_at(run: str | Path, offset: int) -> EpisodeRecord:
    """The record on the line at byte `offset` of the run's trace, its turns `LazyTurn`s (the ordinary
    reading, `rundir.read_at`, when the line does not split so)."""
    with open(rundir.trace_file(run), "rb") as f:
        f.seek(int(offset))
        line = f.readline()
    try:
        top = msgspec.json.decode(line, type=dict[str, msgspec.Raw])
        turns = top.pop("turns", b"[]")
        raws = msgspec.json.decode(turns, type=list[msgspec.Raw])
        lights = msgspec.json.decode(turns, type=list[_Light])
        rest = {k: msgspec.json.decode(v) for k, v in top.items()}
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError):
        return rundir.read_at(run, offset)
    rec = EpisodeRecord.from_dict(rest)
    rec.turns = [LazyTurn(r, x) for r, x in zip(raws, lights, strict=True)]
    rec.run_dir = str(run)  # where its pictures' paths lead, as rundir.read_at says
    return rec
