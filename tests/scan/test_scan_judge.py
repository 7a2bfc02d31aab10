"""Judged scanners through the real Anthropic SDK against a local server speaking its wire, with a scripted
judge: the structured answer parsed from its `answer` call, asked again when it gives none; the transcript
sent is the one the model saw, cut to the budget, pictures on request; the cost recorded; a rerun pays
nothing; a kill mid-scan loses no answer and the rerun asks only the rest; a judge that fails leaves the
episode unanswered, never "no"."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import evalkit as ek
from evalkit.errors import ConfigError, MissingKeyError
from evalkit.providers.prices import cost_usd
from evalkit.records import scans as store
from evalkit.scanners.judge import ask
from evalkit.types import AgentOptions, Usage
from tests.providers.fakes import Reply

JUDGE = "anthropic:claude-haiku-4-5"
QUESTION = "Did the agent call the same tool over and over?"
ROOT = Path(__file__).resolve().parents[2]


def _text(body: dict) -> str:
    """Everything the judge was sent in its first user message."""
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def loops_judge(body: dict) -> Reply:
    """Says yes, at the first turn that called get_document, where the transcript shows such a call."""
    text = _text(body)
    turns = [int(t) for t in re.findall(r"### Turn (\d+): the agent\n[^#]*→ get_document", text)]
    answer = {"answer": "yes", "step": turns[0], "reason": "get_document again and again"} if turns else {
        "answer": "no", "step": None, "reason": "no call repeated"}  # fmt: skip
    return Reply(calls=[("answer", answer)], usage={"input": 1200, "output": 40})


@pytest.fixture
def fresh(planted_run, tmp_path) -> tuple[Path, dict]:
    """The planted run, copied without anything a scan kept beside it: each test asks afresh."""
    run, truth = planted_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".evalkit"))
    return copy, truth


def _asked(run: Path, q=None) -> pl.DataFrame:
    return ek.scan(run, [q or ask(QUESTION, JUDGE, concurrency=4)]).sort("key")


def test_structured_answers_parsed_costed_and_a_rerun_pays_nothing(fresh, judge_server):
    run, truth = fresh
    judge_server.reset(default=loops_judge)
    rows = _asked(run)
    assert len(judge_server.requests) == len(truth) and rows.height == len(truth)
    for r in rows.iter_rows(named=True):
        kind, step = truth[r["key"]]
        assert r["fired"] == (kind == "loop") and r["answer"] == ("yes" if kind == "loop" else "no")
        assert r["steps"] == ([step] if kind == "loop" else [])
        assert r["judge"] == JUDGE and r["kind"] == "model" and r["cached"] is False
        assert r["cost_usd"] == pytest.approx(cost_usd(JUDGE, Usage(input=1200, output=40)))
    body = judge_server.requests[0]["body"]
    assert [t["name"] for t in body["tools"]] == ["answer"]
    assert body["tools"][0]["input_schema"]["properties"]["answer"]["enum"] == ["yes", "no"]
    sent = _text(body)
    assert QUESTION in sent and "You are recreating a target design" in sent  # the model's own instructions
    assert "### Turn 1: result of add_element" in sent
    again = _asked(run)
    assert len(judge_server.requests) == len(truth)  # nothing asked twice
    assert again["cached"].all() and again.drop("cached").equals(rows.drop("cached"))
    kept = store.judged(run)
    assert len(kept) == len(truth) and {k["question"] for k in kept.values()} == {QUESTION}


def test_categories_and_a_judge_asked_again_until_it_answers(fresh, judge_server):
    run, truth = fresh
    one = ek.load_runs(run).filter(pl.col("model") == "planted:streak").head(1)
    good = {"answer": "Tool misuse", "step": 99, "reason": "three failing calls"}
    judge_server.reset(
        Reply(text="I think it misused the tools."),
        Reply(calls=[("answer", {"answer": "maybe", "step": 2, "reason": "?"})]),
        Reply(calls=[("answer", good)], usage={"input": 10, "output": 5}),
    )
    q = ask("What went wrong first?", JUDGE, answers=["misread the task", "tool misuse", "none"])
    assert q.fires == ("misread the task", "tool misuse")
    row = ek.scan(one, [q]).row(0, named=True)
    assert row["answer"] == "tool misuse" and row["fired"] and row["steps"] == []  # turn 99: not in it
    bodies = judge_server.bodies()
    assert len(bodies) == 3
    assert "Answer by calling the tool `answer`" in json.dumps(bodies[1]["messages"][-1])
    last = bodies[2]["messages"][-1]["content"][0]
    assert last["type"] == "tool_result" and last["is_error"] and "must be one of" in json.dumps(last)
    # The usage of all three requests is what the answer cost.
    assert row["cost_usd"] == pytest.approx(cost_usd(JUDGE, Usage(input=30, output=15)))


def test_a_failing_judge_leaves_episodes_unanswered_and_they_are_asked_next_time(fresh, judge_server):
    run, truth = fresh
    judge_server.reset(default=Reply(status=500))
    q = ask(QUESTION, JUDGE, concurrency=1, options=AgentOptions(max_retries=1))
    rows = _asked(run, q)
    assert rows["fired"].is_null().all() and rows["answer"].is_null().all()
    assert rows["evidence"].str.starts_with("no answer").sum() == 5  # then the rest is left unasked
    assert rows["evidence"].str.starts_with("not asked").sum() == len(truth) - 5
    assert len(judge_server.requests) == 5 * 2 and not store.judged(run)
    df = ek.load_runs(run)
    rates = ek.why(df, rows)
    assert (rates["n_episodes"] == 0).all() and (rates["left_out"] > 0).all()  # unanswered: never "no"
    judge_server.reset(default=loops_judge)
    assert _asked(run)["fired"].is_not_null().all()
    assert len(judge_server.requests) == len(truth)


def test_a_refused_key_stops_the_scan_and_a_missing_one_is_said_before_any_work(
    fresh, judge_server, monkeypatch
):
    run, _ = fresh
    judge_server.reset(default=Reply(status=401))
    with pytest.raises(ConfigError, match="rejected the API key"):
        _asked(run)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    judge_server.reset(default=loops_judge)
    with pytest.raises(MissingKeyError):
        _asked(run)
    assert not judge_server.requests
    with pytest.raises(ConfigError):
        ask(QUESTION, JUDGE, answers=["yes"])
    with pytest.raises(ConfigError):
        ask(QUESTION, JUDGE, fires=["perhaps"])


def test_the_transcript_is_cut_to_the_budget_and_pictures_go_on_request(judge_server, tmp_path):
    run = tmp_path / "sample-run"
    shutil.copytree(ROOT / "data" / "sample-run", run, ignore=shutil.ignore_patterns(".evalkit"))
    one = ek.load_runs(run).filter(pl.col("model") == "baseline:random").sort("n_turns").tail(1)
    judge_server.reset(default=loops_judge)
    ek.scan(one, [ask(QUESTION, JUDGE, max_chars=3000, name="small")])
    ek.scan(one, [ask(QUESTION, JUDGE, images=True, name="pictures")])
    small, pictures = judge_server.bodies()
    assert len(_text(small)) < 3400 and "left out to fit the budget" in _text(small)
    assert not any(b.get("type") == "image" for b in small["messages"][0]["content"])
    shown = [b for b in pictures["messages"][0]["content"] if b.get("type") == "image"]
    assert 1 <= len(shown) <= 8


def test_a_kill_mid_scan_loses_no_answer_and_the_rerun_asks_only_the_rest(fresh, judge_server):
    run, truth = fresh
    judge_server.reset(default=lambda body: Reply(**{**loops_judge(body).__dict__, "delay": 0.25}))
    env = {**os.environ, "ANTHROPIC_BASE_URL": judge_server.url, "ANTHROPIC_API_KEY": "test-key",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    cmd = [sys.executable, "-m", "evalkit.cli", "scan", str(run), "--judge", JUDGE, "--ask", QUESTION,
           "--concurrency", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = store.scan_dir(run) / store.JUDGED_FILE
    deadline = time.monotonic() + 60
    while (not cache.exists() or len(store.judged(run)) < 4) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    answered = len(store.judged(run))
    assert 4 <= answered < len(truth)
    asked_before = len(judge_server.requests)
    judge_server.reset(default=loops_judge)
    rows = ek.scan(run, [ask(QUESTION, JUDGE)])
    assert rows["fired"].is_not_null().all()
    assert rows["cached"].sum() == answered
    assert len(judge_server.requests) == len(truth) - answered  # none of the kept answers asked again
    assert asked_before >= answered
