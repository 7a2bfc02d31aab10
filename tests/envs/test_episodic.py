"""What the embedded envs share (`evalkit.envs.embedded.episodic`): the reset arguments every one of them
takes, as OpenEnv's servers read them."""

from __future__ import annotations

import inspect

import pytest
from openenv.core.env_server.interfaces import Environment

from evalkit.envs.embedded.berth.env import BerthEnv
from evalkit.envs.embedded.canvas.env import CanvasEnv
from evalkit.envs.embedded.episodic import step_limit, task_index
from evalkit.envs.embedded.webapp.env import WebAppEnv

ARGS = [
    "task_id",
    "split",
    "index",
    "surface",
    "mode",
    "skin",
    "coordinates",
    "max_steps",
    "seed",
    "episode_id",
]


@pytest.mark.parametrize("make", [CanvasEnv, BerthEnv, WebAppEnv])
def test_every_embedded_env_names_the_same_reset_arguments(make):
    """OpenEnv awaits `reset_async` where an env overrides it, else runs `reset`, and passes it only the
    arguments its signature names (all of them to a **kwargs): the signature it reads must be written out."""
    env = make()
    try:
        overridden = type(env).reset_async is not Environment.reset_async
        read = inspect.signature(env.reset_async if overridden else env.reset).parameters
        assert list(read) == ARGS
        assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in read.values())
    finally:
        env.close()


def test_the_shared_checks_of_reset_arguments():
    assert [task_index(i) for i in (0, 7, "3", " 12 ")] == [0, 7, 3, 12]
    for bad in (-1, True, 1.5, "x", None):
        with pytest.raises(ValueError, match="index must be a non-negative integer"):
            task_index(bad)
    assert (step_limit(None, 30), step_limit(5, 30), step_limit(None, None)) == (30, 5, None)
    for bad in (0, -2, True, 2.5, "4"):
        with pytest.raises(ValueError, match="max_steps must be a positive integer"):
            step_limit(bad, 30)
