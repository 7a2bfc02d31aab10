"""Own-loop tests: the tasks they run and settings without the released 5 s pauses (the DOM solver's plans
for these tasks are the session fixture `plans` of tests/conftest.py)."""

from __future__ import annotations

import pytest

from evalkit.browser import chromium_executable

from tests.conftest import OWNLOOP_TASKS as TASKS

FAST = {"wait_s": 0.2, "settle_s": 0.05, "retry_wait": 0.05}
"""No 5 s pauses in tests."""


def pytest_collection_modifyitems(items):
    if chromium_executable() is None:
        skip = pytest.mark.skip(reason="no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
        for item in items:
            if "ownloop" in str(item.fspath) and "browser" in item.keywords:
                item.add_marker(skip)
