"""Small OpenEnv environments of the kinds a user brings, none of them shaped like the canvas.

- `sketch`: MCP, no finishing tool and no instructions; its task is in the reset metadata's `goal`; it
  serves a render route but no target.
- `quiz`: MCP with instructions; the question is in `metadata["question"]`; `lookup` answers with text and a
  picture; `answer(text)` (tagged `finish`) ends the episode with a reward. No picture routes.
- `guess`: a typed-action env (its own `Action` / `Observation`, no MCP) served by OpenEnv's `create_app`
  with its default capacity, one session; its observation holds a hint, a counter and a pixel board.
- `walk`: a typed-action env whose goal is only in its observations' metadata: the layout of a small maze
  and its exit cell (which the seed picks), beside a key it hides and ids of its own; it gives every task
  the one id `walk`, whatever its reset was sent.

Each is served by `Served` under uvicorn on a free loopback port, as a user's own server would be.
"""

from __future__ import annotations

import io
import threading
import uuid
from typing import Literal

from fastapi import HTTPException, Response
from fastmcp import FastMCP
from fastmcp.utilities.types import Image as MCPImage
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from PIL import Image, ImageDraw
from pydantic import Field

GOAL = "Draw a circle, then a square next to it."
QUESTION = "What is six times seven?"
QUIZ_INSTRUCTIONS = "You answer quiz questions. Look terms up if you need to; answer once, with a number."


def _png(draw) -> bytes:
    img = Image.new("RGB", (64, 48), "white")
    draw(ImageDraw.Draw(img))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


# ---- sketch: MCP, no finishing tool, a render route, no target --------------------------------------------

SKETCHES: dict[str, list[tuple[str, int, int]]] = {}


class SketchEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("sketch")
        self.episode = ""

        @mcp.tool
        def draw(shape: str, x: int, y: int) -> str:
            """Draw a shape ('circle' or 'square') at (x, y)."""
            if shape not in ("circle", "square"):
                raise ValueError(f"unknown shape {shape!r}")
            SKETCHES[self.episode].append((shape, x, y))
            return f"drew a {shape}; {len(SKETCHES[self.episode])} shape(s) on the page"

        @mcp.tool
        def clear() -> str:
            """Remove every shape."""
            SKETCHES[self.episode].clear()
            return "cleared"

        super().__init__(mcp)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.episode = episode_id or uuid.uuid4().hex
        SKETCHES[self.episode] = []
        return Observation(metadata={"episode_id": self.episode, "goal": GOAL, "got": sorted(kwargs)})

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(metadata={"error": "sketch only takes tool calls"})

    @property
    def state(self):
        return State(episode_id=self.episode or None)


def sketch_app():
    app = create_app(SketchEnv, CallToolAction, CallToolObservation, env_name="sketch", max_concurrent_envs=8)

    @app.get("/api/episodes/{episode_id}/render.png")
    def render(episode_id: str) -> Response:
        if episode_id not in SKETCHES:
            raise HTTPException(404)

        def paint(d):
            for shape, x, y in SKETCHES[episode_id]:
                box = (x, y, x + 10, y + 10)
                d.ellipse(box, fill="red") if shape == "circle" else d.rectangle(box, fill="blue")

        return Response(_png(paint), media_type="image/png")

    return app


# ---- quiz: MCP, the question in the metadata, `answer` ends the episode with a reward ---------------------


class QuizEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("quiz")
        self.answered: str | None = None

        @mcp.tool
        def lookup(term: str):
            """Look a term up; returns what is known about it and a picture."""
            known = {"six": "six is 6", "seven": "seven is 7"}.get(
                term.lower(), f"nothing known about {term}"
            )
            return [
                known,
                MCPImage(data=_png(lambda d: d.text((4, 4), term[:8], fill="black")), format="png"),
            ]

        @mcp.tool(tags={"finish"})
        def answer(text: str) -> str:
            """Give your final answer; the quiz ends."""
            self.answered = text
            return f"answer recorded: {text}"

        super().__init__(mcp)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.answered = None
        meta = {"task_id": kwargs.get("task_id") or "quiz-1", "question": QUESTION}
        return Observation(metadata={**meta, "instructions": QUIZ_INSTRUCTIONS})

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(metadata={"error": "quiz only takes tool calls"})

    async def step_async(self, action, timeout_s=None, **kwargs):
        obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if self.answered is not None:
            # OpenEnv's WebSocket server runs tools through step_async: the episode ends on what it returns.
            correct = self.answered.strip() in ("42", "forty-two")
            obs.done, obs.reward = True, 1.0 if correct else 0.0
            obs.metadata = {"grade": {"correct": correct, "total": obs.reward}}
        return obs

    @property
    def state(self):
        return State()


def quiz_app():
    return create_app(QuizEnv, CallToolAction, CallToolObservation, env_name="quiz", max_concurrent_envs=8)


# ---- guess: a typed-action env, one session ---------------------------------------------------------------


class GuessAction(Action):
    """A guess at the secret number."""

    guess: int = Field(..., ge=1, le=100, description="Your guess, 1 to 100.")
    note: str | None = Field(None, description="Anything you want to remember.")


class GuessObservation(Observation):
    hint: str = ""
    guesses_left: int = 0
    board: list[list[list[int]]] = Field(
        default_factory=list, description="A 16 x 16 RGB picture of the guesses."
    )


def _board(guesses: list[int]) -> list[list[list[int]]]:
    rows = [[[255, 255, 255] for _ in range(16)] for _ in range(16)]
    for i, g in enumerate(guesses[:16]):
        for x in range(min(16, g * 16 // 100 + 1)):
            rows[i][x] = [0, 0, 200]
    return rows


class GuessEnv(Environment):
    """Guess the secret number (from the seed) in six guesses; reward 1 when found, 0 when out of guesses."""

    def __init__(self):
        super().__init__()
        self.secret, self.guesses, self._state = 37, [], State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.secret = 37 if seed is None else 1 + (seed * 7919) % 100
        self.guesses = []
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        return GuessObservation(
            hint="I am thinking of a number from 1 to 100.", guesses_left=6, board=_board([])
        )

    def step(self, action: GuessAction, timeout_s=None, **kwargs):
        self.guesses.append(action.guess)
        left, board = 6 - len(self.guesses), _board(self.guesses)
        if action.guess == self.secret:
            return GuessObservation(hint="correct", guesses_left=left, board=board, done=True, reward=1.0)
        hint = "higher" if action.guess < self.secret else "lower"
        return GuessObservation(
            hint=hint, guesses_left=left, board=board, done=left == 0, reward=0.0 if left == 0 else None
        )

    @property
    def state(self):
        return self._state

    def get_metadata(self):
        return EnvironmentMetadata(name="guess", description="Guess the number.")


def guess_app():
    return create_app(GuessEnv, GuessAction, GuessObservation, env_name="guess")


# ---- walk: a typed-action env whose goal is only in the metadata ------------------------------------------

LAYOUT = [
    [0, 0, 0, 1, 0],
    [1, 1, 0, 1, 0],
    [0, 0, 0, 0, 0],
    [0, 1, 1, 1, 0],
]
"""0 is floor, 1 is wall; the walk starts at the top left."""
EXITS = [(3, 4), (3, 0)]
"""The exit of an even seed (and of no seed), and of an odd one."""
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
WALK_STEPS = 12


class WalkAction(Action):
    """One step through the maze."""

    move: Literal["up", "down", "left", "right"] = Field(..., description="Where to step.")


class WalkObservation(Observation):
    position: list[int] = Field(default_factory=list)
    legal_actions: list[str] = Field(default_factory=list)


def _legal(at: tuple[int, int]) -> list[str]:
    out = []
    for name, (dr, dc) in MOVES.items():
        r, c = at[0] + dr, at[1] + dc
        if 0 <= r < len(LAYOUT) and 0 <= c < len(LAYOUT[0]) and LAYOUT[r][c] == 0:
            out.append(name)
    return out


class WalkEnv(Environment):
    """Reach the exit within WALK_STEPS steps: reward 1 there, 0 when the steps run out."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.at, self.exit, self.steps, self._state = (0, 0), EXITS[0], 0, State()

    def _observe(self, status: str, done: bool = False, reward: float | None = None) -> WalkObservation:
        meta = {
            "task_id": "walk",
            "episode_id": self._state.episode_id,
            "layout": LAYOUT,
            "exit_cell": list(self.exit),
            "status": status,
            "solution": "down down",  # what a model must never be shown
            "_seed_used": 1,
            "hidden_keys": ["solution"],
            "discounted_rewards": [0.9, 1.0],
        }
        here = {"position": list(self.at), "legal_actions": _legal(self.at)}
        return WalkObservation(**here, done=done, reward=reward, metadata=meta)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.at, self.steps = (0, 0), 0
        self.exit = EXITS[(seed or 0) % 2]
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        return self._observe("walking")

    def step(self, action: WalkAction, timeout_s=None, **kwargs):
        self.steps += 1
        dr, dc = MOVES[action.move]
        if action.move in _legal(self.at):
            self.at = (self.at[0] + dr, self.at[1] + dc)
        if self.at == self.exit:
            return self._observe("out", done=True, reward=1.0)
        if self.steps >= WALK_STEPS:
            return self._observe("lost", done=True, reward=0.0)
        return self._observe("walking")

    @property
    def state(self):
        return self._state

    def get_metadata(self):
        return EnvironmentMetadata(name="walk", description="Walk out of a small maze.")


def walk_app():
    return create_app(WalkEnv, WalkAction, WalkObservation, env_name="walk", max_concurrent_envs=8)


# ---- serving ----------------------------------------------------------------------------------------------


class Served:
    """An app under uvicorn in a thread on a free loopback port: `with Served(quiz_app()) as s: ...`."""

    def __init__(self, app):
        import uvicorn

        from evalkit.serving import free_port

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", ws="websockets-sansio"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self):
        from evalkit.serving import wait_healthy

        self._thread.start()
        wait_healthy(self.base_url)
        return self

    def __exit__(self, *exc):
        self._server.should_exit = True
        self._thread.join(10)
