"""A batch against a model endpoint that misbehaves: 500s, 429s with `retry-after`, timeouts, streams cut
mid-reply, malformed tool arguments and unknown tools, drawn at random — and a second model whose endpoint
is down. Nothing crashes; every request the server saw is accounted for in the records; the dead model's
episodes are unscored (never zero) and the run exits 3; the resume runs them and exits 0."""

from __future__ import annotations

import random
import subprocess

from tests.faults.drivers import CALL_USAGE, FAULTS, MODEL, StandIn, check_once, records, run_argv

TASKS = 10


def requests_recorded(recs: list[dict]) -> int:
    """Every model request a record accounts for: each turn's attempts, and those of a call that failed."""
    n = 0
    for d in recs:
        n += sum(t.get("attempts", 1) for t in d.get("turns") or [])
        n += (d.get("info") or {}).get("failed_turn", {}).get("attempts", 0)
    return n


def test_a_mix_of_provider_faults(tmp_path, canvas_server):
    seed = random.randrange(2**32)
    model = StandIn(fault_rate=0.45, seed=seed, timeout_delay=2.5)
    out = tmp_path / "run"
    models = f"{MODEL},{MODEL}-dead"
    argv = run_argv(out, "--concurrency", "4", "--request-timeout", "1.5", models=models, tasks=TASKS,
                    env=canvas_server.base_url)  # fmt: skip
    try:
        first = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
        served, sent = dict(model.served), len(model.server.requests)
        recs = records(out)
        model.rate = 0.0
        model.served.clear()
        dead = [d for d in recs if d["model"].endswith("-dead")]
        model.server.reset(default=lambda body: model.reply({**body, "model": "revived"}))
        second = subprocess.run(argv, env=model.env(), capture_output=True, text=True, timeout=300)
    finally:
        model.stop()
    note = (seed, served, first.stderr[-2000:])
    assert "Traceback" not in first.stderr + second.stderr, note
    assert first.returncode == 3, note
    unscored_line = [ln for ln in first.stderr.splitlines() if "unscored by infrastructure errors" in ln]
    assert len(unscored_line) == 1 and "endpoint_error ×" in unscored_line[0], note
    assert all(served.get(k) for k in FAULTS), note  # each kind met at least once

    assert len(recs) == 2 * TASKS, note
    for d in recs:
        assert d["error_class"] in (None, "endpoint_error"), (d["error"], note)
        assert (d["reward"] is None) == (d["error_class"] is not None)  # unscored, never a zero
    assert len(dead) == TASKS and all(d["error_class"] == "endpoint_error" for d in dead)
    # Every request the endpoint saw is in a record: turns' attempts, and the failed call of an episode.
    assert requests_recorded(recs) == sent, note
    assert sum(d["parse_errors"] for d in recs) == served["malformed"], note
    assert sum(d["tool_errors"] for d in recs) == served["unknown_tool"], note
    # Usage is exact: a reply that came reported its usage; an error, a timeout or a cut stream reported none.
    replies = served["ok"] + served["malformed"] + served["unknown_tool"]
    assert sum(d["usage"]["output"] for d in recs) == CALL_USAGE["output"] * replies, note
    for d in recs:
        failed = [a for t in d["turns"] for a in t["failed_attempts"]]
        failed += (d.get("info") or {}).get("failed_turn", {}).get("failed_attempts", [])
        assert all(a["kind"] in ("server_error", "rate_limited", "timeout", "stream_cut") for a in failed)

    assert second.returncode == 0, second.stderr
    tally = check_once(out, 2 * TASKS)
    assert (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"]) == (2 * TASKS, 0, 0, 0)
