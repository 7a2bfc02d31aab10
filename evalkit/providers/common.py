"""What the wire modules share beside their agents' base (`evalkit.providers.agent`): keys from `.env`, the
SDK clients, tool-argument parsing, the texts the harness itself says to a model, raw bodies for the record.
(How requests are retried and accounted for is `evalkit.providers.attempts`.)"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from dotenv import find_dotenv, load_dotenv

from evalkit.errors import ConfigError
from evalkit.providers import clock
from evalkit.types import AgentOptions, Call

log = logging.getLogger(__name__)

T = TypeVar("T")

NOTES_TAIL = 8000
"""Characters of a cut-off turn's reasoning handed back as notes."""

NOTES_NUDGE = (
    "Your previous turn hit the output limit before you called a tool, so it was lost. "
    "Here is the end of your reasoning from that turn, as notes:\n\n<notes>\n{notes}\n</notes>\n\n"
    "Keep your reasoning short this time and call a tool."
)

_loaded: set[Path] = set()


def load_env(env_file: str | os.PathLike | None = None) -> Path | None:
    """Load API keys from `env_file`, or from the nearest `.env` up from the working directory.

    Variables already set in the environment win. Returns the file read, if any.
    """
    if env_file is not None:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"env file {str(path)!r} does not exist")
    else:
        found = find_dotenv(usecwd=True)
        if not found:
            return None
        path = Path(found)
    path = path.resolve()
    if path not in _loaded:
        load_dotenv(path, override=False)
        _loaded.add(path)
    return path


def user_file(variable: str, name: str) -> Path | None:
    """A user's file of evalkit data: the one `variable` names (which must exist), else `name` in evalkit's
    config directory (`$XDG_CONFIG_HOME/evalkit`, or `~/.config/evalkit`) when it is there."""
    named = os.environ.get(variable)
    if named:
        return Path(named).expanduser()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = config / "evalkit" / name
    return path if path.is_file() else None


def sdk(name: str, extra: str = "") -> ModuleType:
    """Import a provider SDK, or say how to install it. The wire modules import their SDK only through this,
    when a request is made: a missing SDK never breaks the offline agents, and importing a wire module (or
    `evalkit.run`) costs no SDK's start-up (tests/providers/test_agent.py checks it)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"the {name!r} package is needed for this provider: pip install {extra or name}"
        ) from exc


_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()


def shared_client(module: ModuleType, cls: str, env_prefix: str, **kwargs: Any) -> Any:
    """The SDK client `module.<cls>(**kwargs)`, made once per configuration and shared by the episodes of the
    process: a client per episode cost a TLS context (tens of milliseconds of CPU) and a new connection pool
    each time. The configuration includes the SDK's own variables (`<env_prefix>*`: key, base URL, ...),
    which it reads when an argument is not given, so a changed variable gets its own client.

    A plain-http endpoint (a server of the user's own, such as vLLM) gets a client per thread, with an HTTP
    client without a CA store to load: an episode thread's requests then search a pool of one connection.
    In one pool shared by fifty threads, each request and each reply's end walked all fifty connections
    under the pool's lock, polling every idle one's socket, and each poll handed the GIL on. A client of a
    thread that has ended is closed when another is made."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(env_prefix)))
    base = str(kwargs.get("base_url") or dict(env).get(f"{env_prefix}BASE_URL") or "")
    plain = base.startswith("http://")
    key = (module.__name__, cls, tuple(sorted(kwargs.items())), env, threading.get_ident() if plain else None)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            if plain:
                _close_ended_threads()
            extra = {"http_client": module.DefaultHttpxClient(verify=False)} if plain else {}
            client = _clients[key] = getattr(module, cls)(**kwargs, **extra)
    return client


@dataclass(frozen=True)
class Sdk:
    """A vendor's SDK as the wire modules use it: its module, its client class, and the prefix of the
    variables it reads itself (`<prefix>API_KEY`, `<prefix>BASE_URL`). Its `required_keys` and `endpoint_url`
    are a provider module's, for a wire whose SDK alone says where requests go."""

    name: str
    cls: str
    prefix: str

    def client(self, options: AgentOptions, endpoint: Callable[[], dict] = dict) -> Any:
        """The shared client (`shared_client`) for an agent with `options`, once `.env` is loaded;
        `endpoint()` gives the arguments of a server the SDK's own variables do not name. The SDK's retries
        are off: every request is made by `evalkit.providers.attempts`, where each is seen and accounted
        for, and `clock` bounds its time."""
        module = sdk(self.name)
        load_env()
        timeout = clock.request_seconds(options)
        return shared_client(module, self.cls, self.prefix, max_retries=0, timeout=timeout, **endpoint())

    def required_keys(self, model: str, provider: str | None = None) -> list[list[str]]:
        load_env()
        return [[f"{self.prefix}API_KEY"]]

    def endpoint_url(self, model: str, provider: str | None = None) -> tuple[str, str]:
        """(the base URL a client sends to, the variable that sets it), for the reachability check before a
        run."""
        load_env()
        return str(getattr(sdk(self.name), self.cls)(api_key="-").base_url), f"{self.prefix}BASE_URL"


ANTHROPIC = Sdk("anthropic", "Anthropic", "ANTHROPIC_")
OPENAI = Sdk("openai", "OpenAI", "OPENAI_")


def release_clients() -> None:
    """Close the clients (and the connections they keep) of threads that have ended: a batch's, once its
    episode threads are gone."""
    with _clients_lock:
        _close_ended_threads()


def _close_ended_threads() -> None:
    """Close the clients of threads that have ended (with `_clients_lock` held)."""
    alive = {t.ident for t in threading.enumerate()}
    for key in [k for k in _clients if k[-1] is not None and k[-1] not in alive]:
        client = _clients.pop(key)
        try:
            client.close()
        except Exception as e:  # a client that will not close costs its sockets, never the batch
            log.debug("closing an SDK client: %s", e)


@atexit.register
def close_clients() -> None:
    """Close the shared clients and the connections their pools keep (at exit, where one left open is
    reported as an unclosed socket)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        try:
            client.close()
        except Exception as e:  # closing must not fail an exit
            log.debug("closing an SDK client: %s", e)


def parse_args(raw: Any) -> tuple[dict, str | None]:
    """Tool-call arguments as a dict, or ({}, why not): a model's malformed arguments are data, not errors."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if not isinstance(raw, str):
        return {}, f"tool arguments must be a JSON object, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"tool arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def make_call(call_id: str, name: str, raw: Any) -> Call:
    args, error = parse_args(raw)
    return Call(id=call_id, name=name, args=args, raw=raw if isinstance(raw, str) else None, error=error)


def wire_args(call: Call) -> str:
    """The arguments to re-send: a broken string would make some servers reject the whole prompt."""
    return call.raw if call.error is None and call.raw is not None else json.dumps(call.args)


def notes_text(reasoning: str) -> str:
    return NOTES_NUDGE.format(notes=reasoning[-NOTES_TAIL:].strip() or "(no reasoning was returned)")


def data_url(mime: str, b64: str) -> str:
    return f"data:{mime};base64,{b64}"


def snapshot(node: Any, is_image: Any, frame: Any) -> Any:
    """A copy of a request body for the record (`--save-raw`): every image block becomes
    `{"type": its type, "frame": run-relative path in the frame store}` (`frame(block)`, None when unknown),
    so the body is text and the pictures are stored once."""
    if isinstance(node, dict):
        if is_image(node):
            return {"type": node.get("type"), "frame": frame(node)}
        return {k: snapshot(v, is_image, frame) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [snapshot(v, is_image, frame) for v in node]
    return node


def exchange(sent: dict | None, response: Any, is_image: Any, frame: Any) -> dict:
    """The raw request and response of one model call, as `--save-raw` keeps them; a streamed response is
    the message its events assembled."""
    return {"request": snapshot(sent or {}, is_image, frame), "response": response}
