"""Shapes found in an image and the geometry that fits them: rect / rounded rect / ellipse masks, thin strokes
as lines, a region of one colour split into the two rects it is made of, collinear pieces of one line joined,
and the stacking order read from who shows where two shapes overlap."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw


@dataclass
class Shape:
    """A shape found in an image, in image pixels. For a line (x0, y0) → (x1, y1) are its endpoints."""

    kind: str
    x0: float
    y0: float
    x1: float
    y1: float
    fill: str | None = None
    stroke: str | None = None
    stroke_width: float = 0
    radius: float = 0
    text: str = ""
    font_size: float = 16
    glyphs: int = 0
    """For text: how many glyphs were found (sizes a placeholder when the words could not be read)."""
    area: int = 0
    label: int = -1
    mask: np.ndarray | None = field(default=None, repr=False)
    """Pixels the shape shows in the image (full-size boolean)."""
    model: np.ndarray | None = field(default=None, repr=False)
    """Pixels the fitted shape covers, visible or not (full-size boolean)."""

    @property
    def box(self) -> tuple[float, float, float, float]:
        return min(self.x0, self.x1), min(self.y0, self.y1), max(self.x0, self.x1), max(self.y0, self.y1)


def to_hex(rgb) -> str:
    r, g, b = (int(max(0, min(255, round(float(v))))) for v in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass
class _Comp:
    label: int
    sl: tuple
    mask: np.ndarray  # local, within sl
    area: int

    @property
    def box(self) -> tuple[int, int, int, int]:
        """Inclusive-exclusive pixel box (x0, y0, x1, y1)."""
        return self.sl[1].start, self.sl[0].start, self.sl[1].stop, self.sl[0].stop

    @property
    def h(self) -> int:
        return self.sl[0].stop - self.sl[0].start

    @property
    def w(self) -> int:
        return self.sl[1].stop - self.sl[1].start


def _solidity(c: _Comp) -> float:
    return c.area / (c.w * c.h)


def _line_params(c: _Comp) -> tuple[float, float, float, float, float] | None:
    """(x0, y0, x1, y1, width) if the component is a thin stroke, else None."""
    ys, xs = np.nonzero(c.mask)
    if len(xs) < 3:
        return None
    xs = xs + c.sl[1].start + 0.5
    ys = ys + c.sl[0].start + 0.5
    x0, y0, x1, y1 = c.box
    if min(c.w, c.h) <= 7 and max(c.w, c.h) >= 3 * min(c.w, c.h):
        t = min(c.w, c.h)
        if t >= 5 and max(c.w, c.h) < 30 and _solidity(c) > 0.85:
            return None  # a small filled rect is likelier than a short fat line
        # PIL centres a t-pixel stroke at offset (t - 1) // 2 and includes both end pixels.
        if c.w >= c.h:
            yc = y0 + (c.h - 1) // 2
            return x0, yc, x1 - 1, yc, c.area / c.w
        xc = x0 + (c.w - 1) // 2
        return xc, y0, xc, y1 - 1, c.area / c.h
    cov = np.cov(np.stack([xs, ys]))
    ev, vec = np.linalg.eigh(cov)
    minor, major = math.sqrt(max(ev[0], 0)) * math.sqrt(12), math.sqrt(max(ev[1], 0)) * math.sqrt(12)
    if minor > 8 or major < 4 * max(minor, 1):
        return None
    length = math.hypot(c.w, c.h)
    width = c.area / max(length, 1)
    if _solidity(c) > 0.5 or width > 8:
        return None
    # Diagonal strokes span their box corner to corner; which diagonal follows the sign of the covariance.
    inset = width / 2 * 0.7
    if cov[0, 1] >= 0:
        return x0 + inset, y0 + inset, x1 - inset, y1 - inset, width
    return x0 + inset, y1 - inset, x1 - inset, y0 + inset, width


def _ellipse_mask(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return (((xx + 0.5 - w / 2) / (w / 2)) ** 2 + ((yy + 0.5 - h / 2) / (h / 2)) ** 2) <= 1.0


def _round_rect_mask(h: int, w: int, r: float) -> np.ndarray:
    r = min(r, w / 2, h / 2)
    m = np.ones((h, w), bool)
    if r < 1:
        return m
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    cx = np.clip(xx, r, w - r)
    cy = np.clip(yy, r, h - r)
    return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r


def fit_solid(own: np.ndarray, known_out: np.ndarray) -> tuple[str, float, np.ndarray]:
    """Best of rect / rounded rect / ellipse for a component box: (kind, radius, mask). `own` marks the
    component's pixels, `known_out` pixels it surely does not cover (background); the rest may be occluded."""
    h, w = own.shape
    m = max(1, min(w, h) // 2)
    cands = [("rect", 0.0, np.ones((h, w), bool)), ("ellipse", 0.0, _ellipse_mask(h, w))]
    radii = set()
    for out in (known_out, ~own):
        corners = [out[:m, :m], out[:m, -m:], out[-m:, :m], out[-m:, -m:]]
        empty = float(np.median([c.sum() for c in corners]))
        r_est = math.sqrt(empty / (1 - math.pi / 4)) if empty > 0 else 0.0
        if r_est >= 1.5:
            radii.add(round(r_est))
    cands += [("rect", r, _round_rect_mask(h, w, r)) for r in sorted(radii)]
    # Pixels of other colours may hide the shape, but a shape whose every corner happens to be hidden is less
    # likely than one that does not reach there: they count a little against covering them.
    other = ~own & ~known_out
    best = None
    for kind, r, mask in cands:
        err = float((own & ~mask).sum() + (known_out & mask).sum() + 0.3 * (other & mask).sum())
        if kind == "ellipse":
            err += 0.02 * own.sum()  # prefer a rect on a tie (tiny shapes)
        if best is None or err < best[0]:
            best = (err, kind, r, mask)
    return best[1], best[2], best[3]


def _two_rects(own: np.ndarray, known_out: np.ndarray) -> list[tuple[int, int, int, int]] | None:
    """Two axis-aligned boxes (x0, y0, x1, y1, local) that together explain a region, or None."""
    may = ~known_out
    n_own = int(own.sum())
    if n_own < 200:
        return None
    cands: set[tuple[int, int, int, int]] = set()
    for axis in (0, 1):
        m, mm = (own, may) if axis == 0 else (own.T, may.T)
        rows = np.nonzero(m.any(1))[0]
        extents: dict[tuple[int, int], int] = {}
        for r in rows:
            xs = np.nonzero(m[r])[0]
            extents[(int(xs[0]), int(xs[-1]) + 1)] = extents.get((int(xs[0]), int(xs[-1]) + 1), 0) + 1
        for (a, b), _n in sorted(extents.items(), key=lambda kv: -kv[1])[:8]:
            full = mm[:, a:b].mean(1) >= 0.85  # rounded corners leave the end rows short
            seed = next((r for r in rows if m[r, a] and m[r, b - 1] and full[r]), None)
            if seed is None:
                continue
            lo = hi = seed
            while lo > 0 and full[lo - 1]:
                lo -= 1
            while hi + 1 < len(full) and full[hi + 1]:
                hi += 1
            cands.add((a, lo, b, hi + 1) if axis == 0 else (lo, a, hi + 1, b))
    best = None
    boxes = list(cands)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            cover = np.zeros(own.shape, bool)
            for x0, y0, x1, y1 in (boxes[i], boxes[j]):
                cover[y0:y1, x0:x1] = True
            got = int((own & cover).sum())
            if best is None or got > best[0]:
                best = (got, [boxes[i], boxes[j]])
    if best is None or best[0] < 0.97 * n_own or best[1][0] == best[1][1]:
        return None
    for x0, y0, x1, y1 in best[1]:
        if (x1 - x0) * (y1 - y0) < 0.1 * n_own:
            return None
    return best[1]


def _line_model(
    shape: tuple[int, int], x0: float, y0: float, x1: float, y1: float, width: float
) -> np.ndarray:
    """Pixels a line covers, hidden parts included (what is drawn over it shows where it passes under)."""
    img = Image.new("L", (shape[1], shape[0]), 0)
    ImageDraw.Draw(img).line([(x0, y0), (x1, y1)], fill=255, width=max(1, round(width)))
    return np.asarray(img) > 0


def _merge_lines(shapes: list[Shape]) -> list[Shape]:
    """Join collinear pieces of one colour: a line that passes under shapes shows as several segments."""
    lines = [s for s in shapes if s.kind == "line"]
    others = [s for s in shapes if s.kind != "line"]
    merged = True
    while merged:
        merged = False
        for i, a in enumerate(lines):
            for j in range(i + 1, len(lines)):
                b = lines[j]
                if a.label != b.label and _colour_dist(a.stroke, b.stroke) > 40:
                    continue
                joined = _collinear(a, b)
                if joined:
                    lines[i] = joined
                    del lines[j]
                    merged = True
                    break
            if merged:
                break
    # Shorter pieces are nearly always the frayed ends of outlines or glyphs, not drawn lines.
    return others + [s for s in lines if math.hypot(s.x1 - s.x0, s.y1 - s.y0) >= 10]


def _colour_dist(a: str | None, b: str | None) -> float:
    if not a or not b:
        return 999.0
    return float(np.linalg.norm(np.array([int(a[k : k + 2], 16) - int(b[k : k + 2], 16) for k in (1, 3, 5)])))


def _collinear(a: Shape, b: Shape) -> Shape | None:
    da = np.array([a.x1 - a.x0, a.y1 - a.y0], float)
    db = np.array([b.x1 - b.x0, b.y1 - b.y0], float)
    la, lb = np.linalg.norm(da), np.linalg.norm(db)
    if la < 1 or lb < 1:
        return None
    ua = da / la
    if abs(float(ua @ (db / lb))) < 0.99:
        return None
    normal = np.array([-ua[1], ua[0]])
    p0 = np.array([a.x0, a.y0])
    pts = [np.array(p) for p in ((a.x0, a.y0), (a.x1, a.y1), (b.x0, b.y0), (b.x1, b.y1))]
    t = [float((p - p0) @ ua) for p in pts]
    if max(abs(float((p - p0) @ normal)) for p in pts) > max(4.0, a.stroke_width, 0.03 * (max(t) - min(t))):
        return None
    lo, hi = pts[int(np.argmin(t))], pts[int(np.argmax(t))]
    mask = a.mask | b.mask
    return Shape(
        "line",
        float(lo[0]),
        float(lo[1]),
        float(hi[0]),
        float(hi[1]),
        stroke=a.stroke if la >= lb else b.stroke,
        stroke_width=max(a.stroke_width, b.stroke_width),
        area=a.area + b.area,
        label=a.label,
        mask=mask,
        model=mask | _line_model(mask.shape, lo[0], lo[1], hi[0], hi[1], max(a.stroke_width, b.stroke_width)),
    )


def _inside(a: tuple, b: tuple, slack: int = 1) -> bool:
    return a[0] >= b[0] - slack and a[1] >= b[1] - slack and a[2] <= b[2] + slack and a[3] <= b[3] + slack


def stack(shapes: list[Shape]) -> list[Shape]:
    """Order shapes bottom to top: where two fitted shapes overlap, the one whose pixels show there wins."""
    n = len(shapes)
    above: list[set[int]] = [set() for _ in range(n)]  # above[i] = shapes that must come after i
    indeg = [0] * n
    for i in range(n):
        for j in range(i + 1, n):
            a, b = shapes[i], shapes[j]
            ax0, ay0, ax1, ay1 = a.box
            bx0, by0, bx1, by1 = b.box
            if min(ax1, bx1) <= max(ax0, bx0) or min(ay1, by1) <= max(ay0, by0):
                continue
            ys = slice(int(max(ay0, by0)), int(math.ceil(min(ay1, by1))))
            xs = slice(int(max(ax0, bx0)), int(math.ceil(min(ax1, bx1))))
            a_shows = int((a.mask[ys, xs] & b.model[ys, xs]).sum())
            b_shows = int((b.mask[ys, xs] & a.model[ys, xs]).sum())
            if a_shows == b_shows:
                continue
            lo, hi = (j, i) if a_shows > b_shows else (i, j)
            if hi not in above[lo]:
                above[lo].add(hi)
                indeg[hi] += 1
    order: list[int] = []
    left = set(range(n))
    while left:
        ready = [i for i in left if indeg[i] == 0] or list(left)  # a cycle: fall back to size
        i = max(ready, key=lambda k: (shapes[k].kind != "text", shapes[k].area))
        order.append(i)
        left.discard(i)
        for k in above[i]:
            indeg[k] -= 1
    return [shapes[i] for i in order]
