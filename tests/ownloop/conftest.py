"""Own-loop tests: the tasks they run and settings without the released 5 s pauses (the DOM solver's plans
for these tasks are the session fixture `plans` of tests/conftest.py)."""

from __future__ import annotations

import pytest

from evalkit.browser import chromium_executable
from tests.conftest import OWNLOOP_TASKS

TASKS = OWNLOOP_TASKS

FAST = {"wait_s": 0.2, "settle_s": 0.05, "retry_wait": 0.05}
"""No 5 s pauses in tests."""


def pytest_collection_modifyitems(items):
    if chromium_executable() is None:
        skip = pytest.mark.skip(reason="no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
        for item in items:
            if "ownloop" in str(item.fspath) and "browser" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def released_code():
    """Undo what running released code did to the process: its --path entries on sys.path and the modules
    loaded from them (and the runners' caches of classes built on them), so later tests see a clean one."""
    import sys

    from evalkit.ownloop import opencua

    before = list(sys.path)
    yield
    added = [p for p in sys.path if p not in before]
    sys.path[:] = before
    drop = []
    for name, mod in list(sys.modules.items()):  # look everything up first: a namespace package's __path__
        where = getattr(mod, "__file__", None) or next(iter(getattr(mod, "__path__", []) or []), None)
        if where and any(str(where).startswith(p) for p in added):  # is recomputed from its parent module
            drop.append(name)
    for name in drop:
        sys.modules.pop(name, None)
    opencua._classes.clear()
