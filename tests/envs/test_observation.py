"""Observations as a model reads them: readable fields, pictures recognised by their shape."""

from __future__ import annotations

import base64
import io

from PIL import Image as PILImage

from evalkit.envs import observation


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
