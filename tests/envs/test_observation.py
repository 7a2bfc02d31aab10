"""Observations as a model reads them: readable fields, pictures recognised by their shape."""

from __future__ import annotations

import base64
import io
import json

from PIL import Image as PILImage

from evalkit.envs.client import observation


def _png(w: int = 4, h: int = 3, colour=(200, 10, 10)) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (w, h), colour).save(buf, "PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (8, 8), "blue").save(buf, "JPEG")
    return buf.getvalue()


def test_fields_render_as_readable_lines():
    text, images = observation.render(
        {
            "done": False,
            "reward": 1.0,
            "metadata": {"secret": 1},
            "question": "How many?",
            "page": "line one\nline two",
            "legal_actions": [0, 3],
            "info": {"turn": 2},
            "empty": "",
            "nothing": None,
        }
    )
    assert text == 'question: How many?\npage:\nline one\nline two\nlegal_actions: [0, 3]\ninfo: {"turn": 2}'
    assert images == []


def test_pictures_by_shape_not_by_name():
    png, jpg = _png(), _jpeg()
    grid = [[[0, 0, 255] for _ in range(10)] for _ in range(9)]
    fields = {
        "reference_b64": base64.b64encode(jpg).decode(),
        "shot": "data:image/png;base64," + base64.b64encode(png).decode(),
        "items": [{"type": "image", "data": base64.b64encode(png).decode(), "mime_type": "image/png"}],
        "screenshot": grid,
        "screen": [128] * (5 * 6 * 3),
        "screen_shape": [5, 6, 3],
        "board": [[0, 1, 0], [1, -1, 0]],  # a game board of ints is text, not a picture
        "note_b64": base64.b64encode(b"not an image").decode(),
    }
    text, images = observation.render(fields)
    assert [i.mime for i in images] == ["image/jpeg", "image/png", "image/png", "image/png", "image/png"]
    assert images[0].data == jpg and images[1].data == png
    assert images[3].to_pil().size == (10, 9) and images[3].to_pil().getpixel((0, 0)) == (0, 0, 255)
    assert images[4].to_pil().size == (6, 5)
    assert text.splitlines() == [
        "reference_b64: [image 1]",
        "shot: [image 2]",
        "items: [image 3]",
        "screenshot: [image 4]",
        "screen: [image 5]",
        "board:",  # a grid of values is a table
        "0  1 0",
        "1 -1 0",
        f"note_b64: {fields['note_b64']}",
    ]


def test_task_text_prefers_metadata_then_fields():
    assert observation.task_text({"question": "Q?", "prompt": "P."}, {"goal": "G"}) == ("P.", None)
    assert observation.task_text({}, {"goal": "G", "task": "T"}) == ("T", "task")
    assert observation.task_text({"prompt": "  "}, {"goal": 3}) == (None, None)


def test_metadata_the_model_reads_tables_cuts_and_what_it_never_sees():
    meta = {
        "task_id": "m-1", "episode_id": "e", "instructions": "x", "grade": {"total": 1},
        "discounted_rewards": [1], "hidden_keys": ["answer"], "answer": "42", "_seed": 3, "empty": [],
        "company": "ACME", "filings": [{"year": 2023, "revenue": 12.5}, {"year": 2024, "revenue": 3}],
        "notes": "n" * 2500, "board": [["X", "."], [".", "O"]], "info": {"turn": 2},
    }  # fmt: skip
    assert list(observation.shown_metadata(meta)) == ["company", "filings", "notes", "board", "info"]
    hidden = frozenset({"company"})  # hidden at reset: hidden in a step's result too
    assert list(observation.shown_metadata(meta, hidden)) == ["filings", "notes", "board", "info"]
    text, images = observation.render_metadata(meta, skip={"notes"})
    assert images == [] and text == (
        "company: ACME\nfilings:\nyear | revenue\n2023 |    12.5\n2024 |       3\nboard:\nX .\n. O\n"
        'info: {"turn": 2}'
    )
    cut = observation.readable("n" * 2500, observation.METADATA_CAP)
    assert cut == "n" * 2000 + "… [cut: 2,000 of 2,500 characters shown]"
    png = "data:image/png;base64," + base64.b64encode(_png()).decode()
    text, images = observation.render_metadata({"hidden_keys": ["ref"], "ref": png, "map": png}, first=3)
    assert text == "map: [image 3]" and len(images) == 1  # a hidden picture is not sent either


def test_long_or_multi_line_cells_are_not_padded_to_the_widest_line():
    rows = [
        {"cell": 1, "source": "x = 1\ny = 2", "out": "ok"},
        {"cell": 2, "source": "print(x)", "out": "1"},
    ]
    text = observation.readable(rows)
    assert (
        text == "[1]\ncell: 1\nsource:\n  x = 1\n  y = 2\nout: ok\n\n[2]\ncell: 2\nsource: print(x)\nout: 1"
    )
    long = [{"path": "a/" * 40, "size": 3}, {"path": "b", "size": 4}]
    assert "  " not in observation.readable(long)  # one 80-character path pads no other row
    last = [{"n": 1, "note": "y" * 300}, {"n": 2, "note": "z"}]
    assert observation.readable(last).splitlines() == ["n | note", f"1 | {'y' * 300}", "2 | z"]
    assert observation.readable([["a\nb", "c"], ["d", "e"]]) == '[["a\\nb", "c"], ["d", "e"]]'


def test_the_usual_task_keys_open_the_episode():
    for key in ("task_prompt", "instruction", "objective", "problem"):
        assert observation.task_text({key: " Do it. "}, {}) == ("Do it.", None)
        assert observation.task_text({}, {key: "Do it."}) == ("Do it.", key)
    assert observation.task_text({"goal": "G", "task_prompt": "T"}, {}) == (
        "T",
        None,
    )  # the order of TASK_KEYS


# ---- what imported envs send (issue 50) ------------------------------------------------------------------


def test_a_prompt_of_blocks_or_chat_messages_is_the_task_its_system_role_the_system_prompt():
    png = base64.b64encode(_png()).decode()
    blocks = [
        {"type": "text", "text": "Look at the dial."},
        {"type": "image", "data": png, "mimeType": "image/png"},
    ]
    assert observation.read_prompt(blocks)[:2] == ("", "Look at the dial.\n[image 1]")
    url = f"data:image/png;base64,{png}"
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What river?"},
                                     {"type": "image_url", "image_url": {"url": url}}]},
    ]  # fmt: skip
    system, text, images = observation.read_prompt(chat, first=3)
    assert (system, text) == ("Be brief.", "What river?\n[image 3]") and images[0].data == _png()
    few_shot = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"},
                {"role": "user", "content": "2+2?"}]  # fmt: skip
    assert observation.read_prompt(few_shot)[1] == "user: 1+1?\n\nassistant: 2\n\nuser: 2+2?"
    openreward = [{"role": "user", "blocks": [{"type": "text", "text": "Hello."}]}]
    assert observation.read_prompt(openreward)[1] == "Hello."
    assert observation.read_prompt([{"a": 1}]) is None and observation.read_prompt([1, 2]) is None
    # the metadata's prompt is the task; a picture before it in the metadata numbers its own pictures on
    meta = {"map": {"type": "image", "data": png, "mimeType": "image/png"}, "prompt": blocks}
    task = observation.task_of(meta, {})
    assert task.text == "Look at the dial.\n[image 2]" and task.key == "prompt" and not task.in_fields
    assert observation.meta_task_key({"prompt": [{"x": 1}], "question": "Q?"}) == "question"


def test_what_is_withheld_and_why():
    record = {"id": "sum-1", "a": 2, "b": 3}
    meta = {"task_spec": {"answer": "4"}, "source_type": "verifiers", "case": dict(record), "level": 2,
            "board": [1, 2], "note": "x"}  # fmt: skip
    got = observation.withheld(meta, hide=["note"], records=frozenset({observation.digest(record)}))
    assert set(got) == {"task_spec", "source_type", "case", "note"}
    assert "openenv import" in got["task_spec"] and got["note"] == observation.HIDE_FIELD
    assert got["case"] == observation.RECORD
    assert observation.digest({"b": 3, "a": 2, "id": "sum-1"}) == observation.digest(record)  # key order
    assert "task_spec" not in observation.shown_metadata(meta)  # never shown, whoever renders it
    assert observation.withhold(meta, got) == {"level": 2, "board": [1, 2]}


def test_every_result_shape_a_wrapper_sends_reaches_the_model():
    from evalkit.envs.client.openenv import tool_outcome

    png = base64.b64encode(_png()).decode()
    blocks = {"blocks": [{"type": "text", "text": "Three notches.", "detail": None},
                         {"type": "image", "data": png, "mimeType": "image/png"}],
              "metadata": {"looks": 1}}  # fmt: skip
    out = tool_outcome({"observation": {"result": blocks, "metadata": {"looks": 1}}})
    assert out.text == "Three notches.\n[image 1]\nlooks: 1" and out.images[0].data == _png()
    scored = {"completion": "4", "reward": 1.0, "task_spec": {"answer": "4"}, "metrics": {"exact": 1}}
    out = tool_outcome({"observation": {"result": scored}})
    assert json.loads(out.text) == {"completion": "4", "reward": 1.0, "metrics": {"exact": 1}}
    assert tool_outcome({"observation": {"result": {"data": {"t": 3}}}}).text == '{"t": 3}'
    mcp = {"content": [{"type": "text", "text": "hi"}], "data": "ignored"}
    assert tool_outcome({"observation": {"result": mcp}}).text == "hi"
    listed = tool_outcome({"observation": {"result": [1, 2]}}, hide=("secret",))
    assert listed.text == "[1, 2]"
    hidden = tool_outcome(
        {"observation": {"result": "ok", "metadata": {"secret": 7, "seen": 1}}}, hide=("secret",)
    )
    assert hidden.text == "ok\nseen: 1"


def test_a_state_that_gives_the_actions_shape_shapes_the_schema():
    from evalkit.envs.client.actions import sample_action, shaped

    schema = {"properties": {"values": {"type": "array", "items": {"type": "number"}}}}
    spec = {"action_spec": {"shape": [2], "minimum": [-1.0, -0.5], "maximum": [1.0, 2.0]}}
    got = shaped(schema, spec)
    values = got["properties"]["values"]
    assert (values["minItems"], values["maxItems"]) == (2, 2)
    assert values["items"] == {"type": "number", "minimum": -0.5, "maximum": 1.0}
    assert got["required"] == ["values"] and sample_action(got) == {"values": [-0.5, -0.5]}
    assert shaped(schema, {}) is schema and shaped(schema, {"action_spec": {"shape": "2"}}) is schema
    two = {"properties": {"a": schema["properties"]["values"], "b": schema["properties"]["values"]}}
    assert shaped(two, spec) is two  # which list the shape is of, the state does not say
