"""EpisodeStepper against the real embedded canvas env with the offline tracer."""

from __future__ import annotations

import pytest

from evalkit.stepper import EpisodeStepper


def test_step_edit_inject_and_finish(canvas_server):
    st = EpisodeStepper("baseline:tracer", canvas_server, task="canvas-test-0007", max_turns=8)
    meta = st.reset()
    assert meta["task_id"] == "canvas-test-0007" and st.system and st.target is not None
    assert st.sent[0]["kind"] == "user" and st.sent[0]["images"]
    with pytest.raises(RuntimeError):
        st.execute()
    s = st.step(execute=False)
    assert s.turn.calls and not s.pairs and st.pending is not None
    first = s.turn.calls[0]
    args = dict(first.args)
    if "color" in args:
        args["color"] = "#123456"
    st.edit(0, args=args)
    with pytest.raises(RuntimeError):
        st.step()
    s = st.execute()
    assert len(s.pairs) == len(s.turn.calls) and s.frame is not None
    assert st.sent[-1]["kind"] == "results"
    op = st.call("get_document")
    assert op.operator and "#123456" in op.pairs[0][1].text or "color" not in args
    assert st.sent[-1]["kind"] == "user" and st.sent[-1]["text"].startswith("[operator]")
    assert "<img" in s._repr_html_()
    st.run()
    if st.reward is None:
        st.submit()
    assert st.reward is not None and 0 <= st.reward <= 1 and "total" in st.grade
    assert st.frame.size == (800, 600)
    st.close()
