"""Serving the embedded envs: OpenEnv's server imported without its web interface."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
from evalkit.envs.embedded.server import build_app
build_app("canvas")
print("gradio" in sys.modules, "openenv.core.env_server" in sys.modules)
print("jsonschema" in sys.modules, "rfc3987_syntax" in sys.modules)
import importlib.util
if importlib.util.find_spec("rfc3987_syntax"):  # (JupyterLab's extras bring it; the tests' do not)
    import rfc3987_syntax  # hidden for the length of the import only
    print(rfc3987_syntax.__name__)
"""


def run(script: str, **env: str) -> str:
    import os

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}, timeout=120)  # fmt: skip
    return out.stdout.strip()


def test_an_embedded_env_is_built_without_gradio():
    # Nor rfc3987_syntax, for which jsonschema compiles a grammar at import (seconds at every start).
    import importlib.util

    later = ["rfc3987_syntax"] if importlib.util.find_spec("rfc3987_syntax") else []
    assert run(SCRIPT, ENABLE_WEB_INTERFACE="false").splitlines() == ["False True", "True False", *later]


def test_the_cli_starts_without_openenv():
    script = (
        "import sys\nfrom evalkit.cli import main\ntry:\n    main(['run', '--help'])\nexcept SystemExit:\n"
        "    pass\nprint('openenv' in sys.modules, 'gradio' in sys.modules)"
    )
    assert run(script).splitlines()[-1] == "False False"


FRAMES = """
import resource, sys
import numpy as np
from evalkit.envs.embedded.server import hold_freed_memory
held = hold_freed_memory() if sys.argv[1] == "held" else None
def frame():  # a new frame's three buffers (the picture, its rows, its filtered lines), freed together
    parts = [np.ones(1_500_000, np.uint8) for _ in range(3)]
    return sum(int(p[-1]) for p in parts)
frame()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    frame()
print(held, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_server_process_keeps_the_memory_of_its_frames_for_the_next():
    # Without it, each frame's buffers are handed back to the kernel and faulted in again: ~1000 pages.
    def faults(how: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", FRAMES, how], capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert int(faults("as is")[1]) > 500
    assert faults("held") == ["True", "0"]
