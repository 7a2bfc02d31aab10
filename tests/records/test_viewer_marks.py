"""Where computer-use actions landed, drawn on frames: the marks, the notebook display and the viewer."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from evalkit.analysis.display import record_html
from evalkit.records.rundir import FrameStore, TraceWriter, write_run_json
from evalkit.records.viewer_marks import (
    acted_on,
    action_marks,
    acts_on_screens,
    draw_marks,
    has_marks,
    marked,
    space_of,
)
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


def test_each_released_own_loop_format_marks_the_same_point():
    """One click at (640, 200) of a 1280 × 800 screen, as each own-loop agent writes it (native runs record
    their space in `coordinates`; imports of seed 001 name the agent in `info`)."""
    size = (1280, 800)
    rw, rh = 1288, 812  # 1280 × 800 as Fara-7B's processor resizes it (28-pixel patches)
    click = CallRecord
    written = {
        "ui-tars": ([click(name="click", args={"start_box": "[0.5, 0.25, 0.5, 0.25]"})], None),
        "ui-tars native": ([click(name="left_single", args={"start_box": "(0.5,0.25)"})],
                           "qwen25vl-smart-resize"),
        "fara7b": ([click(name="left_click", args={"action": "left_click",
                                                    "coordinate": [640 * rw / 1280, 200 * rh / 800]})],
                   "fara-resized-pixels"),
        "molmoweb": ([click(name="click", args={"name": "click", "x": 50.0, "y": 25.0})], "percent"),
        "opencua": ([click(name="pyautogui.click", args={"code": "pyautogui.click(x=640, y=200)"})], None),
        "opencua native": ([click(name="click", args={"code": "pyautogui.click(640, 200)"})], "qwen25"),
        "dom solver": ([click(name="click", args={"x": 640, "y": 200})], "pixels"),
    }  # fmt: skip
    for who, (calls, space) in written.items():
        marks = action_marks(calls, space, size)
        assert len(marks) == 1, who
        assert marks[0].points[0] == pytest.approx((640.0, 200.0), abs=0.5), who
    # MolmoWeb's percentages read as pixels would land at (50, 25): the space decides.
    assert action_marks(written["molmoweb"][0], None, size)[0].points[0] == (50.0, 25.0)
    scroll = CallRecord(name="scroll", args={"code": "pyautogui.moveTo(300, 400)\npyautogui.scroll(-5)"})
    assert action_marks([scroll], "qwen25", size)[0].points[0] == (300.0, 400.0)
    typing = CallRecord(name="write", args={"code": "pyautogui.write('x, y')"})
    assert action_marks([typing], None, size) == [] and not has_marks([typing])


def test_the_space_of_an_imported_own_loop_episode_is_its_agents():
    rec = EpisodeRecord(info={"importer": "ownloop-gui", "agent": "molmoweb"})
    assert space_of(rec) == "percent" and space_of(EpisodeRecord(coordinates="normalized")) == "normalized"
    assert space_of(EpisodeRecord(info={"agent": "uitars"})) is None


def test_an_action_is_drawn_on_the_screen_before_it():
    turns = [TurnRecord(turn=i, frame=f"after{i}.png", calls=CALLS[:1]) for i in (1, 2, 3)]
    rec = EpisodeRecord(surface="gui", frame0="start.png", turns=turns)
    assert [acted_on(rec, n) for n in (1, 2, 3)] == ["start.png", "after1.png", "after2.png"]
    rec.turns[0].frame = None  # that screen was not kept: no other stands in for it
    assert acted_on(rec, 2) is None and acts_on_screens(rec)
    tools = EpisodeRecord(
        surface="tools", turns=[TurnRecord(calls=[CallRecord(name="add_element", args={"x": 1, "y": 2})])]
    )
    assert not acts_on_screens(tools)  # a canvas tool's x and y are not a point on a screen


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
    assert "Step 1: the screen it acted on · actions marked" in captions, captions
