"""A Verifiers-style quiz: questions as chat messages (a system message and the user's question, one with a
picture), each with its answer; a rubric scores a completion by its last message."""

from __future__ import annotations

import base64
import io

import verifiers  # noqa: F401  (what makes `openenv import` see a Verifiers environment)

SYSTEM = "You answer quiz questions about made-up places. Answer with one word."


def _picture() -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (24, 16), "purple").save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _row(question: object, answer: str) -> dict:
    return {"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "answer": answer}  # fmt: skip


ROWS = [
    _row("Which city is the capital of the made-up land of Quorvia?", "Zelphine"),
    _row(
        [
            {"type": "text", "text": "Which river is drawn in the picture?"},
            {"type": "image_url", "image_url": {"url": _picture()}},
        ],
        "Murrowend",
    ),  # fmt: skip
]


class Rubric:
    def score_rollout(self, state: dict) -> None:
        said = state["completion"][-1]["content"] if state["completion"] else ""
        state["reward"] = 1.0 if str(said).strip() == state["answer"] else 0.0
        state["metrics"] = {"exact": state["reward"]}


class QuizEnv:
    rubric = Rubric()

    def get_dataset(self) -> list[dict]:
        return [dict(r) for r in ROWS]


def load_environment() -> QuizEnv:
    return QuizEnv()
