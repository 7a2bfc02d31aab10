"""`evalkit scan`: on the committed sample run it prints per-model rates with intervals (and, for two models,
what separates them), keeps the rows beside the run, checks scanners against labels; every mistake in what
was asked is one line and exit status 2, before any work."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from evalkit.cli import main
from evalkit.records import scans as store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sample(tmp_path) -> Path:
    run = tmp_path / "sample-run"
    shutil.copytree(ROOT / "data" / "sample-run", run, ignore=shutil.ignore_patterns(".evalkit"))
    return run


def test_the_sample_run_prints_rates_with_intervals_and_keeps_its_rows(sample, capsys):
    assert main(["scan", str(sample)]) == 0
    out = capsys.readouterr()
    assert "The model's failures" in out.out and "Infrastructure (apart: unscored)" in out.out
    for model in ("baseline:tracer", "baseline:random", "anthropic:evalkit-standin@low"):
        assert model in out.out
    infra = next(line for line in out.out.splitlines() if line.startswith("infra_error"))
    assert "17% [4.2%, 47%] 2/6" in infra  # the stand-in's two episodes its endpoint broke, of six tasks
    assert "95% CI: Bayesian bootstrap over tasks" in out.out
    rows = store.read_scan(sample)
    assert rows is not None and rows.height == 36 * 10 and "rows written to" in out.err


def test_two_models_are_compared_and_labels_checked(sample, tmp_path, capsys):
    rows_run = sample
    assert main(["scan", str(rows_run), "--scanner", "early_finish,infra_error"]) == 0
    rows = store.read_scan(rows_run)
    labels = tmp_path / "labels.csv"
    fired = rows.filter(pl.col("scanner") == "infra_error").select("key", "fired").rows()
    labels.write_text(
        "key,scanner,label\n" + "".join(f"{k},infra_error,{'yes' if f else 'no'}\n" for k, f in fired)
    )
    capsys.readouterr()
    code = main(["scan", str(rows_run), "--scanner", "infra_error", "--a", "anthropic:evalkit-standin@low",
                 "--b", "baseline:tracer", "--labels", str(labels)])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "anthropic:evalkit-standin@low is stopped by an infrastructure error in 17% of tasks" in out
    assert "Against the labels:" in out and "100% (too few)" in out
    assert sorted(store.read_scan(rows_run)["scanner"].unique()) == ["early_finish", "infra_error"]


@pytest.mark.parametrize(
    "args, said",
    [
        (["--scanner", "nope"], "no scanner named nope"),
        (["--ask", "Did it loop?"], "needs --judge MODEL"),
        (["--scanner", "misread_task"], "needs --judge MODEL"),
        (["--a", "baseline:tracer"], "give both --a and --b"),
        (["--a", "nobody", "--b", "baseline:tracer"], "is neither a model nor a run"),
        (["--judge", "nowhere:model"], "unknown provider"),
    ],
)
def test_mistakes_are_one_line_and_status_2_before_any_work(sample, capsys, args, said):
    assert main(["scan", str(sample), *args]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert store.read_scan(sample) is None


def test_a_judge_without_its_key_is_refused_before_any_work(sample, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(sample)  # no .env up the tree to find one in
    assert main(["scan", str(sample), "--judge", "anthropic:claude-haiku-4-5"]) == 2
    assert "missing API key ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert store.read_scan(sample) is None
    assert main(["scan", str(sample / "nothing-here")]) == 2


def test_a_built_in_question_asked_through_the_judge(sample, judge_server, capsys):
    from tests.providers.fakes import Reply

    said = {"answer": "no", "step": None, "reason": "it read it"}
    judge_server.reset(default=Reply(calls=[("answer", said)], usage={"input": 2000, "output": 30}))
    args = ["scan", str(sample), "--scanner", "misread_task", "--judge", "anthropic:claude-haiku-4-5"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert len(judge_server.requests) == 36 and "Did the agent misread" in json_text(judge_server)
    row = next(line for line in out.out.splitlines() if line.startswith("misread_task"))
    assert row.count("0% [0.0%, 33%] 0/6") == 3  # three models, no task misread
    assert "the judge cost $0.0" in out.err
    assert main(args) == 0 and len(judge_server.requests) == 36  # the second time from the cache
    assert "the judge cost $0.0000" in capsys.readouterr().err


def json_text(server) -> str:
    import json

    return json.dumps(server.bodies()[0])
