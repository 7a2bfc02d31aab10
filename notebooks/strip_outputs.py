"""Git's clean filter for the shipped notebooks: a notebook read on stdin, written to stdout as it is
committed (no outputs, no execution counts, no saved widget state, no per-cell timings, the kernel named
but not its version). Running the notebooks in JupyterLab or VS Code saves their outputs into these files;
with this filter git sees only what a person changed in the cells: `git diff` is empty, `git add` stages
nothing, nothing is committed. JupyterLab started from the project's venv saves them already stripped (a
save hook, `evalkit/analysis/lab.py`), so `git status` stays clean too; after another editor saved outputs,
`git status` may still list the notebook until it is added (git takes a changed file size as a change
without running the filter), and `git add notebooks` clears it, staging no change.

`make venv` (and so `make demo` and `make test`) sets it up for the checkout, as `.gitattributes` names it:

    git config filter.evalkit-notebook.clean "python3 notebooks/strip_outputs.py"

Standard library only: git runs it with whatever `python3` is on the PATH. Anything that is not a notebook
passes through unchanged.
"""

from __future__ import annotations

import json
import sys

KEEP_CELL_METADATA = ("tags",)
"""Per-cell metadata a person sets (the `parameters` tag); the rest (timings, collapsed state) is a run's."""


def clean(nb: dict) -> dict:
    for cell in nb.get("cells", []):
        if isinstance(cell.get("source"), str):  # as nbformat writes it (and so JupyterLab): a list of lines
            cell["source"] = cell["source"].splitlines(keepends=True)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.get("metadata") or {}
        cell["metadata"] = {k: v for k, v in meta.items() if k in KEEP_CELL_METADATA}
    meta = nb.get("metadata") or {}
    meta.pop("widgets", None)
    info = meta.get("language_info")
    if isinstance(info, dict):  # the Python version a run happened to have is not part of the notebook
        meta["language_info"] = {"name": info.get("name", "python")}
    nb["metadata"] = meta
    return nb


def main() -> None:
    text = sys.stdin.buffer.read().decode("utf-8")
    try:
        nb = json.loads(text)
    except ValueError:
        sys.stdout.write(text)
        return
    if not isinstance(nb, dict) or "cells" not in nb:
        sys.stdout.write(text)
        return
    # nbformat's own layout, so that a clean notebook comes out byte for byte as it went in.
    sys.stdout.buffer.write(
        (json.dumps(clean(nb), sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()
    )


if __name__ == "__main__":
    main()
