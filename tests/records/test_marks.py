"""Where computer-use actions landed, drawn on frames: the marks, the notebook display and the viewer."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from evalkit.analysis.display import record_html
from evalkit.records.marks import action_marks, draw_marks, marked
from evalkit.records.traces import FrameStore, TraceWriter, write_run_json
from evalkit.types import CallRecord, EpisodeRecord, Image, TurnRecord

APP = Path(__file__).resolve().parents[2] / "viewer" / "app.py"
CALLS = [
    CallRecord(name="click", args={"x": 500, "y": 250}),
    CallRecord(name="drag", args={"x1": 100, "y1": 100, "x2": 900, "y2": 800}),
    CallRecord(name="click", args={"x": 5000, "y": 1}, ok=False),  # refused: it landed nowhere
    CallRecord(name="type_text", args={"text": "hi"}),
    CallRecord(name="click", args={"x": "left", "y": 3}),
]


def blank(size=(200, 100)) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", size, "white").save(buf, "PNG")
    return buf.getvalue()


def test_marks_in_each_coordinate_system():
    norm = action_marks(CALLS, "normalized", (200, 100))
    assert [(m.n, m.name, m.points) for m in norm] == [
        (1, "click", ((100.0, 25.0),)),
        (2, "drag", ((20.0, 10.0), (180.0, 80.0))),
    ]
    pixels = action_marks([c.__dict__ for c in CALLS[:1]], "pixels", (1280, 800))  # dicts from a trace line
    assert pixels[0].points == ((500.0, 250.0),)


def test_ui_tars_boxes_are_relative_to_the_screen():
    calls = [
        CallRecord(name="click", args={"start_box": "[0.1,0.2,0.1,0.2]"}),
        CallRecord(name="drag", args={"start_box": "(0.5,0.5)", "end_box": "[0.2,0.4,0.4,0.6]"}),
        CallRecord(name="click", args={"start_box": "[512, 300, 512, 300]"}),  # not relative: not guessed
        CallRecord(name="finished", args={"content": "done"}),
    ]
    marks = action_marks(calls, None, (1000, 500))
    assert [m.name for m in marks] == ["click", "drag"]
    assert [v for p in marks[0].points for v in p] == pytest.approx([100.0, 100.0])
    assert [v for p in marks[1].points for v in p] == pytest.approx([500.0, 250.0, 300.0, 250.0])


def test_drawing_marks_where_the_action_landed():
    img = np.asarray(
        PILImage.open(io.BytesIO(draw_marks(blank(), action_marks(CALLS, "normalized", (200, 100)))))
    )
    red = (img[..., 0] > 180) & (img[..., 1] < 100)
    ys, xs = np.nonzero(red)
    assert red[25, 100 - 6 : 100 + 7].any()  # the ring around the click
    assert red[80, 170:181].any() or red[75:86, 180].any()  # the arrow head at the drag's end
    assert xs.min() >= 10 and not red[50, 190:].any()  # nothing drawn elsewhere
    assert marked(blank(), CALLS[3:4], "pixels") is None  # typing lands nowhere on the screen


def _gui_run(tmp_path: Path) -> tuple[Path, EpisodeRecord]:
    store = FrameStore(tmp_path)
    frame = store.put(Image(blank()))
    rec = EpisodeRecord(key="k1", model="scripted", env="canvas", surface="gui", mode="reference",
                        task_id="canvas-test-0007", coordinates="normalized", reward=0.5, frame0=frame,
                        turns=[TurnRecord(turn=1, frame=frame, calls=CALLS)])  # fmt: skip
    write_run_json(tmp_path, {"kind": "test"})
    TraceWriter(tmp_path).append(rec)
    return tmp_path, rec


def test_the_notebook_strip_shows_marked_frames(tmp_path):
    run, rec = _gui_run(tmp_path)
    plain = record_html(EpisodeRecord.from_dict({**rec.to_dict(), "turns": []}), run)
    shown = record_html(rec, run)
    assert shown.count("<img") == 1 and "turn 1" in shown and "turn 1" not in plain
    thumb = shown.split('src="data:image/jpeg;base64,')[1].split('"')[0]
    img = np.asarray(PILImage.open(io.BytesIO(base64.b64decode(thumb))).convert("RGB"))
    assert ((img[..., 0] > 150) & (img[..., 1] < 120)).any()  # the marks survive the thumbnail


def test_the_viewer_marks_a_step(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    run, rec = _gui_run(tmp_path)
    monkeypatch.setenv("EVALKIT_RUNS", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    for k, v in dict(view="episode", run=str(run), episode=rec.key, step="1").items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    captions = [c for img in at.image for c in img.captions]
    assert any("Frame at step 1" in c and "actions marked" in c for c in captions), captions
