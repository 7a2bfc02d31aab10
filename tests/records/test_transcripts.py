"""A record keeps what the model was sent, shared texts stored once per run; `messages()` gives it back in
order, and rebuilds what it can for records written without it."""

from __future__ import annotations

import json

from evalkit.records.rundir import TRACE, read_records, safe_path
from evalkit.records.transcripts import INLINE, messages, tools
from evalkit.run import wording
from evalkit.run.batch import run_batch
from evalkit.run.episode import run_episode
from evalkit.types import Call, EpisodeRecord, Turn, TurnRecord
from tests.support.scripted import call, factory

RECT = dict(kind="rect", x=10, y=10, width=120, height=60, fill="#ff0000")


def test_a_batch_stores_shared_texts_once_and_reads_back_the_conversation(canvas_server, tmp_path):
    run = run_batch(["baseline:tracer", "baseline:random"], canvas_server, out=tmp_path, max_turns=4,
                    task_ids=["canvas-test-0002", "canvas-test-0005"], progress=False)  # fmt: skip
    recs = run.records()
    assert len(recs) == 4
    # a system prompt per task (it carries the task's canvas), one tool list and one opening for the run;
    # each stored once, the records only point at them
    by_task = {(r.task_id, r.transcript["system"]) for r in recs}
    assert len(by_task) == 2 and len({r.transcript["tools"] for r in recs}) == 1
    assert len(list((tmp_path / "texts").rglob("*.txt"))) == 3
    rec = next(r for r in recs if r.model == "baseline:tracer")
    system = (tmp_path / rec.transcript["system"]).read_text()
    assert len(system) > INLINE and system[:200] not in (tmp_path / TRACE).read_text()
    msgs = messages(rec, tmp_path)
    assert [m.role for m in msgs[:3]] == ["system", "user", "assistant"] and msgs[0].text == system
    opening = msgs[1]
    assert "4 turns" in opening.text and [i["path"] for i in opening.images] == [rec.target]
    assert sum(m.role == "assistant" for m in msgs) == rec.n_turns
    results = [m for m in msgs if m.role == "tool"]
    assert [(m.name, m.call_id) for m in results] == [(c.name, c.id) for t in rec.turns for c in t.calls]
    last_of_turn1 = [m for m in results if m.turn == 1][-1]
    assert last_of_turn1.text.endswith("[3 turns left]") and last_of_turn1.note == "turn note"
    shown = [m for m in results if m.images]
    assert shown and all(safe_path(tmp_path, i["path"]) for m in shown for i in m.images)
    assert {t["name"] for t in tools(rec, tmp_path)} >= {"add_element", "view_canvas", "submit"}


def test_nudges_notes_and_parse_errors_as_the_model_saw_them(canvas_server, tmp_path):
    bad = Call("x1", "add_element", {}, raw='{"kind": "rect", ', error="arguments are not valid JSON")
    turns = [
        Turn(calls=[bad, call("add_element", **RECT)]),
        Turn(text="thinking out loud", reasoning="r" * 9000, truncated=True, stop="max_tokens"),
        Turn(calls=[call("submit")]),
    ]
    sink: list = []
    rec = run_episode(factory(turns, sink), canvas_server, "canvas-test-0001", out=tmp_path, max_turns=5)
    msgs = messages(rec, tmp_path)
    assert [(m.role, m.turn, m.note) for m in msgs] == [
        ("system", 0, None), ("user", 0, None),
        ("assistant", 1, None), ("tool", 1, None), ("tool", 1, "turn note"),
        ("assistant", 2, None), ("user", 2, "nudge"), ("user", 2, "notes from a cut turn"),
        ("assistant", 3, None), ("tool", 3, None),
    ]  # fmt: skip
    parse_error, added = msgs[3], msgs[4]
    assert parse_error.error and "not valid JSON" in parse_error.text and not added.error
    agent = sink[0]
    # what the agent was handed, word for word
    assert added.text == agent.results_seen[0][1][1].text
    assert msgs[6].text == agent.users[1][0] and msgs[6].text.startswith(wording.nudge("submit"))
    assert msgs[7].text.endswith("call a tool.") and "r" * 8000 in msgs[7].text
    assert rec.transcript["after"]["2"][1]["text_ref"].startswith("texts/")  # a long text, by reference
    assert msgs[5].reasoning == "r" * 9000 and msgs[5].stop == "max_tokens"


def test_a_record_without_a_transcript_is_reconstructed(tmp_path):
    rec = EpisodeRecord(
        key="k", target="renders/t.jpg", info={"prompt": "Plan the berths."},
        turns=[TurnRecord(turn=1, text="checking", calls=[
            {"id": "a", "name": "check_plan", "args": {"plan": []}, "ok": False, "result": "bad plan",
             "images": ["frames/ab/x.png"]}])],
    )  # fmt: skip
    msgs = messages(json.loads(rec.to_json()), tmp_path)
    assert [(m.role, m.text) for m in msgs] == [
        ("user", "Plan the berths."),
        ("assistant", "checking"),
        ("tool", "bad plan"),
    ]
    assert all(m.note == "reconstructed" for m in msgs)
    assert msgs[0].images == [{"path": "renders/t.jpg", "pruned": False, "mime": "image/jpeg"}]
    assert msgs[2].error and msgs[2].name == "check_plan" and msgs[2].images[0]["path"] == "frames/ab/x.png"


def test_a_reference_outside_the_run_is_not_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show")
    run = tmp_path / "run"
    run.mkdir()
    rec = EpisodeRecord(key="k", transcript={"version": 1, "system": "../secret.txt",
                                             "opening": {"text_ref": "/etc/hostname"}})  # fmt: skip
    system, opening = messages(rec, run)
    assert "do not show" not in system.text and "not found" in system.text
    assert "not found" in opening.text


def test_written_records_round_trip(canvas_server, tmp_path):
    rec = run_episode("baseline:random", canvas_server, "canvas-test-0003", out=tmp_path, max_turns=3)
    (back,) = read_records(tmp_path)
    assert back.transcript == rec.transcript
    assert [m.text for m in messages(back, tmp_path)] == [m.text for m in messages(rec, tmp_path)]


def test_the_stored_tool_list_is_the_indented_json_of_the_list_sent():
    from evalkit.records.transcripts import _tools_text

    wire = [
        {
            "name": "größe",
            "description": "a → b",
            "parameters": {
                "type": "object",
                "properties": {
                    "x": {"type": "number", "minimum": 0.1, "maximum": 1e300},
                    "n": {"type": "integer", "default": -3},
                },
            },
        }
    ]
    compact = json.dumps(wire, ensure_ascii=False)
    assert _tools_text(compact) == json.dumps(wire, ensure_ascii=False, indent=1)
    assert _tools_text(compact) is _tools_text(compact)  # made once per list
