"""JupyterLab's save hook for evalkit's own notebooks: a notebook saved into a checkout's `notebooks/` (the
directory that holds `strip_outputs.py`) is written as it is committed, without outputs, so running the
quickstart and saving it leaves `git status` clean. Lab keeps showing the outputs of the open notebook; the
file holds none. Any other notebook is saved untouched.

`make venv` (and so `make demo` and `make test`) names it in the venv's Jupyter server configuration,
`.venv/etc/jupyter/jupyter_server_config.json` (`python -m evalkit.analysis.lab`, which keeps whatever else
that file says):

    {"ContentsManager": {"pre_save_hook": "evalkit.analysis.lab.strip_shipped"}}

(Not a file in `jupyter_server_config.d/`: Jupyter reads only the extensions it enables from there.)

git's clean filter (`notebooks/strip_outputs.py`) does the same for a commit; this hook is for the file on
disk, which git otherwise lists as modified until it is added (a changed size counts as a change without
running the filter), and for editors other than Lab it is still the filter that keeps outputs out.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

HOOK = "evalkit.analysis.lab.strip_shipped"
STRIPPER = "strip_outputs.py"
"""The file that marks a directory as evalkit's shipped notebooks, and whose `clean` strips them."""


def shipped_dir(file: Path) -> Path | None:
    """The notebooks directory `file` is in when it is evalkit's (it holds `strip_outputs.py`), else None."""
    parent = file.parent
    return parent if parent.name == "notebooks" and (parent / STRIPPER).is_file() else None


def _cleaner(folder: Path) -> Any:
    spec = importlib.util.spec_from_file_location("evalkit_strip_outputs", folder / STRIPPER)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "clean", None)


def strip_shipped(model: dict, path: str, contents_manager: Any, **_: Any) -> None:
    """Jupyter's `pre_save_hook`: strip outputs, execution counts and run metadata from a notebook about to
    be saved into evalkit's `notebooks/` directory (in place, as the hook is meant to)."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    root = Path(getattr(contents_manager, "root_dir", "") or ".")
    folder = shipped_dir(root / path.lstrip("/"))
    if folder is None:
        return
    clean = _cleaner(folder)
    if clean is not None:
        model["content"] = clean(model["content"])


def config_file(prefix: str | Path = sys.prefix) -> Path:
    """The Jupyter server configuration of the environment at `prefix` (a venv's own)."""
    return Path(prefix) / "etc" / "jupyter" / "jupyter_server_config.json"


def install(prefix: str | Path = sys.prefix) -> Path:
    """Name the hook in the Jupyter server configuration of the environment at `prefix`, keeping the rest
    of that file; the file written."""
    path = config_file(prefix)
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        config = {}
    manager = config.setdefault("ContentsManager", {})
    if manager.get("pre_save_hook") != HOOK:
        manager["pre_save_hook"] = HOOK
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2) + "\n")
    return path


if __name__ == "__main__":
    install()
