"""The image budget: which images of a conversation history still travel to the model.

Each adapter keeps its history as plain wire-format dicts; these helpers find the image blocks in it (in
the order the model reads them) and swap the oldest for a short text placeholder. Two policies:

- `keep` only (`--keep-images N`): at most N images, counting the opening message. Pruning drops a batch
  (down to N - N//4) so the prompt prefix, and with it the server's cache, is rewritten only every few turns.
- `window` (`--image-window MAX,KEEP`): the opening message (the target image) is never touched; later
  images build up to MAX, then drop to the newest KEEP. Everything before the first dropped image is a
  stable prefix.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from evalkit.types import Image

PLACEHOLDER = "[an older image was removed here to save context]"

Slot = tuple[list, int]
"""An image block as (the list holding it, its index there)."""


def find_images(node: Any, is_image: Callable[[dict], bool]) -> list[Slot]:
    """Every image block under `node`, in reading order."""
    found: list[Slot] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                if isinstance(v, (list, dict)):
                    walk(v)
        elif isinstance(x, list):
            for i, item in enumerate(x):
                if isinstance(item, dict) and is_image(item):
                    found.append((x, i))
                else:
                    walk(item)

    walk(node)
    return found


def to_drop(live: int, keep: int, window: int | None = None) -> int:
    """How many of the oldest `live` images to drop now under the policy above."""
    keep = max(0, keep)
    if window is not None:
        return live - keep if live > window else 0
    if live <= keep:
        return 0
    return live - (keep - keep // 4)


def drop_oldest(slots: list[Slot], n: int, placeholder: Callable[[], dict]) -> int:
    for parent, i in slots[:n]:
        parent[i] = placeholder()
    return max(0, min(n, len(slots)))


def prune(
    history: list,
    keep: int,
    window: int | None,
    *,
    is_image: Callable[[dict], bool],
    placeholder: Callable[[], dict],
    opening: int | None = None,
) -> int:
    """Apply the budget to `history` in place; `opening` is the index of the opening message. Returns how many
    images were dropped."""
    start = opening + 1 if window is not None and opening is not None else 0
    slots = find_images(history[start:], is_image)
    return drop_oldest(slots, to_drop(len(slots), keep, window), placeholder)


def keep_newest(
    history: list, n: int, *, is_image: Callable[[dict], bool], placeholder: Callable[[], dict]
) -> int:
    """Drop all but the newest `n` images, whatever the policy (a prompt the server found too long)."""
    slots = find_images(history, is_image)
    return drop_oldest(slots, len(slots) - n, placeholder)


def shrink(image: Image, limit: int = 150_000, quality: int = 85) -> Image:
    """A PNG over `limit` bytes re-encoded as JPEG, for routers that cap request size; others unchanged."""
    if image.mime != "image/png" or len(image.data) <= limit:
        return image
    from PIL import Image as PILImage

    pil = PILImage.open(io.BytesIO(image.data))
    if pil.mode in ("RGBA", "LA", "P"):
        pil = pil.convert("RGBA")
        flat = PILImage.new("RGB", pil.size, (255, 255, 255))
        flat.paste(pil, mask=pil.getchannel("A"))
        pil = flat
    elif pil.mode != "RGB":
        pil = pil.convert("RGB")
    buf = io.BytesIO()
    pil.save(buf, "JPEG", quality=quality)
    return Image(buf.getvalue(), "image/jpeg")
