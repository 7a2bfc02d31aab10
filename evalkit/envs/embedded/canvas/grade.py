"""Grading a submitted canvas against its target.

Elements are paired one-to-one by the Hungarian assignment on a similarity that mixes kind, geometry and
colour, so the grade does not depend on ids or on the order elements were added. The pixel comparison
(`visual`) is normalised by how far the target is from a blank canvas of its own background, so an empty
submission cannot earn most of it just because designs are mostly background.
"""

from __future__ import annotations

import difflib
import importlib.machinery
import importlib.util
import math
import sys
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path

import numpy as np
from PIL import ImageFilter

from .model import Doc, Element, hex_to_rgb
from .render import ContentCache, element_box, render_doc

MATCH_THRESHOLD = 0.5
VISUAL_SIZE = 160
WEIGHTS = {"structure": 0.35, "visual": 0.25, "coverage": 0.2, "order": 0.1, "background": 0.1}
COLOUR_SCALE = 100.0  # a CIELAB distance of 100 counts as entirely different colours


@cache
def matcher() -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """SciPy's `linear_sum_assignment`, loaded from its own compiled module where that is found: the
    `scipy.optimize` package, which the grade needs nothing else of, costs ~0.3 s of CPU to import (its
    linear programming, sparse linear algebra, FFT and special functions), in every env process, at the
    moment its first episodes run; the module alone under a millisecond. Where SciPy lays itself out
    otherwise, from the package."""
    loaded = sys.modules.get("scipy.optimize")
    if loaded is not None:
        return loaded.linear_sum_assignment
    spec = importlib.util.find_spec("scipy")
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent / "optimize"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"_lsap{suffix}"
            if path.is_file():
                try:
                    lsap = importlib.util.spec_from_file_location("scipy.optimize._lsap", path)
                    module = importlib.util.module_from_spec(lsap)
                    lsap.loader.exec_module(module)
                    return module.linear_sum_assignment
                except (ImportError, AttributeError):
                    break
    from scipy.optimize import linear_sum_assignment  # start-up: the whole of scipy.optimize, the last resort

    return linear_sum_assignment


def _linear(c: np.ndarray) -> np.ndarray:
    return np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)


_LINEAR = _linear(np.arange(256) / 255.0)
"""sRGB's 256 levels made linear once: the power per pixel was most of a grade's colour conversion."""


_XYZ = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
_WHITE = np.array([0.95047, 1.0, 1.08883])[:, None]


def _lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB (0–255, last axis 3) to CIELAB (D65), one plane per component: shape (3, pixels), pixels in
    order. Distances there track perceived colour difference.

    Planar because numpy loops over a last axis of 3 one pixel at a time, which was most of a grade's time;
    every value is the interleaved form's to the bit (the same matrix product, the same operations in the same
    order on each number), which tests/envs/test_canvas_grade.py holds against that form."""
    c = _LINEAR[np.asarray(rgb, dtype=np.intp).reshape(-1, 3)]
    xyz = np.empty((3, len(c)))
    np.divide((c @ _XYZ.T).T, _WHITE, out=xyz)
    f = np.cbrt(xyz)
    dark = xyz <= 0.008856
    f[dark] = 7.787 * xyz[dark] + 16 / 116
    lab = np.empty_like(f)
    np.multiply(f[1], 116, out=lab[0])
    lab[0] -= 16
    np.subtract(f[0], f[1], out=lab[1])
    lab[1] *= 500
    np.subtract(f[1], f[2], out=lab[2])
    lab[2] *= 200
    return lab


def _mean_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The mean CIELAB distance between the pixels of two planar images (`_lab`); the squares are summed in
    the order `np.linalg.norm(..., axis=-1)` sums an interleaved pixel's, so the mean is its to the bit."""
    d = a - b
    d *= d
    total = d[0] + d[1]
    total += d[2]
    return float(np.sqrt(total, out=total).mean())


@lru_cache(maxsize=4096)
def colour_similarity(a: str | None, b: str | None) -> float:
    """1 for equal colours, falling linearly to 0 at a CIELAB distance of COLOUR_SCALE; None is no paint.
    Cached: a grade compares every pair of elements, in colours of a small palette."""
    if a is None or b is None:
        return 1.0 if a == b else 0.3
    la, lb = _lab(np.array([hex_to_rgb(a), hex_to_rgb(b)])).T
    return max(0.0, 1.0 - float(np.linalg.norm(la - lb)) / COLOUR_SCALE)


def _iou(a: tuple, b: tuple) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else (1.0 if a == b else 0.0)


def _closeness(dist: float, diag: float) -> float:
    """1 at distance 0, 0 at a tenth of the canvas diagonal: forgives a few pixels, not misplacement."""
    return max(0.0, 1.0 - dist / (0.1 * diag))


def _geometry(gt: Element, sub: Element, diag: float) -> float:
    if gt.kind == "line" and sub.kind == "line":
        g = ((gt.x, gt.y), (gt.x + gt.width, gt.y + gt.height))
        s = ((sub.x, sub.y), (sub.x + sub.width, sub.y + sub.height))
        d = min(
            math.dist(g[0], s[0]) + math.dist(g[1], s[1]),
            math.dist(g[0], s[1]) + math.dist(g[1], s[0]),
        )
        return _closeness(d / 2, diag)
    a, b = element_box(gt), element_box(sub)
    corners = (math.dist(a[:2], b[:2]) + math.dist(a[2:], b[2:])) / 2
    return 0.5 * _iou(a, b) + 0.5 * _closeness(corners, diag)


def _paint(el: Element) -> tuple[str | None, str | None]:
    """(main colour, outline colour) as they appear: a stroke of width 0 is invisible."""
    if el.kind == "line":
        return el.stroke or el.fill or "#000000", None
    return el.fill, (el.stroke if el.stroke and el.stroke_width > 0 else None)


def element_similarity(gt: Element, sub: Element, diag: float) -> float:
    """Similarity in [0, 1] of two elements; 0 across kinds except rect/ellipse, which share half credit."""
    if gt.kind != sub.kind:
        kind = 0.5 if {gt.kind, sub.kind} == {"rect", "ellipse"} else 0.0
    else:
        kind = 1.0
    if not kind:
        return 0.0
    gm, go = _paint(gt)
    sm, so = _paint(sub)
    colour = 0.8 * colour_similarity(gm, sm) + 0.2 * colour_similarity(go, so)
    score = 0.6 * _geometry(gt, sub, diag) + 0.4 * colour
    if gt.kind == "text" and sub.kind == "text":
        words = difflib.SequenceMatcher(None, gt.text.strip().lower(), sub.text.strip().lower()).ratio()
        size = min(gt.font_size, sub.font_size) / max(gt.font_size, sub.font_size)
        score = 0.6 * score + 0.3 * words + 0.1 * size
    elif gt.kind == "rect" and sub.kind == "rect" and max(gt.radius, sub.radius) > 0:
        score = 0.9 * score + 0.1 * (1 - abs(gt.radius - sub.radius) / max(gt.radius, sub.radius))
    return kind * score


def _pixels(doc: Doc) -> np.ndarray:
    img = render_doc(doc, VISUAL_SIZE).filter(ImageFilter.GaussianBlur(1.0))
    return _lab(np.asarray(img))


_targets = ContentCache(64)  # ~0.5 MB each; jobs run task by task, so a few suffice
_blanks = ContentCache(64)
"""Blank canvases by size and background: a batch of new tasks shares a few, though each target is new."""


def _target_pixels(target: Doc) -> tuple[np.ndarray, float]:
    """The target's pixels and its distance from a blank canvas: the same for every episode of a task, so
    worked out once (two of the grade's three renders)."""
    tgt = _pixels(target)
    blank = _blanks.of(Doc(target.width, target.height, target.background, []), _pixels)
    return tgt, max(_mean_distance(tgt, blank), 0.25)


def prepare(target: Doc) -> tuple[np.ndarray, float]:
    """What a grade works out from the target alone (its pixels, their distance from a blank canvas), for
    `grade_doc(..., prepared=)`: ~2.4 ms of the ~4 ms a grade of a new task costs."""
    return _targets.of(target, _target_pixels)


def _visual(target: Doc, submitted: Doc, prepared: tuple[np.ndarray, float] | None) -> float:
    tgt, baseline = prepared if prepared is not None else prepare(target)
    canvas = Doc(target.width, target.height, submitted.background, submitted.elements)
    # An empty submission (a model that never drew, an untouched canvas submitted when time ran out) is a
    # blank canvas, already drawn for some target's baseline.
    sub = _pixels(canvas) if canvas.elements else _blanks.of(canvas, _pixels)
    err = _mean_distance(tgt, sub)
    return max(0.0, 1.0 - err / baseline)


def _box(e: Element) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = element_box(e)
    pad = e.stroke_width / 2  # a line, or an outline, covers half its stroke beyond its geometry
    return x0 - pad, y0 - pad, x1 + pad, y1 + pad


def _overlap(a: Element, b: Element) -> bool:
    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = _box(a), _box(b)
    return ax0 < bx1 and bx0 < ax1 and ay0 < by1 and by0 < ay1


def _order(pairs: list[tuple[int, int]], gt: list[Element]) -> float:
    """Fraction of the matched pairs whose target elements overlap that are stacked in the same relative order
    as in the target (concordance); 1.0 when no two matched elements overlap. Only where two elements overlap
    does their order show: counting every pair asked a model working from the picture for an order it
    cannot see (the tracer stacked 13 of 28 pairs as the target did on one sample task, and 3 of the 3 that
    overlap)."""
    ranked = sorted(pairs)
    total = concordant = 0
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            if _overlap(gt[ranked[i][0]], gt[ranked[j][0]]):
                total += 1
                concordant += ranked[i][1] < ranked[j][1]
    return concordant / total if total else 1.0


def grade_doc(
    target: Doc | dict, submitted: Doc | dict, prepared: tuple[np.ndarray, float] | None = None
) -> dict:
    """Grade `submitted` against `target`; every component and `total` is in [0, 1]. `prepared`: what
    `prepare(target)` gave, when it was worked out beforehand."""
    target = Doc.from_dict(target) if isinstance(target, dict) else target
    submitted = Doc.from_dict(submitted) if isinstance(submitted, dict) else submitted
    gt, sub = target.elements, submitted.elements
    diag = math.hypot(target.width, target.height)
    pairs: list[tuple[int, int]] = []
    sims: list[float] = []
    if gt and sub:
        sim = np.array([[element_similarity(g, s, diag) for s in sub] for g in gt])
        rows, cols = matcher()(-sim)
        for r, c in zip(rows, cols, strict=True):
            if sim[r, c] >= MATCH_THRESHOLD:
                pairs.append((int(r), int(c)))
                sims.append(float(sim[r, c]))
    denom = max(len(gt), len(sub))
    parts = {
        "structure": sum(sims) / denom if denom else 1.0,
        "visual": _visual(target, submitted, prepared),
        "coverage": len(pairs) / len(gt) if gt else 1.0,
        "order": _order(pairs, gt),
        "background": colour_similarity(target.background, submitted.background),
    }
    # Stacking order only means something for what was matched, so its weight scales with coverage; otherwise
    # an empty canvas would collect the order weight for free.
    total = sum(WEIGHTS[k] * v * (parts["coverage"] if k == "order" else 1.0) for k, v in parts.items())
    grade = {k: round(v, 4) for k, v in parts.items()}
    grade["total"] = round(min(1.0, max(0.0, total)), 4)
    grade.update(n_gt=len(gt), n_submitted=len(sub), n_matched=len(pairs))
    return grade
