"""evalkit's own environments, and their serving: real OpenEnv servers that run on a fresh machine with no
keys, so that everything a user's own server goes through is exercised.

- `canvas`, `berth`, `webapp` — one package per env (its tasks, its tools, its grader, its FastAPI app);
- `episodic` — the MCP environment base they share; `registry` — the episodes a server keeps by id;
  `recycle` — env instances handed from a finished session to the next;
- `server` — an embedded env served in a thread (`evalkit.serve`, `evalkit serve NAME`); `process` — served by
  child processes, for a batch of many episodes at once (`serve_embedded`).

May import: `browser`, `evalkit.envs` (the names and declarations of `EMBEDDED`), `envs.evalsets` (the task
sets they write), and the modules at evalkit's top. Never the client (`evalkit.envs.client`), the model
(`providers`) nor the loop that drives them (`run`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any


def lazy_names(package: str, modules: dict[str, list[str]]) -> tuple[list[str], Callable[[str], Any]]:
    """An env package's face: its `__all__`, and its `__getattr__` importing each name from its module (of
    `modules`, relative to `package`) on first use, so that generating or grading tasks never loads the
    server stack."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(where[name], package), name)

    return sorted(where), __getattr__


@dataclass(frozen=True)
class TaskIds:
    """An embedded env's task ids (`ENV-SPLIT-NNNN`, split train or test) and the seed each task is generated
    from: its split and index alone, so a task id names the same task on every machine."""

    env: str

    def id_for(self, split: str, index: int) -> str:
        return f"{self.env}-{split}-{index:04d}"

    def parse(self, task_id: str) -> tuple[str, int]:
        """Split `ENV-test-0007` into ("test", 7); ValueError for anything else."""
        m = re.match(rf"^{self.env}-(train|test)-(\d{{4,}})$", task_id or "")
        if not m:
            raise ValueError(f"unknown {self.env} task id {task_id!r}: expected e.g. '{self.env}-test-0007'")
        return m.group(1), int(m.group(2))

    def seed(self, split: str, index: int) -> int:
        return int.from_bytes(hashlib.sha256(f"{self.env}:{split}:{index}".encode()).digest()[:8], "big")
