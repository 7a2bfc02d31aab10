"""`--until-decided` (`evalkit.run.rounds`): real batches on the embedded canvas env, in rounds at the
design's planned looks. The demo's case — the tracer against random — stops early with the right verdict; two
models that play alike (the stand-in over real HTTP under two names, one policy) run on to the last planned
task."""

from __future__ import annotations

import hashlib
import json

import pytest

from evalkit.analysis import report, sequential
from evalkit.analysis.sequential import read_looks
from evalkit.cli import main
from evalkit.errors import ConfigError
from evalkit.providers.standin import SPEC
from evalkit.records.loading import load_runs
from evalkit.records.rundir import read_records
from evalkit.run.batch import run_batch
from tests.providers.fakes import Reply

EVALSET = "data/evalsets/canvas-test-300.json"
TRACER, RANDOM = "baseline:tracer", "baseline:random"


def test_tracer_against_random_stops_early_with_the_right_verdict(canvas_server, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--base-url", canvas_server.base_url, "--models", f"{TRACER},{RANDOM}", "--evalset",
            EVALSET, "--limit", "30", "--concurrency", "4", "--no-progress", "--until-decided", "--a", TRACER,
            "--b", RANDOM, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    looks = read_looks(out)
    last = looks[-1]
    assert last.decision == "a" and last.ci_low > 0 and not last.final
    assert last.n_tasks < 30 and last.max_tasks == 30  # stopped early
    assert [x.decision for x in looks[:-1]] == ["continue"] * (len(looks) - 1)
    assert [x.extra["round_tasks"] for x in looks] == sequential.planned_looks(30)[: len(looks)]
    recs = list(read_records(out))
    assert len(recs) == 2 * last.n_tasks  # nothing ran after the decision
    said = capsys.readouterr().out
    assert f"sequential comparison: {TRACER} better after {len(looks)} look(s)" in said
    meta = json.loads((out / "run.json").read_text())
    assert meta["until_decided"] and meta["compare_a"] == TRACER and meta["compare_b"] == RANDOM

    result = sequential.compare(load_runs([out]), TRACER, RANDOM)
    overall = result.filter(result["group"] == "all").row(0, named=True)
    assert overall["decision"] == "a" and overall["ci_low"] == pytest.approx(last.ci_low)

    head = report.headline_html(load_runs([out]), RANDOM, TRACER)  # (either way round)
    assert f"<b>{TRACER}</b> scores higher than <b>{RANDOM}</b>" in head and "repeated 95% CI" in head
    assert f"decided at look {len(looks)} with {last.n_tasks} of 30 planned tasks" in head
    assert f"Sequential comparison \\(--until-decided\\): {TRACER} better" in (out / "summary.md").read_text()
    assert "until decided" in report.settings_html([str(out)], load_runs([out]))

    assert main(argv) == 0  # a resume of a decided run starts nothing
    assert len(list(read_records(out))) == len(recs) and len(read_looks(out)) == len(looks)
    with pytest.raises(ConfigError, match="another design"):
        run_batch([TRACER, RANDOM], canvas_server, evalset=EVALSET, limit=30, until_decided=True,
                  compare_a=TRACER, compare_b=RANDOM, delta=0.1, progress=False, out=out)  # fmt: skip


PALETTE = ("#ffffff", "#f8f8f8", "#000000", "#3366cc", "#ff0000", "#dddddd")


def alike(body: dict) -> Reply:
    """One policy for both names: a background colour drawn by (name, task), then submit. The two names play
    alike in distribution, differently task by task."""
    task = json.dumps(body["messages"][:2], sort_keys=True)  # the instructions describe the task
    digest = hashlib.sha256(f"{body['model']}|{task}".encode()).digest()
    colour = PALETTE[digest[0] % len(PALETTE)]
    usage = {"input": 900, "output": 40}
    return Reply(calls=[("set_background", {"color": colour}), ("submit", {})], usage=usage)


def test_two_models_that_play_alike_run_on_to_the_last_planned_task(standin, canvas_server, tmp_path):
    standin.play(alike)
    out, a, b = tmp_path / "run", "vllm:standin-a", "vllm:standin-b"
    run = run_batch([a, b], canvas_server, evalset=EVALSET, limit=20, modes=["description"], concurrency=4,
                    until_decided=True, compare_a=a, compare_b=b, progress=False, out=out)  # fmt: skip
    looks = read_looks(out)
    d = [x.diff for x in looks]
    assert any(abs(x) > 0 for x in d)  # they differ task by task
    assert [x.decision for x in looks] == ["continue"] * (len(looks) - 1) + ["undecided"]
    assert looks[-1].final and looks[-1].n_tasks == 20 and run.look == looks[-1]
    assert len(list(read_records(out))) == 40


def test_until_decided_mistakes_are_config_errors_before_any_work(canvas_server, tmp_path):
    out = tmp_path / "run"
    ask = dict(evalset=EVALSET, limit=6, progress=False, out=out)
    with pytest.raises(ConfigError, match="not among --models"):
        run_batch([TRACER, RANDOM], canvas_server, until_decided=True, compare_a=TRACER,
                  compare_b="baseline:greedy", **ask)  # fmt: skip
    with pytest.raises(ConfigError, match="needs --a A and --b B"):
        run_batch([TRACER, RANDOM], canvas_server, until_decided=True, **ask)
    with pytest.raises(ConfigError, match="go with --until-decided"):
        run_batch([TRACER, RANDOM], canvas_server, compare_a=TRACER, compare_b=RANDOM, **ask)
    with pytest.raises(ConfigError, match="known number of tasks"):
        run_batch([TRACER, RANDOM], canvas_server, until_decided=True, compare_a=TRACER, compare_b=RANDOM,
                  tasks="all", progress=False, out=out)  # fmt: skip
    assert not out.exists()
    assert main(["run", "--env", "canvas", "--models", TRACER, "--a", TRACER, "--out", str(out)]) == 2
    assert not out.exists()


def test_a_budget_that_runs_out_leaves_the_design_open_and_a_resume_goes_on(
    priced_standin, canvas_server, tmp_path
):
    out = tmp_path / "run"
    ask = dict(evalset=EVALSET, limit=12, modes=["description"], max_turns=6, max_retries=1, concurrency=2,
               until_decided=True, compare_a=SPEC, compare_b=RANDOM, progress=False, out=out)  # fmt: skip
    run = run_batch([SPEC, RANDOM], canvas_server, max_cost=0.03, **ask)
    looks = read_looks(out)
    assert run.budget_stop is not None and len(looks) == 1 and run.look == looks[0]
    assert looks[0].decision == "continue" and not looks[0].final
    paired = looks[0].n_tasks
    run = run_batch([SPEC, RANDOM], canvas_server, max_cost=1.0, **ask)  # raised: the design goes on
    looks = read_looks(out)
    assert run.budget_stop is None and len(looks) > 1 and looks[-1].n_tasks > paired
    assert looks[-1].decision != "continue" and run.look == looks[-1]
