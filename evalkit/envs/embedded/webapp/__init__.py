"""The embedded `webapp` environment: small local web apps (a shop and a mailbox) with logins and an admin
record, the tasks on them, their grader, and the OpenEnv env that shows them to a model through the
computer-use tools. The own-loop GUI agents (`evalkit.ownloop`) run on the same apps and tasks.

Names are imported lazily so that reading tasks and grading do not pull in the server stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "build_app": ".app",
    "WebAppEnv": ".env",
    "SiteServer": ".serve",
    "build_site": ".serve",
    "ADMIN_HEADER": ".site",
    "grade": ".grade",
    "load_tasks": ".tasks",
    "task_by_id": ".tasks",
    "instruction": ".tasks",
    "fill": ".tasks",
    "DEFAULT_TASKS": ".tasks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
