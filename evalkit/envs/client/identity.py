"""What an env reports of its configuration: the game a multi-game server plays, its level, its variant.

Every game of a multi-game OpenEnv server reports one env name (`OpenSpielEnvironment`, `AtariEnvironment`),
so the name alone cannot tell a run made against catch from one made against tic_tac_toe. What tells them
apart is what the env itself says, wherever it says it:

- OpenSpiel: its state (`game_name`, `agent_player`, `opponent_policy`, `game_params`);
- Atari: the observation metadata (`game_name`) and its state (`mode`, `difficulty`, `obs_type`, ...);
- TextArena: the metadata's `env_id`; BrowserGym: its state (`benchmark`, `task_name`); dm_control: its
  state (`domain_name`, `task_name`).

`configuration` gathers those keys (`CONFIG_KEYS`) from the reset metadata, the reset observation, the
env's state and the server's `/metadata`, in that order of preference, leaving out what the reset was sent
(that is the task, not the server's configuration). A batch records the dict in its run.json and compares
it on resume (`mismatch`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from evalkit.errors import EnvError

CONFIG_KEYS = (
    "env_id", "game_name", "game", "game_params", "benchmark", "domain_name", "task_name", "dataset_name",
    "dataset_config", "level", "variant", "mode", "difficulty", "obs_type", "full_action_space",
    "frameskip", "repeat_action_probability", "agent_player", "opponent_policy", "num_players",
)  # fmt: skip
"""Keys in which OpenEnv's own envs report their configuration (OpenSpiel, Atari, TextArena, BrowserGym,
dm_control, reasoning_gym): the same key in two runs with two values means two configurations."""
VALUE_CAP = 200
"""Characters of a value's JSON kept as it is; a longer value (a dataset config) is kept as its hash."""


def _kept(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    if len(text) <= VALUE_CAP:
        return json.loads(text)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def configuration(
    meta: dict | None,
    fields: dict | None = None,
    state: dict | None = None,
    described: dict | None = None,
    sent: Iterable[str] | None = None,
) -> dict:
    """What the env reports of its configuration, as a small dict sorted by key: each of `CONFIG_KEYS` found
    in the reset metadata (`meta`), the reset observation's fields, the env's `state` or the server's
    `/metadata` (`described`), the first that has it. Keys the reset was `sent` are left out; an empty
    value (None, "", {}) is no configuration."""
    sent = set(sent or ())
    found: dict = {}
    for source in (meta, fields, state, described):
        if not isinstance(source, dict):
            continue
        for key in CONFIG_KEYS:
            value = source.get(key)
            if key in found or key in sent or value is None or value in ("", {}, []):
                continue
            found[key] = _kept(value)
    return dict(sorted(found.items()))


def mismatch(recorded: dict | None, now: dict | None) -> str | None:
    """One line saying how the configuration a run was made against differs from the server's now; None
    when they agree. A key only one side has counts: a server that stopped saying its game may play
    another one."""
    recorded, now = recorded or {}, now or {}
    if recorded == now:
        return None
    parts = []
    for key in sorted(set(recorded) | set(now)):
        if recorded.get(key) != now.get(key):
            was = json.dumps(recorded[key]) if key in recorded else "(not reported)"
            is_ = json.dumps(now[key]) if key in now else "(not reported)"
            parts.append(f"{key} {was} → {is_}")
    return "the env reports another configuration than the run was made against: " + ", ".join(parts)


def of_session(session: Any, sent: Iterable[str] | None = None) -> dict:
    """The configuration `session` reports after its reset (`OpenEnvSession.configuration`); {} for a
    session that has no such notion (a Python env) or cannot say."""
    read = getattr(session, "configuration", None)
    if not callable(read):
        return {}
    try:
        return read(sent)
    except EnvError:
        return {}
