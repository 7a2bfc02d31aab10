"""The embedded `canvas` environment: recreate a target design with MCP editing tools.

Names are imported lazily so that task generation and grading do not pull in the server stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "build_app": ".app",
    "warm": ".app",
    "CanvasEnv": ".env",
    "generate_task": ".tasks",
    "task_from_id": ".tasks",
    "write_evalset": ".tasks",
    "Task": ".tasks",
    "render_doc": ".render",
    "grade_doc": ".grade",
    "Doc": ".model",
    "Element": ".model",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
