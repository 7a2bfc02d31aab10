"""The embedded `berth` environment: re-plan berths after a disruption with `check_plan` / `submit_plan`.

Names are imported lazily so that task generation and grading do not pull in the server stack.
"""

from __future__ import annotations

from evalkit.envs.embedded import lazy_names

__all__, __getattr__ = lazy_names(
    __name__,
    {
        ".app": ["build_app"],
        ".env": ["BerthEnv"],
        ".tasks": ["generate_task", "task_from_id", "Task"],
        ".grade": ["check", "grade", "parse_plan"],
        ".reference": ["best_known", "write_evalset"],
        ".model": ["Instance"],
    },
)
