"""`evalkit run` killed with SIGKILL at five random moments — during start-up, mid-episode, during the
summary — and resumed each time: every episode is in the trace exactly once and the usage totals are exact.

A smaller batch than `benchmarks/faults.py` runs (≥ 200 episodes there, the env served inside the killed
process), with the moments drawn anew each run (the seed is printed on failure)."""

from __future__ import annotations

import random
import subprocess

from evalkit.records import outputs
from tests.faults.drivers import CALL_USAGE, StandIn, check_once, kill_at_random, run_argv

EPISODES = 24
KILLS = 5


def test_killed_five_times_and_resumed(tmp_path, canvas_server):
    seed = random.randrange(2**32)
    model = StandIn()
    try:
        out = tmp_path / "run"
        # The env is the session's server (the benchmark kills one served inside the batch's process).
        argv = run_argv(out, "--concurrency", "4", tasks=EPISODES, env=canvas_server.base_url)
        hits = kill_at_random(argv, model.env(), out, EPISODES, KILLS, random.Random(seed))
        done = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    finally:
        model.stop()
    assert done.returncode == 0, (seed, hits, done.stderr)
    assert "Traceback" not in done.stderr, seed
    tally = check_once(out, EPISODES)
    assert (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"]) == (EPISODES, 0, 0, 0), (
        seed,
        hits,
        tally,
    )
    # Two model calls per episode; what episodes cut short by a kill had used is in no record.
    assert tally["usage"] == {k: 2 * v * EPISODES for k, v in CALL_USAGE.items()}, (seed, tally)
    assert tally["torn"] <= KILLS
    # A kill mid-write leaves at most a torn line, which the resumed writer starts after on a fresh line.
    from evalkit.analysis import load_runs

    df = load_runs(out)
    assert df.height == EPISODES and df["scored"].all()
    assert int(df["input_tokens"].sum()) == 2 * CALL_USAGE["input"] * EPISODES
    # What the kills left mid-write (a frame, a text, summary.json) was swept by the writer that came next.
    stray = [p for p in out.rglob("*.tmp") if outputs.TEMP.match(p.name)]
    assert stray == [], (seed, hits, stray)
