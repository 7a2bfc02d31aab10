"""The embedded `webapp` environment: small local web apps (a shop and a mailbox) with logins and an admin
record, the tasks on them, their grader, and the OpenEnv env that shows them to a model through the
computer-use tools. The own-loop GUI agents (`evalkit.ownloop`) run on the same apps and tasks.

Names are imported lazily so that reading tasks and grading do not pull in the server stack.
"""

from __future__ import annotations

from evalkit.envs.embedded import lazy_names

__all__, __getattr__ = lazy_names(
    __name__,
    {
        ".app": ["build_app"],
        ".env": ["WebAppEnv"],
        ".serve": ["SiteServer", "build_site"],
        ".site": ["ADMIN_HEADER"],
        ".grade": ["grade"],
        ".tasks": ["load_tasks", "task_by_id", "instruction", "fill", "DEFAULT_TASKS"],
    },
)
