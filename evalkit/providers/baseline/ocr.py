"""Text: grouping glyph-like components into lines, their ink and paper colours, and reading them by template
matching against the renderer's font (Pillow's bundled default font).

Glyphs are the connected components of the text's mask, merged when they share columns (the dot of an i);
each is compared with every character rendered at a candidate size, and the size whose best matches fit
best wins. Word gaps wider than a fraction of the size become spaces. Classical and small, good enough for
short labels; a word it cannot read still gets the right size and place.
"""

from __future__ import annotations

import string
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

from .shapes import _Comp, _solidity, to_hex

CHARSET = string.ascii_letters + string.digits + "&!?.,-'"


@lru_cache(maxsize=64)
def _templates(size: int) -> list[tuple[str, np.ndarray, int, np.ndarray]]:
    """(char, ink mask cropped to its box, top offset of the box from the text origin, the mask padded by
    one pixel and grown by one) per character."""
    font = ImageFont.load_default(size=size)
    out = []
    for ch in CHARSET:
        left, top, right, bottom = font.getbbox(ch)
        if right <= left or bottom <= top:
            continue
        img = Image.new("L", (right - left + 2, bottom - top + 2), 0)
        ImageDraw.Draw(img).text((-left + 1, -top + 1), ch, fill=255, font=font)
        a = np.asarray(img) >= 128
        ys, xs = np.nonzero(a)
        if not len(xs):
            continue
        m = a[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
        out.append((ch, m, top + ys.min() - 1, _grown(m)))
    return out


def glyphs(mask: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes (x0, y0, x1, y1) of the glyphs in a text mask, left to right."""
    lab, n = ndimage.label(mask, structure=np.ones((3, 3)))
    boxes = [
        (s[1].start, s[0].start, s[1].stop, s[0].stop) for s in ndimage.find_objects(lab) if s is not None
    ]
    boxes.sort()
    merged: list[list[int]] = []
    for b in boxes:
        if merged:
            m = merged[-1]
            overlap = min(m[2], b[2]) - max(m[0], b[0])
            if overlap >= 0.5 * min(m[2] - m[0], b[2] - b[0]):
                merged[-1] = [min(m[0], b[0]), min(m[1], b[1]), max(m[2], b[2]), max(m[3], b[3])]
                continue
        merged.append(list(b))
    return [tuple(m) for m in merged]


_GROW = np.ones((3, 3), bool)


def _grown(m: np.ndarray) -> np.ndarray:
    p = np.zeros((m.shape[0] + 2, m.shape[1] + 2), bool)
    p[1:-1, 1:-1] = m
    return ndimage.binary_dilation(p, _GROW)


def _iou(a: np.ndarray, ga: np.ndarray, b: np.ndarray, gb: np.ndarray) -> float:
    """Overlap of two glyph masks (with their grown versions) that forgives a pixel of stroke weight or
    placement (JPEG, rounding): pixels within one pixel of the other mask count, the rest count against."""
    h, w = min(a.shape[0], gb.shape[0] - 1), min(a.shape[1], gb.shape[1] - 1)
    a_hit = (a[:h, :w] & gb[1 : h + 1, 1 : w + 1]).sum()
    h2, w2 = min(b.shape[0], ga.shape[0] - 1), min(b.shape[1], ga.shape[1] - 1)
    b_hit = (b[:h2, :w2] & ga[1 : h2 + 1, 1 : w2 + 1]).sum()
    na, nb = a.sum(), b.sum()
    total = na + nb
    if not total:
        return 0.0
    hit = a_hit + b_hit
    return float((hit - 2 * (total - hit)) / total)


def _best(glyph: np.ndarray, top: int, origin: float | None, size: int) -> tuple[float, str, float]:
    """(score, char, implied text origin y) of the template that fits a glyph best at `size`."""
    best = (-1.0, "?", 0.0)
    gh, gw = glyph.shape
    if gh * gw == 0:
        return best
    g_grown = _grown(glyph)
    for ch, tmpl, t_top, t_grown in _templates(size):
        th, tw = tmpl.shape
        if abs(th - gh) > max(2, 0.25 * gh) or abs(tw - gw) > max(2, 0.35 * gw):
            continue
        score = _iou(glyph, g_grown, tmpl, t_grown)
        if origin is not None:
            score -= 0.05 * abs(top - t_top - origin)
        if score > best[0]:
            best = (score, ch, top - t_top)
    return best


def ink_mask(crop: np.ndarray, ink: np.ndarray, paper: np.ndarray) -> np.ndarray:
    """Pixels at least half covered by ink: the same 50% cut the templates get, so strokes weigh the same."""
    axis = ink.astype(np.float64) - paper
    t = ((crop.astype(np.float64) - paper) @ axis) / max(float(axis @ axis), 1e-9)
    return t >= 0.5


def read_text(mask: np.ndarray) -> tuple[str, int, float] | None:
    """(text, font size, mean match score) for a one-line text mask, or None when nothing matches."""
    boxes = glyphs(mask)
    if not boxes:
        return None
    y_top = min(b[1] for b in boxes)
    height = max(b[3] for b in boxes) - y_top
    result = None
    lo, hi = max(6, int(height / 1.05)), int(height / 0.45) + 2
    coarse = sorted({int(round(lo * (hi / lo) ** (k / 10))) for k in range(11)})
    tried: dict[int, tuple[str, int, float]] = {}
    for size in coarse:
        tried[size] = _read_at(mask, boxes, size)
    best = max(tried.values(), key=lambda r: r[2])
    for size in range(best[1] - 3, best[1] + 4):
        if size >= 4 and size not in tried:
            tried[size] = _read_at(mask, boxes, size)
    result = max(tried.values(), key=lambda r: r[2])
    return result if result[2] > 0.35 else None


def _read_at(mask: np.ndarray, boxes: list[tuple], size: int) -> tuple[str, int, float]:
    if True:
        chars, scores, origins = [], [], []
        for x0, y0, x1, y1 in boxes:
            origin = float(np.median(origins)) if origins else None
            score, ch, org = _best(mask[y0:y1, x0:x1], y0, origin, size)
            chars.append(ch)
            scores.append(max(score, 0.0))
            origins.append(org)
        return _join(chars, boxes, size), size, float(np.mean(scores))


def _join(chars: list[str], boxes: list[tuple], size: int) -> str:
    out = chars[0]
    for prev, box, ch in zip(boxes, boxes[1:], chars[1:], strict=False):
        out += (" " if box[0] - prev[2] > 0.28 * size else "") + ch
    return out


def _text_groups(comps: list[_Comp], max_h: int, pal: np.ndarray) -> list[list[_Comp]]:
    """Union glyph-like components of one colour that sit on a common line close to each other."""
    cand = [c for c in comps if c.h <= max_h and c.w <= max_h * 1.3 and c.area < max_h * max_h]
    parent = list(range(len(cand)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(cand):
        for j in range(i + 1, len(cand)):
            b = cand[j]
            # JPEG can split one ink into a core and a darker rim colour: glyphs of either belong together.
            if a.label != b.label and np.linalg.norm(pal[a.label] - pal[b.label]) > 60:
                continue
            ax0, ay0, ax1, ay1 = a.box
            bx0, by0, bx1, by1 = b.box
            hmax = max(a.h, b.h)
            gap_x = max(bx0 - ax1, ax0 - bx1)
            gap_y = max(by0 - ay1, ay0 - by1)
            overlap_y = min(ay1, by1) - max(ay0, by0)
            same_line = overlap_y >= 0.3 * min(a.h, b.h) and gap_x <= 0.75 * hmax
            dot = gap_x < 0 and gap_y <= 0.5 * hmax  # the dot of an i or j
            if same_line or dot:
                parent[find(i)] = find(j)
    groups: dict[int, list[_Comp]] = {}
    for i, c in enumerate(cand):
        groups.setdefault(find(i), []).append(c)
    out = []
    for g in groups.values():
        loose = sum(_solidity(c) < 0.7 for c in g)
        solid = float(np.mean([_solidity(c) for c in g]))
        if (len(g) >= 3 and solid < 0.72) or (len(g) == 2 and loose == 2):
            out.append(g)
    return out


def _ink_colour(img: np.ndarray, mask: np.ndarray, away_from: str) -> str:
    """Colour of thin strokes (1–2 px lines, anti-aliased glyphs): the pixels least mixed with background."""
    px = img[mask].astype(np.float64)
    bg = np.array([int(away_from[i : i + 2], 16) for i in (1, 3, 5)], np.float64)
    d = np.linalg.norm(px - bg, axis=1)
    keep = px[d >= np.quantile(d, 0.7)] if len(px) >= 6 else px
    return to_hex(np.median(keep, axis=0))


def _paper(img: np.ndarray, lab: np.ndarray, box: tuple, labels: set[int]) -> np.ndarray | None:
    """The colour around a text's glyphs: the background or the shape the text sits on."""
    H, W = lab.shape
    x0, y0, x1, y1 = max(0, box[0] - 2), max(0, box[1] - 2), min(W, box[2] + 2), min(H, box[3] + 2)
    around = ~np.isin(lab[y0:y1, x0:x1], list(labels))
    if not around.any():
        return None
    return np.median(img[y0:y1, x0:x1][around], axis=0)


def _read(img: np.ndarray, box: tuple, paper: np.ndarray, ink: str) -> str | None:
    """The text in `box`, read as the pixels nearer the ink than the paper."""
    H, W = img.shape[:2]
    x0, y0, x1, y1 = max(0, box[0] - 2), max(0, box[1] - 2), min(W, box[2] + 2), min(H, box[3] + 2)
    crop = img[y0:y1, x0:x1]
    ink_rgb = np.array([int(ink[i : i + 2], 16) for i in (1, 3, 5)], np.float64)
    found = read_text(ink_mask(crop, ink_rgb, paper))
    return found[0] if found else None
