"""The fault suite of `tests/faults/` at full size, with its tallies printed: what survives when the things a
batch depends on break. Three phases, each against the tests' stand-in model (`tests/faults/drivers.py`:
served in this process over the real chat-completions wire, a fixed usage per reply):

- **kill/resume**: `evalkit run` of `--episodes` canvas episodes (the env served inside the killed process)
  SIGKILLed at `--kills` random moments — from start-up to the summary — and resumed each time, then a
  final resume. Every episode is in the trace exactly once, none lost or unscored, and the usage totals are
  exactly two calls' worth per episode (what an episode cut short had used is in no record).
- **provider faults**: `--provider-tasks` tasks of two models, one whose endpoint serves a seeded mix of
  500s, 429s with retry-after, timeouts, cut streams, malformed arguments and unknown tools, one whose
  endpoint is down. The batch exits 3 with the dead model's episodes unscored (never zero), every request
  is accounted for in the records; the resume (endpoint back) exits 0 with every episode once.
- **env faults**: a batch against `evalkit serve canvas` in a child process that is SIGKILLed mid-batch, and
  one that is frozen with SIGSTOP: the breaker stops each batch with one line and exit status 4 (the frozen
  one within seconds, by `--env-breaker 0,3`); the resume, with the server back, exits 0.

Prints each phase's tallies with PASS/FAIL per property, then a summary table; exits 1 if anything failed.
Everything is written under a temporary directory, removed at the end; every child process is killed.

    PYTHONPATH=. python benchmarks/faults.py [--episodes 200] [--kills 5] [--seed N] [--phases kill,provider]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fault suite's drivers

from tests.faults.drivers import (  # noqa: E402
    CALL_USAGE,
    FAULTS,
    MODEL,
    EnvProcess,
    StandIn,
    check_once,
    kill_at_random,
    records,
    run_argv,
    wait_for_records,
)
from tests.faults.test_provider_faults import requests_recorded  # noqa: E402

PHASES = ("kill", "provider", "env")


class Verdicts:
    """Properties checked, in order: (phase, property, got, expected, passed)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, bool]] = []

    def check(self, phase: str, name: str, got: object, expected: object, ok: bool | None = None) -> bool:
        ok = got == expected if ok is None else ok
        self.rows.append((phase, name, str(got), str(expected), ok))
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {got}" + ("" if ok else f" (expected {expected})"))
        return ok


def finish(argv: list[str], env: dict, timeout: float = 600) -> tuple[int, str, float]:
    """Run `argv` to its end in a session of its own (killed with everything it started if it overruns):
    exit status, stderr, seconds."""
    t = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err, time.monotonic() - t


def tally_checks(v: Verdicts, phase: str, tally: dict, keys: int) -> None:
    print(f"  tally: {tally}")
    got = (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"])
    v.check(phase, "keys, duplicated, lost, unscored", got, (keys, 0, 0, 0))


def kill_resume(tmp: Path, a: argparse.Namespace, v: Verdicts) -> None:
    n = a.episodes
    print(f"== kill/resume: {n} episodes, --env canvas in the killed process, --concurrency {a.concurrency}, "
          f"{a.kills} SIGKILLs")  # fmt: skip
    model = StandIn()
    out = tmp / "kill"
    t0 = time.monotonic()
    try:
        argv = run_argv(out, "--concurrency", str(a.concurrency), tasks=n, env="canvas")
        hits = kill_at_random(argv, model.env(), out, n, a.kills, random.Random(a.seed))
        killed_at = time.monotonic()
        status, err, took = finish(argv, model.env())
    finally:
        model.stop()
    wall = time.monotonic() - t0
    print(f"  {'kill':>4} {'target':>6} {'aimed at':>10} {'killed':>6} {'records before':>14} {'after':>6}")
    for i, h in enumerate(hits, 1):
        moment = "start-up" if h["target"] == 0 else "summary" if h["target"] >= n else "mid-batch"
        print(f"  {i:>4} {h['target']:>6} {moment:>10} {str(h['killed']):>6} {h['records_before']:>14} "
              f"{h['after']:>6}")  # fmt: skip
    print(f"  killed runs {killed_at - t0:.1f}s, final resume {took:.1f}s (exit {status}), phase {wall:.1f}s")
    print(
        f"  {sum(h['killed'] for h in hits)} of {a.kills} kills hit a running batch (the rest found it done)"
    )
    v.check("kill", "final resume exit status", status, 0)
    if not v.check(
        "kill", "no traceback in the final resume", "found" if "Traceback" in err else "none", "none"
    ):
        for line in dict.fromkeys(ln.strip() for ln in err.splitlines() if "Error" in ln):
            print(f"    stderr: {line}")
    tally = check_once(out, n)
    tally_checks(v, "kill", tally, n)
    for d in {d["key"]: d for d in records(out)}.values():  # the episodes off the expected two calls
        used = tuple(d["usage"].get(k) for k in CALL_USAGE)
        if d.get("reward") is None or used != tuple(2 * c for c in CALL_USAGE.values()):
            print(f"    {d.get('task_id')}: reward {d.get('reward')}, {d.get('n_turns')} turns, usage {used},"
                  f" {d.get('error_class')}: {str(d.get('error'))[:200]}")  # fmt: skip
    v.check("kill", f"torn lines (≤ {a.kills})", tally["torn"], f"≤ {a.kills}", ok=tally["torn"] <= a.kills)
    expected = {k: 2 * c * n for k, c in CALL_USAGE.items()}
    v.check("kill", "usage totals (input, output)", tuple(tally["usage"].values()), tuple(expected.values()))
    from evalkit.analysis import load_runs

    df = load_runs(out)
    v.check("kill", "load_runs rows, all scored", (df.height, bool(df["scored"].all())), (n, True))


def provider_faults(tmp: Path, a: argparse.Namespace, v: Verdicts) -> None:
    n = a.provider_tasks
    print(f"== provider faults: {n} tasks × 2 models ({MODEL} with fault rate {a.fault_rate}, {MODEL}-dead), "
          "--concurrency 4, --request-timeout 1.5")  # fmt: skip
    model = StandIn(fault_rate=a.fault_rate, seed=a.seed, timeout_delay=2.5)
    out = tmp / "provider"
    argv = run_argv(out, "--concurrency", "4", "--request-timeout", "1.5", models=f"{MODEL},{MODEL}-dead",
                    tasks=n, env="canvas")  # fmt: skip
    try:
        first, err1, took1 = finish(argv, model.env())
        served, sent = dict(model.served), len(model.server.requests)
        recs = records(out)
        model.rate = 0.0
        model.served.clear()
        model.server.reset(default=lambda body: model.reply({**body, "model": "revived"}))
        second, err2, took2 = finish(argv, model.env())
    finally:
        model.stop()
    print("  served: " + ", ".join(f"{k} {served.get(k, 0)}" for k in ("ok", *FAULTS, "dead")))
    print(f"  first run {took1:.1f}s (exit {first}), resume {took2:.1f}s (exit {second})")
    v.check("provider", "first run exit status", first, 3)
    v.check("provider", "no traceback", "found" if "Traceback" in err1 + err2 else "none", "none")
    v.check("provider", "every fault kind served", [k for k in FAULTS if not served.get(k)], [])
    v.check("provider", "records of the first run", len(recs), 2 * n)
    unscored = Counter(d["error_class"] for d in recs if d["reward"] is None)
    print(f"  unscored by error class: {dict(unscored)}")
    line = [ln for ln in err1.splitlines() if "unscored by infrastructure errors" in ln]
    for ln in line:
        print(f"    {ln}")
    v.check("provider", "one 'unscored' line", len(line), 1)
    dead = Counter(d["error_class"] for d in recs if d["model"].endswith("-dead"))
    v.check("provider", "dead model: every episode endpoint_error", dict(dead), {"endpoint_error": n})
    v.check("provider", "unscored ⇔ error (never a zero)",
            sum((d["reward"] is None) != (d["error_class"] is not None) for d in recs), 0)  # fmt: skip
    v.check("provider", "requests recorded / sent", f"{requests_recorded(recs)} / {sent}", f"{sent} / {sent}")
    v.check("provider", "parse_errors = malformed served",
            sum(d["parse_errors"] for d in recs), served.get("malformed", 0))  # fmt: skip
    v.check("provider", "tool_errors = unknown tools served",
            sum(d["tool_errors"] for d in recs), served.get("unknown_tool", 0))  # fmt: skip
    replies = served.get("ok", 0) + served.get("malformed", 0) + served.get("unknown_tool", 0)
    v.check("provider", "output tokens = replies × usage",
            sum(d["usage"]["output"] for d in recs), CALL_USAGE["output"] * replies)  # fmt: skip
    v.check("provider", "resume exit status", second, 0)
    tally_checks(v, "provider", check_once(out, 2 * n), 2 * n)


def lose_env(
    out: Path, env: EnvProcess, sig: int, breaker: str, model: StandIn, a: argparse.Namespace, spare: list
) -> dict:
    """A batch on `env`, `sig` sent to the server once `a.env_after` episodes are recorded; then the server
    back (thawed, or a new one on the same port, kept in `spare` to be stopped) and the batch resumed."""
    argv = run_argv(out, "--concurrency", "2", "--env-breaker", breaker, tasks=a.env_tasks, env=env.url)
    proc = subprocess.Popen(argv, env=model.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        wait_for_records(out, a.env_after, proc)
        at = len(records(out))
        env.signal(sig)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=150)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if sig == signal.SIGSTOP:
        env.signal(signal.SIGCONT)
    else:
        env.proc.wait(10)
        spare.append(EnvProcess(port=env.port).start())
    again, err2, took2 = finish(argv, model.env())
    return {"status": proc.returncode, "err": err + err2, "took": took, "at": at, "again": again,
            "resume": took2, "records": len(records(out))}  # fmt: skip


def env_faults(tmp: Path, a: argparse.Namespace, v: Verdicts) -> None:
    print(f"== env faults: {a.env_tasks} tasks, --concurrency 2, the server hit after {a.env_after} records")
    model = StandIn()
    envs = {"killed": EnvProcess().launch(), "frozen": EnvProcess().launch()}
    spare: list[EnvProcess] = []
    try:
        for env in envs.values():
            env.ready()
        results = {
            "killed": lose_env(tmp / "env-killed", envs["killed"], signal.SIGKILL, "3,60", model, a, spare),
            "frozen": lose_env(tmp / "env-frozen", envs["frozen"], signal.SIGSTOP, "0,3", model, a, spare),
        }
    finally:
        for env in [*envs.values(), *spare]:
            env.stop()
        model.stop()
    for name, r in results.items():
        phase = f"env {name}"
        sig = "SIGKILL, --env-breaker 3,60" if name == "killed" else "SIGSTOP, --env-breaker 0,3"
        down = [line for line in r["err"].splitlines() if " is down: " in line]
        print(f"  {name} ({sig}) at {r['at']} records: fault → exit {r['took']:.1f}s, exit {r['status']}; "
              f"resume {r['resume']:.1f}s, exit {r['again']}")  # fmt: skip
        for line in down:
            print(f"    {line}")
        v.check(phase, "batch exit status", r["status"], 4)
        v.check(phase, "one 'is down' line", len(down), 1)
        why = "episodes in a row lost the environment" if name == "killed" else "has not answered for"
        v.check(phase, "the line says why", bool(down) and why in down[0], True)
        if name == "frozen":
            v.check(phase, "fault → exit (s, < 30)", f"{r['took']:.1f}", "< 30", ok=r["took"] < 30)
        v.check(phase, "no traceback", "found" if "Traceback" in r["err"] else "none", "none")
        v.check(phase, "resume exit status", r["again"], 0)
        tally_checks(v, phase, check_once(tmp / f"env-{name}", a.env_tasks), a.env_tasks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200, help="episodes of the kill/resume phase")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=8, help="of the kill/resume phase")
    ap.add_argument("--provider-tasks", type=int, default=40, help="tasks per model of the provider phase")
    ap.add_argument("--fault-rate", type=float, default=0.45)
    ap.add_argument("--env-tasks", type=int, default=16)
    ap.add_argument("--env-after", type=int, default=4, help="records before the env server is hit")
    ap.add_argument("--seed", type=int, default=None, help="kill moments and fault mix (default: drawn)")
    ap.add_argument("--phases", default=",".join(PHASES), help="comma-separated, of " + ", ".join(PHASES))
    a = ap.parse_args()
    a.seed = random.randrange(2**32) if a.seed is None else a.seed
    phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    if unknown := set(phases) - set(PHASES):
        ap.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    run = {"kill": kill_resume, "provider": provider_faults, "env": env_faults}
    v = Verdicts()
    walls = {}
    print(f"seed {a.seed} (rerun with --seed {a.seed}; kill moments also depend on timing)")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="evalkit-faults-") as tmp:
        for phase in phases:
            t = time.monotonic()
            try:
                run[phase](Path(tmp), a, v)
            except Exception as e:  # one broken phase is reported, and the others still run
                traceback.print_exc()
                v.check(
                    phase, "phase ran to its end", f"{type(e).__name__}: {e}"[:80], "no exception", ok=False
                )
            walls[phase] = time.monotonic() - t
            print()
    print(f"{'phase':13} {'property':40} {'got':>28} {'expected':>28}  verdict")
    for phase, name, got, expected, ok in v.rows:
        print(f"{phase:13} {name[:40]:40} {got[:28]:>28} {expected[:28]:>28}  {'PASS' if ok else 'FAIL'}")
    failed = sum(not r[4] for r in v.rows)
    times = ", ".join(f"{p} {s:.0f}s" for p, s in walls.items())
    print(f"{len(v.rows) - failed} passed, {failed} failed; wall {time.monotonic() - t0:.0f}s ({times})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
