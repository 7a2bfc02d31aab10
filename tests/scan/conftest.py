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
