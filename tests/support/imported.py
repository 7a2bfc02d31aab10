"""OpenEnv servers made by `openenv import` (openenv 0.10) in the test session, from the source trees in
`tests/support/import_sources/`: the importer detects the environment, vendors its source and writes the
wrapper and app (its own templates, untouched), and the app it wrote is served as a user would serve it.

- `quiz`: a Verifiers environment: chat-message prompts (a system message, a question; one with a picture),
  the answer in the task spec, one tool `submit(completion, messages)`, both optional.
- `vault`: an OpenReward environment: three tasks that open alike (a prompt of a text block and an image
  block), a code per task in its task spec; `look` answers with text and image blocks, `answer(code)`
  ends the task.

What the importer is not run for here is its last step, `uv lock` (it resolves the generated package's
dependencies on a package index; the wrapper's code does not depend on it).
"""

from __future__ import annotations

import atexit
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

SOURCES = Path(__file__).parent / "import_sources"
IMPORTED = {"quiz": "quiz_vf", "vault": "vault_ors"}
"""Each env → its source tree; the generated package is `imported_<env>` (`openenv import --name`), a name no
other module of the session takes."""
QUIZ_ANSWERS = ("Zelphine", "Murrowend")
QUIZ_SYSTEM = "You answer quiz questions about made-up places. Answer with one word."
"""The system message of every quiz prompt (`import_sources/quiz_vf/quiz.py`)."""
VAULT_CODES = ("lynx-204", "zebra-417", "otter-938")

_made: dict[str, object] = {}
_out: list[Path] = []


def generate(name: str, out: Path) -> Path:
    """Run `openenv import SOURCE --name NAME --output-dir OUT` (its detection and generation) and return the
    generated package's directory."""
    from openenv.cli.commands.import_env import _select_match
    from openenv.cli.importers import DEFAULT_IMPORTERS, ImporterRegistry

    source = (SOURCES / IMPORTED[name]).resolve()
    importer, detected = _select_match(ImporterRegistry(DEFAULT_IMPORTERS), source, None, None)
    package = f"imported_{name}"
    destination = out / package
    destination.mkdir(parents=True)
    importer.generate(source=source, destination=destination, env_name=package, detected=detected)
    return destination


def app(name: str):
    """The ASGI app `openenv import` generated for `name` (generated once per process)."""
    if name not in _made:
        if not _out:
            _out.append(Path(tempfile.mkdtemp(prefix="evalkit-openenv-import-")))
            atexit.register(shutil.rmtree, _out[0], ignore_errors=True)
            sys.path.insert(0, str(_out[0]))
        generate(name, _out[0])
        _made[name] = importlib.import_module(f"imported_{name}.server.app").app
    return _made[name]
