"""Game and control envs shaped like OpenEnv's own (`tests.support.games`), through `evalkit run` and
`evalkit probe` on loopback: an illegal move the env raises on is the model's mistake (it reads it and plays
on), an env whose every step fails is the env's failure (unscored, non-zero exit), a question dealt anew on
each session's reset is one task, and actions fit the schema (the legal actions listed, a pattern, an enum,
the shape the state gives) in the probe's sample step and the random baseline; a probe step that breaks the
env is said after the whole report."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main
from evalkit.records.rundir import read_records
from tests.providers.fakes import Reply
from tests.support import games, kinds
from tests.support.foreign_envs import Served
from tests.support.standin import MODEL, calls_and_results, turns_taken, user_texts

RANDOM = "baseline:random"


@pytest.fixture(scope="module")
def board():
    with Served(games.board_app()) as s:
        yield s


@pytest.fixture(scope="module")
def stale():
    with Served(games.stale_app()) as s:
        yield s


@pytest.fixture(scope="module")
def dealer():
    with Served(games.dealer_app()) as s:
        yield s


@pytest.fixture(scope="module")
def arm():
    with Served(games.arm_app()) as s:
        yield s


@pytest.fixture(scope="module")
def mines():
    with Served(games.mines_app()) as s:
        yield s


def _run(url: str, model: str, out, *more: str) -> int:
    return main(["run", "--base-url", url, "--models", model, "--no-progress", "--out", str(out), *more])


def _run_calls(out) -> list:
    """The calls a run's episodes made that were run (not those after an episode's end)."""
    calls = [c for r in read_records(out) for t in r.turns for c in t.calls]
    return [c for c in calls if not c.result.startswith("not executed")]


def taken_then_winning(body: dict) -> Reply:
    """Plays a taken cell first (an illegal move), then the winning one."""
    return Reply(calls=[("step", {"action_id": 4 if turns_taken(body) == 0 else games.WIN})])


def test_an_illegal_move_is_the_models_mistake_and_the_right_one_after_it_scores(
    standin, board, tmp_path, capsys
):
    standin.play(taken_then_winning)
    out = tmp_path / "board"
    assert _run(board.base_url, MODEL, out, "--tasks", "6") == 0  # more episodes than the breaker's five
    recs = list(read_records(out))
    assert len(recs) == 6 and all(r.reward == 1.0 and r.error_class is None for r in recs)
    assert all((r.tool_calls, r.tool_errors, r.n_turns) == (2, 1, 2) for r in recs)
    assert "is down" not in capsys.readouterr().err
    [(_, args, told)] = calls_and_results([b for b in standin.bodies if turns_taken(b) == 1][0])
    assert args == {"action_id": 4} and "Illegal action 4" in told  # the model read why, then won


def test_the_random_baseline_plays_only_legal_moves(board, tmp_path):
    out = tmp_path / "random"
    assert _run(board.base_url, RANDOM, out, "--tasks", "3") == 0
    recs = list(read_records(out))
    assert recs and all(r.tool_errors == 0 and r.error_class is None and r.reward is not None for r in recs)
    played = [c.args["action_id"] for r in recs for t in r.turns for c in t.calls]
    assert played and set(played) <= {2, 5, 6, 7, 8}  # the legal actions the observation lists


def test_an_env_whose_every_step_fails_is_unscored(stale, tmp_path, capsys):
    assert main(["probe", stale.base_url, "--sessions", "1"]) == 0  # its sample step: a tool error to read
    assert "a tool error" in capsys.readouterr().out
    out = tmp_path / "stale"
    assert _run(stale.base_url, RANDOM, out, "--tasks", "2") == 3
    recs = list(read_records(out))
    assert len(recs) == 2 and all(r.error_class == "env_error" and r.reward is None for r in recs)
    assert all("every step failed" in r.error for r in recs)
    # One at a time: an episode still running when the breaker opens would be abandoned, and `evalkit run`
    # then leaves by os._exit (it would end this test process, not only the command).
    more = ("--tasks", "1", "--repeats", "6", "--concurrency", "1")
    assert _run(stale.base_url, RANDOM, tmp_path / "more", *more) == 4
    assert "5 episodes in a row lost the environment" in capsys.readouterr().err


def test_questions_dealt_anew_in_each_session_are_one_task(standin, dealer, tmp_path, capsys):
    standin.play(lambda body: Reply(calls=[("step", {"answer": "7"})]))  # the first question's answer
    out = tmp_path / "dealer"
    assert _run(dealer.base_url, f"{MODEL},{RANDOM}", out, "--tasks", "3") == 0
    assert "its reset ignores split and index): running it as one task, 3 time(s)" in capsys.readouterr().err
    recs = [r for r in read_records(out) if r.model == MODEL]
    assert len(recs) == 3 and {r.task_id for r in recs} == {"DealerEnv-test-0000"}
    assert sorted(r.repeat for r in recs) == [0, 1, 2] and all(r.reward == 1.0 for r in recs)
    assert {user_texts(b)[0].splitlines()[0] for b in standin.bodies} == {"What is 3 + 4?"}
    assert main(["compare", str(out), "--a", MODEL, "--b", RANDOM]) == 0
    from evalkit import analysis

    paired = analysis.compare(analysis.load_runs([out]), MODEL, RANDOM, by=None)
    assert paired["n_tasks"].to_list() == [1]  # one task, never three copies counted as three


def test_the_probes_sample_fits_the_shape_its_state_gives_and_the_random_baseline_too(arm, tmp_path, capsys):
    assert main(["probe", arm.base_url, "--sessions", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == {"tool": "step", "args": {"values": [-1.0, -1.0]}}
    assert not report["step_result"]["is_error"] and "reward: 0.25" in report["step_result"]["text"]
    [tool] = report["tools"]
    assert tool["parameters"]["properties"]["values"]["minItems"] == 2
    out = tmp_path / "arm"
    assert _run(arm.base_url, RANDOM, out, "--tasks", "2") == 0
    calls = _run_calls(out)
    assert len(calls) >= 3 and all(c.ok and len(c.args["values"]) == 2 for c in calls)


def test_a_pattern_and_an_enum_are_honoured(mines, tmp_path, capsys):
    assert main(["probe", mines.base_url, "--sessions", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"]["args"]["mode"] == "reveal" and not report["step_result"]["is_error"]
    out = tmp_path / "mines"
    assert _run(mines.base_url, RANDOM, out, "--tasks", "3") == 0
    calls = _run_calls(out)
    assert len(calls) >= 4 and all(c.ok for c in calls)  # none refused (VALIDATION_ERROR)


def test_a_probe_step_that_breaks_the_env_comes_after_the_whole_report(tmp_path, capsys):
    with Served(kinds.crash_app()) as crash:
        argv = ["probe", crash.base_url, "--sessions", "1"]
        assert main([*argv, "--step-json", '{"args": {"poke": 8}}']) == 3
        out, err = capsys.readouterr()
        assert "opening message" in out and out.rstrip().splitlines()[-1].startswith("probed in")
        assert "it broke the env" in out
        assert err.count("\n") == 1 and err.startswith('evalkit probe: step step {"poke": 8} broke the env: ')
        assert "no longer answers" in err
        # a step the env raised on while its session goes on is a result like any other, a tool error
        assert main([*argv, "--step-json", '{"args": {"poke": 9}}']) == 0
        assert "a tool error" in capsys.readouterr().out


def test_the_opening_of_a_game_lists_its_legal_actions(standin, board):
    standin.play(taken_then_winning)
    assert main(["probe", board.base_url, "--sessions", "1", "--no-step"]) == 0
    from evalkit.run.episode import run_episode

    rec = run_episode(MODEL, board.base_url, max_turns=3)
    assert rec.reward == 1.0 and "legal_actions: [2, 5, 6, 7, 8]" in user_texts(standin.bodies[0])[0]
