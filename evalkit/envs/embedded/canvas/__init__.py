"""The embedded `canvas` environment: recreate a target design with MCP editing tools.

Names are imported lazily so that task generation and grading do not pull in the server stack.
"""

from __future__ import annotations

from evalkit.envs.embedded import lazy_names

__all__, __getattr__ = lazy_names(
    __name__,
    {
        ".app": ["build_app", "warm"],
        ".env": ["CanvasEnv"],
        ".tasks": ["generate_task", "task_from_id", "write_evalset", "Task"],
        ".render": ["render_doc"],
        ".grade": ["grade_doc"],
        ".model": ["Doc", "Element"],
    },
)
