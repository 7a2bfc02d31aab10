"""Small OpenEnv servers for the ways OpenEnv's own envs were misread (issue 41), each on openenv 0.10's
`create_app` as a user would serve it:

- `catalog`: a typed env with the Task API (splits train: 3 tasks, test: 2), played by
  `reset(split=..., index=...)`; its task text is under the reset metadata's `task_prompt`, its ids are its
  own (`sum-test-1`); `spec_key` puts the task's record in the reset metadata under that key too.
- `copycat`: the Task API too (5 tasks), but its reset ignores split and index: every task opens on the
  same question (reasoning_gym without a seed).
- `games`: one server class, two configurations (`game="catch"` or `"tic_tac_toe"`), reporting the same
  env name; the game is in its state (OpenSpiel's way) or, with `report="metadata"`, in the reset
  metadata (Atari's way).
- `pixels`: dm_control's way: a base64 PNG in a plain `pixels` field, a WebP data URI nested in a dict, and
  two base64 strings that are not pictures (one begins like a PNG).
- `lens`: an MCP env whose `look` returns a base64 PNG as its text and `snap` a data URI inside its data.
- `dead`: its reset answers `done: true` with `status: error` (jupyter without its key), or, with
  `status=False`, just `done: true`.
- `crash`: a typed env whose step 9 returns what the server cannot send (an EXECUTION_ERROR after which the
  session still works), whose step 8 raises and breaks the session (its state fails from then on), whose
  step 7 is an illegal move it answers in its observation, and whose schema refuses anything past 9
  (VALIDATION_ERROR).
- `slow`: answers /health at once, but its reset takes `delay` seconds (a sandbox being set up); with
  `setup=True`, building the env does, so `/metadata` is slow too.

Start one in a test with `Served(<name>_app(...))`, or from a shell (Ctrl-C stops it):

    python -m tests.support.kinds catalog --port 8011
    python -m tests.support.kinds games --game tic_tac_toe --report metadata --port 8012
"""

from __future__ import annotations

import base64
import io
import time
import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State
from PIL import Image
from pydantic import Field

# ---- catalog: the Task API, the env's own ids, the task under `task_prompt` ------------------------------

SUMS = {"train": [(2, 3), (4, 5), (6, 7)], "test": [(10, 20), (30, 40)]}


class SumAction(Action):
    """Your answer to the sum."""

    answer: int = Field(..., description="The sum.")


class SumObservation(Observation):
    attempts_left: int = 1


def _spec(split: str, index: int) -> dict:
    a, b = SUMS[split][index]
    return {"id": f"sum-{split}-{index}", "a": a, "b": b}


class CatalogEnv(Environment):
    """Add two numbers; which two is the task (split and index)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.task, self._state = _spec("train", 0), State()

    # The Task API (OpenEnv's TaskProvider protocol): plain methods on the env.
    def list_splits(self) -> list:
        return ["train", {"name": "test", "type": "test"}]

    def num_tasks(self, split: str) -> int:
        return len(SUMS[split])

    def get_task(self, split: str, index: int) -> dict:
        if not 0 <= index < len(SUMS[split]):
            raise IndexError(index)
        return _spec(split, index)

    def list_tasks(self, split: str) -> list:
        return [_spec(split, i) for i in range(len(SUMS[split]))]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list:
        return [_spec(split, i) for i in range(len(SUMS[split]))[start:stop]]

    def reset(self, seed=None, episode_id=None, split: str = "train", index: int = 0, **kwargs):
        self.task = _spec(split, index)
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        prompt = f"What is {self.task['a']} + {self.task['b']}?"
        return SumObservation(metadata={"task_id": self.task["id"], "task_prompt": prompt})

    def step(self, action: SumAction, timeout_s=None, **kwargs):
        right = action.answer == self.task["a"] + self.task["b"]
        return SumObservation(attempts_left=0, done=True, reward=1.0 if right else 0.0)

    @property
    def state(self):
        return self._state


def catalog_app(spec_key: str | None = None):
    """The catalog; with `spec_key`, its reset metadata also holds the task's record (as its Task API gives
    it, the answer's terms with it) under that key, as an env that hands the evaluator its task does."""
    if spec_key is None:
        return create_app(CatalogEnv, SumAction, SumObservation, env_name="catalog", max_concurrent_envs=8)

    class SpecEnv(CatalogEnv):
        def reset(self, seed=None, episode_id=None, split: str = "train", index: int = 0, **kwargs):
            obs = super().reset(seed, episode_id, split, index, **kwargs)
            obs.metadata[spec_key] = dict(self.task)
            return obs

    return create_app(SpecEnv, SumAction, SumObservation, env_name="catalog", max_concurrent_envs=8)


# ---- copycat: the Task API, but every task opens the same ------------------------------------------------


class CopycatObservation(Observation):
    question: str = ""


class CopycatEnv(CatalogEnv):
    """Five tasks by its Task API, one question whatever reset is sent."""

    def list_splits(self) -> list:
        return ["test"]

    def num_tasks(self, split: str) -> int:
        return 5

    def get_task(self, split: str, index: int) -> dict:
        if not 0 <= index < 5:
            raise IndexError(index)
        return {"id": f"copy-{index}"}

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list:
        return [{"id": f"copy-{i}"} for i in range(5)[start:stop]]

    def reset(self, seed=None, episode_id=None, split: str = "test", index: int = 0, **kwargs):
        self.task = {"id": "copy", "a": 2, "b": 2}
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        return CopycatObservation(question="What is 2 + 2?")

    def step(self, action: SumAction, timeout_s=None, **kwargs):
        return CopycatObservation(done=True, reward=1.0 if action.answer == 4 else 0.0)


def copycat_app():
    return create_app(CopycatEnv, SumAction, CopycatObservation, env_name="copycat", max_concurrent_envs=8)


# ---- games: two configurations behind one env name --------------------------------------------------------

GAMES = {"catch": 3, "tic_tac_toe": 9}
"""Each game and how many actions it has."""


class GameAction(Action):
    action_id: int = Field(..., description="One of the legal actions.")
    game_name: str = "catch"  # OpenSpiel's action carries a default game name that means nothing


class GameObservation(Observation):
    info_state: list[float] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    game_phase: str = "initial"


class GameState(State):
    game_name: str = ""
    agent_player: int = 0
    opponent_policy: str = "random"


def games_app(game: str = "catch", report: str = "state"):
    """A server of `game`; it says which in its state (`report="state"`) or reset metadata."""

    class GameEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            super().__init__()
            self._state = GameState(game_name=game)

        def reset(self, seed=None, episode_id=None, **kwargs):
            self._state = GameState(game_name=game, episode_id=episode_id or uuid.uuid4().hex)
            meta = {"game_name": game, "action_meanings": ["a"] * GAMES[game]} if report == "metadata" else {}
            legal = list(range(GAMES[game]))
            return GameObservation(info_state=[0.0] * 4, legal_actions=legal, metadata=meta)

        def step(self, action: GameAction, timeout_s=None, **kwargs):
            self._state.step_count += 1
            return GameObservation(info_state=[1.0] * 4, game_phase="terminal", done=True, reward=1.0)

        @property
        def state(self):
            return self._state

    return create_app(GameEnvironment, GameAction, GameObservation, env_name="games", max_concurrent_envs=8)


# ---- pixels: pictures in plain fields ---------------------------------------------------------------------


def picture(fmt: str = "PNG", size: tuple[int, int] = (64, 48), colour: str = "red") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, fmt)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


NOT_A_PICTURE = b64(bytes(range(256)) * 2)
"""A long base64 string of other bytes: text, never an image."""
LOOKS_LIKE_PNG = b64(b"\x89PNG\r\n\x1a\n" + b"\x00" * 120)
"""Begins like a PNG, but has no header that gives a size."""


class ControlAction(Action):
    values: list[float] = Field(..., description="Torques, one per actuator.")


class ControlObservation(Observation):
    observations: dict[str, list[float]] = Field(default_factory=dict)
    pixels: str | None = None
    camera: dict[str, Any] = Field(default_factory=dict)
    checksum: str = ""
    header: str = ""


class PixelsEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.steps, self._state = 0, State()

    def _observe(self, colour: str, done: bool = False) -> ControlObservation:
        return ControlObservation(
            observations={"position": [0.1 * self.steps, 1.0], "velocity": [0.0, 0.0]},
            pixels=b64(picture("PNG", (64, 48), colour)),
            camera={
                "frame": "data:image/webp;base64," + b64(picture("WEBP", (16, 12), "blue")),
                "step": self.steps,
            },
            checksum=NOT_A_PICTURE,
            header=LOOKS_LIKE_PNG,
            done=done,
            reward=0.5 if done else None,
        )

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.steps, self._state = 0, State(episode_id=episode_id or uuid.uuid4().hex)
        return self._observe("red")

    def step(self, action: ControlAction, timeout_s=None, **kwargs):
        self.steps += 1
        return self._observe("green", done=self.steps >= 2)

    @property
    def state(self):
        return self._state


def pixels_app():
    return create_app(PixelsEnv, ControlAction, ControlObservation, env_name="pixels", max_concurrent_envs=8)


class LensEnv(MCPEnvironment):
    """An MCP env whose tools return pictures as base64 text and inside structured data."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("lens")

        @mcp.tool
        def look() -> str:
            """A picture of the scene, as base64 PNG text."""
            return b64(picture("PNG", (20, 10), "red"))

        @mcp.tool
        def snap() -> dict:
            """A picture of the scene with its time, as data."""
            return {"t": 3, "image": "data:image/png;base64," + b64(picture("PNG", (8, 8), "blue"))}

        super().__init__(mcp)

    def reset(self, seed=None, episode_id=None, **kwargs):
        return Observation(metadata={"goal": "Look around."})

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation()

    @property
    def state(self):
        return State()


def lens_app():
    return create_app(LensEnv, CallToolAction, CallToolObservation, env_name="lens", max_concurrent_envs=8)


# ---- dead: a reset that says done -------------------------------------------------------------------------

DEAD_ERROR = "SANDBOX_API_KEY is not set (tried key sk-live-abcdefghijklmnopqrstuvwx1234). Configure it."


class PokeAction(Action):
    poke: int = Field(..., ge=0, le=9, description="Where to poke, 0 to 9.")


class PokeObservation(Observation):
    said: str = ""


def dead_app(status: bool = True):
    class DeadEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def reset(self, seed=None, episode_id=None, **kwargs):
            meta = {"status": "error", "error": DEAD_ERROR} if status else {}
            return PokeObservation(done=True, reward=None, metadata=meta)

        def step(self, action: PokeAction, timeout_s=None, **kwargs):
            return PokeObservation(said="played against a dead env", done=True, reward=1.0)

        @property
        def state(self):
            return State()

    return create_app(DeadEnv, PokeAction, PokeObservation, env_name="dead", max_concurrent_envs=8)


# ---- crash: steps the server fails to run, and actions the env refuses ------------------------------------


class NotAnObservation:
    """What dipg's step returns: not an Observation, so the server cannot serialise it (EXECUTION_ERROR)."""

    def __init__(self, reward: float):
        self.reward, self.done = reward, True


class CrashEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state, self.dead = State(), False

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state, self.dead = State(episode_id=episode_id or uuid.uuid4().hex), False
        return PokeObservation(said="Poke me.", metadata={"goal": "Poke somewhere from 0 to 6."})

    def step(self, action: PokeAction, timeout_s=None, **kwargs):
        if action.poke == 9:
            return NotAnObservation(0.0)
        if action.poke == 8:  # the session is broken from here on: its state fails too
            self.dead = True
            raise RuntimeError("the simulator under the session died")
        if action.poke == 7:  # an illegal move: the env's answer, for the model to read
            return PokeObservation(said="illegal move: 7 is not allowed", metadata={"error": "illegal move"})
        return PokeObservation(said=f"poked {action.poke}", done=True, reward=1.0)

    @property
    def state(self):
        if self.dead:
            raise RuntimeError("no simulator")
        return self._state


def crash_app():
    return create_app(CrashEnv, PokeAction, PokeObservation, env_name="crash", max_concurrent_envs=8)


# ---- slow: a reset that takes its time --------------------------------------------------------------------


def slow_app(delay: float = 2.0, setup: bool = False):
    """Its reset takes `delay` seconds; with `setup`, building the env does (so `/metadata`, which OpenEnv
    answers from a new instance, is slow too)."""

    class SlowEnv(CrashEnv):
        def __init__(self):
            super().__init__()
            if setup:
                time.sleep(delay)

        def reset(self, seed=None, episode_id=None, **kwargs):
            if not setup:
                time.sleep(delay)
            return super().reset(seed, episode_id, **kwargs)

    return create_app(SlowEnv, PokeAction, PokeObservation, env_name="slow", max_concurrent_envs=8)


APPS = {
    "catalog": catalog_app,
    "copycat": copycat_app,
    "games": games_app,
    "pixels": pixels_app,
    "lens": lens_app,
    "dead": dead_app,
    "crash": crash_app,
    "slow": slow_app,
}


def main(argv: list[str] | None = None) -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve one of the test envs on loopback.")
    parser.add_argument("name", choices=sorted(APPS))
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--game", default="catch", choices=sorted(GAMES), help="games: which game")
    parser.add_argument("--report", default="state", choices=["state", "metadata"], help="games: where")
    parser.add_argument("--no-status", action="store_true", help="dead: done without an error status")
    parser.add_argument("--delay", type=float, default=2.0, help="slow: seconds a reset takes")
    parser.add_argument("--setup", action="store_true", help="slow: building the env takes them instead")
    args = parser.parse_args(argv)
    kw: dict = {
        "games": {"game": args.game, "report": args.report},
        "dead": {"status": not args.no_status},
        "slow": {"delay": args.delay, "setup": args.setup},
    }.get(args.name, {})
    uvicorn.run(APPS[args.name](**kw), host="127.0.0.1", port=args.port, log_level="info")


if __name__ == "__main__":
    main()
