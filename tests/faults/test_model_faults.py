"""`evalkit run` against model endpoints that misbehave the way real ones do, each speaking its wire on
loopback to the real SDK: an endless stream and a silent endpoint under `--episode-timeout`, a trickle under
`--request-timeout`; a prompt past the context window on each wire and Groq's malformed calls (the
providers' documented error bodies), which are the model's outcome; a Claude that refuses adaptive thinking.
Every run is bounded in time and ends in lines, never a traceback."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter

import pytest

from tests.faults.drivers import RECT, ROOT, records, run_argv
from tests.providers.fakes import FakeModelServer, Reply

ADAPTIVE_REFUSED = {
    "type": "error",
    "request_id": "req_011CVQe1dLrGNMJyE1ghG1av",
    "error": {"type": "invalid_request_error", "message": "adaptive thinking is not supported on this model"},
}
KEYS = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "VLLM_API_KEY": "k"}


def turns(body: dict) -> int:
    """Model turns already in a request's history, on any of the three wires."""
    if "input" in body:
        return sum(i.get("type") == "function_call" for i in body["input"])
    return sum(m.get("role") == "assistant" for m in body["messages"])


def play(body: dict) -> Reply:
    """A model that draws a rectangle, then submits."""
    if turns(body) == 0:
        return Reply(text="adding a box", calls=[("add_element", RECT)])
    return Reply(text="done", calls=[("submit", {})])


@pytest.fixture
def model():
    server = FakeModelServer().start()
    yield server
    server.stop()


def env_for(server: FakeModelServer) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALKIT_", "OPENAI_", "ANTHROPIC_"))}
    urls = {"ANTHROPIC_BASE_URL": server.url, "OPENAI_BASE_URL": server.url + "/v1",
            "VLLM_BASE_URL": server.url + "/v1"}  # fmt: skip
    return env | KEYS | urls | {"PYTHONPATH": str(ROOT)}


def run(server, out, models, *extra, env_url, tasks=1, timeout=120):
    argv = run_argv(out, *extra, models=models, tasks=tasks, env=env_url)
    t = time.monotonic()
    done = subprocess.run(argv, env=env_for(server), capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - t


# ---- deadlines ---------------------------------------------------------------------------------------------


def endless_or_silent(body: dict) -> Reply:
    if body["model"] == "endless":  # a delta every 0.2 s, for 20 minutes
        return Reply(text="more " * 60_000, chunk_delay=0.2)
    if body["model"] == "silent":  # headers never come
        return Reply(text="late", delay=3600)
    return play(body)


def test_the_episode_timeout_cuts_an_endless_stream_and_a_silent_endpoint(model, canvas_server, tmp_path):
    model.reset(default=endless_or_silent)
    out = tmp_path / "run"
    done, took = run(model, out, "vllm:endless,vllm:silent", "--episode-timeout", "3", "--concurrency", "2",
                     env_url=canvas_server.base_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert took < 25, took  # two episodes at once, each cut at 3 s (the interpreter's start-up aside)
    recs = {d["model"]: d for d in records(out)}
    for d in recs.values():
        assert d["end_reason"] == "deadline" and d["error_class"] is None, d.get("error")
        assert (
            d["reward"] is not None and d["auto_submitted"]
        )  # scored as the env scores it: submitted for it
        assert 2.5 < d["seconds"] < 8, d["seconds"]
        (failed,) = d["info"]["failed_turn"]["failed_attempts"]
        assert failed["kind"] == "timeout" and d["cost_usd"] is None  # may have been billed: unknown
    cut = recs["vllm:endless"]["info"]["cut_turn"]
    assert cut["turn"] == 1 and cut["text"].startswith("more more")  # what was received before the cut
    assert "cut_turn" not in recs["vllm:silent"]["info"]


def test_the_request_timeout_bounds_a_trickle_in_all(model, canvas_server, tmp_path):
    """No episode timeout: the request's own time cuts the stream (every 0.2 s a delta, which a read timeout
    alone would never fire on); with no retries left the episode is unscored and the batch exits."""
    model.reset(default=endless_or_silent)
    out = tmp_path / "run"
    done, took = run(model, out, "vllm:endless", "--request-timeout", "2", "--max-retries", "0",
                     env_url=canvas_server.base_url)  # fmt: skip
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert took < 20
    (d,) = records(out)
    assert d["error_class"] == "endpoint_error" and d["reward"] is None
    assert [a["kind"] for a in d["info"]["failed_turn"]["failed_attempts"]] == ["timeout"]


def test_the_request_timeout_is_said_in_help():
    from evalkit.cli import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "860 at --max-tokens 16000" in " ".join(text.split())


# ---- the model's failures ----------------------------------------------------------------------------------

OVERFLOW = {
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
        "request_id": "req_011CVQe1dLrGNMJyE1ghG1av",
    },  # fmt: skip
    "openai-chat": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130412 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "openai": {
        "error": {
            "message": "Your input exceeds the context window of this model. Please adjust your "
            "input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    },  # fmt: skip
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, you "
        "requested 41648 tokens (37552 in the messages, 4096 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
}


def overflowing(body: dict) -> Reply:
    """Turn 1 fits; turn 2's prompt is past the model's context, in the model's own provider's words."""
    if turns(body) == 0:
        return play(body)
    wire = body["model"].partition("-")[0]
    return Reply(status=400, error_body=OVERFLOW[wire])


def test_a_prompt_past_the_context_is_the_models_scored_end(model, canvas_server, tmp_path):
    model.reset(default=overflowing)
    out = tmp_path / "run"
    models = "anthropic:anthropic-x,openai:openai-x,openai-chat:openai-chat-x,vllm:vllm-x"
    done, _ = run(model, out, models, "--concurrency", "2", env_url=canvas_server.base_url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "0 unscored" in done.stdout
    recs = records(out)
    assert len(recs) == 4
    for d in recs:
        assert d["end_reason"] == "context_overflow" and d["error_class"] is None, (
            d["model"],
            d.get("error"),
        )
        assert d["reward"] is not None and d["auto_submitted"] and d["n_turns"] == 1
        (failure,) = d["info"]["model_failures"]
        assert failure["kind"] == "context_overflow" and failure["status"] == 400 and failure["turn"] == 2
    again, _ = run(model, out, models, env_url=canvas_server.base_url)  # scored ends: nothing to rerun
    assert again.returncode == 0 and "ran 0 episode(s), skipped 4" in again.stdout, again.stdout


GROQ = {"error": {"message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' "
        "for more details.", "type": "invalid_request_error", "code": "tool_use_failed",
        "failed_generation": '<function=add_element{"kind": "rect", "x": 10}</function>'}}  # fmt: skip


def groq_stream_error() -> bytes:
    """Groq's streamed form of the same refusal: an error event instead of the reply."""
    return (
        "event: error\ndata: " + json.dumps({"error": {**GROQ["error"], "status_code": 400}}) + "\n\n"
    ).encode()


def malformed(body: dict) -> Reply:
    """One model refuses its first call (plain 400), then plays; another refuses every call, in a stream."""
    if body["model"] == "always":
        return Reply(recorded=groq_stream_error())
    said = json.dumps(body["messages"])
    if "could not be parsed" not in said:
        return Reply(status=400, error_body=GROQ)
    return play({"messages": [m for m in body["messages"] if m.get("tool_calls")]})


def test_malformed_calls_are_the_models_turns(model, canvas_server, tmp_path):
    model.reset(default=malformed)
    out = tmp_path / "run"
    done, _ = run(model, out, "vllm:once,vllm:always", env_url=canvas_server.base_url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    recs = {d["model"]: d for d in records(out)}
    once, always = recs["vllm:once"], recs["vllm:always"]
    assert once["end_reason"] == "submitted" and once["error_class"] is None and once["parse_errors"] == 1
    first = once["turns"][0]
    assert first["stop"] == "tool_use_failed" and first["text"].startswith("<function=add_element")
    assert first["attempts"] == 1 and first["calls"] == []
    assert always["end_reason"] == "malformed_call" and always["error_class"] is None
    assert always["parse_errors"] == 3 and always["reward"] is not None and always["auto_submitted"]


# ---- requests every model accepts --------------------------------------------------------------------------


def claude(body: dict) -> Reply:
    if (body.get("thinking") or {}).get("type") == "adaptive" and body["model"] == "claude-haiku-6":
        return Reply(status=400, error_body=ADAPTIVE_REFUSED)
    return play(body)


def test_a_claude_refusing_adaptive_thinking_runs_with_the_thinking_it_takes(model, canvas_server, tmp_path):
    model.reset(default=claude)
    out = tmp_path / "run"
    models = "anthropic:claude-haiku-6@low,anthropic:claude-sonnet-4-5@medium"
    done, _ = run(model, out, models, "--concurrency", "1", tasks=3, env_url=canvas_server.base_url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    refused = [ln for ln in lines if "refused adaptive thinking" in ln]
    assert len(refused) == 1 and "claude-haiku-6" in refused[0] and "budget_tokens 2000" in refused[0], lines
    table = [ln for ln in lines if "claude-sonnet-4-5@medium: sent as budgeted thinking" in ln]
    assert len(table) == 1, lines
    recs = records(out)
    assert len(recs) == 6 and all(d["error_class"] is None and d["reward"] is not None for d in recs)
    statuses = Counter(r["body"].get("thinking", {}).get("type") for r in model.requests)
    assert (
        sum(
            1
            for r in model.requests
            if r["body"]["model"] == "claude-haiku-6" and r["body"]["thinking"]["type"] == "adaptive"
        )
        == 1
    ), statuses  # one 400 in the whole run
    meta = json.loads((out / "run.json").read_text())
    (kept,) = meta["fallbacks"]["anthropic:claude-haiku-6@low"]
    assert kept["asked"] == "adaptive thinking at effort low" and kept["sent"].startswith("budgeted thinking")
    assert meta["sent_as"] == {"anthropic:claude-sonnet-4-5@medium": "budgeted thinking (budget_tokens 4000)"}
