"""The image budget: which images of a conversation history still travel to the model.

Each adapter keeps its history as plain wire-format dicts; these helpers find the image blocks in it (in the
order the model reads them) and swap the oldest for a short text placeholder. The opening message (the task,
and in reference mode the target image) is never touched by any policy: only the images after it count, and
only they are dropped.

- `--keep-images N`: at least the newest N later images stay. They build up to N + KEEP_BLOCK - 1, then the
  oldest KEEP_BLOCK go at once, so the prompt prefix (and the provider's cache of it) changes once every
  KEEP_BLOCK new images: every 4 turns when a turn brings one screenshot.
- `--image-window MAX,KEEP` (KEEP < MAX): later images build up to MAX, then drop to the newest KEEP; the
  prefix changes once every MAX - KEEP + 1 new images.
- A prompt the server rejects as too long (or as holding too many images): every later image but the newest
  goes, once.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.errors import ConfigError
from evalkit.types import Image

PLACEHOLDER = "[an older image was removed here to save context]"

KEEP_BLOCK = 4
"""How many images `--keep-images` drops at a time: the prefix then stays the same for this many more."""

Slot = tuple[list, int]
"""An image block as (the list holding it, its index there)."""


@dataclass(frozen=True)
class Budget:
    """Later images (after the opening message) a history may hold, and how many survive a drop."""

    most: int
    keep: int


def check_budget(keep_images: Any = None, image_window: Any = None) -> None:
    """ConfigError for a budget that cannot be honoured: both options at once, KEEP ≥ MAX, negatives."""

    def count(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if keep_images is not None and image_window is not None:
        raise ConfigError(
            "--keep-images and --image-window set the same image budget two ways: give only one"
        )
    if keep_images is not None and not count(keep_images):
        raise ConfigError(f"--keep-images wants a whole number ≥ 0, got {keep_images!r}")
    if image_window is not None:
        try:
            most, keep = image_window
        except (TypeError, ValueError):
            raise ConfigError(f"--image-window wants MAX,KEEP, got {image_window!r}") from None
        if not (count(most) and count(keep) and keep < most):
            raise ConfigError(
                f"--image-window MAX,KEEP wants whole numbers with 0 ≤ KEEP < MAX, got {most},{keep} "
                "(KEEP = MAX would drop an image, and rewrite the prompt prefix, every turn)"
            )


def budget(keep_images: int | None = None, image_window: tuple[int, int] | None = None) -> Budget | None:
    """The budget the two options ask for (checked), or None for no pruning."""
    check_budget(keep_images, image_window)
    if image_window is not None:
        return Budget(most=image_window[0], keep=image_window[1])
    if keep_images is not None:
        return Budget(most=keep_images + KEEP_BLOCK - 1, keep=keep_images)
    return None


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


def droppable(history: list, opening: int | None, is_image: Callable[[dict], bool]) -> list[Slot]:
    """The image blocks after the opening message (all of them if there is none yet)."""
    start = opening + 1 if opening is not None else 0
    return find_images(history[start:], is_image)


def to_drop(live: int, keep: int, window: int | None = None) -> int:
    """How many of the oldest `live` later images to drop now: none until they exceed the window (by default
    `keep + KEEP_BLOCK - 1`), then down to `keep`."""
    most = window if window is not None else keep + KEEP_BLOCK - 1
    return live - max(0, keep) if live > most else 0


class Ledger:
    """Which image each image block of a history holds, so that the record can say which images a prune
    took out of the conversation, and a raw request can point at the frame store instead of carrying
    base64. Blocks are known by identity: a block stays in the history until a prune replaces it."""

    def __init__(self) -> None:
        self._of: dict[int, str] = {}
        self.dropped: list[str] = []
        """`Image.frame_rel` of every image dropped so far, in the order they went."""

    def add(self, node: Any, images: Sequence[Image], is_image: Callable[[dict], bool]) -> None:
        """Note the images of new wire content `node`; `images` in the order the content holds them."""
        for (parent, i), image in zip(find_images(node, is_image), images, strict=False):
            self._of[id(parent[i])] = image.frame_rel

    def frame(self, block: dict) -> str | None:
        return self._of.get(id(block))

    def drop(self, block: dict) -> None:
        rel = self._of.pop(id(block), None)
        if rel is not None:
            self.dropped.append(rel)


def drop_oldest(
    slots: list[Slot], n: int, placeholder: Callable[[], dict], ledger: Ledger | None = None
) -> int:
    for parent, i in slots[:n]:
        if ledger is not None:
            ledger.drop(parent[i])
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
    ledger: Ledger | None = None,
) -> int:
    """Apply the budget to `history` in place, sparing the opening message (at index `opening`). Returns how
    many images were dropped."""
    slots = droppable(history, opening, is_image)
    return drop_oldest(slots, to_drop(len(slots), keep, window), placeholder, ledger)


def keep_newest(
    history: list,
    n: int,
    *,
    is_image: Callable[[dict], bool],
    placeholder: Callable[[], dict],
    opening: int | None = None,
    ledger: Ledger | None = None,
) -> int:
    """Drop all but the newest `n` later images whatever the budget (a prompt the server rejected); the
    opening message is spared as always."""
    slots = droppable(history, opening, is_image)
    return drop_oldest(slots, len(slots) - n, placeholder, ledger)


def shrink(image: Image, limit: int = 150_000, quality: int = 85) -> Image:
    """A PNG over `limit` bytes re-encoded as JPEG, for routers that cap request size; others unchanged."""
    if image.mime != "image/png" or len(image.data) <= limit:
        return image
    from PIL import Image as PILImage  # here: `evalkit.run` imports this module; most runs never shrink

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
