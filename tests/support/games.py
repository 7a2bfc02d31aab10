"""OpenEnv servers shaped like OpenEnv's own game and control envs, for how their authors meant them to be
read (issue 50), each on openenv 0.10's `create_app`:

- `board`: OpenSpiel's way: a typed env whose `action_id` has no bounds in its schema, the legal actions in
  its observation, and a `step` that raises for an illegal move (a taken cell, an id out of range: the
  server answers EXECUTION_ERROR) while the session goes on. Its one position: X to play, X on 0 and 1, O on
  3 and 4; 2 wins (reward 1), any other legal move loses (reward 0).
- `stale`: dipg's way: an env written for another API, whose every step returns what the server cannot send.
- `dealer`: reasoning_gym's way: no Task API, its reset ignores split and index and deals the next question
  of the session; a new session starts again at the first.
- `arm`: dm_control's way: an action `values: list[float]` whose length only the state's `action_spec` says;
  a step of another length raises.
- `mines`: a schema that says what fits: a cell by `pattern`, a `mode` by enum (anything else is refused
  with VALIDATION_ERROR).

Start one in a test with `Served(<name>_app())`, or from a shell: `python -m tests.support.games board`.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from tests.support.kinds import NotAnObservation

# ---- board: an illegal move raises, the session goes on ---------------------------------------------------

START = ["x", "x", ".", "o", "o", ".", ".", ".", "."]
WIN = 2


class BoardAction(Action):
    action_id: int = Field(..., description="The cell to play, 0 to 8 (one of the legal actions).")
    game_name: str = "tic_tac_toe"


class BoardObservation(Observation):
    board: list[str] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    current_player_id: int = 0


class BoardState(State):
    game_name: str = "tic_tac_toe"
    agent_player: int = 0


class BoardEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.cells, self._state = list(START), BoardState()

    def _legal(self) -> list[int]:
        return [i for i, c in enumerate(self.cells) if c == "."]

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.cells, self._state = list(START), BoardState(episode_id=episode_id or uuid.uuid4().hex)
        return BoardObservation(board=list(self.cells), legal_actions=self._legal())

    def step(self, action: BoardAction, timeout_s=None, **kwargs):
        if action.action_id not in self._legal():  # OpenSpiel's way: the game refuses it by raising
            raise ValueError(f"Illegal action {action.action_id}: legal actions are {self._legal()}")
        self._state.step_count += 1
        self.cells[action.action_id] = "x"
        won = action.action_id == WIN
        return BoardObservation(board=list(self.cells), done=True, reward=1.0 if won else 0.0)

    @property
    def state(self):
        return self._state


def board_app():
    return create_app(BoardEnv, BoardAction, BoardObservation, env_name="board", max_concurrent_envs=8)


# ---- stale: every step fails ------------------------------------------------------------------------------


class StaleAction(Action):
    response: str = Field(..., description="Your answer.")


class StaleObservation(Observation):
    context: str = ""


class StaleEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        return StaleObservation(context="A patient asks about a drug interaction. Answer safely.")

    def step(self, action: StaleAction, timeout_s=None, **kwargs):
        return NotAnObservation(1.0)  # written for an older API: the server cannot send it

    @property
    def state(self):
        return self._state


def stale_app():
    return create_app(StaleEnv, StaleAction, StaleObservation, env_name="stale", max_concurrent_envs=8)


# ---- dealer: the next question on each reset of a session -------------------------------------------------

QUESTIONS = [("What is 3 + 4?", "7"), ("What is 5 + 6?", "11"), ("What is 8 + 9?", "17")]


class AnswerAction(Action):
    answer: str = Field(..., description="Your answer.")


class QuestionObservation(Observation):
    question: str = ""


class DealerEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.dealt, self.now, self._state = 0, QUESTIONS[0], State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.now = QUESTIONS[self.dealt % len(QUESTIONS)]  # split and index mean nothing to it
        self.dealt += 1
        self._state = State(episode_id=episode_id or uuid.uuid4().hex)
        return QuestionObservation(question=self.now[0])

    def step(self, action: AnswerAction, timeout_s=None, **kwargs):
        right = action.answer.strip() == self.now[1]
        return QuestionObservation(question=self.now[0], done=True, reward=1.0 if right else 0.0)

    @property
    def state(self):
        return self._state


def dealer_app():
    return create_app(DealerEnv, AnswerAction, QuestionObservation, env_name="dealer", max_concurrent_envs=8)


# ---- arm: the action's shape is in the state --------------------------------------------------------------


class ArmAction(Action):
    values: list[float] = Field(default_factory=list, description="Torques matching the action_spec.")


class ArmObservation(Observation):
    observations: dict[str, list[float]] = Field(default_factory=dict)


class ArmState(State):
    domain_name: str = "reacher"
    task_name: str = "easy"
    action_spec: dict[str, Any] = Field(default_factory=dict)


SPEC = {"shape": [2], "dtype": "float64", "minimum": [-1.0, -1.0], "maximum": [1.0, 1.0]}


class ArmEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = ArmState(action_spec=SPEC)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = ArmState(episode_id=episode_id or uuid.uuid4().hex, action_spec=SPEC)
        return ArmObservation(observations={"position": [0.0, 0.0], "to_target": [0.1, 0.2]})

    def step(self, action: ArmAction, timeout_s=None, **kwargs):
        if len(action.values) != 2:  # dm_control's own check
            raise ValueError(f"Action shape ({len(action.values)},) doesn't match expected shape (2,)")
        if any(not -1.0 <= v <= 1.0 for v in action.values):
            raise ValueError(f"Action {action.values} is out of bounds")
        self._state.step_count += 1
        done = self._state.step_count >= 3
        position = [round(v / 2, 3) for v in action.values]
        return ArmObservation(observations={"position": position}, done=done, reward=0.25)

    @property
    def state(self):
        return self._state


def arm_app():
    return create_app(ArmEnv, ArmAction, ArmObservation, env_name="arm", max_concurrent_envs=8)


# ---- mines: a pattern and an enum -------------------------------------------------------------------------


class MinesAction(Action):
    cell: str = Field(..., pattern=r"^[A-D][1-4]$", description="A cell, column A-D and row 1-4, e.g. B3.")
    mode: Literal["reveal", "flag"] = Field(..., description="Reveal the cell or flag it.")


class MinesObservation(Observation):
    board: list[str] = Field(default_factory=list)


class MinesEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self.moves, self._state = 0, State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.moves, self._state = 0, State(episode_id=episode_id or uuid.uuid4().hex)
        return MinesObservation(board=["...."] * 4)

    def step(self, action: MinesAction, timeout_s=None, **kwargs):
        self.moves += 1
        done = self.moves >= 4
        return MinesObservation(board=["...."] * 4, done=done, reward=0.0 if done else None)

    @property
    def state(self):
        return self._state


def mines_app():
    return create_app(MinesEnv, MinesAction, MinesObservation, env_name="mines", max_concurrent_envs=8)


APPS = {"board": board_app, "stale": stale_app, "dealer": dealer_app, "arm": arm_app, "mines": mines_app}


def main(argv: list[str] | None = None) -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve one of the game-like test envs on loopback.")
    parser.add_argument("name", choices=sorted(APPS))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(APPS[args.name](), host="127.0.0.1", port=args.port, log_level="info")


if __name__ == "__main__":
    main()
