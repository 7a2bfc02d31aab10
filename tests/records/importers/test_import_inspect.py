"""Inspect logs written by Inspect's own classes: samples × epochs as tasks × repeats, the reward from one
scorer's score as Inspect's `value_to_float` reads it (never a made-up 0), and one line for a corrupt log."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalkit as ek
from evalkit.cli import main


def _snapshot(root: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _log(path: Path, scorers: dict[str, list], epochs: int = 2, limits: list | None = None) -> Path:
    """An Inspect log written with Inspect's own classes: 3 samples × `epochs`, scored by `scorers`
    (name → values, one per sample and epoch in order); `limits`, the type of limit each sample met (or
    None)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.log._log import EvalSampleLimit
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall

    ids = ["q1", "q2", "q3"]
    samples, k = [], 0
    for epoch in range(1, epochs + 1):
        for sid in ids:
            msgs = [
                ChatMessageUser(content=f"Question {sid}"),
                ChatMessageAssistant(
                    content="Let me check.",
                    tool_calls=[ToolCall(id="t1", function="lookup", arguments={"q": sid})],
                ),
                ChatMessageTool(content="42", tool_call_id="t1", function="lookup"),
                ChatMessageAssistant(content="42"),
            ]
            scores = {name: Score(value=vals[k]) for name, vals in scorers.items()}
            samples.append(
                EvalSample(
                    id=sid,
                    epoch=epoch,
                    input=f"Question {sid}",
                    target="42",
                    messages=msgs,
                    output=ModelOutput.from_content("m", "42"),
                    scores=scores,
                    limit=EvalSampleLimit(type=limits[k], limit=1) if limits and limits[k] else None,
                )
            )
            k += 1
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created="2026-12-01T10:00:00+00:00",
            task="quiz",
            dataset=EvalDataset(name="quiz", samples=3, sample_ids=ids),
            model="mockllm/model",
            config=EvalConfig(epochs=epochs),
        ),
        samples=samples,
    )
    write_eval_log(log, str(path))
    return path


def test_an_inspect_log_of_3_samples_by_2_epochs_scored_c_i(tmp_path):
    pytest.importorskip("inspect_ai")
    values = ["C", "I", "C", "I", "I", "C"]
    path = _log(tmp_path / "quiz.eval", {"match": values})
    before = _snapshot(tmp_path)
    df = ek.load_runs(path).sort("repeat", "task_id")
    assert _snapshot(tmp_path) == before  # read-only: the index went to the user cache
    assert df.height == 6 and df["repeat"].to_list() == [0, 0, 0, 1, 1, 1]
    assert df["task_id"].to_list() == ["q1", "q2", "q3"] * 2
    assert df["reward"].to_list() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert set(df["model"]) == {"mockllm/model"} and set(df["env"]) == {"quiz"}
    calls = ek.calls(tmp_path / "quiz.eval")
    assert (
        calls.height == 6
        and set(calls["name"]) == {"lookup"}
        and set(calls["args"]) <= {'{"q": "q1"}', '{"q": "q2"}', '{"q": "q3"}'}
    )


def test_the_limit_a_sample_met_is_its_end_reason(tmp_path):
    pytest.importorskip("inspect_ai")
    limits = ["cost", "context", "time", "working", "message", None]
    path = _log(tmp_path / "quiz.eval", {"match": ["I"] * 6}, limits=limits)
    df = ek.load_runs(path).sort("repeat", "task_id")
    assert df["end_reason"].to_list() == [
        "cost_limit", "context_overflow", "deadline", "deadline", "turn_limit", "done"
    ]  # fmt: skip
    assert df["reward"].to_list() == [0.0] * 6  # scored all the same: a limit met is the model's end


def test_a_log_with_several_scorers_reads_the_one_asked(tmp_path, caplog, capsys):
    pytest.importorskip("inspect_ai")
    path = _log(tmp_path / "two.eval", {"match": ["C", "I", "P"], "judge": [0.2, True, "no"]}, epochs=1)
    df = ek.load_runs(path, cache=False).sort("task_id")
    assert df["reward"].to_list() == [1.0, 0.0, 0.5]  # the first scorer, said in a warning
    assert "'judge'" in caplog.text and "--scorer" in caplog.text
    df = ek.load_runs(path, scorer="judge").sort("task_id")
    assert df["reward"].to_list() == [0.2, 1.0, 0.0]
    assert ek.load_runs(path, scorer="match").sort("task_id")["reward"].to_list() == [1.0, 0.0, 0.5]
    assert main(["summarise", str(path), "--scorer", "nope"]) == 2
    assert "no scorer 'nope' in this log (its scorers: match, judge)" in capsys.readouterr().err
    assert main(["summarise", str(path), "--scorer", "judge"]) == 0
    assert "0.400" in capsys.readouterr().out  # the mean of 0.2, 1 and 0


@pytest.mark.parametrize(
    "value, reward",
    [
        (1, 1.0),
        (0.25, 0.25),
        (True, 1.0),
        (False, 0.0),
        ("C", 1.0),
        ("I", 0.0),
        ("P", 0.5),
        ("N", 0.0),
        ("yes", 1.0),
        ("0.75", 0.75),
        ("maybe", None),
        ("c", None),
        ("Yes", 1.0),
        ({"a": 1}, None),
        ([1], None),
        (float("nan"), None),
    ],
)
def test_score_values_read_as_inspect_reads_them_but_never_a_made_up_zero(value, reward):
    from evalkit.records.importers.inspect_log import to_float

    assert to_float(value) == reward
    if reward is not None:  # what it reads, it reads as Inspect's own function does
        value_to_float = pytest.importorskip("inspect_ai.scorer").value_to_float
        assert value_to_float()(value) == reward


def test_corrupt_logs_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.eval"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["summarise", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable Inspect log" in err


def test_inspect_json_logs_read_too(tmp_path):
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(_log(tmp_path / "quiz.eval", {"match": ["C", "I", "C", "I", "I", "C"]})))
    write_eval_log(log, str(tmp_path / "quiz.json"), format="json")
    df = ek.load_runs(tmp_path / "quiz.json").sort("repeat", "task_id")
    assert (
        df["reward"].to_list() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
        and df["repeat"].to_list() == [0] * 3 + [1] * 3
    )
