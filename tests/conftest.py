"""Session-wide fixtures: one embedded canvas server shared by every test that needs a live env."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def canvas_server():
    from evalkit.envs.server import serve

    with serve("canvas") as env:
        yield env
