"""The embedded `berth` environment: re-plan berths after a disruption with `check_plan` / `submit_plan`.

Names are imported lazily so that task generation and grading do not pull in the server stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "build_app": ".app",
    "BerthEnv": ".env",
    "generate_task": ".tasks",
    "task_from_id": ".tasks",
    "Task": ".tasks",
    "check": ".grade",
    "grade": ".grade",
    "parse_plan": ".grade",
    "best_known": ".reference",
    "write_evalset": ".reference",
    "Instance": ".model",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
