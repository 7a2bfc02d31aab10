"""Own-loop GUI agents: released agent loops (UI-TARS-1.5, OpenCUA-7B, Fara-7B, MolmoWeb) run as released on
the `webapp` tasks, only their model call swapped for an OpenAI-compatible endpoint and their browser for
evalkit's Chromium; plus offline baselines (a DOM solver, random clicks) and a fake endpoint that answers as
each agent would (`--endpoint fake`: no GPU).

`run_ownloop(Settings(agent=...), out)` — or `evalkit ownloop AGENT --endpoint URL --model NAME --out RUN`
— writes, per task, `session.json` (or `session_failed.json`), `steps.jsonl` and `screens/step_NN.png`, and
one EpisodeRecord per task in `trace.jsonl`, so analysis and the viewer read these runs like any other.

A runner beside `run`: may import `envs` (the webapp's tasks, site and grader), `browser`, `records`,
`analysis` (its summary files) and the modules at evalkit's top.
"""

from .run import OwnloopRun, model_label, run_ownloop
from .runners import RUNNERS
from .task import Settings, TaskRun

__all__ = ["RUNNERS", "OwnloopRun", "Settings", "TaskRun", "model_label", "run_ownloop"]
