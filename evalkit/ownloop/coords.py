"""Coordinate spaces of the open GUI models and the way back to page pixels.

Qwen2.5-VL models (UI-TARS-1.5, OpenCUA-7B with `coordinate_type qwen25`) point in the pixels of the image
they were given after the processor's smart resize: both sides rounded to multiples of 28, the area kept
between 100·28·28 and 16384·28·28 pixels. The UI-TARS parser turns those into fractions of the resized
image, which map back to the page at the page's size.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence

FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_RATIO = 200


def smart_resize(
    height: int, width: int, factor: int = FACTOR, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS
) -> tuple[int, int]:
    """(height, width) of the image a Qwen2.5-VL processor makes of one `height` × `width`."""
    if min(height, width) <= 0 or max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"cannot resize a {width} x {height} image (aspect ratio over {MAX_RATIO})")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def to_smart(x: float, y: float, width: int, height: int) -> tuple[int, int]:
    """A page point → the integer point a Qwen2.5-VL model would name for it in the resized screenshot."""
    h, w = smart_resize(height, width)
    return round(x * w / width), round(y * h / height)


def box_centre(box: str | Sequence[float], width: int, height: int) -> tuple[float, float]:
    """The middle of a parsed box — `"[x1, y1, x2, y2]"` as fractions of the image — in page pixels."""
    values = ast.literal_eval(box) if isinstance(box, str) else box
    if not isinstance(values, list | tuple) or len(values) not in (2, 4):
        raise ValueError(f"not a box: {box!r}")
    x1, y1, x2, y2 = (list(values) * 2)[:4] if len(values) == 2 else values
    return round((float(x1) + float(x2)) / 2 * width, 3), round((float(y1) + float(y2)) / 2 * height, 3)


def fit_pixels(
    width: int, height: int, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS
) -> tuple[int, int]:
    """The size UI-TARS's own loop resizes a screenshot to before sending it (unchanged when its area is
    already within [min_pixels, max_pixels], as it is at every viewport used here)."""
    if width * height > max_pixels:
        f = math.sqrt(max_pixels / (width * height))
        return int(width * f), int(height * f)
    if width * height < min_pixels:
        f = math.sqrt(min_pixels / (width * height))
        return math.ceil(width * f), math.ceil(height * f)
    return width, height
