"""Deterministic PIL rendering of a canvas document at any size.

Drawing happens directly at the output scale (not render-then-resize) so the grader's small renders are cheap
and every size of the same document looks the same up to resolution.
"""

from __future__ import annotations

import base64
import io
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .model import Doc, Element

try:  # ISA-L's deflate: ~15 times as fast as the standard library's on a frame
    from isal import isal_zlib
except ImportError:  # (it has wheels wherever evalkit runs; without it the standard library deflates)
    isal_zlib = None


class Cache:
    """The most recently used values by key: at most `size` of them and, given `weigh`, at most `budget` of
    their weight in all. Thread-safe: HTTP routes and tools of many sessions share one (two that miss the same
    key at once both make its value, an equal one)."""

    def __init__(self, size: int = 512, weigh: Callable[[Any], int] | None = None, budget: int = 0):
        self.size, self.weigh, self.budget = size, weigh, budget
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self._weight += self.weigh(value) if self.weigh else 0
            while self._items and (len(self._items) > self.size or self.weigh and self._weight > self.budget):
                _, old = self._items.popitem(last=False)
                self._weight -= self.weigh(old) if self.weigh else 0
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0


class _Font(ImageFont.FreeTypeFont):
    """The bundled font, its text masks kept (`_masks`): Pillow lays a text out (libraqm) and rasterises it
    (FreeType) on every draw, 0.1–0.5 ms a word, and renders draw the same words at the same sizes again and
    again (every frame of an episode redraws every text on its canvas). A mask is what `getmask2` gives for
    exactly its arguments; the ink only colours a mask in RGBA mode (colour fonts), which is not kept."""

    def getmask2(
        self,
        text: Any,
        mode: str = "",
        direction: str | None = None,
        features: list[str] | None = None,
        language: str | None = None,
        stroke_width: float = 0,
        anchor: str | None = None,
        ink: int = 0,
        start: tuple[float, float] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[Any, tuple[int, int]]:
        def make() -> tuple[Any, tuple[int, int]]:
            return super(_Font, self).getmask2(
                text, mode, direction, features, language, stroke_width, anchor, ink, start, *args, **kwargs
            )

        if mode != "L" or args or not isinstance(text, str):
            return make()
        features_key = None if features is None else tuple(features)
        key = (self.size, text, direction, features_key, language, stroke_width, anchor, start,
               tuple(sorted(kwargs.items())))  # fmt: skip
        return _masks.get(key, make)


@lru_cache(maxsize=256)
def font(size: int) -> ImageFont.FreeTypeFont:
    """The bundled default font at an integer pixel size (cached: loading it is the slow part of text)."""
    bundled = ImageFont.load_default(size=max(1, size))
    return _Font(io.BytesIO(bundled.font_bytes), bundled.size, layout_engine=bundled.layout_engine)


@lru_cache(maxsize=4096)
def glyph_box(size: int, text: str) -> tuple[int, int, int, int]:
    """The box `text` occupies at a font size, relative to where it is drawn (cached: FreeType lays the text
    out for each measure, and tasks, grades and renders measure the same words again and again)."""
    return font(size).getbbox(text)


_masks = Cache(4096, weigh=lambda mask: mask[0].size[0] * mask[0].size[1], budget=32 << 20)
"""Text masks (`_Font`), at most 32 MB of them."""


def text_box(el: Element) -> tuple[float, float, float, float]:
    """The pixel box a text element's glyphs occupy, measured rather than taken from width/height."""
    left, top, right, bottom = glyph_box(round(el.font_size), el.text or " ")
    return el.x + left, el.y + top, el.x + max(right, left + 1), el.y + max(bottom, top + 1)


def element_box(el: Element) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) with x0 <= x1: the region an element covers, in pixels."""
    if el.kind == "text":
        return text_box(el)
    x0, x1 = sorted((el.x, el.x + el.width))
    y0, y1 = sorted((el.y, el.y + el.height))
    return x0, y0, x1, y1


def output_size(doc: Doc, size: int | None) -> tuple[int, int, float]:
    """Pixel size of a render whose longest side is `size` (None = the canvas size), and its scale."""
    if not size:
        return doc.width, doc.height, 1.0
    scale = size / max(doc.width, doc.height)
    return max(1, round(doc.width * scale)), max(1, round(doc.height * scale)), scale


def render_doc(doc: Doc | dict, size: int | None = None) -> Image.Image:
    """Render a document to an RGB image whose longest side is `size` pixels (default: canvas size)."""
    if isinstance(doc, dict):
        doc = Doc.from_dict(doc)
    w, h, s = output_size(doc, size)
    img = Image.new("RGB", (w, h), doc.background)
    draw = ImageDraw.Draw(img)
    for el in doc.elements:
        _draw(draw, el, s)
    return img


def _width(value: float, s: float) -> int:
    return max(1, round(value * s)) if value > 0 else 0


def _draw(draw: ImageDraw.ImageDraw, el: Element, s: float) -> None:
    if el.kind == "line":
        pts = [(el.x * s, el.y * s), ((el.x + el.width) * s, (el.y + el.height) * s)]
        draw.line(pts, fill=el.stroke or el.fill or "#000000", width=_width(el.stroke_width, s) or 1)
        return
    if el.kind == "text":
        draw.text(
            (el.x * s, el.y * s), el.text, fill=el.fill or "#000000", font=font(round(el.font_size * s))
        )
        return
    x0, y0, x1, y1 = (v * s for v in element_box(el))
    if x1 - x0 < 0.5 or y1 - y0 < 0.5:
        return
    sw = _width(el.stroke_width, s) if el.stroke else 0
    outline = el.stroke if sw else None
    box = (x0, y0, x1, y1)
    if el.kind == "ellipse":
        draw.ellipse(box, fill=el.fill, outline=outline, width=sw or 1)
    elif el.radius > 0:
        r = min(el.radius * s, (x1 - x0) / 2, (y1 - y0) / 2)
        try:
            draw.rounded_rectangle(box, radius=r, fill=el.fill, outline=outline, width=sw or 1)
        except ValueError:
            # Pillow (12.3) refuses an outlined box a few pixels wide at fractional coordinates ("x1 must be
            # greater than or equal to x0"); at that size the corners' rounding is invisible anyway.
            draw.rectangle(box, fill=el.fill, outline=outline, width=sw or 1)
    else:
        draw.rectangle(box, fill=el.fill, outline=outline, width=sw or 1)


def encode(img: Image.Image, fmt: str = "PNG", quality: int = 90) -> bytes:
    """Encode an image as PNG or JPEG bytes."""
    if fmt.upper() not in ("JPG", "JPEG"):
        return png(img)
    buf = io.BytesIO()
    # convert() copies even an RGB image (every render is one): a third of a target's encode
    (img if img.mode == "RGB" else img.convert("RGB")).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def png(img: Image.Image) -> bytes:
    """An image as PNG. An RGB one (every render) is written here: each row as its difference from the row
    above (PNG's "up" filter: a design of flat shapes is zeros but for its edges), deflated with ISA-L.
    Pillow tries all five filters on every row and deflates with zlib: ~6 ms of CPU for a 640 × 640 frame,
    the env's largest cost in a turn that changes the canvas, against ~0.9 ms here (~3 ms with the standard
    library's deflate), for a file about 1.7 times the size (~12 KiB against ~6). The pixels are the same."""
    if img.mode != "RGB":
        buf = io.BytesIO()
        img.save(buf, "PNG")
        return buf.getvalue()
    width, height = img.size
    rows = np.asarray(img).reshape(height, width * 3)
    lines = np.empty((height, width * 3 + 1), np.uint8)
    lines[:, 0] = 2  # each line's filter: up (the first line's is its own bytes: the line above is zeros)
    lines[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=lines[1:, 1:])  # modulo 256, as the filter is defined
    if isal_zlib is not None:
        data = isal_zlib.compress(lines, isal_zlib.ISAL_DEFAULT_COMPRESSION)
    else:
        z = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS, 9, zlib.Z_RLE)
        data = z.compress(lines) + z.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, filtered, whole
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


class ContentCache(Cache):
    """What was worked out from a document, kept by the document's content (its full-precision repr) for
    the most recent `size` documents."""

    def of(self, doc: Doc, make: Callable[[Doc], Any], *key: Any) -> Any:
        return self.get((repr(doc), *key), lambda: make(doc))


_encoded = ContentCache()


def png_of(doc: Doc, size: int | None = None) -> bytes:
    """The document rendered as PNG, cached by its content: an episode's frames repeat (a submit changes
    nothing, every empty canvas of a size and background looks the same), and encoding is the env's
    largest cost per frame."""
    return _encoded.of(doc, lambda d: encode(render_doc(d, size)), size, "PNG")


def jpeg_b64_of(doc: Doc) -> str:
    """The document's render as base64 JPEG, the form a reference image travels in over the reset metadata;
    cached by its content (every episode of a task sends it)."""
    return _encoded.of(doc, lambda d: base64.b64encode(encode(render_doc(d), "JPEG")).decode("ascii"), "JPEG")
