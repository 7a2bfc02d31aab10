"""Lines for whoever runs evalkit: on the command line, log records on stderr; in a notebook, plain output.

Shared by every part that speaks to its user while it works (a batch's notices, the own-loop runner), so
that none of them reaches into another's display code for it.
"""

from __future__ import annotations

import logging
import sys


def notice(log: logging.Logger, text: str, level: int = logging.INFO) -> None:
    """A line for whoever runs evalkit, as a record of `log` when logging would show it (`evalkit`'s CLI
    shows its records on stderr). Else, in a notebook, information is plain output in the cell: on stderr,
    which Python's last-resort handler writes to, Jupyter draws it as an error. Warnings and errors are
    left to that handler."""
    if level < logging.WARNING and not _shown(log, level):
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
        if getattr(shell, "kernel", None) is not None:
            # start-up: IPython only in a kernel
            from IPython.display import display

            display({"text/plain": f"evalkit: {text}"}, raw=True)
            return
    log.log(level, text)


def _shown(log: logging.Logger, level: int) -> bool:
    """Whether a record of `level` from `log` reaches a handler that takes it (not the last resort)."""
    if not log.isEnabledFor(level):
        return False
    logger: logging.Logger | None = log
    while logger is not None:
        if any(level >= h.level for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False
