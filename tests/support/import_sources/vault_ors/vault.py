"""An OpenReward environment: three vaults that open alike (a dial to look at, one code each); the code is in
the task spec, as the answer of a Verifiers or OpenReward task is."""

from __future__ import annotations

import base64
import io

from openreward.environments import Environment, ImageBlock, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

CODES = ["lynx-204", "zebra-417", "otter-938"]


def _dial(colour: str) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (20, 20), colour).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


class AnswerInput(BaseModel):
    code: str = Field(description="The code to open the vault with.")


class Vault(Environment):
    @classmethod
    def list_splits(cls) -> list:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"id": f"vault-{i + 1}", "code": code} for i, code in enumerate(CODES)]

    def get_prompt(self) -> list:
        return [
            TextBlock(text="A vault opens on one code. Look at its dial, then answer with the code."),
            ImageBlock(data=_dial("gray"), mimeType="image/png"),
        ]

    @tool
    def look(self) -> ToolOutput:
        """Look at the vault's dial."""
        return ToolOutput(
            blocks=[
                TextBlock(text="The dial shows three notches."),
                ImageBlock(data=_dial("gold"), mimeType="image/png"),
            ],
            metadata={"looks": 1},
        )

    @tool
    def answer(self, params: AnswerInput) -> ToolOutput:
        """Try a code; the vault opens or stays shut, and the task ends."""
        right = params.code == self.task_spec["code"]
        said = "The vault opens." if right else "The vault stays shut."
        return ToolOutput(blocks=[TextBlock(text=said)], reward=1.0 if right else 0.0, finished=True)
