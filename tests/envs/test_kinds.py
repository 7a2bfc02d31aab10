"""OpenEnv envs of the kinds issue 41 found misread, at the env level, each on a real server over loopback:
the Task API, pictures in plain fields, dead resets, failed steps, slow and unreachable servers, the
configuration a multi-game server reports, typed envs' episode ids, and an env that ignores its task."""

from __future__ import annotations

import pytest

from evalkit.envs.client import identity, observation, openenv
from evalkit.envs.client.openenv import TypedSession, connect
from evalkit.envs.client.tasks import TaskApi, TaskRef, summary, task_api
from evalkit.errors import (
    ConfigError,
    EnvDeadError,
    EnvError,
    EnvSlowError,
    EnvStepError,
    EnvUnreachableError,
)
from tests.support import kinds
from tests.support.foreign_envs import Served


@pytest.fixture(scope="module")
def pixels():
    with Served(kinds.pixels_app()) as s:
        yield s


@pytest.fixture(scope="module")
def crash():
    with Served(kinds.crash_app()) as s:
        yield s


@pytest.fixture
def nowhere():
    from evalkit.serving import free_port

    return f"http://127.0.0.1:{free_port()}"


# ---- the Task API -----------------------------------------------------------------------------------------


def test_the_task_api_gives_splits_counts_and_the_envs_own_ids(catalog):
    with TaskApi(catalog.base_url) as api:
        assert api.env_name == "catalog"
        assert api.splits() == [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]
        assert (api.num_tasks("train"), api.num_tasks("test")) == (3, 2)
        assert api.task("test", 1) == TaskRef("test", 1, "sum-test-1")
        assert api.task("test", 1).spec == {"id": "sum-test-1", "a": 30, "b": 40}
        assert [t.id for t in api.tasks("train")] == ["sum-train-0", "sum-train-1", "sum-train-2"]
        assert [(t.index, t.id) for t in api.task_range("train", 1, 3)] == [
            (1, "sum-train-1"),
            (2, "sum-train-2"),
        ]
        with pytest.raises(ConfigError, match="HTTP 400"):
            api.task("test", 5)
        # a batch's draw: "all", a count, more than the split holds, a split it lacks
        assert [t.id for t in api.draw("test", "all")] == ["sum-test-0", "sum-test-1"]
        assert api.draw("train", 2) == [
            TaskRef("train", 0, "sum-train-0"),
            TaskRef("train", 1, "sum-train-1"),
        ]
        with pytest.raises(ConfigError, match=r"split 'test' has 2 task\(s\); 9 were asked for"):
            api.draw("test", 9)
        with pytest.raises(ConfigError, match="no split 'dev' .its splits: train, test"):
            api.draw("dev", 1)
    assert summary(catalog.base_url) == [
        {"name": "train", "type": "train", "num_tasks": 3},
        {"name": "test", "type": "test", "num_tasks": 2},
    ]


def test_a_drawn_task_is_played_by_its_split_and_index_and_opens_on_its_task_prompt(catalog):
    with TaskApi(catalog.base_url) as api:
        task = api.task("test", 1)
    with connect(catalog.base_url) as s:
        meta = s.reset(**task.reset)
        assert task.reset == {"split": "test", "index": 1}
        assert meta["task_id"] == task.id == "sum-test-1"
        assert observation.task_text(meta, s.observation) == ("What is 30 + 40?", None)
        assert observation.meta_task_key(meta) == "task_prompt"
        assert s.call("step", {"answer": 70}).reward == 1.0


def test_a_server_without_the_task_api_is_absent_not_an_error(guess_server, sketch_server, nowhere):
    assert task_api(guess_server.base_url) is None and summary(sketch_server.base_url) is None
    with TaskApi(guess_server.base_url) as api:  # routes under its name answer 501
        assert api.env_name == "guess"
        assert api.splits() is None and api.num_tasks("test") is None and api.task("test", 0) is None
        assert api.tasks("test") is None and api.task_range("test") is None and api.draw("test", 2) is None
    with pytest.raises(EnvUnreachableError, match="cannot reach the environment"):
        task_api(nowhere)


def test_an_env_that_ignores_its_task_opens_every_task_the_same(copycat):
    """The Task API says five tasks, each with its own id; every reset opens on one question. Detecting it is
    the batch's (it compares openings); the server is here for it."""
    with TaskApi(copycat.base_url) as api:
        drawn = api.draw("test", 3)
    assert [t.id for t in drawn] == ["copy-0", "copy-1", "copy-2"]
    openings = set()
    with connect(copycat.base_url) as s:
        for task in drawn:
            s.reset(**task.reset)
            openings.add(observation.render(s.observation)[0])
    assert openings == {"question: What is 2 + 2?"}
    prints = set()
    with connect(copycat.base_url) as s:
        for task in drawn:
            prints.add(observation.fingerprint(s.reset(**task.reset), s.observation))
    assert len(prints) == 1  # ids differ (episode_id), the opening does not


def test_distinct_tasks_have_distinct_fingerprints(catalog, pixels):
    prints = set()
    with connect(catalog.base_url) as s:
        for index in range(3):
            prints.add(observation.fingerprint(s.reset(split="train", index=index), s.observation))
    with connect(pixels.base_url) as s:
        prints.add(observation.fingerprint(s.reset(), s.observation))
        assert observation.fingerprint(s.reset(), s.observation) in prints  # one picture, one print
    assert len(prints) == 4


# ---- pictures anywhere ------------------------------------------------------------------------------------


def test_a_base64_png_in_a_plain_field_is_a_picture_and_other_base64_stays_text(pixels):
    with connect(pixels.base_url) as s:
        s.reset()
        text, images = observation.render(s.observation)
        assert [i.mime for i in images] == ["image/png", "image/webp"]
        assert images[0].to_pil().size == (64, 48) and images[1].to_pil().size == (16, 12)
        lines = text.splitlines()
        assert "pixels: [image 1]" in lines
        assert 'camera: {"frame": "[image 2]", "step": 0}' in lines  # what is beside a picture stays
        assert f"checksum: {kinds.NOT_A_PICTURE}" in lines and f"header: {kinds.LOOKS_LIKE_PNG}" in lines
        assert len(text) < 1500  # no picture's characters
        out = s.call("step", {"values": [0.1]})
        assert [i.mime for i in out.images] == ["image/png", "image/webp"] and "pixels: [image 1]" in out.text
        assert out.images[0].to_pil().getpixel((0, 0)) == (0, 128, 0)


def test_pictures_are_recognised_by_their_bytes_not_their_name():
    png, jpeg, webp = kinds.picture("PNG"), kinds.picture("JPEG"), kinds.picture("WEBP")
    assert observation.as_image("anything", kinds.b64(png)).data == png
    assert observation.as_image("x", kinds.b64(jpeg)).mime == "image/jpeg"
    assert observation.as_image("x", kinds.b64(webp)).mime == "image/webp"
    wrapped = "\n".join(kinds.b64(png)[i : i + 76] for i in range(0, len(kinds.b64(png)), 76))
    assert observation.as_image("x", wrapped).data == png  # MIME-wrapped base64
    for text in (
        kinds.NOT_A_PICTURE,
        kinds.LOOKS_LIKE_PNG,
        "iVBORw0KGgo" + "A" * 80,
        "data:image/png,notb64",
    ):
        assert observation.as_image("x", text) is None
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 80
    assert observation.as_image("sound_b64", kinds.b64(wav)) is None  # RIFF, but not a WebP
    assert observation.images_in({"a": [{"b": {"c": kinds.b64(png)}}]})[0].data == png  # nested


# ---- dead envs and failed steps ---------------------------------------------------------------------------


def test_a_reset_that_answers_done_is_a_dead_env_with_its_status_scrubbed():
    with Served(kinds.dead_app()) as served:
        with connect(served.base_url) as s, pytest.raises(EnvDeadError) as got:
            s.reset()
    err = got.value
    assert err.error_class == "env_error" and isinstance(err, EnvError)
    assert err.status == "error" and "SANDBOX_API_KEY is not set" in err.detail
    assert "sk-live-abcdefghijklmnopqrstuvwx1234" not in str(err) and "abcdefghijklmnop" not in err.detail
    assert str(err).startswith("the environment ended the episode at its reset (done: true, status: error): ")
    with Served(kinds.dead_app(status=False)) as served:
        with connect(served.base_url) as s, pytest.raises(EnvDeadError) as got:
            s.reset()
    assert (
        got.value.status is None
        and str(got.value) == "the environment ended the episode at its reset (done: true)"
    )


def test_a_step_the_env_raised_on_is_the_models_to_read_while_the_session_works(crash):
    """An EXECUTION_ERROR frame says the env raised, not that it is gone: while its state still answers,
    the error is a tool error the model reads and the next step runs; a session whose state stops answering
    is the env's failure, and so are steps that all fail from the first."""
    with connect(crash.base_url) as s:
        assert isinstance(s, TypedSession)
        s.reset()
        refused = s.call("step", {"poke": 12})  # the schema says 0 to 9: VALIDATION_ERROR
        assert refused.is_error and refused.text.startswith("the environment refused the action: poke:")
        illegal = s.call("step", {"poke": 7})  # an illegal move the env answers: data
        assert not illegal.is_error and "illegal move: 7 is not allowed" in illegal.text and not illegal.done
        raised = s.call("step", {"poke": 9})  # the env raised (EXECUTION_ERROR); its state still answers
        assert raised.is_error and "failed to run the step" in raised.text
        assert raised.metadata == {"execution_error": "EXECUTION_ERROR"} and not raised.done
        played = s.call("step", {"poke": 1})
        assert played.done and played.reward == 1.0 and s.unplayable() is None
    with connect(crash.base_url) as s:
        s.reset()
        broke = "the simulator under the session died.*no longer answers"
        with pytest.raises(EnvStepError, match=broke) as got:
            s.call("step", {"poke": 8})  # it broke the session: its state fails from then on
        assert got.value.code == "EXECUTION_ERROR" and got.value.error_class == "env_error"
    with connect(crash.base_url) as s:
        s.reset()
        for _ in range(openenv.FAILED_FROM_FIRST - 1):
            assert s.call("step", {"poke": 9}).is_error
        assert "every step failed (2 of 2)" in str(s.unplayable())
        with pytest.raises(EnvStepError, match="every step failed from the first \\(3\\)"):
            s.call("step", {"poke": 9})  # dipg's way: not one step runs


def test_dead_and_crashing_envs_end_the_episode_unscored_the_dead_one_without_a_model_call(crash):
    from evalkit.run.episode import run_episode
    from evalkit.types import Turn
    from tests.support.scripted import call, factory

    with Served(kinds.dead_app()) as served:
        sink: list = []
        rec = run_episode(factory([Turn(calls=[call("step", poke=1)])], sink), served.base_url, max_turns=3)
    assert (rec.error_class, rec.end_reason, rec.reward, rec.n_turns) == ("env_error", "error", None, 0)
    assert sink == []  # no agent was made: no model call
    assert rec.error.startswith("EnvDeadError: the environment ended the episode at its reset (done: true")
    sink = []
    turns = [Turn(calls=[call("step", poke=7)]), Turn(calls=[call("step", poke=8)])]
    rec = run_episode(factory(turns, sink), crash.base_url, max_turns=4)
    assert (rec.error_class, rec.end_reason, rec.reward, rec.n_turns) == ("env_error", "error", None, 1)
    sink = []
    turns = [Turn(calls=[call("step", poke=9)]), Turn(text="I give up.")]
    rec = run_episode(factory(turns, sink), crash.base_url, max_turns=4)  # its one step failed, none ran
    assert (rec.error_class, rec.reward, rec.n_turns) == ("env_error", None, 2)
    assert "every step failed" in rec.error
    [(_, told)] = sink[0].results_seen[0]
    assert told.is_error and "failed to run the step" in told.text  # the model read the error first


# ---- slow and unreachable servers -------------------------------------------------------------------------


def test_a_slow_reset_is_said_apart_from_an_unreachable_server(nowhere):
    with Served(kinds.slow_app(delay=1.5)) as served:
        s = connect(served.base_url, message_timeout_s=0.4)
        try:
            with pytest.raises(
                EnvSlowError, match=r"answers /health but its reset took more than 0.4s"
            ) as got:
                s.reset()
        finally:
            s.close()
    assert (got.value.what, got.value.seconds) == ("reset", 0.4) and not isinstance(
        got.value, EnvUnreachableError
    )
    from evalkit.envs.client.openenv import OpenEnvSession

    with pytest.raises(EnvUnreachableError, match="cannot connect to the environment"):
        OpenEnvSession(nowhere)


def test_a_server_slow_to_build_its_env_is_not_called_unreachable(monkeypatch, nowhere):
    from evalkit.envs.client import openenv

    monkeypatch.setattr(openenv, "METADATA_TIMEOUT", 0.4)
    with Served(kinds.slow_app(delay=1.5, setup=True)) as served:
        with pytest.raises(
            ConfigError, match=r"answers /health but its /metadata took more than 0.4s"
        ) as got:
            openenv.env_identity(served.base_url)
    assert isinstance(got.value.__cause__, EnvSlowError) and got.value.__cause__.what == "/metadata"
    with pytest.raises(ConfigError, match="cannot reach the environment"):
        openenv.env_identity(nowhere)


# ---- what the env reports of its configuration ------------------------------------------------------------


@pytest.mark.parametrize("report", ["state", "metadata"])
def test_two_configurations_of_one_server_are_told_apart(report):
    seen = {}
    for game in ("catch", "tic_tac_toe"):
        with Served(kinds.games_app(game, report)) as served:
            from evalkit.envs.client.openenv import env_identity

            assert env_identity(served.base_url) == "GameEnvironment"  # one name for both
            with connect(served.base_url) as s:
                s.reset()
                seen[game] = s.configuration()
                assert (
                    s.configuration(sent={"game_name": "x"}).get("game_name") is None
                )  # the task's, not its
    assert seen["catch"]["game_name"] == "catch" and seen["tic_tac_toe"]["game_name"] == "tic_tac_toe"
    if report == "state":  # OpenSpiel's state says more of its configuration
        assert seen["catch"] == {"agent_player": 0, "game_name": "catch", "opponent_policy": "random"}
    assert identity.mismatch(seen["catch"], dict(seen["catch"])) is None
    said = identity.mismatch(seen["catch"], seen["tic_tac_toe"])
    assert said.endswith('game_name "catch" → "tic_tac_toe"') and "\n" not in said


def test_configuration_prefers_the_reset_then_the_state_and_hashes_what_is_long():
    meta = {"env_id": "Wordle-v0", "level": None, "prompt": "x"}
    state = {"env_id": "other", "game_params": {"rows": 8}, "dataset_config": {"words": ["a" * 50] * 10}}
    got = identity.configuration(meta, {"difficulty": 2}, state, {"name": "X", "mode": 1}, sent=["mode"])
    assert list(got) == ["dataset_config", "difficulty", "env_id", "game_params"]
    assert got["env_id"] == "Wordle-v0" and got["game_params"] == {"rows": 8}
    assert got["dataset_config"].startswith("sha256:") and len(got["dataset_config"]) == 23
    assert identity.configuration({}, {}) == {}
    assert "level (not reported) → 3" in identity.mismatch({}, {"level": 3})


# ---- typed envs' episode ids ------------------------------------------------------------------------------


def test_a_typed_envs_episode_id_comes_from_its_state(guess_server, crash):
    with connect(guess_server.base_url) as s:
        meta = s.reset(seed=1)
        assert len(meta["episode_id"]) == 32 and meta["episode_id"] == s.state()["episode_id"]
        first = meta["episode_id"]
        assert s.reset(seed=2)["episode_id"] != first
    with connect(crash.base_url) as s:
        assert s.reset(episode_id="mine")["episode_id"] == "mine"


def test_an_mcp_tools_picture_in_text_or_data_is_a_picture():
    with Served(kinds.lens_app()) as served, connect(served.base_url) as s:
        s.reset()
        look = s.call("look", {})
        assert look.text == "[image 1]" and look.images[0].to_pil().size == (20, 10)
        snap = s.call("snap", {})
        assert [i.to_pil().size for i in snap.images] == [(8, 8)]
        assert '"image": "[image 1]"' in snap.text and '"t": 3' in snap.text


def test_a_sessions_configuration_is_empty_where_it_has_none():
    from tests.support.pictures import PictureEnv

    assert identity.of_session(PictureEnv()) == {}


def test_an_episode_sends_plain_field_pictures_as_images_and_stores_them_as_frames(pixels, tmp_path):
    from evalkit.records.rundir import safe_path
    from evalkit.run.episode import run_episode
    from evalkit.types import Turn
    from tests.support.scripted import call, factory

    sink: list = []
    turns = [Turn(calls=[call("step", values=[0.1])]), Turn(calls=[call("step", values=[0.2])])]
    rec = run_episode(factory(turns, sink), pixels.base_url, out=tmp_path, max_turns=3)
    assert (rec.error_class, rec.end_reason, rec.reward) == (None, "done", 0.5)
    opening, pictures = sink[0].users[0]
    assert len(pictures) == 2 and "pixels: [image 1]" in opening and len(opening) < 1500
    [(_, first)] = sink[0].results_seen[0]
    assert len(first.images) == 2 and len(first.text) < 1500
    assert rec.frame0 and all(t.frame for t in rec.turns) and rec.episode_id  # a typed env's, from its state
    assert safe_path(tmp_path, rec.frame0).read_bytes()[:4] in (b"\x89PNG", b"RIFF")  # a picture, not text
