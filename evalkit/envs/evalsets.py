"""Frozen task sets: a JSON file of tasks with tiers and scores, an id that hashes its content, subsets.

{"evalset_id": "…", "name": "canvas-test-300", "env": "canvas", "split": "test",
 "tasks": [{"task_id", "split", "index", "tier", "difficulty_score", …}], "subsets": {"lite": [ids]}}
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.errors import EvalsetError
from evalkit.values.checks import json_file

TIER_ORDER = ("easy", "medium", "hard")


def evalset_hash(tasks: list[dict], subsets: dict[str, list[str]]) -> str:
    """The id of an evalset: a hash of its tasks and subsets, so two runs on the same id ran the same set."""
    canonical = json.dumps({"tasks": tasks, "subsets": subsets}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def tier_subsets(rows: list[dict], sizes: dict[str, int]) -> dict[str, list[str]]:
    """Subsets of `rows` with `sizes[name]` tasks per tier, taken in a fixed pseudo-random order (so a subset
    spreads over the whole index range rather than its start); a smaller subset is part of a larger one."""

    def rank(task_id: str) -> str:
        return hashlib.sha256(f"subset:{task_id}".encode()).hexdigest()

    tiers = sorted({r.get("tier") or "" for r in rows})
    ranked = {t: sorted((r["task_id"] for r in rows if (r.get("tier") or "") == t), key=rank) for t in tiers}
    return {name: sorted(tid for t in tiers for tid in ranked[t][:n]) for name, n in sizes.items()}


@dataclass
class Evalset:
    evalset_id: str
    name: str
    env: str | None
    tasks: list[dict]
    subsets: dict[str, list[str]] = field(default_factory=dict)
    path: str | None = None

    def select(
        self,
        subset: str | None = None,
        tiers: list[str] | None = None,
        task_ids: list[str] | None = None,
        limit: int | None = None,
    ) -> list[dict]:
        """Tasks of a subset, filtered by tier and id; `limit` takes tasks round-robin across tiers so a
        short run stays balanced."""
        tasks = self.tasks
        if subset:
            if subset not in self.subsets:
                known = ", ".join(sorted(self.subsets)) or "none"
                raise EvalsetError(f"evalset {self.name} has no subset {subset!r} (subsets: {known})")
            wanted = set(self.subsets[subset])
            tasks = [t for t in tasks if t["task_id"] in wanted]
        if tiers:
            unknown = set(tiers) - {t.get("tier") for t in self.tasks}
            if unknown:
                raise EvalsetError(f"evalset {self.name} has no tier {', '.join(sorted(unknown))}")
            tasks = [t for t in tasks if t.get("tier") in tiers]
        if task_ids:
            by_id = {t["task_id"]: t for t in self.tasks}
            missing = [i for i in task_ids if i not in by_id]
            if missing:
                raise EvalsetError(f"evalset {self.name} has no task {', '.join(missing[:5])}")
            keep = set(task_ids)
            tasks = [t for t in tasks if t["task_id"] in keep]
        if limit is not None:
            tasks = _balanced(tasks, limit)
        return tasks


def _balanced(tasks: list[dict], limit: int) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for t in tasks:
        groups.setdefault(t.get("tier") or "", []).append(t)
    order = sorted(groups, key=lambda k: (TIER_ORDER.index(k) if k in TIER_ORDER else len(TIER_ORDER), k))
    picked: list[dict] = []
    i = 0
    while len(picked) < min(limit, len(tasks)):
        for k in order:
            if i < len(groups[k]) and len(picked) < limit:
                picked.append(groups[k][i])
        i += 1
    return picked


def repeated(ids: Iterable[str]) -> str:
    """The ids met more than once, for a message ("a ×2, b ×3", at most ten), or "" when none is."""
    counts = Counter(ids)
    twice = [f"{i} ×{n}" for i, n in counts.items() if n > 1]
    more = f" and {len(twice) - 10} more" if len(twice) > 10 else ""
    return ", ".join(twice[:10]) + more


def load_evalset(path: str | Path) -> Evalset:
    """Read and check an evalset file; any problem is an EvalsetError with a one-line message."""
    path = Path(path)
    data = json_file("evalset", path, EvalsetError)
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise EvalsetError(f"evalset {path} has no task list")
    for i, t in enumerate(data["tasks"]):
        if not isinstance(t, dict) or not isinstance(t.get("task_id"), str):
            raise EvalsetError(f"evalset {path}: task #{i} has no task_id")
    twice = repeated(t["task_id"] for t in data["tasks"])
    if twice:
        # Run twice under one key, a task would be counted once and resumed as done: refused, not merged.
        raise EvalsetError(f"evalset {path} lists the same task id more than once: {twice}; list each task "
                           "once (--repeats runs every task again)")  # fmt: skip
    subsets = data.get("subsets") or {}
    if not isinstance(subsets, dict):
        raise EvalsetError(f"evalset {path}: subsets must be an object")
    actual = evalset_hash(data["tasks"], subsets)
    if data.get("evalset_id") and data["evalset_id"] != actual:
        raise EvalsetError(
            f"evalset {path} was edited after it was frozen (its id is {data['evalset_id']}, its content "
            f"hashes to {actual}): set evalset_id to {actual} to freeze the new content"
        )
    return Evalset(
        evalset_id=actual,
        name=str(data.get("name") or path.stem),
        env=data.get("env"),
        tasks=data["tasks"],
        subsets={k: list(v) for k, v in subsets.items()},
        path=str(path),
    )
