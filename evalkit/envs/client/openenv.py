"""`EnvSession`s on OpenEnv servers, one WebSocket session per episode.

Two kinds of OpenEnv env exist. An MCP env lists its tools and runs them (`OpenEnvSession`). A typed-action
env takes its own `Action` (JSON schema at `/schema`) and answers with its own `Observation`
(`TypedSession`): the model drives it through one tool, `step`, whose parameters are that schema and whose
result is the observation. `connect` tells them apart from `/schema`. Servers that also offer evalkit's HTTP
picture routes (`/api/episodes/{id}/render.png`, `/reference.jpg`, `/api/episodes/{id}`) get frames,
targets and final documents; each route is tried on its own, and a server without them simply has none.
"""

from __future__ import annotations

import functools
import http.client
import itertools
import json
import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evalkit.envs.client import actions, identity, loopback, observation
from evalkit.envs.client.wire import ActionRefused, Connection, ServerError
from evalkit.errors import (
    ConfigError,
    EnvDeadError,
    EnvError,
    EnvSlowError,
    EnvStepError,
    EnvUnreachableError,
    reason,
)
from evalkit.secrets import redact_url, scrub
from evalkit.types import Image, ToolOutcome, ToolSpec

log = logging.getLogger(__name__)

FINISH_TAG = "finish"
"""A tool the env marks with this fastmcp tag, or with `finishes_episode: true` in its MCP meta, is the one
that ends the episode (see `evalkit.run.rules.finishing_tool`)."""


def http_url(url: str) -> str:
    """The HTTP base of a server given by its HTTP or WebSocket URL."""
    url = url.rstrip("/").removesuffix("/ws")
    return url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)


def http_client(url: str, **kw: Any) -> httpx.Client:
    """An HTTP client for `url`. A plain-http server needs no TLS context, whose set-up (loading the CA
    store) costs tens of milliseconds per client — per episode, when every session makes one."""
    return httpx.Client(verify=url.startswith("https://"), **kw)


_shared: dict[tuple, httpx.Client] = {}
_shared_lock = threading.Lock()


def shared_http(url: str, timeout: float, headers: dict | None = None) -> httpx.Client:
    """One HTTP client (one connection pool) per server elsewhere, shared by every session of the process:
    thread-safe, and it spares each episode a client, a TLS context and a connection of its own for its
    pictures. (A server on this machine is read by `evalkit.envs.client.loopback`.)"""
    key = (url, timeout, tuple(sorted((headers or {}).items())))
    with _shared_lock:
        client = _shared.get(key)
        if client is None or client.is_closed:
            client = _shared[key] = http_client(url, timeout=timeout, headers=headers)
    return client


@dataclass(frozen=True)
class Endpoint:
    """An OpenEnv server whose name and kind were resolved once (`Endpoint.of`, by the env's resolution at
    the door: `evalkit.envs.client.resolved`): sessions on it open without asking `/metadata` or `/schema`
    again. Plain data, so it travels to other processes."""

    base_url: str
    name: str
    schema: dict | None = None
    """The action schema of a typed-action env; None for an MCP env."""
    mirrors: tuple[str, ...] = ()
    """More servers of the same env (an embedded env served by several processes): sessions are spread
    over `base_url` and these in turn."""

    @classmethod
    def of(cls, env: Any, name: str | None = None) -> Endpoint:
        """`env` (a base URL or a served env) as an Endpoint; EnvError when `/schema` cannot be read."""
        if isinstance(env, Endpoint):
            return env
        url = _base_url(env)
        mirrors = tuple(u for u in getattr(env, "base_urls", ()) if u != url)
        return cls(url, name or env_identity(env), action_schema(url), mirrors)


def _base_url(env: Any) -> str:
    url = env if isinstance(env, str) else getattr(env, "base_url", None)
    if not url:
        raise TypeError(f"cannot connect to {env!r}: give a base URL or a served environment")
    return str(url)


METADATA_TIMEOUT = 30.0
"""Seconds `/metadata` may take: OpenEnv builds an instance of the env to answer it, which for an env that
sets up a browser or a sandbox takes seconds."""


def _server_json(url: str, route: str, timeout: float = 10.0) -> dict:
    """A route of the server as a JSON object; {} when it has no such route or answers something else.
    Raises httpx.HTTPError when the server cannot be reached."""
    with http_client(url, timeout=timeout) as client:
        r = client.get(f"{url}{route}")
    try:
        body = r.json() if r.status_code == 200 else None
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def env_identity(env: Any) -> str:
    """The env's name in keys and records: an embedded server's name, else the name the server reports at
    `/metadata` (so a restart on another port still resumes), else its URL. An unreachable server is a
    configuration mistake, reported before any work."""
    if getattr(env, "name", None):
        return env.name
    url = http_url(str(getattr(env, "base_url", env)))
    try:
        name = _server_json(url, "/metadata", METADATA_TIMEOUT).get("name")
    except httpx.TimeoutException as e:
        if not _answers(url, "/health"):
            raise ConfigError(f"cannot reach the environment at {redact_url(url)} ({reason(e)})") from None
        # Said apart from an unreachable server: this one is there, and slow to build its env.
        where = redact_url(url)
        said = (
            f"answers /health but its /metadata took more than {METADATA_TIMEOUT:g}s (an env slow to set up)"
        )
        slow = EnvSlowError(f"the environment at {where} {said}", "/metadata", METADATA_TIMEOUT)
        raise ConfigError(str(slow)) from slow
    except httpx.HTTPError as e:
        raise ConfigError(f"cannot reach the environment at {redact_url(url)} ({reason(e)})") from None
    return str(name) if name else redact_url(url)  # the name goes into every record: no credentials


def action_schema(url: str) -> dict | None:
    """The action schema of a typed-action env, or None for an MCP env (its actions are tool calls) and for
    a server without `/schema`."""
    try:
        action = _server_json(http_url(url), "/schema").get("action")
    except httpx.HTTPError as e:
        raise EnvError(f"cannot reach the environment at {redact_url(http_url(url))}: {reason(e)}") from e
    if not isinstance(action, dict):
        return None
    props = set(action.get("properties") or {})
    # OpenEnv takes MCP actions when the env's action class is CallToolAction or the bare Action.
    return None if "tool_name" in props or props <= {"metadata"} else action


OPENENV_ROUTES = ("/health", "/schema")
"""Routes every OpenEnv server (`create_app`) answers with JSON, besides its WebSocket at `/ws`."""


def _answers(url: str, route: str) -> bool:
    try:
        with http_client(url, timeout=10.0) as client:
            r = client.get(f"{url}{route}")
        return r.status_code == 200 and isinstance(r.json(), dict)
    except (httpx.HTTPError, ValueError):
        return False


def not_openenv(url: str, err: EnvError) -> ConfigError | None:
    """When a server answered a WebSocket at `/ws` as something else (a 404, a plain page): a ConfigError
    naming what it lacks of an OpenEnv server. None when the failure was another (nothing listening, a
    timeout): that is the connection's, said as it is."""
    from websockets.exceptions import InvalidHandshake, InvalidStatus  # start-up (as `wire.Connection`)

    cause = err.__cause__
    if not isinstance(cause, InvalidHandshake):
        return None
    missing = [r for r in OPENENV_ROUTES if not _answers(url, r)]
    if isinstance(cause, InvalidStatus):
        got = f"got HTTP {cause.response.status_code}"
    else:
        got = "was not answered as one"
    return ConfigError(
        f"{redact_url(url)} is not an OpenEnv server: no {', '.join([*missing, '/ws'])} "
        f"(a WebSocket at /ws {got}); give the base URL of a server built with OpenEnv's create_app"
    )


def step_tool(schema: dict) -> ToolSpec:
    """The one tool of a typed-action env: its parameters are the action's fields (OpenEnv's own `metadata`
    field is not the model's to fill)."""
    params = {k: v for k, v in schema.items() if k not in ("title", "description", "properties", "required")}
    params["type"] = "object"
    params["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    required = [r for r in schema.get("required") or [] if r != "metadata"]
    if required:
        params["required"] = required
    about = str(schema.get("description") or "").strip()
    text = (
        "Act in the environment: send one action and get back what you observe next (with the reward, "
        "when the environment gives one)."
    )
    return ToolSpec("step", f"{text} {about}".strip(), params)


def _tool_meta(tool: dict) -> dict:
    meta = tool.get("meta") or tool.get("_meta") or {}
    return meta if isinstance(meta, dict) else {}


def _finishes(tool: dict) -> bool:
    meta = _tool_meta(tool)
    tags = (meta.get("fastmcp") or meta.get("_fastmcp") or {}).get("tags") or []
    return bool(meta.get("finishes_episode")) or FINISH_TAG in tags


def tool_outcome(
    payload: dict, hidden: frozenset[str] = frozenset(), hide: tuple[str, ...] = (),
    records: frozenset[str] = frozenset(),
) -> ToolOutcome:  # fmt: skip
    """An MCP tool call's answer (an OpenEnv `CallToolObservation` on the wire) as a ToolOutcome: the
    tool's text and pictures, then the metadata the model is shown (all but `hidden`, evalkit's own and
    what is withheld from the model: `observation.withheld` with `hide` and the Task API's `records`)."""
    obs = payload.get("observation") or {}
    meta = dict(payload.get("metadata") or obs.get("metadata") or {})
    shown_meta = observation.withhold(meta, observation.withheld(meta, hide, records))
    texts: list[str] = []
    images: list[Image] = []
    error = obs.get("error")
    is_error = bool(error)
    if error:
        texts.append(str(error.get("message") if isinstance(error, dict) else error))
    result = obs.get("result")
    if isinstance(result, dict):
        is_error = is_error or bool(result.get("is_error") or result.get("isError"))
        texts += _result_texts(result, images, meta, hide, records)
    elif result is not None:
        lifted = observation.lift(result, "result", None, images, 1)
        texts.append(lifted if isinstance(lifted, str) else observation.readable(lifted))
    known, pictures = observation.render_metadata(shown_meta, hidden, first=len(images) + 1)
    texts.append(known)
    return _outcome("\n".join(t for t in texts if t), images + pictures, is_error, payload, obs, meta)


RESULT_KEYS = frozenset({"content", "data", "structured_content", "structuredContent", "is_error", "isError",
                         "meta", "_meta", "blocks"})  # fmt: skip
"""Keys of a tool's result that say how it is made (MCP's content list and data, OpenReward's blocks), not
what the tool answered beside them."""


def _result_texts(
    result: dict, images: list[Image], meta: dict, hide: tuple[str, ...], records: frozenset[str]
) -> list[str]:
    """What a tool's result says, whatever shape its wrapper gave it: MCP's `content` items (text and
    pictures), else its `data`; OpenReward's `blocks` (text and image blocks, as `openenv import`'s wrapper
    sends them, the block metadata beside them when it is not the observation's own); any other dict as
    JSON, without what is withheld from the model."""
    content = result.get("content") or []
    texts = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict) and item.get("type") == "image":
            images += observation.images_in(item)
        elif isinstance(item, dict) and item.get("type") == "text":
            texts.append(_text_item(str(item.get("text", "")), images))
    if content:
        return texts
    if result.get("data") is not None:
        data = observation.lift(result["data"], "data", None, images, 1)
        return [data if isinstance(data, str) else json.dumps(data, default=str, ensure_ascii=False)]
    blocks = result.get("blocks")
    if isinstance(blocks, list):
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(_text_item(str(block.get("text", "")), images))
            elif isinstance(block, dict) and block.get("type") == "image":
                images += observation.images_in(block)
                texts.append(f"[image {len(images)}]")
    rest = {k: v for k, v in result.items() if k not in RESULT_KEYS}
    if isinstance(rest.get("metadata"), dict) and (rest["metadata"] == meta or not rest["metadata"]):
        rest.pop("metadata")  # OpenReward's wrapper sends the tool's metadata twice: shown once, below
    rest = observation.withhold(rest, observation.withheld(rest, hide, records))
    if rest:
        lifted = observation.lift(rest, "", None, images, 1)
        texts.append(observation.readable(lifted))
    return texts


def _text_item(text: str, images: list[Image]) -> str:
    """An MCP text item as the model reads it. A tool that returns a picture as base64 text (a data URI, a
    PNG's base64), or JSON holding one (fastmcp sends a tool's dict as JSON text), returns a picture: it is
    moved to `images` and its place says `[image N]`."""
    picture = observation.as_image("", text.strip())
    if picture is not None:
        images.append(picture)
        return f"[image {len(images)}]"
    if len(text) >= observation.MIN_B64 and text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            return text
        before = len(images)
        lifted = observation.lift(data, "", None, images, 1)
        if len(images) > before:
            return json.dumps(lifted, ensure_ascii=False, default=str)
    return text


def typed_outcome(
    payload: dict, hidden: frozenset[str] = frozenset(), hide: tuple[str, ...] = (),
    records: frozenset[str] = frozenset(),
) -> ToolOutcome:  # fmt: skip
    """A typed env's observation after `step`: its fields, then the metadata the model is shown (all but
    `hidden`, evalkit's own and what is withheld from the model), as text; their pictures as images."""
    obs = payload.get("observation") or {}
    meta = dict(payload.get("metadata") or obs.get("metadata") or {})
    fields = observation.withhold(obs, observation.withheld(obs, hide, records))
    shown_meta = observation.withhold(meta, observation.withheld(meta, hide, records))
    text, images = observation.render(fields)
    known, pictures = observation.render_metadata(shown_meta, hidden, skip=obs, first=len(images) + 1)
    text, images = "\n".join(t for t in (text, known) if t), images + pictures
    reward = payload.get("reward", obs.get("reward"))
    if reward is not None:
        text = f"{text}\nreward: {reward}" if text else f"reward: {reward}"
    return _outcome(text or "(the observation is empty)", images, False, payload, obs, meta)


def _outcome(
    text: str, images: list[Image], is_error: bool, payload: dict, obs: dict, meta: dict
) -> ToolOutcome:
    reward = payload.get("reward", obs.get("reward"))
    grade = meta.get("grade") if isinstance(meta.get("grade"), dict) else None
    return ToolOutcome(
        text=text,
        images=images,
        is_error=is_error,
        done=bool(payload.get("done") or obs.get("done")),
        reward=float(reward) if isinstance(reward, int | float) else None,  # OpenEnv allows a bool reward
        grade=grade,
        metadata=meta,
    )


FAILED_FROM_FIRST = 3
"""Steps in a row that failed from an episode's first (EXECUTION_ERROR, none run) after which the env, not the
model, is taken to be failing: dipg, written for an older API, raises on every step, while OpenSpiel and
Atari raise only for an illegal move, and a move after it runs."""

DEAD_DETAIL = ("error", "message", "reason", "detail")
"""Metadata keys a dead reset's explanation is read from, for the message only (never to classify it)."""


def dead_reset(meta: dict) -> EnvDeadError:
    """The error a reset that answered `done` stands for: what the server said (its `status` and the first
    of its `error` / `message` / ... texts), scrubbed of anything shaped like a key and cut short."""
    status = meta.get("status")
    status = scrub(str(status))[:80] if status is not None else None
    detail = next((meta[k] for k in DEAD_DETAIL if isinstance(meta.get(k), str) and meta[k].strip()), None)
    detail = scrub(" ".join(detail.split()))[:300] if detail else None
    said = f", status: {status}" if status else ""
    text = f"the environment ended the episode at its reset (done: true{said})"
    return EnvDeadError(f"{text}: {detail}" if detail else text, status, detail)


class OpenEnvSession:
    """One episode's connection to an OpenEnv MCP server."""

    kind = "mcp"
    background_reads = True
    """Its pictures and document (HTTP reads apart from the WebSocket, on connections safe to use from any
    thread) may be read from another thread, beside each other: the loop takes frames while the model
    thinks."""

    def __init__(
        self,
        base_url: str,
        *,
        message_timeout_s: float = 120.0,
        headers: dict | None = None,
        hide: tuple[str, ...] | list[str] = (),
        records: frozenset[str] = frozenset(),
    ):
        self.base_url = base_url.rstrip("/")
        self.http_base = http_url(self.base_url)
        self.metadata: dict = {}
        self.hidden: frozenset[str] = frozenset()
        """Metadata keys the env hid from the model at reset (`hidden_keys`): hidden in its results too."""
        self.hide, self.records = tuple(hide), frozenset(records)
        """Keys the user withholds from the model (`--hide-field`), and digests of the Task API's records of
        the tasks (`evalkit.envs.client.tasks.records`): a value equal to one is withheld too."""
        self.withheld: dict[str, str] = {}
        """What the reset's metadata and observation hold that the model is never sent: key → why
        (`observation.withheld`)."""
        self._ran = self._failed = 0
        """Steps of this episode the env ran, and steps it failed to run (EXECUTION_ERROR)."""
        self._unsure = False
        """The last step failed and the env's state could not say whether the session still works."""
        self._state_answered = False
        """The env's state answered at the reset: failing after a failed step, it says the session broke."""
        self.observation: dict = {}
        """The reset observation's own fields (everything but done, reward and metadata)."""
        self._missing: set[str] = set()
        self.state_seen: dict | None = None
        """The env's state as `state()` last read it this episode."""
        self._timeout, self._headers = message_timeout_s, headers
        local = loopback.is_loopback(self.http_base)
        self._http = None if local else shared_http(self.http_base, message_timeout_s, headers)
        """httpx for a server elsewhere; a loopback server's pictures are read by
        `evalkit.envs.client.loopback`."""
        try:
            self._conn = Connection(self.base_url, timeout=message_timeout_s, headers=headers)
        except EnvError as e:
            raise not_openenv(self.http_base, e) or e from None

    def reset(self, **kwargs: Any) -> dict:
        """Start an episode; returns the reset observation's metadata (instructions, task id, ...), with the
        `episode_id` the env's state reports when the metadata has none (a typed env's).

        Raises EnvDeadError when the reset answers `done` (nothing can be played), EnvSlowError when the
        server answers `/health` but not the reset in time, EnvUnreachableError when it answers neither."""
        try:
            payload = self._conn.reset(**{k: v for k, v in kwargs.items() if v is not None})
        except EnvSlowError as e:
            raise self._slow_or_gone(e) from None
        obs = payload.get("observation") or {}
        self.metadata = dict(payload.get("metadata") or obs.get("metadata") or {})
        self.observation = {k: v for k, v in obs.items() if k not in observation.SKIP}
        self.hidden = frozenset(observation.hidden_keys(self.metadata))
        self.withheld = {
            **observation.withheld(self.observation, self.hide, self.records),
            **observation.withheld(self.metadata, self.hide, self.records),
        }
        self._missing.clear()
        self.state_seen, self._state_answered = None, False
        self._ran = self._failed = 0
        self._unsure = False
        if payload.get("done") or obs.get("done"):
            raise dead_reset(self.metadata)
        # The state is read at every reset (a round trip of ~0.1 ms on loopback, a fifth of a reset's): it
        # gives a typed env's episode id, and after a step the env raised on, a state that answered here
        # and fails there says the session broke (`_answers`).
        episode = self.state().get("episode_id")
        if episode and not self.metadata.get("episode_id"):
            self.metadata["episode_id"] = str(episode)
        return self.metadata

    def state(self) -> dict:
        """The env's own state (OpenEnv's `state` message: its episode id, step count, and for many envs
        their configuration, e.g. OpenSpiel's `game_name`); {} when the env cannot say."""
        if self.state_seen is None:
            try:
                self.state_seen = self._conn.request("state")
                self._state_answered = True
            except ServerError as e:  # an env whose `state` raises: it simply has none to give
                log.debug("no state from %s: %s", redact_url(self.base_url), e)
                self.state_seen = {}
        return self.state_seen

    def configuration(self, sent: dict | None = None) -> dict:
        """What the env reports of its configuration (`identity.configuration` over the reset's metadata
        and observation, its state and the server's `/metadata`), without the keys the reset was `sent`."""
        try:
            described = _server_json(self.http_base, "/metadata", METADATA_TIMEOUT)
        except httpx.HTTPError:
            described = {}
        return identity.configuration(self.metadata, self.observation, self.state(), described, sent)

    def _slow_or_gone(self, err: EnvSlowError) -> EnvError:
        where = redact_url(self.http_base)
        if _answers(self.http_base, "/health"):
            return EnvSlowError(
                f"the environment at {where} answers /health but its reset took more than {err.seconds:g}s "
                "(an env slow to set up: give it a longer message timeout)",
                "reset",
                err.seconds,
            )
        gone = (
            f"the environment at {where} stopped answering: no /health, and no reset within {err.seconds:g}s"
        )
        return EnvUnreachableError(gone)

    def tools(self) -> list[ToolSpec]:
        tools = self._conn.mcp("tools/list").get("tools") or []
        return [
            ToolSpec(
                str(t["name"]),
                str(t.get("description") or ""),
                t.get("inputSchema") or t.get("input_schema") or {"type": "object", "properties": {}},
                finishes=_finishes(t),
                auto_submit=bool(_tool_meta(t).get("auto_submit")),
            )
            for t in tools
            if isinstance(t, dict) and t.get("name")
        ]

    def call(self, name: str, args: dict) -> ToolOutcome:
        # An MCP env answers a failing tool inside its observation (OpenEnv's MCPEnvironment catches it); an
        # EXECUTION_ERROR frame means the env's step raised: `_step` tells a refused call from a broken env.
        try:
            payload = self._step({"type": "call_tool", "tool_name": name, "arguments": args}, name)
        except ActionRefused as e:
            return ToolOutcome(f"error: {e}", is_error=True)
        if isinstance(payload, ToolOutcome):
            return payload
        return tool_outcome(payload, self.hidden, self.hide, self.records)

    def _step(self, action: dict, name: str) -> dict | ToolOutcome:
        """One step: the server's answer, or — when the env raised while running it (EXECUTION_ERROR) and
        the session still answers — that error as a tool error the model reads (an illegal move is its
        mistake). Raises EnvStepError, the env's failure, when the session no longer answers, or when
        every step has failed from the first (FAILED_FROM_FIRST of them: an env written for another API)."""
        try:
            payload = self._conn.step(action)
        except EnvStepError as e:
            self._failed += 1
            said = f"{e} (while running {name})"
            answers = self._answers()
            if answers is False or (answers is None and self._unsure):
                raise EnvStepError(f"{said}; the session no longer answers", e.code) from None
            self._unsure = answers is None  # its state cannot say: the next step will
            if not self._ran and self._failed >= FAILED_FROM_FIRST:
                first = f"every step failed from the first ({self._failed}); last: {said}"
                raise EnvStepError(first, e.code) from None
            return ToolOutcome(f"error: {e}", is_error=True, metadata={"execution_error": e.code})
        self._ran += 1
        self._unsure = False
        return payload

    def _answers(self) -> bool | None:
        """Whether the session still works after a failed step: its state answers (True); the connection
        is gone, or a state that answered before now fails (False); a state that has never answered fails
        again (None: it cannot say)."""
        try:
            self._conn.request("state")
        except ServerError:
            return False if self._state_answered else None
        except EnvError:
            return False
        self._state_answered = True
        return True

    def unplayable(self) -> EnvStepError | None:
        """At the end of an episode: the env's failure when every step it was sent failed (EXECUTION_ERROR)
        and none ran — nothing the model did was ever played; None otherwise."""
        if self._failed and not self._ran:
            return EnvStepError(f"every step failed ({self._failed} of {self._failed}); none was run")
        return None

    # ---- pictures, each route on its own

    def _get(self, route: str) -> tuple[bytes, str] | None:
        """The body and content type of one of the episode's routes; None when there is none."""
        episode = self.metadata.get("episode_id")
        if not episode or route in self._missing:
            return None
        url = f"{self.http_base}/api/episodes/{episode}{route}"
        try:
            if self._http is None:
                status, ctype, body = loopback.get(url, self._timeout, self._headers)
            else:
                r = self._http.get(url)
                status, ctype, body = r.status_code, r.headers.get("content-type", ""), r.content
        except (httpx.HTTPError, http.client.HTTPException, OSError) as e:
            log.debug("%s unavailable: %s", route, e)
            return None
        if status in (404, 405):
            self._missing.add(route)  # this server has no such route: don't ask again this episode
        return (body, ctype) if status == 200 else None

    def _picture(self, route: str) -> Image | None:
        got = self._get(route)
        if got is None:
            return None
        body, ctype = got
        return Image(body, (ctype or "image/png").split(";")[0])

    def render(self) -> Image | None:
        """The environment's current state as a picture, when the server offers one."""
        return self._picture("/render.png")

    def target(self) -> Image | None:
        """What the task asks for: the reset's reference image, or the server's reference route."""
        b64 = self.metadata.get("reference_jpeg_b64")
        if b64:
            return Image.from_b64(b64, "image/jpeg")
        return self._picture("/reference.jpg")

    def document(self) -> Any:
        """The environment's own final state (the canvas document), when the server offers it."""
        got = self._get("")
        try:
            return json.loads(got[0]) if got is not None else None
        except ValueError:
            return None

    _leave: Callable[[], None] | None = None
    """Tells the spread of an env's servers this session is gone (`connect`)."""

    def close(self) -> None:
        leave, self._leave = self._leave, None
        try:
            self._conn.close()
        finally:
            if leave is not None:
                leave()

    def __enter__(self) -> OpenEnvSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TypedSession(OpenEnvSession):
    """One episode's connection to a typed-action OpenEnv env, driven through one tool, `step`."""

    kind = "typed"

    def __init__(self, base_url: str, schema: dict, **kw: Any):
        super().__init__(base_url, **kw)
        self.schema = schema
        """The env's action schema, as `/schema` serves it."""

    def tools(self) -> list[ToolSpec]:
        """The one tool, `step`; its parameters are the action schema, with the shape the env's state gives
        its one list of numbers (`actions.shaped`: dm_control's `action_spec`)."""
        return [step_tool(actions.shaped(self.schema, self.state()))]

    def call(self, name: str, args: dict) -> ToolOutcome:
        if name != "step":
            return ToolOutcome(f"unknown tool {name!r}: this environment has one tool, step", is_error=True)
        # An action that does not fit the schema is the model's to read; a step the env raised on is read
        # by `_step` (a refused move, or a broken env).
        try:
            payload = self._step(args, name)
        except ActionRefused as e:
            return ToolOutcome(f"the environment refused the action: {e}", is_error=True)
        if isinstance(payload, ToolOutcome):
            return payload
        return typed_outcome(payload, self.hidden, self.hide, self.records)


def connect(env: Any, spread: str | None = None, **kw: Any) -> OpenEnvSession:
    """Open a session on `env` (a base URL, or anything with a `base_url`, such as an `EnvServer` or an
    `Endpoint`), of the kind the server is: MCP or typed-action. `spread`: what the session will open (its
    task, `sessions.spread_key`), which picks the server among an Endpoint's (`Spread`)."""
    url, picked = _base_url(env), None
    if isinstance(env, Endpoint) and env.mirrors:
        url = picked = _spread.pick((url, *env.mirrors), spread)
    try:
        schema = env.schema if isinstance(env, Endpoint) else action_schema(url)
        session = TypedSession(url, schema, **kw) if schema is not None else OpenEnvSession(url, **kw)
    except BaseException:
        if picked is not None:
            _spread.leave(picked)
        raise
    if picked is not None:
        session._leave = functools.partial(_spread.leave, picked)
    return session


SPREAD_SLACK = 4
"""Sessions a server may hold beyond the least busy of its Endpoint's before a task's sessions go to
another."""


class Spread:
    """Which of an Endpoint's servers (an embedded env served by several processes) a session goes to.

    Sessions of one task go to one server: what an env works out from a task alone is kept by the process
    that worked it out (the canvas' reference image, its grade's preparation of the target: ~2 ms of a
    reset's ~4), and a batch runs a task's episodes (its models, its repeats) one after the other, so in
    turn over two servers each worked out every task twice. A server already holding more than
    `SPREAD_SLACK` sessions beyond the least busy one takes no more of them until that evens out: a few
    tasks repeated many times still share the servers. A session of no known task goes to each in turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self._turns = itertools.count()

    def pick(self, urls: tuple[str, ...], key: str | None) -> str:
        with self._lock:
            if key is None:
                url = urls[next(self._turns) % len(urls)]
            else:
                url = urls[zlib.crc32(key.encode()) % len(urls)]
                least = min(urls, key=lambda u: self._open.get(u, 0))
                if self._open.get(url, 0) - self._open.get(least, 0) > SPREAD_SLACK:
                    url = least
            self._open[url] = self._open.get(url, 0) + 1
            return url

    def leave(self, url: str) -> None:
        with self._lock:
            self._open[url] -= 1

    def open(self, url: str) -> int:
        """Sessions open on `url` that were spread here."""
        with self._lock:
            return self._open.get(url, 0)


_spread = Spread()
