"""Statistics over runs and the ways they are shown: the part notebooks, the report and the viewer read.

- `stats` — task-weighted summaries per model and tier with CIs over tasks, paired comparisons by task;
- `intervals` — the intervals and tests themselves, on arrays (each method named once: `tables.METHODS`);
- `repeats` — pass@k and pass^k over repeats, and `plan` (tasks and repeats a difference needs);
- `sequential` — paired comparisons looked at between rounds, stopping when decided (`--until-decided`);
- `noise` — how noisy a benchmark is, from its repeats: flips, variance parts, the difference needed;
- `why` — scanners' rates per model, the failure modes that separate two models, checks against labels, and
  where two trajectories part;
- `summary` — the same as the CLI's text tables and a run's `summary.json` / `summary.md`;
- `tables`, `plots`, `display` — HTML tables, Altair charts, the notebook display of records and runs;
  `kernel` what `import evalkit` sets up in a kernel, `offline` Altair's charts with no network;
- `report`, `export` — `evalkit report` (the report notebook executed) and any notebook as offline HTML.

The names notebooks use are here too, loaded on first use: `analysis.load_runs`, `.summarise`, `.by_tier`,
`.compare`, the column lists, `.write_summary`, …

May import: `records` and the modules at evalkit's top. Never `run`, `view`, `envs` or `providers`: analysis
starts from a run directory, whoever wrote it.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    **dict.fromkeys(
        ["COMPARE_COLUMNS", "GROUP", "MIN_TASKS", "N_BOOT", "PAIR_KEYS", "TASK_KEYS", "TIER_ORDER",
         "Z_80", "Z_975", "by_tier", "cluster_bootstrap", "compare_many", "grade_components",
         "min_detectable", "paired_bootstrap", "sign_flip_p", "summarise", "holm", "mean_interval",
         "sign_flip_interval", "N_FLIPS", "ALPHA", "paired_tasks", "MEAN_METHODS", "PAIRED_METHODS",
         "CELL_KEYS"],
        "evalkit.analysis.stats",
    ),
    **dict.fromkeys(["pass_at_k", "pass_hat_k", "plan", "format_plan"], "evalkit.analysis.repeats"),
    # A run that recorded a sequential comparison is compared as its design decided (the same as stats'
    # compare elsewhere).
    **dict.fromkeys(["compare", "format_sequential"], "evalkit.analysis.sequential"),
    **dict.fromkeys(["noise", "format_noise"], "evalkit.analysis.noise"),
    **dict.fromkeys(["why", "check", "disagreements", "parting", "partings"], "evalkit.analysis.why"),
    **dict.fromkeys(["calls", "load_runs", "malformed", "turns", "run_status"], "evalkit.records.loading"),
    "METHODS": "evalkit.analysis.tables",
    **dict.fromkeys(
        ["CALL_COLUMNS", "EPISODE_COLUMNS", "EPISODE_SCHEMA", "TURN_COLUMNS"], "evalkit.records.columns"
    ),
    "index_path": "evalkit.records.index_cache",
    **dict.fromkeys(
        ["format_compare", "format_harness", "format_summary", "summary_dir", "write_summary"],
        "evalkit.analysis.summary",
    ),
}  # fmt: skip

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'evalkit.analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *globals()})
