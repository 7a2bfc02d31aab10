"""The transcript of an API model's episode says exactly what each request carried: the images an image
budget pruned (checked against the bodies the local server received, per wire API), and with --save-raw
each request and response body, images as references to the frame store."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from evalkit.records.rundir import safe_path
from evalkit.records.transcripts import messages
from evalkit.run.episode import run_episode
from evalkit.types import AgentOptions
from tests.providers.fakes import Reply, live_images

SPECS = [
    ("anthropic:claude-sonnet-5@low", "/v1/messages"),
    ("openai:gpt-6-sol", "/v1/responses"),
    ("openai-chat:gpt-6-luna", "/v1/chat/completions"),
]


def looker(body: dict) -> Reply:
    """Look at the canvas every turn (an image each time) and say why."""
    return Reply(reasoning="Let me look again.", text="Looking.", calls=[("view_canvas", {})],
                 usage={"input": 50, "output": 9})  # fmt: skip


def sha_of(data: str) -> str:
    b64 = data.split(",", 1)[1] if data.startswith("data:") else data
    return hashlib.sha256(base64.b64decode(b64)).hexdigest()


@pytest.mark.parametrize(("spec", "path"), SPECS)
def test_pruned_images_are_the_ones_requests_stopped_carrying(fake, canvas_server, tmp_path, spec, path):
    fake.reset(default=looker)
    rec = run_episode(spec, canvas_server, "canvas-test-0004", out=tmp_path, max_turns=8, save_raw=True,
                      options=AgentOptions(keep_images=1, max_retries=0))  # fmt: skip
    assert rec.error_class is None and rec.n_turns == 8
    msgs = messages(rec, tmp_path)
    bodies = fake.bodies(path)
    assert len(bodies) == 8
    for n, body in enumerate(bodies, start=1):
        # What the transcript says request n carried: the opening's images, and every later image sent
        # before turn n that was not pruned by then.
        said = [
            hashlib.sha256(safe_path(tmp_path, img["path"]).read_bytes()).hexdigest()
            for m in msgs
            if (m.turn == 0 and m.role == "user") or (m.role != "assistant" and 0 < m.turn < n)
            for img in m.images
            if not img["pruned"] or img["pruned_at"] > n
        ]
        assert [sha_of(d) for d in live_images(body)] == said, n
    pruned = [i for m in msgs for i in m.images if i["pruned"]]
    assert len(pruned) >= 4 and all(i["path"].startswith("frames/") for i in pruned)
    # --save-raw: each turn's bodies, text only, images named by their frame
    tool_ms = [m for m in msgs if m.role == "assistant"]
    for m in tool_ms:
        req = json.loads(safe_path(tmp_path, m.raw["request"]).read_text())
        resp = json.loads(safe_path(tmp_path, m.raw["response"]).read_text())
        assert resp and "base64" not in json.dumps(req)
        refs = [x["frame"] for x in _frames(req)]
        assert refs and all(safe_path(tmp_path, r) is not None for r in refs)
        assert len(refs) == len(live_images(bodies[m.turn - 1]))
    assert m.reasoning == "Let me look again." and m.usage["input"] > 0 and m.stop


def _frames(node):
    if isinstance(node, dict):
        if "frame" in node:
            yield node
        for v in node.values():
            yield from _frames(v)
    elif isinstance(node, list):
        for v in node:
            yield from _frames(v)


def test_without_save_raw_there_is_no_raw(fake, canvas_server, tmp_path):
    fake.reset(default=looker)
    rec = run_episode("anthropic:claude-sonnet-5", canvas_server, "canvas-test-0004", out=tmp_path,
                      max_turns=2)  # fmt: skip
    assert "raw" not in rec.transcript and not (tmp_path / "raw").exists()
    assert all(m.raw is None for m in messages(rec, tmp_path))


def test_the_cli_saves_raw_bodies(fake, canvas_server, tmp_path):
    from evalkit.cli import main
    from evalkit.records.rundir import read_records

    fake.reset(default=looker)
    out = tmp_path / "run"
    argv = ["run", "--base-url", canvas_server.base_url, "--models", "openai:gpt-6-sol", "--task-ids",
            "canvas-test-0001", "--max-turns", "2", "--no-progress", "--save-raw",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    (rec,) = read_records(out)
    assert rec.transcript["raw"].startswith("raw/") and json.loads((out / "run.json").read_text())["save_raw"]
    assert sorted(p.name for p in (out / rec.transcript["raw"]).iterdir()) == [
        "001.request.json",
        "001.response.json",
        "002.request.json",
        "002.response.json",
    ]
