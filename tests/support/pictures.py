"""An in-process env whose every tool call returns a new picture: the image budget's worst case, a
screenshot per turn, with a target that must travel in every request."""

from __future__ import annotations

from evalkit.types import Image, ToolOutcome, ToolSpec

TARGET = Image(b"\x89PNG the reference target", "image/png")


class PictureEnv:
    """Reference mode, one tool (`look`) that answers with a fresh screenshot; no submit."""

    name = "pictures"

    def __init__(self) -> None:
        self.shots = 0

    def reset(self, **kwargs) -> dict:
        return {"task_id": kwargs.get("task_id") or "pictures-0", "instructions": "Look until told to stop."}

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("look", "Take a screenshot.")]

    def target(self) -> Image:
        return TARGET

    def call(self, name: str, args: dict) -> ToolOutcome:
        self.shots += 1
        return ToolOutcome(f"screenshot {self.shots}", images=[Image(b"\x89PNG shot %d" % self.shots)])

    def close(self) -> None:
        pass
