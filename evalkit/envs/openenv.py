"""An `EnvSession` over OpenEnv's MCP WebSocket client: one session per episode.

Works with any OpenEnv MCP server — an embedded one from `evalkit.envs.server` or a user's own at
`--base-url`. Servers that also offer evalkit's HTTP picture routes (`/api/episodes/{id}/render.png`,
`/reference.jpg`, `/api/episodes/{id}`) get frames, targets and final documents; others simply don't.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx

from evalkit.errors import ConfigError, EnvError
from evalkit.types import Image, ToolOutcome, ToolSpec

log = logging.getLogger(__name__)


def _image_item(item: dict) -> Image | None:
    data = item.get("data")
    if not data:
        return None
    # fastmcp 3 sends mimeType, fastmcp 4 mime_type.
    mime = item.get("mimeType") or item.get("mime_type") or "image/png"
    try:
        return Image(base64.b64decode(data), mime)
    except (ValueError, TypeError):
        return None


def outcome_from_step(result: Any) -> ToolOutcome:
    """Convert an OpenEnv `StepResult` of a `CallToolAction` into a ToolOutcome."""
    obs = result.observation
    meta = dict(getattr(result, "metadata", None) or getattr(obs, "metadata", None) or {})
    texts: list[str] = []
    images: list[Image] = []
    is_error = False
    error = getattr(obs, "error", None)
    if error is not None:
        is_error = True
        texts.append(str(getattr(error, "message", error)))
    payload = getattr(obs, "result", None)
    if hasattr(payload, "model_dump"):
        payload = payload.model_dump()
    if isinstance(payload, dict):
        is_error = is_error or bool(payload.get("is_error") or payload.get("isError"))
        for item in payload.get("content") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "image":
                img = _image_item(item)
                if img is not None:
                    images.append(img)
            elif item.get("type") == "text":
                texts.append(str(item.get("text", "")))
        if not payload.get("content") and payload.get("data") is not None:
            data = payload["data"]
            texts.append(data if isinstance(data, str) else json.dumps(data, default=str))
    elif payload is not None:
        texts.append(str(payload))
    reward = result.reward if result.reward is not None else getattr(obs, "reward", None)
    grade = meta.get("grade") if isinstance(meta.get("grade"), dict) else None
    return ToolOutcome(
        text="\n".join(t for t in texts if t),
        images=images,
        is_error=is_error,
        done=bool(result.done or getattr(obs, "done", False)),
        reward=float(reward) if reward is not None else None,
        grade=grade,
        metadata=meta,
    )


def http_url(url: str) -> str:
    """The HTTP base of a server given by its HTTP or WebSocket URL."""
    return url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)


def env_identity(env: Any) -> str:
    """The env's name in keys and records: an embedded server's name, else the name the server reports at
    `/metadata` (so a restart on another port still resumes), else its URL. An unreachable server is a
    configuration mistake, reported before any work."""
    if getattr(env, "name", None):
        return env.name
    url = http_url(str(getattr(env, "base_url", env)))
    try:
        r = httpx.get(f"{url}/metadata", timeout=10.0)
    except httpx.HTTPError as e:
        raise ConfigError(f"cannot reach the environment at {url} ({type(e).__name__})") from None
    try:
        name = r.json().get("name") if r.status_code == 200 else None
    except ValueError:
        name = None
    return str(name) if name else url


class OpenEnvSession:
    """One episode's connection to an OpenEnv MCP server."""

    def __init__(self, base_url: str, *, message_timeout_s: float = 120.0, headers: dict | None = None):
        from openenv.core.mcp_client import MCPToolClient

        self.base_url = base_url.rstrip("/")
        self.http_base = http_url(self.base_url)
        self.metadata: dict = {}
        self._http = httpx.Client(timeout=message_timeout_s, headers=headers)
        self._has_pictures: bool | None = None
        self._client = MCPToolClient(
            self.base_url, message_timeout_s=message_timeout_s, headers=headers
        ).sync()
        try:
            self._client.connect()
        except Exception as e:
            self.close()  # the sync client owns an event-loop thread that would otherwise outlive us
            raise EnvError(f"cannot connect to the environment at {self.base_url}: {e}") from e

    def reset(self, **kwargs: Any) -> dict:
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        try:
            result = self._client.reset(**kwargs)
        except Exception as e:
            raise EnvError(f"reset failed: {type(e).__name__}: {e}") from e
        obs = result.observation
        self.metadata = dict(getattr(obs, "metadata", None) or getattr(result, "metadata", None) or {})
        return self.metadata

    def tools(self) -> list[ToolSpec]:
        try:
            tools = self._client.list_tools(use_cache=False)
        except Exception as e:
            raise EnvError(f"list_tools failed: {type(e).__name__}: {e}") from e
        return [
            ToolSpec(t.name, t.description or "", t.input_schema or {"type": "object", "properties": {}})
            for t in tools
        ]

    def call(self, name: str, args: dict) -> ToolOutcome:
        from openenv.core.env_server.mcp_types import CallToolAction

        try:
            result = self._client.step(CallToolAction(tool_name=name, arguments=args))
        except Exception as e:
            raise EnvError(f"tool call {name} failed: {type(e).__name__}: {e}") from e
        return outcome_from_step(result)

    def _picture(self, route: str) -> Image | None:
        episode = self.metadata.get("episode_id")
        if not episode or self._has_pictures is False:
            return None
        try:
            r = self._http.get(f"{self.http_base}/api/episodes/{episode}/{route}")
        except httpx.HTTPError as e:
            log.debug("picture %s unavailable: %s", route, e)
            return None
        if r.status_code != 200:
            if self._has_pictures is None and r.status_code == 404:
                self._has_pictures = False
            return None
        self._has_pictures = True
        return Image(r.content, r.headers.get("content-type", "image/png").split(";")[0])

    def render(self) -> Image | None:
        """The environment's current state as a picture, when the server offers one."""
        return self._picture("render.png")

    def target(self) -> Image | None:
        """What the task asks for: the reset's reference image, or the server's reference route."""
        b64 = self.metadata.get("reference_jpeg_b64")
        if b64:
            return Image.from_b64(b64, "image/jpeg")
        return self._picture("reference.jpg")

    def document(self) -> Any:
        """The environment's own final state (the canvas document), when the server offers it."""
        episode = self.metadata.get("episode_id")
        if not episode or self._has_pictures is False:
            return None
        try:
            r = self._http.get(f"{self.http_base}/api/episodes/{episode}")
            return r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def close(self) -> None:
        try:
            self._client.close()
        except Exception as e:  # closing a dead socket must not mask the episode's own outcome
            log.debug("close failed: %s", e)
        self._http.close()

    def __enter__(self) -> OpenEnvSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(env: Any, **kw: Any) -> OpenEnvSession:
    """Open a session on `env`: a base URL, or anything with a `base_url` (an `EnvServer`)."""
    url = env if isinstance(env, str) else getattr(env, "base_url", None)
    if not url:
        raise TypeError(f"cannot connect to {env!r}: give a base URL or a served environment")
    return OpenEnvSession(url, **kw)
