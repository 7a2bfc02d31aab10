"""Why a model fails: scanners over every episode of a run, keyless rules and questions a model answers.

- `base` — what a scanner is (a function of a record returning fired / steps / evidence), `Finding`;
- `rules` — the built-in keyless scanners (`BUILTIN`), each documented in docs/scanners.md;
- `engine` — `scan(runs, scanners)`: one row per episode × scanner, kept beside the run on request;
- `judge` — `ask(question, judge=...)`: a scanner a model answers through evalkit's providers, its answers
  cached beside the run by (episode, question, judge).

Their rates, the differences between two models and the checks against a person's labels are statistics
(`evalkit.analysis.why`); where scans and labels are kept is the run's (`evalkit.records.scans`).

May import: `records`, `analysis`, `providers` and the modules at evalkit's top; never `run`, `envs` or
`view`.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    **dict.fromkeys(["Finding", "Context", "Scanner", "as_scanner"], "evalkit.scanners.base"),
    **dict.fromkeys(["scan", "SCAN_COLUMNS", "scanners_of", "with_kept"], "evalkit.scanners.engine"),
    **dict.fromkeys(["ask", "Judged"], "evalkit.scanners.judge"),
    **dict.fromkeys(
        ["BUILTIN", "repeated_call", "error_streak", "retry_unchanged", "unknown_tool", "early_finish",
         "no_tool_call", "output_limit", "refusal", "context_overflow", "infra_error"],
        "evalkit.scanners.rules",
    ),
    **dict.fromkeys(
        ["label", "read_labels", "read_scan", "read_scans", "write_scan", "scan_dir"], "evalkit.records.scans"
    ),
    **dict.fromkeys(["why", "check", "disagreements", "parting", "partings"], "evalkit.analysis.why"),
}  # fmt: skip

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'evalkit.scanners' has no attribute {name!r}")
    module = importlib.import_module(_NAMES[name])
    builtins = getattr(module, "BUILTIN", {})
    return builtins[name] if name in builtins else getattr(module, name)  # a built-in as its Scanner


def __dir__() -> list[str]:
    return sorted({*__all__, *globals()})
