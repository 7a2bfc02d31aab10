"""Classical segmentation of a flat design into shapes: no learning, only colour clusters, components and
moments.

The pipeline: find the palette from locally uniform pixels (JPEG noise and glyph anti-aliasing never form flat
patches), label every pixel with its nearest palette colour, take the dominant border colour as background,
split the rest into 8-connected components, group glyph-sized components of one colour into text, fit every
other component as a line (thin, elongated), or as the best of rect / rounded rect / ellipse (judged only on
pixels that are known: its own and the background's; pixels of other colours may be occluders), and finally
stack the shapes by who owns the pixels where two of them overlap.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .ocr import _ink_colour, _paper, _read, _text_groups
from .shapes import (
    Shape,
    _Comp,
    _inside,
    _line_model,
    _line_params,
    _merge_lines,
    _two_rects,
    fit_solid,
    stack,
    to_hex,
)

MAX_COLOUR_DIST = 70.0
MIN_PALETTE_PIXELS = 6
MERGE_DIST = 28.0


def _uniformity(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat, streak): `flat` pixels equal (within JPEG noise) to all eight neighbours — the body of a region;
    `streak` pixels equal to both neighbours along some direction — also the body of a thin line, but also
    the blended seam along an edge, so their colours count only when they are no blend of flat colours."""
    f = img.astype(np.int16)
    flat = np.ones(img.shape[:2], bool)
    streak = np.zeros(img.shape[:2], bool)
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        a = np.abs(np.roll(f, (dy, dx), (0, 1)) - f).max(-1) < 18
        b = np.abs(np.roll(f, (-dy, -dx), (0, 1)) - f).max(-1) < 18
        flat &= a & b
        streak |= a & b
    return flat, streak & ~flat


def _clusters(px: np.ndarray, min_count: int) -> tuple[list[np.ndarray], list[float]]:
    """Greedy colour clustering of pixels (n × 3) on a 32-level grid, biggest bins first."""
    if not len(px):
        return [], []
    q = (px // 8).astype(np.int64)
    keys = q[:, 0] * 1024 + q[:, 1] * 32 + q[:, 2]
    uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
    sums = np.zeros((len(uniq), 3))
    np.add.at(sums, inv.ravel(), px)
    means = sums / counts[:, None]
    centres: list[np.ndarray] = []
    weights: list[float] = []
    for i in np.argsort(-counts):
        if counts[i] < 2:
            break
        c = means[i]
        if centres:
            d = np.linalg.norm(np.array(centres) - c, axis=1)
            j = int(d.argmin())
            if d[j] < MERGE_DIST:
                w = weights[j]
                centres[j] = (centres[j] * w + c * counts[i]) / (w + counts[i])
                weights[j] = w + counts[i]
                continue
        centres.append(c.copy())
        weights.append(float(counts[i]))
    keep = [k for k, w in enumerate(weights) if w >= min_count]
    return [centres[k] for k in keep], [weights[k] for k in keep]


def _is_blend(c: np.ndarray, pal: list[np.ndarray], tol: float = 26.0) -> bool:
    for i in range(len(pal)):
        for j in range(i + 1, len(pal)):
            a, b = pal[i], pal[j]
            ab = b - a
            t = float(np.dot(c - a, ab) / max(float(np.dot(ab, ab)), 1e-9))
            if 0.05 < t < 0.95 and np.linalg.norm(a + t * ab - c) < tol:
                return True
    return False


def palette(img: np.ndarray) -> np.ndarray:
    """The design's flat colours (k × 3 float), most frequent first."""
    flat, streak = _uniformity(img)
    pal, _ = _clusters(img[flat].astype(np.float64), 12)
    if not pal:
        return np.array([img.reshape(-1, 3).astype(np.float64).mean(0)])
    extra, _ = _clusters(img[streak].astype(np.float64), MIN_PALETTE_PIXELS)
    for c in extra:
        if min(np.linalg.norm(p - c) for p in pal) >= MERGE_DIST and not _is_blend(c, pal):
            pal.append(c)
    return np.array(pal)


def label_pixels(img: np.ndarray, pal: np.ndarray) -> np.ndarray:
    """Nearest-palette label per pixel; pixels far from every colour take the nearest labelled one's label."""
    f = img.reshape(-1, 3).astype(np.float32)
    p = pal.astype(np.float32)
    d2 = (f * f).sum(1)[:, None] - 2 * f @ p.T + (p * p).sum(1)[None, :]
    lab = d2.argmin(-1).reshape(img.shape[:2])
    far = (d2.min(-1) > MAX_COLOUR_DIST**2).reshape(img.shape[:2])
    if far.any() and not far.all():
        idx = ndimage.distance_transform_edt(far, return_distances=False, return_indices=True)
        lab = lab[idx[0], idx[1]]
    # Lone pixels (JPEG speckle) join their neighbours; one-pixel lines keep two same-label neighbours.
    same = np.zeros(lab.shape, np.int8)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if dy or dx:
                same += np.roll(lab, (dy, dx), (0, 1)) == lab
    lone = same == 0
    if lone.any():
        lab = np.where(lone, ndimage.median_filter(lab, size=3), lab)
    return lab


def background_label(lab: np.ndarray) -> int:
    border = np.concatenate([lab[0], lab[-1], lab[:, 0], lab[:, -1]])
    return int(np.bincount(border).argmax())


def components(lab: np.ndarray, bg: int, min_area: int = 4) -> list[_Comp]:
    out = []
    for k in np.unique(lab):
        if k == bg:
            continue
        cc, n = ndimage.label(lab == k, structure=np.ones((3, 3)))
        for i, sl in enumerate(ndimage.find_objects(cc), 1):
            if sl is None:
                continue
            m = cc[sl] == i
            a = int(m.sum())
            if a >= min_area:
                out.append(_Comp(int(k), sl, m, a))
    return out


def _distinct(lab: np.ndarray) -> np.ndarray:
    """How many different labels each pixel's 3 × 3 neighbourhood holds."""
    distinct = np.zeros(lab.shape, np.int8)
    for k in np.unique(lab):
        distinct += ndimage.maximum_filter(lab == k, size=3)
    return distinct


def _absorb(lab: np.ndarray, c: _Comp) -> None:
    """Relabel a component's pixels with the label most common around it."""
    y0, x0 = max(0, c.sl[0].start - 1), max(0, c.sl[1].start - 1)
    sl = (slice(y0, c.sl[0].stop + 1), slice(x0, c.sl[1].stop + 1))
    own = np.zeros(lab[sl].shape, bool)
    own[c.sl[0].start - y0 : c.sl[0].stop - y0, c.sl[1].start - x0 : c.sl[1].stop - x0] = c.mask
    ring = ndimage.binary_dilation(own, np.ones((3, 3))) & ~own
    around = lab[sl][ring]
    around = around[around != c.label]
    if len(around):
        sub = lab[sl]
        sub[own] = np.bincount(around).argmax()


def _artefact(c: _Comp, img: np.ndarray, pal: np.ndarray, distinct: np.ndarray) -> bool:
    """A seam of blended pixels along the boundary of two regions (JPEG, anti-aliasing), not a drawn shape:
    its pixels touch two other colours at once, or their colour is far from the palette colour they took."""
    seam = float((distinct[c.sl][c.mask] >= 3).mean())
    if seam > 0.5:
        return True
    # Anti-aliased glyphs are mostly blended too, but their best pixels reach the ink colour; a seam's don't.
    d = np.linalg.norm(img[c.sl][c.mask].astype(np.float64) - pal[c.label], axis=1)
    return float(np.quantile(d, 0.2)) > 40


def _median_colour(img: np.ndarray, mask: np.ndarray, sl: tuple | None = None) -> str:
    """Colour of a region: the median of its interior, which JPEG ringing and blended edges do not reach."""
    if sl is None:
        found = ndimage.find_objects(mask.astype(np.int8))
        sl = found[0] if found and found[0] else (slice(0, mask.shape[0]), slice(0, mask.shape[1]))
    sub, m = img[sl], mask[sl]
    core = ndimage.binary_erosion(m)
    sel = core if core.sum() >= 4 else m
    return to_hex(np.median(sub[sel], axis=0))


def _paste(shape: tuple[int, int], sl: tuple, local: np.ndarray) -> np.ndarray:
    full = np.zeros(shape, bool)
    full[sl] = local
    return full


def segment(img: np.ndarray) -> tuple[str, list[Shape]]:
    """Background colour and the shapes of an RGB image (H × W × 3 uint8), bottom to top."""
    pal = palette(img)
    lab = label_pixels(img, pal)
    bg = background_label(lab)
    bg_hex = _median_colour(img, lab == bg)
    comps = _whole_components(img, lab, bg, pal)
    shapes, used = _text_shapes(img, lab, comps, pal, bg_hex)
    rest = [c for c in comps if id(c) not in used]
    rings: set[int] = set()  # fills seen inside an outline: drawn by the outline's own shape
    for c in rest:
        shapes += _component_shapes(img, lab, bg, bg_hex, c, rest, rings)
    shapes = [s for s in shapes if getattr(s, "_comp_id", None) not in rings]
    return bg_hex, stack(_merge_lines(shapes))


def _whole_components(img: np.ndarray, lab: np.ndarray, bg: int, pal: np.ndarray) -> list[_Comp]:
    """The regions of `lab` other than the background, once artefacts are merged away (`lab` is edited)."""
    for limit in (12, 40, None):
        # Blended seams and anti-aliasing fragments join the region they border most, which makes glyphs
        # and shape edges whole again; smallest first, so a glyph is not judged by the fragments around it.
        distinct = _distinct(lab)
        comps = components(lab, bg, min_area=1)
        bad = [c for c in comps if (limit is None or c.area <= limit) and _artefact(c, img, pal, distinct)]
        for c in bad:
            _absorb(lab, c)
    distinct = _distinct(lab)
    return [c for c in components(lab, bg) if not _artefact(c, img, pal, distinct)]


def _text_shapes(
    img: np.ndarray, lab: np.ndarray, comps: list, pal: np.ndarray, bg_hex: str
) -> tuple[list[Shape], set[int]]:
    """A text shape per group of glyph-like regions, and the ids of the regions they took."""
    H, W = lab.shape
    shapes: list[Shape] = []
    used: set[int] = set()
    for g in _text_groups(comps, max(12, min(80, H // 6)), pal):
        used.update(id(c) for c in g)
        mask = np.zeros((H, W), bool)
        for c in g:
            mask[c.sl] |= c.mask
        ys, xs = np.nonzero(mask)
        x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
        paper = _paper(img, lab, (x0, y0, x1, y1), {c.label for c in g})
        ink = _ink_colour(img, mask, to_hex(paper) if paper is not None else bg_hex)
        text = (_read(img, (x0, y0, x1, y1), paper, ink) if paper is not None else None) or ""
        shapes.append(
            Shape("text", x0, y0, x1, y1, fill=ink, area=int(mask.sum()), label=g[0].label, mask=mask,
                  model=mask, text=text, glyphs=len(g))
        )  # fmt: skip
    return shapes, used


def _component_shapes(
    img: np.ndarray, lab: np.ndarray, bg: int, bg_hex: str, c: _Comp, rest: list, rings: set[int]
) -> list[Shape]:
    """The shapes one region reads as: a line, a solid (rect, rounded rect, ellipse) with its outline if it
    has one, two overlapping rects of one colour, or none when it is too small to say."""
    H, W = lab.shape
    line = _line_params(c)
    mask = _paste((H, W), c.sl, c.mask)
    if line:
        x0, y0, x1, y1, width = line
        colour = _ink_colour(img, mask, bg_hex) if width <= 2.5 else _median_colour(img, mask, c.sl)
        model = mask | _line_model((H, W), x0, y0, x1, y1, width)
        return [Shape("line", x0, y0, x1, y1, stroke=colour, stroke_width=max(1, round(width)), area=c.area,
                      label=c.label, mask=mask, model=model)]  # fmt: skip
    if c.area < 10 or min(c.w, c.h) < 3:
        return []
    filled = ndimage.binary_fill_holes(c.mask)
    outline = _outline(img, lab, c, mask, filled, rest, rings=rings, bg_hex=bg_hex)
    if outline:
        stroke, sw, fill = outline
        own, vis = filled, _paste((H, W), c.sl, filled)
    else:
        stroke, sw = None, 0
        fill, own, vis = _median_colour(img, mask, c.sl), c.mask, mask
    known_out = lab[c.sl] == bg
    if stroke:
        known_out = known_out & ~filled
    kind, radius, local = fit_solid(own, known_out)
    x0, y0, x1, y1 = c.box
    misfit = float((own & ~local).sum() + (known_out & local).sum())
    pair = _two_rects(own, known_out) if not stroke and misfit > 0.04 * own.sum() else None
    if pair:
        # Two overlapping shapes of one colour read as one region: split it into the two rects.
        out = []
        for bx0, by0, bx1, by1 in pair:
            box = np.zeros(own.shape, bool)
            box[by0:by1, bx0:bx1] = True
            model = _paste((H, W), c.sl, box)
            out.append(Shape("rect", x0 + bx0, y0 + by0, x0 + bx1, y0 + by1, fill=fill, area=int(box.sum()),
                             label=c.label, mask=vis & model, model=model))  # fmt: skip
        return out
    model = _paste((H, W), c.sl, local)
    shape = Shape(kind, x0, y0, x1, y1, fill=fill, stroke=stroke, stroke_width=sw, radius=radius,
                  area=int(own.sum()), label=c.label, mask=vis, model=model)  # fmt: skip
    shape._comp_id = id(c)  # type: ignore[attr-defined]
    return [shape]


def _outline(
    img: np.ndarray, lab: np.ndarray, c: _Comp, mask: np.ndarray, filled: np.ndarray, rest: list, *,
    rings: set[int], bg_hex: str,
) -> tuple[str, int, str] | None:  # fmt: skip
    """(stroke, stroke width, fill) when region `c` is an outline (a thin ring around most of its box), the
    regions of its fill colour inside it added to `rings`; None otherwise."""
    H, W = lab.shape
    hole = filled & ~c.mask
    ring_w = c.area / max(1, 2 * (c.w + c.h))
    hy, hx = np.nonzero(hole)
    if not (
        len(hy)
        and ring_w <= 6
        and hole.sum() > 0.3 * filled.sum()
        and hx.max() - hx.min() + 1 >= c.w - 4 * ring_w - 2
        and hy.max() - hy.min() + 1 >= c.h - 4 * ring_w - 2
    ):
        return None
    # An outline: its inside shows the fill colour (or the background when the fill matches it).
    fill_label = int(np.bincount(lab[c.sl][hole]).argmax())
    stroke = _median_colour(img, mask, c.sl)
    inside = _paste((H, W), c.sl, hole & (lab[c.sl] == fill_label))
    fill = _median_colour(img, inside) if inside.sum() else bg_hex
    for o in rest:
        if o is not c and o.label == fill_label and _inside(o.box, c.box):
            rings.add(id(o))
    return stroke, max(1, round(ring_w)), fill
