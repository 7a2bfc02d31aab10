"""Serving the embedded envs: OpenEnv's server imported without its web interface."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from evalkit.envs.server import build_app
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
