"""The shared vocabulary: what an agent returns, what an environment answers, what a trace holds.

Two Protocols meet only in `run_episode`: an `Agent` (a model behind one wire API, or an offline policy)
and an `EnvSession` (one episode's connection to an environment). Everything in a trace is one of the
record dataclasses below, serialised with `to_dict`; no SDK object ever reaches a trace.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evalkit import wellformed

FORMAT_VERSION = 1

END_REASONS = (
    "submitted", "done", "answered", "auto_submitted", "turn_limit", "no_tool_call", "deadline", "refused",
    "context_overflow", "malformed_call", "cost_limit", "error",
)  # fmt: skip
"""`submitted`: the model called the env's finishing tool and the env ended the episode; `done`: the env ended
it on another action (a typed env's step, a game won or lost); `answered`: in an env with no finishing tool,
the model replied in text without a tool call, and that reply is its answer; `auto_submitted`: the env ended
it on its own budget; `turn_limit` / `no_tool_call` / `deadline` / `cost_limit` (its cost passed
`--episode-max-cost`): the loop ended it (then submitting on the model's behalf through a finishing tool that
needs no arguments, when the env has one); `refused`: the model declined to go on (`Turn.refused`), and the
loop ended the episode as data; `context_overflow`: the model's conversation grew past its context window (the
API refused the prompt as too long), and `malformed_call`: it wrote MAX_NUDGES tool calls in a row that the
server refused to pass on — both the model's outcome, scored as the env scores an unfinished episode; `error`:
the infrastructure broke it."""


@dataclass(frozen=True)
class Image:
    """Encoded image bytes as they travel between an environment and a model."""

    data: bytes
    mime: str = "image/png"

    @property
    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @functools.cached_property
    def sha256(self) -> str:
        # Cached: the frame store, the transcript and a provider's image ledger all ask for it.
        return hashlib.sha256(self.data).hexdigest()

    @property
    def ext(self) -> str:
        return {"image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}.get(self.mime, "png")

    @property
    def frame_rel(self) -> str:
        """Where a run's frame store keeps this image (content-addressed), relative to the run."""
        digest = self.sha256
        return f"frames/{digest[:2]}/{digest}.{self.ext}"

    @classmethod
    def from_b64(cls, data: str, mime: str = "image/png") -> Image:
        return cls(base64.b64decode(data), mime)

    @classmethod
    def from_pil(cls, img: Any, fmt: str = "PNG", **save_kw: Any) -> Image:
        buf = io.BytesIO()
        img.save(buf, fmt, **save_kw)
        return cls(buf.getvalue(), "image/jpeg" if fmt.upper() in ("JPG", "JPEG") else f"image/{fmt.lower()}")

    def to_pil(self) -> Any:
        # start-up: Pillow only for an image's size
        from PIL import Image as PILImage

        return PILImage.open(io.BytesIO(self.data))

    def __repr__(self) -> str:
        return f"Image({self.mime}, {len(self.data)} bytes)"


@dataclass
class ToolSpec:
    """A tool as the environment declares it: name, description, JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    finishes: bool = False
    """The env marks this tool as the one that ends the episode (MCP meta `finishes_episode`, or the
    fastmcp tag `finish`); providers send only name, description and parameters."""
    auto_submit: bool = False
    """The env marks this (finishing) tool as one the loop may call with no arguments on the model's
    behalf though it takes some, all optional (MCP meta `auto_submit`)."""


@dataclass
class Call:
    """One tool call a model asked for."""

    id: str
    name: str
    args: dict
    raw: str | None = None
    """The arguments exactly as the model sent them, when they came as a string."""
    error: str | None = None
    """Why the arguments could not be used (not JSON, not an object). Such a call is not executed: the error
    goes back to the model as the tool result and the episode goes on."""


@dataclass
class Usage:
    """Tokens of one model call or a sum of them."""

    input: int = 0
    """Input tokens not read from or written to the cache."""
    output: int = 0
    """Output tokens, reasoning included."""
    cache_read: int = 0
    cache_write: int = 0
    reasoning_tokens: int = 0
    reasoning_chars: int = 0
    """Characters of visible or summarised reasoning; APIs that hide reasoning tokens still show its size."""

    def __add__(self, other: Usage) -> Usage:
        # Field by field: `dataclasses.astuple` deep-copies every value, 12 us a sum against 1.5, six sums
        # an episode.
        return Usage(*(getattr(self, n) + getattr(other, n) for n in _USAGE_FIELDS))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> Usage:
        d = d or {}
        return cls(**{f.name: int(d.get(f.name) or 0) for f in dataclasses.fields(cls)})


@dataclass
class Attempt:
    """One request of a model call that did not bring the reply: an HTTP error, a timeout, a lost connection,
    a stream cut mid-reply. A turn keeps them so that retries and fallbacks stay visible in the trace."""

    route: str = ""
    """The model id the request named (for a router, `org/model:provider`)."""
    status: int | None = None
    """The HTTP status, when the server answered with one."""
    kind: str = ""
    """What went wrong: `rate_limited`, `server_error`, `rejected`, `timeout`, `no_connection`,
    `connection_lost`, `stream_cut`, `stream_error`; or the model's own failure the API reported,
    `context_overflow` or `malformed_call` (`evalkit.errors.ModelFailure`)."""
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    """What the API reported before the failure (an error status reports nothing and bills nothing)."""
    usage_known: bool = True
    """False when the request may have been billed beyond `usage` (a cut stream, a timeout): the turn's cost
    is then unknown."""
    retry_after: float | None = None
    """Seconds the server asked to wait, if it said."""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))

MALFORMED_STOP = "tool_use_failed"
"""The stop of a turn whose tool call the server refused to pass on (Groq's `tool_use_failed`): the model's
text is the turn's, and it is told its call was malformed."""

REFUSED_STOPS = ("refusal", "content_filter")
"""Stop reasons that end an episode as a refusal: the model declined, or the provider's filter cut it."""


@dataclass
class Turn:
    """What one model call produced."""

    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    stop: str = ""
    """Why the model stopped, in the provider's words (`end_turn`, `tool_use`, `length`, `max_output_tokens`,
    `length (harness cap)`, ...)."""
    usage: Usage = field(default_factory=Usage)
    truncated: bool = False
    """The output limit cut this turn off; the loop hands its reasoning back as notes."""
    attempts: list[Attempt] = field(default_factory=list)
    """The requests that failed before the reply (retries, fallbacks); their reported usage is in `usage`."""
    usage_known: bool = True
    """False when some request of this turn was billed without reporting its usage (a stream cut by the
    harness cap or by the network): the episode's cost is then unknown."""
    route: str = ""
    """The model id the request that answered named (behind a router, `org/model:provider`)."""
    provider: str = ""
    """Who answered: the provider behind a router route, else the spec's provider (`anthropic`, `vllm`)."""

    @property
    def refused(self) -> bool:
        """The API said the model declined (Anthropic's stop reason `refusal`, an OpenAI reply's `refusal`
        field; `stop` is then `refusal`), or the provider's content filter cut the reply (finish reason or
        incomplete reason `content_filter`, kept as `stop`). The refused text is in `text` but not in the
        agent's history: the episode ends here, with end reason `refused`."""
        return self.stop in REFUSED_STOPS


@dataclass
class ToolOutcome:
    """What the environment answered to one tool call."""

    text: str = ""
    images: list[Image] = field(default_factory=list)
    is_error: bool = False
    done: bool = False
    reward: float | None = None
    grade: dict | None = None
    metadata: dict = field(default_factory=dict)


@dataclass
class AgentOptions:
    """Settings every agent accepts; providers ignore what does not apply to them."""

    max_tokens: int = 16000
    request_timeout: float | None = None
    """Seconds one model request may take in all, however slowly its reply streams; None: sized for
    `max_tokens` (`evalkit.providers.clock.request_seconds`: 860 s at 16,000)."""
    max_retries: int = 4
    keep_images: int | None = None
    """Keep the newest N images in the history; older ones become a short placeholder."""
    image_window: tuple[int, int] | None = None
    """(MAX, KEEP): let images build up to MAX, then drop to the newest KEEP; the opening message is kept."""
    temperature: float | None = None
    seed: int | None = None
    send_reasoning: bool | None = None
    """Chat completions: send an assistant tool-call turn's `reasoning_content` back in the history (True),
    never (False), or as the model's rule says (None: DeepSeek thinking models yes, deepseek-reasoner no)."""


class Agent(Protocol):
    """A model behind one wire API (or an offline policy), holding one episode's conversation."""

    model: str
    """The label records carry, e.g. `anthropic:claude-sonnet-5@low`."""

    def user(self, text: str, images: Sequence[Image] = ()) -> None: ...

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None: ...

    def notes(self, text: str) -> None:
        """The reasoning of a turn cut off by the output limit, handed back with a nudge."""

    def step(self) -> Turn:
        """One model call."""

    def prune_images(self, keep: int, window: int | None = None) -> None: ...


@runtime_checkable
class EnvSession(Protocol):
    """One episode's connection to an environment.

    Sessions may also offer `render() -> Image | None` (the current state as a picture, saved as a frame
    after each turn), `target() -> Image | None` (what the task asks for, kept with the record) and
    `observation: dict` (the reset observation's own fields, which the opening message shows the model with
    the metadata's pictures); a session without `observation` has its target open the message instead.
    One with `background_reads = True` lets the loop call `render` (and `document`, beside it) from another
    thread while the model thinks, never beside `call`; any other is read in series from its episode's
    thread.
    """

    def reset(self, **kwargs: Any) -> dict: ...

    def tools(self) -> list[ToolSpec]: ...

    def call(self, name: str, args: dict) -> ToolOutcome: ...

    def close(self) -> None: ...


@dataclass
class CallRecord:
    """One tool call as a trace keeps it."""

    id: str = ""
    name: str = ""
    args: Any = None
    """The parsed arguments, or the raw string when they did not parse."""
    ok: bool = True
    result: str = ""
    """The result text, capped (see `RESULT_CAP`)."""
    images: list[str] = field(default_factory=list)
    """Paths, relative to the run directory, of the images the tool returned."""
    parse_error: bool = False


@dataclass
class PlanRecord:
    """A plan the model sent to a plan tool (one taking a `plan` argument) and the environment's whole
    answer, so drafts can be counted and each plan read with its violations."""

    turn: int = 0
    call_id: str = ""
    tool: str = ""
    plan: Any = None
    """The plan as sent: a list (a JSON string of one is parsed), else the raw value."""
    answer: Any = None
    """The environment's answer, parsed when it is JSON, else its text. Never capped."""
    ok: bool = True
    """False when the environment answered with a tool error (a plan argument of the wrong shape)."""
    final: bool = False
    """This call ended the episode (the submitted plan)."""


@dataclass
class TurnRecord:
    """One model turn and the tool calls it made."""

    turn: int = 0
    text: str = ""
    reasoning: str = ""
    stop: str = ""
    usage: dict = field(default_factory=dict)
    model_s: float = 0.0
    env_s: float = 0.0
    frame: str | None = None
    """The environment's render after this turn, relative to the run directory."""
    calls: list[CallRecord] = field(default_factory=list)
    attempts: int = 1
    """Model requests this turn made: 1, plus one per retry or fallback."""
    failed_attempts: list[dict] = field(default_factory=list)
    """The requests that failed (`Attempt.to_dict()`): route, status, kind, error, usage, seconds."""
    usage_known: bool = True
    """False when a request of this turn was billed without reporting its usage; `usage` is then a floor."""
    provider: str = ""
    """Who answered this turn: behind a router spec (`hf:org/m:a|b`) the provider (`a`), else the spec's
    provider; empty for an offline agent."""
    route: str = ""
    """The model id the answering request named (`org/m:a` behind a router)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TurnRecord:
        """A turn from its dict; a field of the wrong kind reads as its default (see `evalkit.wellformed`)."""
        fields = wellformed.clean(d if isinstance(d, dict) else {}, cls, [])
        return _turn(fields)


def _turn(fields: dict) -> TurnRecord:
    """A TurnRecord from fields `evalkit.wellformed.clean` kept."""
    calls = [c if isinstance(c, CallRecord) else CallRecord(**c) for c in fields.get("calls", [])]
    return TurnRecord(**{**fields, "calls": calls})


@dataclass
class EpisodeRecord:
    """One episode, one line of `trace.jsonl`."""

    format_version: int = FORMAT_VERSION
    key: str = ""
    """Stable hash of model, env, surface, mode, task, skin and repeat; resume skips keys that ended
    cleanly."""
    model: str = ""
    env: str = ""
    surface: str = ""
    mode: str = ""
    split: str | None = None
    task_id: str = ""
    evalset_task: str | None = None
    """The evalset id the task was drawn from, if any."""
    tier: str | None = None
    difficulty_score: float | None = None
    skin: str | None = None
    coordinates: str | None = None
    repeat: int = 0
    episode_id: str | None = None
    prompt_version: str | None = None
    reset: dict | None = None
    """The keyword arguments the env's reset was sent (the task's, and the surface, mode, skin or
    coordinates asked of it); None in records written before it was kept."""

    reward: float | None = None
    """The grade total, or None when the episode is unscored (an infrastructure error): never read as zero."""
    grade: dict | None = None
    end_reason: str = ""
    """One of END_REASONS."""
    error_class: str | None = None
    """`endpoint_error`, `env_error` or `harness_error` when infrastructure ended the episode; None
    otherwise."""
    error: str | None = None
    traceback: str | None = None
    auto_submitted: bool = False
    provider_switches: list = field(default_factory=list)
    """Every change of provider behind a router spec: {`turn`, `from`, `to`, `why`, `status`}; a switch at
    turn 1 with why `cooling down …` means an earlier episode of the run found the first provider failing."""

    usage: dict = field(default_factory=dict)
    cost_usd: float | None = None
    n_turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    parse_errors: int = 0
    drafts: int = 0
    """Plans the environment checked without ending the episode (see `plans`)."""
    seconds: float = 0.0
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    started: str | None = None
    """ISO 8601 UTC start time."""

    target: str | None = None
    frame0: str | None = None
    render: str | None = None
    final_doc: Any = None
    turns: list[TurnRecord] = field(default_factory=list)
    plans: list[PlanRecord] = field(default_factory=list)
    """Every plan sent to a plan tool, in order, with the environment's answer."""
    info: dict = field(default_factory=dict)
    """Anything else worth keeping (agent notes such as an effort fallback, importer provenance)."""
    transcript: dict | None = None
    """What the model was sent besides what `turns` hold: the system prompt, the tools, the opening message,
    each tool result as sent (notes appended, images and when a budget pruned them), nudges and notes; shared
    texts by reference to the run's text store. Read it with `evalkit.records.transcripts.messages`."""
    problems: list[str] = field(default_factory=list, compare=False, repr=False)
    """What was wrong with the line this record was read from ("turns is a string"): those fields read as
    their defaults. Empty for a sound record; never written (see `evalkit.wellformed`)."""
    run_dir: str | None = field(default=None, compare=False, repr=False)
    """The run directory the record was read from or written to, where its pictures' paths lead (its
    notebook display shows them); never written."""

    def to_dict(self) -> dict:
        d = plain(self)
        del d["problems"], d["run_dir"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"), default=str)

    @classmethod
    def from_dict(cls, d: dict) -> EpisodeRecord:
        """A record from its dict (a trace line). Never raises on a dict: a field of the wrong kind reads as
        its default and is named in `problems` (see `evalkit.wellformed`)."""
        problems: list[str] = []
        if not isinstance(d, dict):
            problems, d = wellformed.problems(d, cls), {}
        fields = wellformed.clean(d, cls, problems)
        rec = cls(**{k: v for k, v in fields.items() if k not in ("turns", "plans")})
        rec.turns = [t if isinstance(t, TurnRecord) else _turn(t) for t in fields.get("turns", [])]
        rec.plans = [p if isinstance(p, PlanRecord) else PlanRecord(**p) for p in fields.get("plans", [])]
        rec.problems = problems
        return rec

    @property
    def scored(self) -> bool:
        return self.error_class is None and self.reward is not None


RESULT_CAP = 4000
SCRIPTED = "scripted by the harness, not a model call"
"""The note on a message of a transcript that a harness wrote in the model's name (τ²-bench's greeting): it
opens the conversation the model continues, and no model call made it."""

_PLAIN_LEAVES = (str, int, float, bool, type(None))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def plain(value: Any) -> Any:
    """`dataclasses.asdict` of a record, to the same dict: dataclasses, lists, tuples and dicts made anew,
    other values deep-copied. Without asdict's generic walk (a check and a `deepcopy` call per value), a
    record with its turns is converted in a fraction of the time, once per episode as it is written."""
    if isinstance(value, _PLAIN_LEAVES):
        return value
    cls = type(value)
    if dataclasses.is_dataclass(cls):
        return {name: plain(getattr(value, name)) for name in _field_names(cls)}
    if cls is list:
        return [plain(v) for v in value]
    if cls is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)):
        return dataclasses.asdict(_Box(value))["value"]  # a subclass, a named tuple: as asdict builds them
    return copy.deepcopy(value)


@dataclass
class _Box:
    value: Any


def episode_key(
    model: str, env: str, surface: str, mode: str, task_id: str, skin: str | None, repeat: int
) -> str:
    """The stable identity of one job: same inputs, same key, across runs and machines."""
    blob = json.dumps([model, env, surface, mode, task_id, skin, int(repeat)], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def record_problems(d: Any) -> list[str]:
    """What is wrong with a trace line's value as an EpisodeRecord (see `evalkit.wellformed`)."""
    return wellformed.problems(d, EpisodeRecord)
