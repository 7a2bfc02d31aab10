"""Which records of a trace count: each key once, as its latest record (`latest_records`, `survivors` for a
column of keys), and every record without a key on its own. Every reader of runs (records, the analysis
index, resume, the viewer's search) goes through this one rule; `rundir` gives it under the same names."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def record_key(d: dict) -> str | None:
    """The key a record is counted by: its `key` when that is a non-empty string. A record without one (a
    hand-edited or foreign line) is an episode of its own: it never replaces another, nor is replaced."""
    k = d.get("key")
    return k if isinstance(k, str) and k else None


def survivors(keys: Iterable[str | None]) -> list[int]:
    """Positions of the records that count, in order, given each record's key (`record_key`): the last
    record of each key, and every record without one."""
    keys = keys if isinstance(keys, list) else list(keys)
    last = dict(zip(keys, range(len(keys)), strict=True))  # C-speed: a 100k-row index is deduped in ms
    if None in last:
        return [i for i, k in enumerate(keys) if k is None or last[k] == i]
    return sorted(last.values())


def latest_records(records: Iterable[T], key: Callable[[T], str | None] = record_key) -> list[T]:
    """`records` (oldest first) with every key counted once, as its latest record, in the order of those
    latest records (see `survivors`)."""
    records = list(records)
    return [records[i] for i in survivors(key(r) for r in records)]
