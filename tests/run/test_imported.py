"""Envs made by `openenv import` (a Verifiers quiz, an OpenReward vault), read as their authors meant, through
`evalkit probe` and `evalkit run` on loopback with the stand-in model: the evaluator's task spec (the answer
with it) reaches no request, a list-valued prompt is the task (its system role the system prompt, its
pictures images), an OpenReward tool's blocks reach the model, the env's own tasks stay its tasks however
alike they open, a finishing tool with only optional arguments is never called on an empty answer, and
a value equal to the Task API's record of the task is never sent either."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main
from evalkit.records import transcripts
from evalkit.records.rundir import read_records, read_run_json
from tests.providers.fakes import Reply
from tests.support import imported
from tests.support.foreign_envs import Served
from tests.support.standin import MODEL, calls_and_results, images, texts, turns_taken, user_texts

EVALUATORS = ("task_spec", "source_type", "original_env_class", '"answer"')


def _sent(bodies: list[dict]) -> str:
    """Everything the model was sent, as one text (pictures as their data URLs)."""
    return json.dumps([b["messages"] for b in bodies])


def _run(argv: list[str]) -> int:
    return main(["run", *argv, "--models", MODEL, "--no-progress"])


def answer_if_told(body: dict) -> Reply:
    """A quiz player that knows nothing: it submits an answer only if it was shown it, else "unknown"."""
    seen = "\n".join(texts(m) for m in body["messages"])
    said = next((a for a in imported.QUIZ_ANSWERS if a in seen), "unknown")
    return Reply(calls=[("submit", {"completion": said})])


def test_an_imported_verifiers_envs_answer_is_in_no_request(standin, quiz_import, tmp_path, capsys):
    standin.play(answer_if_told)
    out = tmp_path / "quiz"
    argv = ["--base-url", quiz_import.base_url, "--split", "train", "--tasks", "all", "--out", str(out)]
    assert _run(argv) == 0
    sent = _sent(standin.bodies)
    assert len(standin.bodies) == 2 and not any(a in sent for a in imported.QUIZ_ANSWERS)
    assert not any(k in sent for k in EVALUATORS)
    recs = sorted(read_records(out), key=lambda r: r.task_id)
    assert [r.reward for r in recs] == [0.0, 0.0]  # what a model that is not told the answer scores
    assert [r.end_reason for r in recs] == ["submitted", "submitted"]
    # the prompt's system message is the system prompt; the question opens the first message, its picture
    # an image of it
    first, second = sorted(standin.bodies, key=lambda b: user_texts(b)[0])
    for body in (first, second):
        assert body["messages"][0] == {"role": "system", "content": imported.QUIZ_SYSTEM}
    assert user_texts(second)[0].startswith("Which river is drawn in the picture?\n[image 1]\n")
    assert images(second["messages"][1]) == 1
    assert user_texts(first)[0].startswith("Which city is the capital of the made-up land of Quorvia?\n")
    assert "first observation" not in sent and "content" not in user_texts(first)[0]
    # nor does what the record keeps of the conversation, up to the env's verdict (the wrapper's scoring
    # state, the answer in it, came back with the end, after the model's last turn)
    for rec in recs:
        *before, verdict = transcripts.messages(rec, out)
        kept = json.dumps([m.text for m in before])
        assert not any(a in kept for a in imported.QUIZ_ANSWERS) and "task_spec" not in kept
        assert '"reward": 0.0' in verdict.text


def test_the_probe_lists_what_it_hid_and_nothing_is_submitted_empty(standin, quiz_import, tmp_path, capsys):
    assert main(["probe", quiz_import.base_url, "--split", "train", "--index", "0", "--no-step"]) == 0
    shown = capsys.readouterr().out
    assert "hidden from the model:" in shown
    for key in ("task_spec", "source_type"):
        assert any(line.split()[:1] == [key] and "openenv import" in line for line in shown.splitlines())
    opening = shown[shown.index("opening message") :]
    assert "Zelphine" not in opening and "Quorvia" in opening
    assert "finishing:  submit; it takes arguments (completion, messages), so it is never called" in shown
    # a model that never submits: nudged, then out; nothing is sent on its behalf, nothing is scored
    standin.play(lambda body: Reply(text="I think about it."))
    out = tmp_path / "silent"
    argv = ["--base-url", quiz_import.base_url, "--split", "train", "--tasks", "1", "--out", str(out)]
    assert _run(argv) == 0
    [rec] = read_records(out)
    assert rec.end_reason == "no_tool_call" and rec.reward is None and not rec.auto_submitted
    assert "auto_submit" not in rec.info and rec.tool_calls == 0


def look_then_open(body: dict) -> Reply:
    """Looks at the dial, then tries one code, whatever the vault."""
    if turns_taken(body) == 0:
        return Reply(calls=[("look", {})])
    return Reply(calls=[("answer", {"code": "zebra-417"})])


def test_an_imported_openreward_env_three_tasks_alike_and_its_blocks(standin, vault_import, tmp_path, capsys):
    standin.play(look_then_open)
    out = tmp_path / "vault"
    argv = ["run", "--base-url", vault_import.base_url, "--split", "test", "--tasks", "all", "--no-progress"]
    models = f"{MODEL},baseline:random"
    assert main([*argv, "--models", models, "--out", str(out), "--hide-field", "looks"]) == 0
    err = capsys.readouterr().err
    assert "tasks vault-1 and vault-2 open alike" in err and "kept apart" in err
    recs = sorted((r for r in read_records(out) if r.model == MODEL), key=lambda r: r.task_id)
    assert [(r.task_id, r.reward) for r in recs] == [("vault-1", 0.0), ("vault-2", 1.0), ("vault-3", 0.0)]
    # three tasks, compared as three
    assert main(["compare", str(out), "--a", MODEL, "--b", "baseline:random"]) == 0
    from evalkit import analysis

    paired = analysis.compare(analysis.load_runs([out]), MODEL, "baseline:random", by=None)
    assert paired["n_tasks"].to_list() == [3] and paired["mean_a"].to_list() == [pytest.approx(1 / 3)]
    assert read_run_json(out)["hide_fields"] == ["looks"] and read_run_json(out)["outcome"]["hide_fields"]
    sent = _sent(standin.bodies)
    assert "lynx-204" not in sent and "otter-938" not in sent and not any(k in sent for k in EVALUATORS)
    opening = [b for b in standin.bodies if turns_taken(b) == 0][0]
    assert user_texts(opening)[0].startswith(
        "A vault opens on one code. Look at its dial, then answer with the code.\n[image 1]\n"
    )
    assert images(opening["messages"][1]) == 1
    # the `look` tool's text and image blocks reach the model (the blocks' metadata is what was hidden)
    second = [b for b in standin.bodies if turns_taken(b) == 1][0]
    [(name, _, result)] = calls_and_results(second)
    assert name == "look" and result.startswith("The dial shows three notches.\n[image 1]")
    assert "looks" not in result and images(second["messages"][-1]) == 1
    # the probe says the same: what it hid, the opening with its picture, the look's blocks
    step = '{"tool": "look", "args": {}}'
    assert main(["probe", vault_import.base_url, "--sessions", "1", "--step-json", step]) == 0
    shown = capsys.readouterr().out
    hidden = shown[shown.index("hidden from the model:") : shown.index("tools (")]
    assert all(k in hidden for k in ("task_spec", "source_type", "original_env_class"))
    assert "opening message (1 image):" in shown and "lynx-204" not in shown[shown.index("tools (") :]
    assert "its result as the model gets it (1 image):\n  | The dial shows three notches." in shown


def test_a_value_equal_to_the_task_apis_record_is_never_sent(standin, tmp_path):
    from tests.support import kinds

    def answer_what_you_see(body: dict) -> Reply:
        seen = "\n".join(texts(m) for m in body["messages"])
        return Reply(calls=[("step", {"answer": 5 if '"a": 2' in seen else 0})])

    standin.play(answer_what_you_see)
    with Served(kinds.catalog_app(spec_key="case")) as served:
        out = str(tmp_path / "a")
        assert _run(["--base-url", served.base_url, "--split", "train", "--tasks", "1", "--out", out]) == 0
        assert main(["probe", served.base_url, "--split", "train", "--index", "0", "--no-step"]) == 0
    sent = _sent(standin.bodies)
    assert "What is 2 + 3?" in sent and "sum-train-0" not in sent and "case" not in sent
    [rec] = read_records(out)
    assert rec.reward == 0.0  # it never saw the terms: the record of the task was not sent


def test_the_hidden_reasons_and_a_record_in_the_probe(capsys):
    from tests.support import kinds

    with Served(kinds.catalog_app(spec_key="case")) as served:
        argv = ["probe", served.base_url, "--split", "train", "--index", "1", "--no-step"]
        assert main([*argv, "--hide-field", "task_prompt"]) == 0
    shown = capsys.readouterr().out
    listed = [line for line in shown.splitlines() if line.startswith("  ") and "|" not in line]
    lines = {line.split()[0]: line for line in listed}
    assert "Task API record" in lines["case"] and "--hide-field" in lines["task_prompt"]
    assert "bookkeeping" in lines["task_id"]
    assert "What is 4 + 5?" not in shown[shown.index("opening message") :]


def test_runs_of_two_configurations_are_never_paired(tmp_path, capsys):
    from tests.support import kinds

    runs = {}
    for game in ("catch", "tic_tac_toe"):
        with Served(kinds.games_app(game)) as served:
            out = tmp_path / game
            assert main(["run", "--base-url", served.base_url, "--models", "baseline:random", "--tasks", "3",
                         "--no-progress", "--out", str(out)]) == 0  # fmt: skip
            runs[game] = out
    configs = [read_run_json(runs[g])["env_config"]["game_name"] for g in ("catch", "tic_tac_toe")]
    assert configs == ["catch", "tic_tac_toe"]  # the env side records each configuration as the env says it
    capsys.readouterr()
    argv = ["compare", str(runs["catch"]), str(runs["tic_tac_toe"])]
    status = main([*argv, "--a", "catch", "--b", "tic_tac_toe"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "catch" in err and "tic_tac_toe" in err
