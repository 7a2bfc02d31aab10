"""A 50 MB observation and a 1 MB tool argument, through `evalkit run` against a user's OpenEnv server and a
model on the chat-completions wire: nothing lost (the observation whole in the transcript, the argument
whole in the record and at the env), and where a limit is hit, one line saying which."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State

from evalkit.types import Call, Turn
from tests.faults.drivers import ROOT, records
from tests.providers.fakes import FakeModelServer, Reply
from tests.support.foreign_envs import Served
from tests.support.scripted import factory

UNIT = "0123456789abcdef" * 65536  # 1 MiB
ARGUMENT = "x" * (1 << 20)


class BigEnv(MCPEnvironment):
    """`read_log` answers `size_mb` MiB of text (the reset's); `write_file` says how much it was sent."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("big")
        self.size = 50

        @mcp.tool
        def read_log() -> str:
            """The whole log."""
            return UNIT * self.size

        @mcp.tool
        def write_file(content: str) -> str:
            """Store content; says how many characters arrived."""
            return f"stored {len(content)} characters"

        super().__init__(mcp)
        self._state = State(episode_id="big", step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.size = int(kwargs.get("size_mb") or 50)
        return Observation(done=False, reward=None, metadata={"task_id": "big", "unfinished_reward": 0.5})

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(done=False, reward=None, metadata={})

    @property
    def state(self):
        return self._state


def model_turn(body: dict) -> Reply:
    turns = sum(m.get("role") == "assistant" for m in body["messages"])
    if turns == 0:
        return Reply(calls=[("read_log", {})])
    if turns == 1:
        return Reply(calls=[("write_file", {"content": ARGUMENT})])
    return Reply(text="done")


@pytest.fixture(scope="module")
def big_env():
    with Served(create_app(BigEnv, CallToolAction, CallToolObservation, env_name="big")) as served:
        yield served


@pytest.fixture
def model():
    server = FakeModelServer().start()
    server.reset(default=model_turn)
    yield server
    server.stop()


def run(model, env, out, *extra):
    argv = [sys.executable, "-m", "evalkit.cli", "run", "--base-url", env.base_url, "--models", "vllm:m",
            "--max-turns", "4", "--no-progress", "--out", str(out), *extra]  # fmt: skip
    env_vars = {**os.environ, "VLLM_BASE_URL": model.url + "/v1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, env=env_vars, capture_output=True, text=True, timeout=300)


def test_a_50_mb_observation_and_a_1_mb_argument_lose_nothing(model, big_env, tmp_path):
    from evalkit.records.transcripts import messages
    from evalkit.types import EpisodeRecord

    out = tmp_path / "run"
    done = run(model, big_env, out, "--tasks", "1", "--max-tokens", "400000")  # room for a 1 MB argument
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (d,) = records(out)
    assert d["error_class"] is None and d["reward"] == 0.5, d.get("error")
    read, write = (t["calls"][0] for t in d["turns"][:2])
    assert write["args"] == {"content": ARGUMENT} and write["result"] == f"stored {1 << 20} characters"
    assert read["result"] == (UNIT * 50)[: len(read["result"])]  # the record's copy is capped...
    said = [m for m in messages(EpisodeRecord.from_dict(d), out) if m.role == "tool"]
    assert said[0].text.startswith(UNIT * 50)  # ...the transcript keeps what the model was sent, whole
    assert len(model.bodies()[1]["messages"][-1]["content"]) >= 50 * (1 << 20)


def test_the_output_limit_on_a_1_mb_argument_is_the_turns_stop(model, big_env, tmp_path):
    """At the default 16,000 output tokens a 1 MB argument cannot be written: the harness's cap on a server
    that ignores max_tokens cuts the turn, whose stop says so; what arrived is kept, the episode goes on."""
    out = tmp_path / "run"
    done = run(model, big_env, out, "--reset-json", json.dumps({"size_mb": 1}))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (d,) = records(out)
    cut = d["turns"][1]
    assert cut["stop"] == "length (harness cap)" and cut["calls"][0]["parse_error"]
    assert isinstance(cut["calls"][0]["args"], str) and cut["calls"][0]["args"].startswith('{"content": "xxx')
    assert d["error_class"] is None and d["n_turns"] == 3


def test_a_message_past_the_frame_limit_is_one_line(big_env, monkeypatch):
    """Past the largest WebSocket frame evalkit takes (512 MiB; here lowered to 8), the env's answer is
    refused in one line naming both sizes: an env error, as the env's connection is lost with it."""
    from evalkit.envs.client import wire
    from evalkit.run.episode import run_episode

    monkeypatch.setattr(wire, "MAX_MESSAGE", 8 << 20)
    turns = [
        Turn(calls=[Call("c1", "read_log", {})]),
        Turn(calls=[Call("c2", "write_file", {"content": "x"})]),
    ]
    rec = run_episode(factory(turns), big_env.base_url, {"size_mb": 4}, max_turns=3)
    assert rec.error_class == "env_error" and "\n" not in rec.error
    assert "exceeds limit of 8388608 bytes" in rec.error
