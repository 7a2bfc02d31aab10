"""`evalkit run --executor ray` on a real two-node cluster (`tests/run/raycluster.py`): every node runs
episodes (shown live in the run as they go), a node killed mid-batch or frozen costs only its episodes in
flight, and the batch ends complete;
a budget (`--max-cost`) holds across the cluster.

The batch is the CLI in a child process (its exit status and stderr are what a user sees), against the
stand-in model (each reply after 1 s: a runner takes ~10 s to start on a busy machine, and episodes must
be in flight when a node goes) and the embedded canvas env (served by the driver for the head and by the
runner on the second node)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import replace

import pytest

from tests.faults.drivers import StandIn, records, run_argv

pytestmark = pytest.mark.slow
TASKS = 60
"""Enough for the second node's runner to start while the batch runs (~11-14 s measured on a busy machine;
a batch does not wait for it) and still have episodes to run when it goes."""


@pytest.fixture(scope="session")
def cluster():
    pytest.importorskip("ray")
    from tests.run.raycluster import Cluster

    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def standin():
    model = StandIn()
    plain = model.reply
    model.server.reset(default=lambda body: replace(plain(body), delay=1.0))
    yield model
    model.stop()


def batch(cluster, standin, out, *extra: str, tasks: int = TASKS, **environ: str) -> subprocess.Popen:
    argv = run_argv(out, "--executor", "ray", "--ray-address", cluster.address, "--concurrency", "6",
                    *extra, tasks=tasks)  # fmt: skip
    env = standin.env(RAY_AUTH_MODE="disabled", **environ)
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def ended(proc: subprocess.Popen, timeout: float = 180) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the batch did not end in {timeout}s: {err[-2000:]}")
    return proc.returncode, err


def nodes_of(recs: list[dict]) -> Counter:
    return Counter((r.get("info") or {}).get("node", {}).get("address") for r in recs)


def wait_for_node(out, address: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until the second node has finished an episode (and so has more in flight)."""
    deadline = time.monotonic() + timeout
    while nodes_of(records(out))[address] < 1:
        assert proc.poll() is None, f"the batch ended first: {proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, "the second node ran nothing"
        time.sleep(0.05)


def complete(out, tasks: int = TASKS) -> list[dict]:
    """The trace holds every job once, each scored."""
    recs = records(out)
    keys = Counter(r["key"] for r in recs)
    assert len(keys) == tasks and max(keys.values()) == 1, keys
    assert all(r["error_class"] is None and r["reward"] is not None for r in recs)
    return recs


def watched(proc: subprocess.Popen, out, timeout: float = 180) -> list:
    """What a viewer watching the run saw running, polled until the batch ends."""
    from evalkit.records import live

    seen, deadline = [], time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        for e in live.running(out):
            if e.frame and (out / e.frame).is_file():  # (a picture it names is there to show)
                seen.append(e)
        time.sleep(0.3)
    return seen


def test_every_node_runs_episodes(cluster, standin, tmp_path):
    from evalkit.records import live

    cluster.second()
    proc = batch(cluster, standin, tmp_path / "run")
    seen = watched(proc, tmp_path / "run")
    status, err = ended(proc)
    assert status == 0, err[-2000:]
    # The runners' episodes in flight showed in the run's live folder, turn by turn; none is left there.
    assert len({e.key for e in seen}) >= 6 and max(e.turn or 0 for e in seen) >= 1, len(seen)
    assert live.files(tmp_path / "run") == []
    recs = complete(tmp_path / "run")
    ran = nodes_of(recs)
    assert set(ran) == {"127.0.0.2", "127.0.0.3"}, (ran, err[-3000:])
    assert all(len(r["info"]["node"]["id"]) == 56 for r in recs)  # Ray's node id, hex
    assert "Traceback" not in err and "Ray: " in err
    # Files the driver already had were not fetched again: the task renders and texts came once.
    assert "already here 0" not in err


def test_a_frozen_node_is_given_up_after_the_timeout(cluster, standin, tmp_path):
    cluster.second()
    proc = batch(cluster, standin, tmp_path / "run", "--ray-node-timeout", "4")
    wait_for_node(tmp_path / "run", "127.0.0.3", proc)
    cluster.freeze(True)
    try:
        frozen = time.monotonic()
        status, err = ended(proc)
        took = time.monotonic() - frozen
    finally:
        cluster.freeze(False)
    assert status == 0, err[-2000:]
    complete(tmp_path / "run")
    said = [line for line in err.splitlines() if "warning: Ray node" in line]
    assert len(said) == 1 and "127.0.0.3" in said[0] and "4s" in said[0], err[-2000:]
    assert "Traceback" not in err
    assert took < 4 + 60, took  # the timeout and the rest of the batch, not Ray's own minutes


def test_a_killed_node_costs_only_its_episodes(cluster, standin, tmp_path):
    cluster.second()
    proc = batch(cluster, standin, tmp_path / "run")
    wait_for_node(tmp_path / "run", "127.0.0.3", proc)
    cluster.raylet().kill()
    status, err = ended(proc)
    assert status == 0, err[-2000:]
    complete(tmp_path / "run")
    said = [line for line in err.splitlines() if "warning: Ray node" in line]
    assert len(said) == 1 and "127.0.0.3" in said[0], err[-2000:]
    assert "Traceback" not in err


def test_a_budget_holds_on_the_cluster_and_every_node_prices_its_episodes(cluster, standin, tmp_path):
    # The price file is the driver's: the second node has a /tmp of its own and never sees it.
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"standin": {"input": 2.0, "output": 10.0}}))
    cluster.second()
    out, each = tmp_path / "run", 0.00014  # what one episode of the stand-in costs at these prices
    budget = 52 * each  # (long enough for the second node's runner to start: ~11-14 s on a busy machine)
    status, err = ended(
        batch(cluster, standin, out, "--max-cost", f"{budget:.6f}", EVALKIT_PRICES=str(prices))
    )
    assert status == 0 and "Traceback" not in err, err[-2000:]
    recs = records(out)
    costs = [r["cost_usd"] for r in recs]
    assert all(c == pytest.approx(each) for c in costs), costs
    assert set(nodes_of(recs)) == {"127.0.0.2", "127.0.0.3"}, err[-2000:]
    # Stopped when the next episode would pass it: within one episode's cost of the budget, either side.
    assert abs(sum(costs) - budget) <= each * 1.01 and len(recs) < TASKS
    stop = json.loads((out / "run.json").read_text())["budget_stop"]
    assert stop["max_cost"] == pytest.approx(budget) and "budget" in err
