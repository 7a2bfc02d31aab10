"""Properties the grader must keep: perfect copies score ~1, empty canvases low, damage lowers the score."""

import random
from dataclasses import replace

import pytest

from evalkit.envs.canvas.grade import grade_doc
from evalkit.envs.canvas.model import Doc
from evalkit.envs.canvas.tasks import generate_task

INDICES = [1, 2, 4, 5, 8, 11, 13, 21]
COMPONENTS = ("structure", "visual", "coverage", "order", "background", "total")


def _with(doc: Doc, elements) -> Doc:
    out = doc.copy()
    out.elements = list(elements)
    return out


@pytest.mark.parametrize("index", INDICES)
def test_target_scores_full_and_empty_scores_low(index):
    doc = generate_task("test", index).doc
    perfect = grade_doc(doc, doc)
    assert perfect["total"] >= 0.99
    assert perfect["n_matched"] == perfect["n_gt"] == perfect["n_submitted"]
    empty = grade_doc(doc, Doc(doc.width, doc.height))
    assert empty["total"] < 0.3
    for grade in (perfect, empty):
        assert all(0 <= grade[k] <= 1 for k in COMPONENTS)


def test_ids_do_not_matter_and_dicts_are_accepted():
    doc = generate_task("test", 2).doc
    renamed = _with(doc, [replace(e, id=f"x{i}") for i, e in enumerate(doc.elements)])
    assert grade_doc(doc.to_dict(), renamed.to_dict())["total"] >= 0.99


@pytest.mark.parametrize("index", [1, 2, 5])
def test_deleting_elements_lowers_the_score_monotonically(index):
    doc = generate_task("test", index).doc
    totals = [grade_doc(doc, _with(doc, doc.elements[:m]))["total"] for m in range(len(doc.elements), -1, -1)]
    assert all(b <= a + 0.02 for a, b in zip(totals, totals[1:], strict=False)), totals
    assert totals[0] - totals[-1] > 0.6


def test_shuffling_order_lowers_order():
    doc = next(t.doc for t in (generate_task("test", i) for i in range(50)) if len(t.doc.elements) >= 8)
    shuffled = list(reversed(doc.elements))
    grade = grade_doc(doc, _with(doc, shuffled))
    assert grade["order"] < 0.2 and grade["coverage"] == 1.0


@pytest.mark.parametrize("index", INDICES)
def test_small_jitter_keeps_a_high_score(index):
    doc = generate_task("test", index).doc
    rng = random.Random(index)
    jittered = [replace(e, x=e.x + rng.uniform(-3, 3), y=e.y + rng.uniform(-3, 3)) for e in doc.elements]
    grade = grade_doc(doc, _with(doc, jittered))
    assert grade["total"] >= 0.85 and grade["coverage"] == 1.0


def test_extra_junk_lowers_structure():
    doc = generate_task("test", 5).doc
    junk = [replace(e, id=f"j{i}", x=5 + 40 * i, y=5, fill="#00ff00") for i, e in enumerate(doc.elements[:4])]
    grade = grade_doc(doc, _with(doc, doc.elements + junk))
    assert grade["structure"] < 0.8 and grade["n_submitted"] == len(doc.elements) + 4
    assert grade["total"] < 0.99


def test_wrong_colours_and_background_cost():
    doc = generate_task("test", 4).doc
    recoloured = _with(
        doc, [replace(e, fill="#00ff00", stroke="#00ff00" if e.stroke else None) for e in doc.elements]
    )
    recoloured.background = "#000000"
    grade = grade_doc(doc, recoloured)
    assert grade["background"] < 0.5 and grade["total"] < 0.85


def test_cached_blank_canvas_grades_as_a_fresh_one():
    """The blank canvas a grade compares against is cached by size and background: a second task of the same
    size reuses it, and every grade equals the one worked out from scratch."""
    from evalkit.envs.canvas import grade

    tasks = [generate_task("test", i) for i in range(10)]
    subs = [Doc(t.doc.width, t.doc.height, t.doc.background, t.doc.elements[:1]) for t in tasks]
    cached = [grade_doc(t.doc, s) for t, s in zip(tasks, subs, strict=True)]
    for cache in (grade._targets, grade._blanks):
        cache._items.clear()
    blanks = {(t.doc.width, t.doc.height, t.doc.background) for t in tasks}
    grade._blanks.size = 0  # keeps nothing: every grade draws its blank canvas again
    try:
        fresh = [grade_doc(t.doc, s) for t, s in zip(tasks, subs, strict=True)]
    finally:
        grade._blanks.size = 64
    assert fresh == cached
    grade._targets._items.clear()
    for t, s in zip(tasks, subs, strict=True):
        grade_doc(t.doc, s)
    assert len(grade._blanks._items) == len(blanks) < len(tasks)
