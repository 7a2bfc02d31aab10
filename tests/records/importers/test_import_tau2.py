"""τ²-bench results as τ² writes them (`seed_tau2`): one episode per simulation with its reward, trial, costs,
end and reward breakdown; the conversation as the transcript; both shapes, τ²'s directory format and a
leaderboard submission folder; two submissions paired by task; nothing written beside them."""

from __future__ import annotations

import json

import polars as pl
import pytest

import evalkit as ek
from evalkit.cli import main
from evalkit.records import importers, rundir, transcripts
from tests.records.importers import seed_tau2


def _snapshot(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.parent.rglob("*")}


@pytest.fixture
def results(tmp_path):
    return seed_tau2.write_results(tmp_path / "sims" / "gpt-4.1-mini_airline_default_gpt-4.1_2trials.json")


def test_a_results_file_loads_rewards_trials_costs_and_ends_and_is_never_written(results):
    before = _snapshot(results)
    df = ek.load_runs(results).sort("task_id", "repeat")
    assert _snapshot(results) == before  # its index went to evalkit's cache, not beside the file
    assert set(df["source"]) == {importers.tau2.NAME} and set(df["model"]) == {seed_tau2.AGENT_LLM}
    assert set(df["env"]) == {"airline"}
    assert df.select("task_id", "repeat").rows() == [(t, r) for t in "012" for r in (0, 1)]
    assert df["reward"].to_list() == [1.0, 1.0, 0.0, 1.0, 0.0, None]  # no reward_info: none, never 0
    assert df["end_reason"].to_list() == ["done", "done", "done", "submitted", "turn_limit", "error"]
    assert df["error_class"].to_list() == [None] * 5 + ["endpoint_error"]  # litellm's RateLimitError
    assert df["cost_usd"].to_list() == [0.0123, 0.0141, 0.0102, None, 0.03, None]  # unknown cost: null
    assert df["n_turns"].to_list() == [4, 4, 4, 4, 3, 0]  # the scripted greeting is no turn
    assert df["tool_errors"].to_list() == [0, 0, 1, 0, 0, 0]
    assert df["input_tokens"][0] == 4 * 900 and df["output_tokens"][0] == 4 * 20
    grade = json.loads(df["grade"][2])
    assert grade["db"] == 0.0 and grade["communicate"] == 1.0 and grade["db_match"] is False
    assert grade["termination_reason"] == "user_stop" and grade["n_actions_met"] == 0
    assert json.loads(df["grade"][4])["note"].startswith("Simulation terminated prematurely")
    s = ek.summarise(df).row(0, named=True)
    # Task-weighted: task 0 = 1, task 1 = 0.5, task 2 = 0 (its unscored trial apart).
    assert s["mean_reward"] == pytest.approx(0.5) and s["unscored"] == 1
    rec = next(r for r in rundir.read_records(results) if r.task_id == "0")
    assert rec.info["user_cost"] == 0.004 and rec.info["user_llm"] == seed_tau2.USER_LLM
    assert rec.info["reward_info"]["reward_basis"] == ["DB", "COMMUNICATE"]


def test_the_transcript_is_the_conversation_with_tool_calls_and_results(results):
    recs = {(r.task_id, r.repeat): r for r in rundir.read_records(results)}
    msgs = transcripts.messages(recs[("0", 1)], results)
    roles = [(m.role, m.turn) for m in msgs]
    assert roles[:4] == [("system", 0), ("assistant", 0), ("user", 0), ("assistant", 1)]
    assert msgs[0].text == seed_tau2.POLICY
    assert msgs[1].text == "Hi! How can I help you today?" and msgs[1].note == transcripts.SCRIPTED
    assert msgs[2].text == "I want to cancel reservation ZFA04Y." and msgs[2].note is None
    # Parallel calls (a MultiToolMessage): both results, each after its call, by id.
    assert [c["name"] for c in msgs[3].calls] == ["get_reservation_details", "get_user_details"]
    assert [(m.name, m.text) for m in msgs[4:6]] == [
        ("get_reservation_details", '{"cabin": "business"}'),
        ("get_user_details", '{"name": "Mia Li"}'),
    ]
    turn = recs[("0", 1)].turns[0]
    assert turn.stop == "tool_calls" and turn.model_s == 1.5
    assert recs[("0", 0)].turns[0].reasoning == "Look it up first."
    failed = transcripts.messages(recs[("1", 0)], results)
    (err,) = [m for m in failed if m.error]
    assert err.name == "cancel_reservation" and err.text.startswith("Error:")
    assert msgs[-1].role == "user" and msgs[-1].text == "###STOP###"


def test_the_user_simulators_own_tools_are_shown_as_not_sent_to_the_agent(tmp_path):
    path = seed_tau2.write_results(tmp_path / "telecom.json", sims=seed_tau2.telecom_sims())
    (rec,) = rundir.read_records(path)
    msgs = transcripts.messages(rec, path)
    said = [(m.role, m.turn, m.text, m.note) for m in msgs if m.role != "system"]
    assert said[:4] == [
        ("assistant", 0, "Hi! How can I help you today?", transcripts.SCRIPTED),
        ("user", 0, "check_status_bar({})", "the user's own tool call, not sent to the agent"),
        ("user", 0, "No signal", "the result of the user's own tool call, not sent to the agent"),
        ("user", 0, "My phone has no signal.", None),
    ]
    assert said[5][2] == "toggle_airplane_mode({})" and said[5][1] == 1
    assert rec.n_turns == 1 and rec.tool_calls == 0  # the user's tools are not the agent's calls


def test_a_bare_list_of_simulations_names_its_model_and_domain_as_it_can(tmp_path):
    path = seed_tau2.write_bare(tmp_path / "claude-x_airline_default_gpt-4.1_2trials.json")
    df = ek.load_runs(path)
    assert set(df["model"]) == {"claude-x-2025"}  # from the agent's raw responses
    assert set(df["env"]) == {"airline"}  # from the file name, as τ² names its files
    assert df["reward"].drop_nulls().sum() == 3.0 and df.height == 6
    anon = tmp_path / "anon"
    anon.mkdir()
    sims = json.loads(path.read_text())
    for s in sims:
        for m in s["messages"]:
            m["raw_data"] = None
    (anon / "run.json").write_text(json.dumps(sims))
    df = ek.load_runs(anon / "run.json")
    assert set(df["model"]) == {"run"} and set(df["env"]) == {"tau2"}


def test_a_submission_folder_and_the_directory_format(tmp_path):
    sub = seed_tau2.write_submission(tmp_path / "claude-x_example_2025-06-02")
    before = _snapshot(sub / "submission.json")
    df = ek.load_runs(sub)
    assert set(df["model"]) == {"Claude-X"} and set(df["env"]) == {"airline"} and df.height == 6
    assert _snapshot(sub / "submission.json") == before
    # Its pass^1 (58.3) is the mean over simulations with a reward; evalkit's the same when asked as τ².
    harness = ek.summarise(df, as_harness=True).row(0, named=True)
    assert harness["n"] == 5 and harness["mean_reward"] == pytest.approx(0.6)
    d = seed_tau2.write_dir_format(tmp_path / "dirfmt")
    df = ek.load_runs(d).sort("task_id", "repeat")
    assert df["reward"].to_list() == [1.0, 1.0, 0.0, 1.0, 0.0, None] and set(df["env"]) == {"airline"}


def test_two_submissions_on_one_domain_pair_by_task(tmp_path):
    a = seed_tau2.write_results(tmp_path / "a.json")
    sims = seed_tau2.simulations()
    for s in sims:  # model B fails task 0 both times
        if s["task_id"] == "0":
            s["reward_info"]["reward"] = 0.0
    b = seed_tau2.write_results(tmp_path / "b.json", agent_llm="gpt-5-nano", sims=sims)
    df = ek.load_runs([a, b])
    out = ek.compare(df, seed_tau2.AGENT_LLM, "gpt-5-nano", by="env")
    row = out.row(0, named=True)
    assert row["n_tasks"] == 3 and row["diff"] == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert row["wins"] == 1 and row["ties"] == 2


def test_a_user_simulator_error_is_unscored_here_and_counted_by_tau2(tmp_path):
    sims = seed_tau2.simulations()
    sims[2]["termination_reason"] = "user_error"
    path = seed_tau2.write_results(tmp_path / "r.json", sims=sims)
    df = ek.load_runs(path)
    row = df.filter((pl.col("task_id") == "1") & (pl.col("repeat") == 0)).row(0, named=True)
    assert row["reward"] is None and row["error_class"] == "harness_error" and row["harness_reward"] == 0.0
    assert ek.summarise(df, as_harness=True)["n"].to_list() == [5]


def test_a_broken_results_file_is_one_line(tmp_path, capsys):
    path = seed_tau2.write_results(tmp_path / "cut.json")
    path.write_bytes(path.read_bytes()[:-200])  # cut off mid-write
    assert main(["summarise", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not τ²-bench results" in err


def test_a_tau2_run_through_atif_and_inspect_keeps_its_conversation(results, tmp_path, harbor):
    """The scripted greeting is no model turn in either format (ATIF: an agent step with llm_call_count 0;
    Inspect: an assistant message without a model event), and the user's own tools keep their notes."""
    pytest.importorskip("inspect_ai")
    from evalkit.records.exporters import convert

    telecom = seed_tau2.write_results(tmp_path / "telecom.json", sims=seed_tau2.telecom_sims())
    for run in (results, telecom):
        job = convert(run, "atif", tmp_path / f"{run.stem}-job").paths[0]
        logs = convert(run, "inspect", tmp_path / f"{run.stem}.eval").paths
        for f in job.glob("*/agent/trajectory.json"):
            harbor.Trajectory.model_validate(json.loads(f.read_text()))
        original = {r.key: r for r in rundir.read_records(run)}
        for back in (job, *logs):
            for rec in rundir.read_records(back):
                want = original[rec.key]
                assert (rec.n_turns, rec.reward, rec.tool_calls) == (
                    want.n_turns,
                    want.reward,
                    want.tool_calls,
                )
                seen = [(m.role, m.turn, m.text, m.note) for m in transcripts.messages(rec, back)]
                assert seen == [(m.role, m.turn, m.text, m.note) for m in transcripts.messages(want, run)]


def test_odd_fields_are_read_as_nothing_never_a_crash(tmp_path):
    """A hand-edited file: a tool_calls that is no list, a breakdown that is no object, a reward that is no
    number. Each is left out; the simulation still loads (as ~3,000 randomly broken files did)."""
    sims = seed_tau2.simulations()
    sims[0]["messages"][2]["tool_calls"] = True
    sims[1]["reward_info"]["reward_breakdown"] = 0.5
    sims[2]["reward_info"]["reward"] = float("nan")
    sims[3]["messages"] = "lost"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(seed_tau2.results(sims=sims)))
    df = ek.load_runs(path).sort("task_id", "repeat")
    assert df.height == 6 and df["reward"].to_list() == [1.0, 1.0, None, 1.0, 0.0, None]
    assert df["n_turns"].to_list()[3] == 0 and "db" not in json.loads(df["grade"][1])
