"""run_episode against the real canvas server over WebSocket, with scripted agents."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from evalkit.envs.embedded.server import serve
from evalkit.errors import ConfigError, EndpointError, MissingKeyError
from evalkit.records.rundir import read_records, safe_path
from evalkit.run.episode import run_episode
from evalkit.types import AgentOptions, Call, Turn, Usage
from tests.support.echo_env import EchoServer
from tests.support.scripted import call, factory

RECT = dict(kind="rect", x=10, y=10, width=120, height=60, fill="#ff0000")


def test_submit_records_grade_frames_and_usage(canvas_server, tmp_path):
    sink: list = []
    turns = [
        Turn(text="add", calls=[call("add_element", **RECT), call("view_canvas")], usage=Usage(input=5)),
        Turn(text="done", calls=[call("submit")], usage=Usage(output=7)),
    ]
    rec = run_episode(factory(turns, sink), canvas_server, "canvas-test-0007", out=tmp_path)
    agent = sink[0]
    assert rec.end_reason == "submitted" and not rec.auto_submitted
    assert rec.error_class is None and 0 <= rec.reward <= 1
    assert rec.reward == pytest.approx(rec.grade["total"])
    assert rec.usage["input"] == 5 and rec.usage["output"] == 7
    assert rec.tier in ("easy", "medium", "hard") and rec.task_id == "canvas-test-0007"
    assert rec.tool_calls == 3 and rec.n_turns == 2
    # the opening message carries the target image in reference mode
    text, images = agent.users[0]
    assert len(images) == 1 and images[0].mime == "image/jpeg" and "60 turns" in text
    # each result batch ends with the turns-left note; view_canvas came back as an image
    first = agent.results_seen[0]
    assert first[-1][1].text.endswith("[59 turns left]")
    assert first[1][1].images and first[1][1].images[0].mime == "image/png"
    # pictures are stored inside the run, content-addressed, and the record points at them
    for rel in [
        rec.frame0,
        rec.target,
        rec.render,
        *(t.frame for t in rec.turns),
        *rec.turns[0].calls[1].images,
    ]:
        assert safe_path(tmp_path, rel) is not None, rel
    assert rec.turns[0].calls[1].images[0].startswith("frames/")
    assert [r.key for r in read_records(tmp_path)] == [rec.key]
    assert isinstance(rec.final_doc, dict) and len(rec.final_doc["elements"]) == 1


def test_parse_errors_are_data_and_the_episode_goes_on(canvas_server):
    sink: list = []
    bad = Call("x1", "add_element", {}, raw='{"kind": "rect", ', error="arguments are not valid JSON")
    turns = [Turn(calls=[bad]), Turn(calls=[call("submit")])]
    rec = run_episode(factory(turns, sink), canvas_server, "canvas-test-0001")
    assert rec.parse_errors == 1 and rec.tool_calls == 1 and rec.end_reason == "submitted"
    fed_back = sink[0].results_seen[0][0][1]
    assert fed_back.is_error and "not valid JSON" in fed_back.text
    assert rec.turns[0].calls[0].parse_error and rec.turns[0].calls[0].args == '{"kind": "rect", '


def test_tool_errors_are_counted_not_fatal(canvas_server):
    turns = [
        Turn(calls=[call("add_element", kind="hexagon", x=1, y=1, width=5, height=5)]),
        Turn(calls=[call("delete_element", id="nope")]),
        Turn(calls=[call("submit")]),
    ]
    rec = run_episode(factory(turns), canvas_server, "canvas-test-0002")
    assert rec.tool_errors == 2 and rec.end_reason == "submitted"
    assert not rec.turns[0].calls[0].ok and "hexagon" in rec.turns[0].calls[0].result


def test_three_silent_turns_end_the_episode_and_submit_on_its_behalf(canvas_server):
    sink: list = []
    rec = run_episode(factory([Turn(text="thinking")] * 5, sink), canvas_server, "canvas-test-0003")
    assert rec.end_reason == "no_tool_call" and rec.auto_submitted and rec.n_turns == 3
    assert rec.reward is not None and rec.grade is not None
    assert sum("did not call a tool" in u[0] for u in sink[0].users) == 2


def test_turn_limit_warns_of_the_last_turn_then_auto_submits(canvas_server):
    sink: list = []
    turns = [Turn(calls=[call("get_document")]) for _ in range(4)]
    rec = run_episode(factory(turns, sink), canvas_server, "canvas-test-0004", max_turns=3)
    assert rec.end_reason == "turn_limit" and rec.auto_submitted and rec.n_turns == 3
    notes = [pairs[-1][1].text for pairs in sink[0].results_seen]
    assert "[2 turns left]" in notes[0] and "last" in notes[1] and "[no turns left]" in notes[2]


def test_env_step_limit_ends_the_episode(canvas_server):
    turns = [Turn(calls=[call("get_document"), call("get_document")]) for _ in range(5)]
    rec = run_episode(factory(turns), canvas_server, "canvas-test-0005", max_steps=3)
    assert rec.end_reason == "auto_submitted" and rec.auto_submitted and rec.reward is not None
    assert rec.tool_calls == 3


def test_deadline(canvas_server):
    import time

    def slow():
        time.sleep(0.3)
        return Turn(calls=[call("get_document")])

    rec = run_episode(factory([slow] * 10), canvas_server, "canvas-test-0006", episode_timeout=0.5)
    assert rec.end_reason == "deadline" and rec.auto_submitted and rec.n_turns < 10


def test_endpoint_failure_is_unscored_not_zero(canvas_server):
    def down():
        raise EndpointError("503 after retries", status=503)

    rec = run_episode(factory([Turn(calls=[call("get_document")]), down]), canvas_server, "canvas-test-0008")
    assert rec.error_class == "endpoint_error" and rec.reward is None and rec.end_reason == "error"
    assert "503" in rec.error and rec.traceback and rec.n_turns == 1


def test_env_connection_lost_is_env_error(tmp_path):
    server = serve("canvas")

    def kill_server():
        server.stop()
        return Turn(calls=[call("get_document")])

    rec = run_episode(
        factory([Turn(calls=[call("get_document")]), kill_server]), server, "canvas-test-0009", out=tmp_path
    )
    assert rec.error_class == "env_error" and rec.reward is None
    assert json.loads((tmp_path / "trace.jsonl").read_text())["error_class"] == "env_error"


def test_unreachable_env_is_env_error():
    from evalkit.serving import free_port

    rec = run_episode(factory([]), f"http://127.0.0.1:{free_port()}", "t")
    assert rec.error_class == "env_error" and rec.reward is None


def test_unknown_provider_is_raised_before_any_work():
    with pytest.raises(ConfigError):
        run_episode("nosuch:model", "http://127.0.0.1:9", "t")


def test_env_without_submit_ends_at_the_turn_limit():
    with EchoServer() as echo:
        turns = [Turn(calls=[call("echo_message", message=f"hi {i}")]) for i in range(5)]
        rec = run_episode(factory(turns), echo, "anything", max_turns=2)
    assert rec.end_reason == "turn_limit" and not rec.auto_submitted
    assert rec.reward is None and rec.error_class is None and rec.tool_calls == 2
    assert rec.turns[0].calls[0].result.startswith("hi 0")


def test_description_mode_sends_no_image_and_pruning_is_requested(canvas_server):
    sink: list = []
    opts = AgentOptions(image_window=(6, 2))
    rec = run_episode(
        factory([Turn(calls=[call("submit")])], sink),
        canvas_server,
        "canvas-test-0010",
        mode="description",
        options=opts,
    )
    assert rec.mode == "description" and sink[0].users[0][1] == []
    assert "Target design:" in sink[0].system  # the written brief replaces the image
    assert sink[0].pruned == [(2, 6)]


def test_cancel_stops_before_the_next_turn(canvas_server):
    import threading

    cancel = threading.Event()

    def then_cancel():
        cancel.set()
        return Turn(calls=[call("get_document")])

    from evalkit.envs.client.resolved import resolve
    from evalkit.run.episode import play
    from evalkit.run.jobs import Job
    from evalkit.run.settings import Settings

    env = resolve(canvas_server)  # the batch's own entry: a batch's episodes are cancelled when it stops
    rec = play(factory([then_cancel] * 5), env, Job.of("scripted", env, "canvas-test-0011"), Settings(),
               cancel=cancel)  # fmt: skip
    assert rec.error_class == "cancelled" and rec.n_turns == 1 and rec.reward is None


def test_a_broken_price_table_costs_the_number_not_the_episode(canvas_server, monkeypatch):
    import evalkit.providers.prices as prices

    def broken(*a):
        raise FileNotFoundError("prices.json")

    monkeypatch.setattr(prices, "episode_cost", broken)
    rec = run_episode(factory([Turn(calls=[call("submit")])]), canvas_server, "canvas-test-0012")
    assert rec.error_class is None and rec.reward is not None and rec.cost_usd is None


def test_keys_endpoint_urls_and_endpoints_are_checked_before_any_work(tmp_path, monkeypatch):
    """As the CLI does: a missing key or URL is named, an endpoint nothing answers at is named by its URL."""
    from evalkit.serving import free_port

    monkeypatch.chdir(tmp_path)  # no .env up the tree supplies a key
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    out = tmp_path / "run"
    with pytest.raises(MissingKeyError, match="missing API key ANTHROPIC_API_KEY"):
        run_episode("anthropic:claude-sonnet-5", "http://127.0.0.1:9", "t", out=out)
    with pytest.raises(MissingKeyError) as info:
        run_episode("vllm:m", "http://127.0.0.1:9", "t", out=out)
    assert "missing endpoint URL VLLM_BASE_URL" in str(info.value) and "API key" not in str(info.value)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("VLLM_BASE_URL", dead)
    with pytest.raises(ConfigError) as info:
        run_episode("vllm:m", "http://127.0.0.1:9", "t", out=out)
    assert f"cannot reach the model endpoint {dead} (set by VLLM_BASE_URL" in str(info.value)
    with pytest.raises(ConfigError, match="give only one"):
        run_episode(
            factory([]), "http://127.0.0.1:9", "t", options=AgentOptions(keep_images=1, image_window=(3, 1))
        )
    assert not out.exists()


def test_a_parse_error_reads_once_as_an_error(canvas_server):
    sink: list = []
    broken = Call("c1", "add_element", {}, raw="{kind: rect", error="tool arguments are not valid JSON")
    run_episode(factory([Turn(calls=[broken])], sink), canvas_server, "canvas-test-0013", max_turns=1)
    (outcome,) = [o for _, o in sink[0].results_seen[0]]
    assert outcome.is_error and outcome.text.startswith("tool arguments are not valid JSON")


@pytest.mark.browser
def test_a_screen_env_gets_a_screenshot_every_turn(canvas_server, tmp_path):
    """gui declares `screenshot_tool`: the opening shows the screen after the target, a turn without a
    screenshot ends with one on its last result (a silent turn: on the nudge), frames are the screenshots."""
    from evalkit.browser import chromium_executable

    if chromium_executable() is None:
        pytest.skip("no Chromium")
    sink: list = []
    turns = [
        Turn(calls=[call("press_key", keys="r"), call("press_key", keys="Escape")]),
        Turn(calls=[call("screenshot"), call("press_key", keys="e")]),
        Turn(text="looking"),
        Turn(calls=[call("submit")]),
    ]
    rec = run_episode(factory(turns, sink), canvas_server, "canvas-test-0007", surface="gui", out=tmp_path)
    agent = sink[0]
    text, images = agent.users[0]
    assert [i.mime for i in images] == ["image/jpeg", "image/png"]
    # the canvas says which image is which in its own words; the loop names the screenshot it added
    assert text.startswith("The first image is the target; the second shows the editor.")
    assert "200 turns" in text and text.endswith("\nImage 2 is a screenshot of the screen as it is now.")
    first, second = agent.results_seen[0], agent.results_seen[1]
    assert [len(o.images) for _, o in first] == [0, 1] and first[-1][1].text.endswith("[199 turns left]")
    assert [len(o.images) for _, o in second] == [1, 0]  # the model's own screenshot: none added
    nudge, shown = agent.users[1]
    assert nudge.startswith("You did not call a tool.") and "call submit." in nudge and len(shown) == 1
    assert rec.end_reason == "submitted" and rec.tool_calls == 5  # the loop's screenshots are not the model's
    assert rec.frame0 and rec.turns[0].frame == rec.turns[0].calls[-1].images[-1]
    assert rec.turns[1].frame == rec.turns[1].calls[0].images[0]
    assert rec.turns[2].frame and rec.turns[2].frame != rec.frame0  # the editor changed: ellipse tool on
    with Image.open(tmp_path / rec.turns[0].frame) as frame:
        assert frame.size == (1280, 800)
    assert (rec.skin, rec.coordinates) == ("paper", "pixels")
    assert rec.info["image_window"] == [12, 4] and agent.pruned[0] == (4, 12)


def test_canvas_keeps_its_own_words_and_the_loop_has_none(canvas_server):
    sink: list = []
    run_episode(
        factory([Turn(text="hm"), Turn(calls=[call("submit")])], sink), canvas_server, "canvas-test-0013"
    )
    agent = sink[0]
    assert agent.users[0][0] == (  # 60 turns: the tools surface's own budget (reset metadata `max_turns`)
        "The target is attached. Recreate it with your tools, then call submit.\n"
        "You have 60 turns; each turn may call several tools."
    )
    assert agent.users[1][0] == (
        "You did not call a tool. Continue the task by calling one of your tools; "
        "when you are done, call submit.\n[59 turns left]"
    )
    from evalkit.run import wording

    for text in (wording.nudge(None), wording.turns_left_note(1, None), wording.opening({}, {}, 3).text):
        assert not {"target", "recreate", "submit"} & set(text.lower().replace(",", " ").split())


def test_dict_tasks_have_distinct_stable_identities(canvas_server, tmp_path):
    from evalkit.analysis import load_runs
    from evalkit.envs.client.resolved import embedded
    from evalkit.envs.client.selection import drawn, select_tasks, task_identity
    from evalkit.run.jobs import plan_jobs
    from evalkit.run.settings import Settings

    recs = [
        run_episode(
            factory([Turn(calls=[call("submit")])]),
            canvas_server,
            {"split": "test", "index": i},
            out=tmp_path,
        )
        for i in (3, 4)
    ]
    assert [r.task_id for r in recs] == ["canvas-test-0003", "canvas-test-0004"]
    assert recs[0].key != recs[1].key and load_runs([tmp_path]).height == 2
    # the key a batch gives the same task, so a batch resumes what run_episode ran
    draw, _ = select_tasks("canvas", Settings(split="test", tasks=2, start=3))
    tasks, _ = drawn(embedded("canvas"), draw)
    jobs = plan_jobs(["scripted"], embedded("canvas"), tasks, ["tools"], ["reference"], 1)
    assert [j.key for j in jobs] == [r.key for r in recs]
    assert task_identity({"seed": 2, "level": "b"}, "x") == '{"level":"b","seed":2}'
    assert task_identity({"level": "b", "seed": 2}, "x") == task_identity({"seed": 2, "level": "b"}, "y")
    assert task_identity({"task_id": "t9"}, "x") == "t9"
    # a task id with more arguments is another reset of it: distinct, never refused as the same task twice
    assert task_identity({"task_id": "t9", "seed": 1}, "x") == '{"seed":1,"task_id":"t9"}'
    assert [r.split for r in recs] == ["test", "test"]
    assert recs[0].reset == {"split": "test", "index": 3, "mode": "reference", "surface": "tools"}


def test_the_final_render_is_the_last_frame_unless_a_tool_ran_since(canvas_server, tmp_path):
    from evalkit.envs.client.openenv import OpenEnvSession
    from evalkit.envs.client.resolved import resolve

    class Counting(OpenEnvSession):
        renders = 0

        def render(self):
            Counting.renders += 1
            return super().render()

    def session():
        return Counting(canvas_server.base_url)

    turns = [Turn(calls=[call("add_element", **RECT)]), Turn(calls=[call("submit")])]
    env = resolve(session, name="canvas")
    rec = run_episode(factory(turns), env, "canvas-test-0007", out=tmp_path)
    assert rec.end_reason == "submitted" and rec.frame0 and rec.render
    assert Counting.renders == 3  # frame0 and a frame per turn; the final render is the last frame
    assert (tmp_path / rec.render).read_bytes() == (tmp_path / rec.turns[-1].frame).read_bytes()

    Counting.renders = 0
    rec = run_episode(factory(turns[:1]), env, "canvas-test-0007", out=tmp_path, max_turns=1)
    assert rec.end_reason == "turn_limit" and rec.auto_submitted
    assert Counting.renders == 3  # the loop's submit ran after the last frame: the final render is asked for


@pytest.mark.parametrize("background", [True, False])
def test_frames_are_taken_beside_the_model_only_from_sessions_that_allow_it(
    canvas_server, tmp_path, background
):
    """An OpenEnv session's pictures are read from the loop's frame threads while the model thinks; a session
    that does not say `background_reads` (a user's own, perhaps bound to its thread) is read in series from
    the episode's thread. The record is the same either way."""
    import threading

    from evalkit.envs.client.openenv import OpenEnvSession
    from evalkit.envs.client.resolved import resolve

    threads: set[str] = set()

    class Watched(OpenEnvSession):
        background_reads = background

        def render(self):
            threads.add(threading.current_thread().name)
            return super().render()

        def document(self):
            threads.add(threading.current_thread().name)
            return super().document()

    turns = [Turn(calls=[call("add_element", **RECT)]), Turn(calls=[call("submit")])]
    env = resolve(lambda: Watched(canvas_server.base_url), name="canvas")
    rec = run_episode(factory(turns), env, "canvas-test-0007", out=tmp_path / str(background))
    assert rec.end_reason == "submitted" and rec.frame0 and all(t.frame for t in rec.turns)
    assert rec.final_doc and rec.final_doc["elements"]
    if background:
        assert threads and all(name.startswith("evalkit-frames") for name in threads), threads
    else:
        assert threads == {threading.current_thread().name}
    shown = [
        (tmp_path / str(background) / p).read_bytes() for p in (rec.frame0, rec.turns[-1].frame, rec.render)
    ]
    assert (
        shown[0] != shown[1] == shown[2]
    )  # the blank canvas, then the shape (the final render: the last frame)


def test_a_refusal_ends_the_episode_as_data_and_is_not_sent_back(canvas_server):
    turns = [Turn(calls=[call("add_element", **RECT)]), Turn(text="I won't do that.", stop="refusal")]
    rec = run_episode(factory(turns + [Turn(calls=[call("submit")])]), canvas_server, "canvas-test-0007")
    assert rec.end_reason == "refused" and rec.error_class is None and rec.n_turns == 2
    assert rec.turns[-1].text == "I won't do that." and rec.auto_submitted and rec.reward is not None
    from evalkit.records import transcripts

    said = transcripts.messages(rec, ".")
    assert not any(m.role == "user" and m.turn == 2 for m in said)  # nothing answered the refusal


def test_an_episode_is_priced_request_by_request_at_its_tier(canvas_server, monkeypatch):
    """gpt-6-sol's long-context rate applies to its 300K-token request alone: the episode's cost is its
    requests' (`prices.episode_cost`), more than its summed usage priced below the tier."""
    import evalkit.providers.prices as prices

    monkeypatch.delenv(prices.OVERRIDE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    prices.price_table.cache_clear()
    big, small = Usage(input=300_000, output=10), Usage(input=1_000, output=10)
    make = factory([Turn(calls=[call("view_canvas")], usage=big), Turn(calls=[call("submit")], usage=small)])
    make.model = spec = "openai:gpt-6-sol"
    rec = run_episode(make, canvas_server, "canvas-test-0012")
    prices.price_table.cache_clear()
    each = prices.request_cost(spec, big) + prices.request_cost(spec, small)
    assert rec.cost_usd == pytest.approx(each) and rec.cost_usd > prices.cost_usd(spec, big + small) * 1.5
