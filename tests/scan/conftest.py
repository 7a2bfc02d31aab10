"""A run of planted failures on the embedded canvas env, made once per session: two episodes of each kind of
`tests/support/planted.py`, with the truth (kind, planted turn) of each key."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import planted


@pytest.fixture(scope="session")
def planted_run(canvas_server, tmp_path_factory) -> tuple[Path, dict[str, tuple[str, int | None]]]:
    import evalkit as ek

    out = tmp_path_factory.mktemp("planted") / "run"
    jobs = [(kind, seed) for seed in (1, 2) for kind in planted.KINDS]

    def one(job: tuple[str, int]) -> tuple[str, tuple[str, int | None]]:
        kind, seed = job
        make, p = planted.factory(kind, seed)
        task = f"canvas-test-{planted.KINDS.index(kind) + 1:04d}"
        rec = ek.run_episode(make, canvas_server, task=task, out=out, max_turns=planted.MAX_TURNS,
                             frames=False, repeat=seed)  # fmt: skip
        return rec.key, (kind, p.step)

    with ThreadPoolExecutor(4) as pool:
        truth = dict(pool.map(one, jobs))
    return out, truth


@pytest.fixture(scope="session")
def _judge_server():
    from tests.providers.fakes import FakeModelServer

    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def judge_server(_judge_server, monkeypatch):
    """A local server speaking the Anthropic Messages API (the real SDK's requests), emptied, the
    Anthropic provider pointed at it; waits between retries recorded, not slept."""
    from evalkit.providers import attempts

    _judge_server.reset()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _judge_server.url)
    _judge_server.waits = []
    monkeypatch.setattr(attempts, "sleep", _judge_server.waits.append)
    yield _judge_server
