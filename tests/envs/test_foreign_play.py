"""Foreign-style envs played in full: what an env puts only in its observations' metadata reaches the model
(and what it hides, or evalkit keeps for itself, does not), a text reply is the answer where no finishing
tool is, `evalkit probe` shows the opening and one step result exactly as an episode sends them, and a URL
that is not an OpenEnv server is refused by name."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalkit.errors import ConfigError
from evalkit.run.batch import run_batch
from evalkit.run.episode import run_episode
from evalkit.run.probe import example_step, probe
from evalkit.types import Turn
from tests.support.echo_env import EchoServer
from tests.support.scripted import call, factory
from tests.support.standin import MODEL, calls_and_results, texts, user_texts, walk_out

LAYOUT_TABLE = "layout:\n0 0 0 1 0\n1 1 0 1 0\n0 0 0 0 0\n0 1 1 1 0"


def _all_text(bodies: list[dict]) -> str:
    return "\n".join(texts(m) for b in bodies for m in b["messages"])


def test_a_goal_only_in_the_metadata_is_read_and_the_maze_is_left(standin, walk_server, tmp_path):
    standin.play(walk_out)
    rec = run_episode(MODEL, walk_server.base_url, out=tmp_path, max_turns=12)
    assert (rec.end_reason, rec.reward, rec.n_turns, rec.error_class) == ("done", 1.0, 7, None)
    first, second, *_ = standin.bodies
    opening = user_texts(first)[0]
    assert opening.startswith("The environment's first observation:\nposition: [0, 0]\nlegal_actions: [")
    assert f"{LAYOUT_TABLE}\nexit_cell: [3, 4]\nstatus: walking" in opening  # a grid as a table
    [(_, args, result)] = calls_and_results(second)
    assert args == {"move": "right"} and result.startswith("position: [0, 1]\nlegal_actions:")
    assert "exit_cell: [3, 4]" in result and LAYOUT_TABLE in result
    # what the env hid, its ids and its rewards are never sent
    sent = _all_text(standin.bodies)
    for kept in ("down down", "solution", "_seed_used", "hidden_keys", "discounted", "task_id", "episode_id"):
        assert kept not in sent
    # another seed moves the exit: read again, walked again
    standin.play(walk_out)
    other = run_episode(MODEL, walk_server.base_url, {"seed": 1}, max_turns=12)
    assert other.reward == 1.0 and "exit_cell: [3, 0]" in user_texts(standin.bodies[0])[0]


def test_the_probe_shows_the_opening_and_a_step_result_as_the_model_gets_them(standin, walk_server):
    standin.play(walk_out)
    run_episode(MODEL, walk_server.base_url, max_turns=12)
    first, second, *_ = standin.bodies
    report = probe(walk_server.base_url, {}, sessions=1, max_turns=12, step=True)
    assert report.opening.text == user_texts(first)[0]
    assert report.step == ("step", {"move": "right"})  # the one legal action the observation lists
    assert report.result.text == calls_and_results(second)[0][2]
    assert report.result.text.endswith("\n[11 turns left]")
    shown = report.describe()
    assert 'step step {"move": "right"}, its result as the model gets it (0 images):' in shown
    assert "  | exit_cell: [3, 4]" in shown and "down down" not in shown
    given = probe(walk_server.base_url, {}, sessions=1, step={"args": {"move": "up"}})
    assert given.step == ("step", {"move": "up"}) and "position: [0, 0]" in given.result.text
    with pytest.raises(ConfigError, match="names no tool"):
        probe(walk_server.base_url, {}, sessions=1, step={"tool": "jump"})
    as_json = json.loads(json.dumps(report.to_dict(), default=str))
    assert as_json["step"] == {"tool": "step", "args": {"move": "right"}}


def test_example_steps_fill_in_what_a_schema_asks():
    from evalkit.types import ToolSpec

    shot = ToolSpec("screenshot")
    to = {"$ref": "#/$defs/D"}
    move = ToolSpec("move", parameters={"properties": {"to": to}, "required": ["to"],
                                        "$defs": {"D": {"enum": ["north", "south"]}}})  # fmt: skip
    why = {"anyOf": [{"type": "null"}, {"type": "string"}]}
    number = {"type": "integer", "minimum": 3}
    guess = ToolSpec("guess", parameters={"required": ["n", "why"], "properties": {"n": number, "why": why}})
    submit = ToolSpec("submit")
    assert example_step([submit, shot], {}, {}, "screenshot") == ("screenshot", {})
    assert example_step([submit, move], {}, {}) == ("move", {"to": "north"})
    assert example_step([move], {}, {"legal_moves": ["south"]}) == ("move", {"to": "south"})
    assert example_step([guess], {}, {}) == ("guess", {"n": 3, "why": ""})
    assert example_step([submit], {}, {}) is None


def test_one_answer_in_text_ends_an_episode_with_no_finishing_tool():
    with EchoServer() as echo:
        sink: list = []
        turns = [Turn(calls=[call("echo_message", message="hi")]), Turn(text="It said hi."), Turn(text="x")]
        rec = run_episode(factory(turns, sink), echo, "anything", max_turns=5)
        assert (rec.end_reason, rec.n_turns, rec.reward, rec.error_class) == ("answered", 2, None, None)
        assert "final answer in text" in sink[0].system
        assert not any("You did not call a tool" in text for text, _ in sink[0].users)

        # an env that says a reply in text does not end it: nudges toward its tools, as with a finishing tool
        sink = []
        silent = [Turn(text="Thinking.")] * 4
        rec = run_episode(factory(silent, sink), echo, {"tools_only": True}, max_turns=5)
        assert (rec.end_reason, rec.n_turns) == ("no_tool_call", 3)
        nudges = [text for text, _ in sink[0].users if text.startswith("You did not call a tool")]
        assert len(nudges) == 2 and all("answer in text" not in n for n in nudges)
        assert "final answer in text" not in sink[0].system


def test_two_resets_the_env_gives_one_id_are_recorded_apart_with_their_arguments(tmp_path, walk_server):
    rows = [{"seed": 7, "level": "hard"}, {}]
    run = run_batch("baseline:random", walk_server.base_url, out=tmp_path, reset=rows, max_turns=2,
                    concurrency=1, progress=False)  # fmt: skip
    recs = sorted(run.records(), key=lambda r: len(r.reset))
    assert [r.reset for r in recs] == [{}, {"seed": 7, "level": "hard"}]
    assert recs[0].task_id == "walk" and recs[1].task_id.startswith("walk-") and len(recs[1].task_id) == 13
    assert len({r.key for r in recs}) == 2
    again = run_episode("baseline:random", walk_server.base_url, {"level": "hard", "seed": 7}, max_turns=1)
    assert again.task_id == recs[1].task_id  # the same arguments, in any order: the same id


def test_drawn_tasks_keep_their_split_and_repeat(tmp_path, walk_server):
    run = run_batch("baseline:random", walk_server.base_url, out=tmp_path, split="train", tasks=1, repeats=2,
                    max_turns=1, concurrency=1, progress=False)  # fmt: skip
    recs = sorted(run.records(), key=lambda r: r.repeat)
    assert [(r.split, r.repeat) for r in recs] == [("train", 0), ("train", 1)]
    assert recs[0].reset == {"split": "train", "index": 0}


class _NotOpenEnv(BaseHTTPRequestHandler):
    """A web server of another kind: every path is a 404 page."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b"<h1>Not Found</h1>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def web_page():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotOpenEnv)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(5)


def test_a_server_that_is_not_openenv_is_refused_by_what_it_lacks(web_page, tmp_path, capsys):
    from evalkit.cli import main

    why = "is not an OpenEnv server: no /health, /schema, /ws (a WebSocket at /ws got HTTP 404)"
    with pytest.raises(ConfigError, match=r"is not an OpenEnv server: no /health, /schema, /ws"):
        run_batch("baseline:random", web_page, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    argv = ["run", "--base-url", web_page, "--models", "baseline:random", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and why in err and "refused task" not in err
    assert main(["probe", web_page]) == 2 and why in capsys.readouterr().err
