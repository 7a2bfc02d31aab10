"""An env server killed (SIGKILL) and one frozen (SIGSTOP) in the middle of a batch: the breaker stops each
batch with one line and exit status 4 — the frozen one within seconds, not after every session's two-minute
message timeout — and once the server is back, the same command resumes and runs every episode exactly
once. The two run side by side (each server a process of its own, which is what can be killed or frozen)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalkit.envs.embedded.server import serve
from tests.faults.drivers import EnvProcess, StandIn, check_once, records, run_argv, wait_for_records

TASKS = 12
"""Enough for the breaker to open whatever the timing: the server goes after 3 episodes, and each of the
(at most 2) episodes in flight then may still end well, which resets "in a row"; 7 failures in at most 3
runs make one run of 3. (With 8, 4 failures split 2 + 2 around a late success: no breaker, exit 3.)"""


def lose_the_env(out: Path, env: EnvProcess, sig: int, breaker: str, model: StandIn) -> dict:
    """Run a batch on `env`, send `sig` to the server after 3 episodes, then bring it back and resume."""
    argv = run_argv(out, "--concurrency", "2", "--env-breaker", breaker, tasks=TASKS, env=env.url)
    proc = subprocess.Popen(argv, env=model.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    wait_for_records(out, 3, proc)
    env.signal(sig)
    t0 = time.monotonic()
    said, err = proc.communicate(timeout=150)
    took = time.monotonic() - t0
    written = records(out)
    if sig == signal.SIGSTOP:
        env.signal(signal.SIGCONT)  # the same server thaws
        again = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    else:
        env.proc.wait(10)
        with serve("canvas", port=env.port):  # a server again on the same port
            again = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    return {
        "status": proc.returncode,
        "said": said,
        "err": err,
        "took": took,
        "again": again,
        "written": written,
    }


def test_env_server_killed_and_frozen_mid_batch(tmp_path):
    model = StandIn()
    envs = {"killed": EnvProcess().launch(), "frozen": EnvProcess().launch()}
    try:
        for env in envs.values():
            env.ready()
        with ThreadPoolExecutor(2) as pool:
            killed = pool.submit(lose_the_env, tmp_path / "k", envs["killed"], signal.SIGKILL, "3,60", model)
            frozen = pool.submit(lose_the_env, tmp_path / "f", envs["frozen"], signal.SIGSTOP, "0,3", model)
            results = {"killed": killed.result(), "frozen": frozen.result()}
    finally:
        for env in envs.values():
            env.stop()
        model.stop()
    for name, r in results.items():
        err = r["err"]
        assert r["status"] == 4, (name, err)
        assert "Traceback" not in err, name
        down = [line for line in err.splitlines() if " is down: " in line]
        assert len(down) == 1 and down[0].startswith("evalkit: error: the environment at http://127.0.0.1:")
        assert "rerun the same command" in down[0]
        # The counts it printed are the records it wrote (the episodes that opened the breaker included).
        ran = re.search(r"ran (\d+) episode\(s\), skipped 0 already done, (\d+) unscored", r["said"])
        assert ran, r["said"]
        unscored = sum(d["error_class"] is not None for d in r["written"])
        assert (int(ran[1]), int(ran[2])) == (len(r["written"]), unscored), (name, r["said"])
        left = re.search(r"(\d+) episode\(s\) were not run", err)
        assert (int(left[1]) if left else 0) == TASKS - len(r["written"]), (name, err)
        assert r["again"].returncode == 0, (name, r["again"].stderr)
        out = tmp_path / name[0]
        tally = check_once(out, TASKS)
        assert (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"]) == (TASKS, 0, 0, 0)
    assert "episodes in a row lost the environment" in results["killed"]["err"]
    assert "has not answered for" in results["frozen"]["err"]
    assert results["frozen"]["took"] < 30  # not the 120 s each hung session would wait for its answer


def test_what_the_breaker_says_ran_is_what_the_trace_holds(canvas_server, tmp_path, monkeypatch):
    """The episodes that open the breaker are still being written as the batch stops waiting (a write is
    fsynced: milliseconds, here stretched to 1.2 s, past the batch's one-second look at the breaker): they
    are counted as ran if and only if they are in the trace, and nothing is written after the batch
    returns."""
    from evalkit.envs.client import sessions
    from evalkit.errors import EnvError
    from evalkit.records.rundir import TraceWriter
    from evalkit.run.batch import run_batch
    from evalkit.run.breaker import BreakerSettings

    write = TraceWriter.append

    def slow(self, rec):
        time.sleep(1.2)
        write(self, rec)

    real = sessions.open_session

    def lost(env, reset_kw, cancel=None, wait=sessions.CAPACITY_WAIT):
        if cancel is None:  # the preflight's own reset (an episode's has the batch's cancel)
            return real(env, reset_kw, cancel, wait)
        raise EnvError("the environment closed the connection during reset")

    monkeypatch.setattr(sessions, "open_session", lost)  # every episode loses the env
    monkeypatch.setattr(TraceWriter, "append", slow)
    out = tmp_path / "run"
    run = run_batch("baseline:random", canvas_server, out=out, tasks=8, concurrency=2, progress=False,
                    env_breaker=BreakerSettings(failures=1, silence=0))  # fmt: skip
    written = records(out)
    time.sleep(1.5)  # an episode the batch stopped waiting for may end now: it is not written
    assert records(out) == written
    assert run.stopped and run.ran == len(written) and run.errors == len(written)
    assert run.unscored == ({"env_error": len(written)} if written else {})
    assert run.not_run + run.abandoned == 8 - len(written)
