"""Own-loop runners and baselines on the webapp tasks, measured in one run on this machine.

1. The offline baselines (the DOM solver and random clicks) on every task: reward per tier, which shows the
   grader separates a policy that does the task from one that does not.
2. Each runner that can run here (UI-TARS always; OpenCUA, Fara-7B and MolmoWeb when their released code is
   on --path / $OWNLOOP_PATH) against the fake OpenAI-compatible endpoint replaying the DOM solver's plans:
   seconds per step split into model (the HTTP round trip to an instant model), action (input, the released
   loops' own sleeps and settling) and screenshot, and the share of tasks graded.

    python benchmarks/ownloop.py [--per-tier 2] [--workers 2] [--fast] [--path DIRS]

With --fast the released pauses (UI-TARS's wait, OpenCUA's 5 s after each action, 1 s settling) shrink to
test values; without it the figures are the released loops' own. Timings on a shared machine are noisy:
read the medians and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from evalkit.envs.embedded.webapp.tasks import load_tasks
from evalkit.errors import ConfigError
from evalkit.ownloop import Settings, run_ownloop
from evalkit.ownloop.baselines import plan_of
from evalkit.ownloop.fake import FakeEndpoint, PlanPolicy
from evalkit.ownloop.run import runner_for

TIERS = ("easy", "medium", "hard")
STAND_IN = Path(__file__).resolve().parents[1] / "tests" / "ownloop" / "stand_in"


def per_tier(records) -> dict[str, list[float]]:
    out = defaultdict(list)
    for r in records:
        if r.reward is not None:
            out[r.tier].append(r.reward)
            out["all"].append(r.reward)
    return out


def baselines(root: Path, workers: int) -> None:
    print("Baselines on every task: mean reward per tier (n)")
    print(f"{'agent':<10}" + "".join(f"{t:>14}" for t in (*TIERS, "all")) + f"{'graded':>10}{'s/task':>9}")
    for agent in ("dom", "random"):
        run = run_ownloop(Settings(agent=agent), root / agent, workers=workers, log=lambda _: None)
        by = per_tier(run.records)
        cells = "".join(f"{statistics.mean(by[k]):>9.2f} ({len(by[k]):>2})" for k in (*TIERS, "all"))
        graded = sum(r.reward is not None for r in run.records) / len(run.records)
        print(f"{agent:<10}{cells}{graded:>10.0%}{statistics.median(r.seconds for r in run.records):>9.1f}")
        sys.stdout.flush()
    print(f"(s/task: median seconds per task, workers={workers})\n")


def pick(per: int) -> list[str]:
    by = defaultdict(list)
    for t in load_tasks():
        by[t["tier"]].append(t["task_id"])
    return [i for tier in TIERS for i in by[tier][:per]]


def runner_row(agent: str, ids: list[str], root: Path, workers: int, fast: bool, path: list[str]) -> str:
    runner = runner_for(agent)
    w, h = runner.viewport
    note = ""
    settings = Settings(agent=agent, endpoint="http://unused", model="fake-model", path=list(path))
    if fast:
        settings.wait_s, settings.settle_s = 0.2, 0.05
    settings.width, settings.height = w, h
    try:
        runner.check(settings)
    except ConfigError as e:
        if agent != "opencua":
            return f"{agent:<10} skipped: {e}"
        settings.path = [str(STAND_IN)]
        note = "*"
    dom = run_ownloop(
        Settings(agent="dom", width=w, height=h),
        root / f"plan-{agent}",
        task_ids=ids,
        workers=workers,
        log=lambda _: None,
    )
    prompts = {t["task_id"]: t["prompt"] for t in load_tasks()}
    plans = {prompts[r.task_id]: plan_of(root / f"plan-{agent}" / r.task_id) for r in dom.records}
    with FakeEndpoint(PlanPolicy(plans, agent), model="fake-model") as fake:
        settings.endpoint = fake.url
        run = run_ownloop(settings, root / agent, task_ids=ids, workers=workers, log=lambda _: None)
    steps = sum(r.n_turns for r in run.records) or 1
    split = {
        k: sum(r.info["seconds_split"][k] for r in run.records) / steps
        for k in ("model", "action", "screenshot")
    }
    total = sum(r.seconds for r in run.records) / steps
    med = statistics.median(r.seconds / max(1, r.n_turns) for r in run.records)
    graded = sum(r.reward is not None for r in run.records) / len(run.records)
    reward = statistics.mean(r.reward for r in run.records if r.reward is not None)
    return (
        f"{agent + note:<10}{len(run.records):>6}{steps:>7}{split['model']:>9.3f}{split['action']:>9.3f}"
        f"{split['screenshot']:>9.3f}{total:>9.3f}{med:>10.3f}{graded:>9.0%}{reward:>8.2f}  {w}x{h}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-tier", type=int, default=2, help="tasks per tier for each runner")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fast", action="store_true", help="test pauses instead of the released ones")
    ap.add_argument("--path", default=os.environ.get("OWNLOOP_PATH", ""), help="released code, colon list")
    ap.add_argument("--agents", default="uitars,opencua,fara7b,molmoweb")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ownloop-bench-") as tmp:
        root = Path(tmp)
        baselines(root, a.workers)
        ids = pick(a.per_tier)
        print(
            f"Runners against the fake endpoint on {len(ids)} tasks ({a.per_tier} per tier), "
            f"{'test' if a.fast else 'released'} pauses: seconds per step"
        )
        print(
            f"{'agent':<10}{'tasks':>6}{'steps':>7}{'model':>9}{'action':>9}{'shot':>9}{'total':>9}"
            f"{'median':>10}{'graded':>9}{'reward':>8}  viewport"
        )
        path = [p for p in a.path.split(":") if p]
        for agent in a.agents.split(","):
            print(runner_row(agent, ids, root, a.workers, a.fast, path))
            sys.stdout.flush()
        print("* OSWorld not on the path: OpenCUA ran as the tests' stand-in with the agent's interface")
        print("total = wall seconds per step (includes the released loops' settling); median over tasks")


if __name__ == "__main__":
    main()
