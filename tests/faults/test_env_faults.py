"""An env server killed (SIGKILL) and one frozen (SIGSTOP) in the middle of a batch: the breaker stops each
batch with one line and exit status 4 — the frozen one within seconds, not after every session's two-minute
message timeout — and once the server is back, the same command resumes and runs every episode exactly
once. The two run side by side (each server a process of its own, which is what can be killed or frozen)."""

from __future__ import annotations

import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalkit.envs.server import serve
from tests.faults.drivers import EnvProcess, StandIn, check_once, run_argv, wait_for_records

TASKS = 8


def lose_the_env(out: Path, env: EnvProcess, sig: int, breaker: str, model: StandIn) -> dict:
    """Run a batch on `env`, send `sig` to the server after 3 episodes, then bring it back and resume."""
    argv = run_argv(out, "--concurrency", "2", "--env-breaker", breaker, tasks=TASKS, env=env.url)
    proc = subprocess.Popen(argv, env=model.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    wait_for_records(out, 3, proc)
    env.signal(sig)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=150)
    took = time.monotonic() - t0
    if sig == signal.SIGSTOP:
        env.signal(signal.SIGCONT)  # the same server thaws
        again = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    else:
        env.proc.wait(10)
        with serve("canvas", port=env.port):  # a server again on the same port
            again = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    return {"status": proc.returncode, "err": err, "took": took, "again": again}


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
        assert r["again"].returncode == 0, (name, r["again"].stderr)
        out = tmp_path / name[0]
        tally = check_once(out, TASKS)
        assert (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"]) == (TASKS, 0, 0, 0)
    assert "episodes in a row lost the environment" in results["killed"]["err"]
    assert "has not answered for" in results["frozen"]["err"]
    assert results["frozen"]["took"] < 30  # not the 120 s each hung session would wait for its answer
