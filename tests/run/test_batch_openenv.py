"""OpenEnv envs as their users run them, through `run_batch` and `evalkit run` on loopback: the env's own
tasks (its Task API, never merged however alike they open), a run kept to the configuration it was made
against, dead resets and failed steps as env errors."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main
from evalkit.errors import ConfigError
from evalkit.records.rundir import read_records, read_run_json
from evalkit.run.batch import run_batch
from tests.support import kinds
from tests.support.foreign_envs import Served

RANDOM = "baseline:random"


def test_tasks_are_drawn_from_the_envs_own_list_with_its_ids(catalog, tmp_path, capsys):
    run = run_batch(RANDOM, catalog.base_url, out=tmp_path / "a", split="test", tasks="all", progress=False)
    recs = sorted(read_records(tmp_path / "a"), key=lambda r: r.task_id)
    assert run.ran == 2 and [r.task_id for r in recs] == ["sum-test-0", "sum-test-1"]
    assert [r.reset["index"] for r in recs] == [0, 1] and all(r.reward is not None for r in recs)
    with pytest.raises(ConfigError, match="split 'test' has 2 task\\(s\\); 9 were asked for"):
        run_batch(RANDOM, catalog.base_url, out=tmp_path / "b", split="test", tasks=9, progress=False)
    with pytest.raises(ConfigError, match="no split 'dev' \\(its splits: train, test\\)"):
        run_batch(RANDOM, catalog.base_url, out=tmp_path / "b", split="dev", tasks=1, progress=False)
    assert not (tmp_path / "b").exists()
    argv = ["run", "--base-url", catalog.base_url, "--models", RANDOM, "--split", "train", "--tasks", "9",
            "--no-progress", "--out", str(tmp_path / "c")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split 'train' has 3 task(s); 9 were asked for" in err
    argv[argv.index("9")] = "all"
    assert main(argv) == 0
    assert sorted(r.task_id for r in read_records(tmp_path / "c")) == [f"sum-train-{i}" for i in range(3)]


def test_all_tasks_needs_an_env_that_lists_them(guess_server, tmp_path):
    with pytest.raises(ConfigError, match="--tasks all needs an env that lists its tasks"):
        run_batch(RANDOM, guess_server.base_url, out=tmp_path / "a", tasks="all", progress=False)


def test_the_envs_own_tasks_stay_its_tasks_however_alike_they_open(copycat, tmp_path, caplog):
    """The Task API lists five tasks, each with its own id, that open on one question: they are the env's
    tasks (a notice says they open alike), never merged into one; copies of one task are found only where
    the env lists none (`tests/run/test_games.py`, the dealer)."""
    import logging

    with caplog.at_level(logging.INFO, logger="evalkit"):
        run = run_batch(RANDOM, copycat.base_url, out=tmp_path / "a", tasks=3, repeats=2, progress=False)
    said = [r.message for r in caplog.records if "open alike" in r.message]
    assert len(said) == 1 and "tasks copy-0 and copy-1 open alike" in said[0] and "kept apart" in said[0]
    assert not any("ignores split and index" in r.message for r in caplog.records)
    recs = list(read_records(tmp_path / "a"))
    assert run.ran == 6 and sorted({r.task_id for r in recs}) == ["copy-0", "copy-1", "copy-2"]
    from evalkit.records.loading import load_runs

    assert load_runs([tmp_path / "a"])["task_id"].n_unique() == 3


def test_a_run_is_kept_to_the_configuration_it_was_made_against(tmp_path, capsys):
    out = tmp_path / "run"
    with Served(kinds.games_app("catch")) as catch:
        assert run_batch(RANDOM, catch.base_url, out=out, tasks=2, progress=False).ran == 2
        config = read_run_json(out)["env_config"]
        assert config and "catch" in json.dumps(config)
        again = run_batch(RANDOM, catch.base_url, out=out, tasks=2, progress=False)
        assert (again.ran, again.skipped) == (0, 2)  # the same game resumes
    with Served(kinds.games_app("tic_tac_toe")) as other:
        argv = ["run", "--base-url", other.base_url, "--models", RANDOM, "--tasks", "2", "--no-progress",
                "--out", str(out)]  # fmt: skip
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another configuration" in err and "tic_tac_toe" in err
    assert len(list(read_records(out))) == 2


def test_a_dead_reset_is_refused_before_any_episode(tmp_path, capsys):
    with Served(kinds.dead_app()) as dead:
        argv = ["run", "--base-url", dead.base_url, "--models", RANDOM, "--tasks", "2", "--no-progress",
                "--out", str(tmp_path / "a")]  # fmt: skip
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused task" in err and "done" in err
    assert not (tmp_path / "a").exists()


def test_a_step_the_server_failed_to_run_ends_the_episode_unscored(tmp_path):
    from evalkit.run.episode import run_episode
    from evalkit.types import Turn
    from tests.support.scripted import call, factory

    with Served(kinds.crash_app()) as crash:
        rec = run_episode(factory([Turn(calls=[call("step", poke=9)])] * 3), crash.base_url)
        assert rec.error_class == "env_error" and rec.reward is None and "step" in rec.error
        refused = run_episode(factory([Turn(calls=[call("step", poke=7)])] * 2), crash.base_url, max_turns=2)
        assert refused.error_class is None and refused.n_turns == 2  # an illegal move is the model's: data
