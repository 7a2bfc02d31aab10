"""Session-wide fixtures: one embedded canvas server and one berth server, shared by every test that needs
a live env."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.server import serve

    with serve("canvas") as env:
        yield env


@pytest.fixture(scope="session")
def berth_server():
    from evalkit.envs.server import serve

    with serve("berth") as env:
        yield env
