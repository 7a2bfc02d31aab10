"""Properties the grader must keep: perfect copies score ~1, empty canvases low, damage lowers the score."""

import random
from dataclasses import replace

import numpy as np
import pytest

from evalkit.envs.embedded.canvas.grade import grade_doc
from evalkit.envs.embedded.canvas.model import Doc
from evalkit.envs.embedded.canvas.tasks import generate_task

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
    size reuses it, an empty submission is one, and every grade equals the one worked out from scratch."""
    from evalkit.envs.embedded.canvas import grade

    tasks = [generate_task("test", i) for i in range(10)]
    pairs = [(t, Doc(t.doc.width, t.doc.height, t.doc.background, t.doc.elements[:1])) for t in tasks]
    pairs += [
        (t, Doc(t.doc.width, t.doc.height, bg)) for t in tasks[:3] for bg in (t.doc.background, "#123456")
    ]
    subs = [s for _, s in pairs]
    cached = [grade_doc(t.doc, s) for t, s in pairs]
    for cache in (grade._targets, grade._blanks):
        cache.clear()
    grade._blanks.size = 0  # keeps nothing: every grade draws its blank canvases again
    try:
        fresh = [grade_doc(t.doc, s) for t, s in pairs]
    finally:
        grade._blanks.size = 64
    assert fresh == cached
    assert cached[-1]["total"] < cached[-2]["total"]  # a blank of the wrong colour is further off
    grade._targets.clear()
    for t, s in pairs:
        grade_doc(t.doc, s)
    blanks = {(t.doc.width, t.doc.height, t.doc.background) for t in tasks}
    blanks |= {(s.width, s.height, s.background) for s in subs if not s.elements}
    assert len(grade._blanks._items) == len(blanks) < len(pairs)


def _interleaved_lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB as the grader first worked it out, pixels × (L, a, b): the reference its planar form keeps."""
    from evalkit.envs.embedded.canvas.grade import _LINEAR

    c = _LINEAR[np.asarray(rgb, dtype=np.intp)]
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = c @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1
    )


def test_planar_colours_and_distances_are_the_interleaved_ones_to_the_bit():
    """The grade's visual part works on planes (`_lab`, `_mean_distance`) for speed; every value must stay the
    one the interleaved form gives, to the last bit, or a rerun's grades would drift from the first run's."""
    from PIL import ImageFilter

    from evalkit.envs.embedded.canvas import grade
    from evalkit.envs.embedded.canvas.render import render_doc

    def planar_as_interleaved(lab: np.ndarray, shape: tuple) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(lab.reshape(3, *shape[:2]), 0, -1))

    rng = np.random.default_rng(0)
    blur = ImageFilter.GaussianBlur(1)
    renders = [
        np.asarray(render_doc(generate_task("test", i).doc, grade.VISUAL_SIZE).filter(blur))
        for i in range(0, 300, 12)
    ]
    noise = [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(4)]  # 262,144 colours
    dark = [rng.integers(0, 24, (37, 53, 3), dtype=np.uint8)]  # CIELAB's linear segment, below its knee
    for img in renders + noise + dark:
        assert planar_as_interleaved(grade._lab(img), img.shape).tobytes() == _interleaved_lab(img).tobytes()
    pairs = [(a, b) for a, b in zip(renders, renders[1:], strict=False) if a.shape == b.shape]
    pairs.append((noise[0], noise[1]))
    assert len(pairs) >= 5
    for a, b in pairs:
        reference = float(np.linalg.norm(_interleaved_lab(a) - _interleaved_lab(b), axis=-1).mean())
        assert grade._mean_distance(grade._lab(a), grade._lab(b)) == reference
    for a, b in [("#1f77b4", "#ff7f0e"), ("#000000", "#010101"), ("#ffffff", "#f7f3e9")]:
        la, lb = _interleaved_lab(np.array([grade.hex_to_rgb(a), grade.hex_to_rgb(b)]))
        assert grade.colour_similarity(a, b) == max(0.0, 1.0 - float(np.linalg.norm(la - lb)) / 100.0)


MATCHER = """
import sys
import numpy as np
from evalkit.envs.embedded.canvas.grade import matcher
match = matcher()
print("scipy.optimize" in sys.modules)
rng = np.random.default_rng(7)
cases = [rng.random((n, m)).round(1) for n, m in [(1, 1), (3, 5), (6, 2), (8, 8), (12, 9)] for _ in range(20)]
mine = [match(-c) for c in cases]
from scipy.optimize import linear_sum_assignment  # the package's own, for comparison
theirs = [linear_sum_assignment(-c) for c in cases]
print(all(np.array_equal(a, b) for got, want in zip(mine, theirs) for a, b in zip(got, want)))
"""


def test_the_matcher_is_scipys_own_without_the_rest_of_its_optimize_package():
    # (rounded similarities: ties, which any other assignment solver could break another way)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", MATCHER], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_order_counts_only_elements_that_overlap():
    """Stacking shows only where two elements overlap: two apart, drawn in the other order, look the same
    and keep order 1.0; two overlapping, drawn in the other order, score 0. (All pairs counted, the tracer
    working from the picture lost order for stackings nobody could see.)"""
    from evalkit.envs.embedded.canvas.model import build_element

    a = build_element("a", "rect", x=10, y=10, width=50, height=50, fill="#ff0000")
    b = build_element("b", "rect", x=200, y=10, width=50, height=50, fill="#0000ff")
    c = build_element("c", "rect", x=30, y=30, width=50, height=50, fill="#00ff00")
    apart = _with(Doc(400, 300), [a, b])
    assert grade_doc(apart, _with(apart, [b, a]))["order"] == 1.0
    over = _with(Doc(400, 300), [a, c])
    assert grade_doc(over, _with(over, [c, a]))["order"] == 0.0
    assert grade_doc(over, over)["order"] == 1.0
