"""The exception tree.

::

    EvalkitError
    ├── ConfigError              a mistake in what was asked; raised before any work, the CLI exits 2
    │   ├── UnknownProviderError
    │   ├── MissingKeyError
    │   ├── KeyRejectedError     the endpoint refused the key (401/403): that model's episodes stop
    │   └── EvalsetError
    ├── EndpointError            the model endpoint failed after its retries → error_class "endpoint_error"
    ├── ModelFailure             the API reported the model's own failure (a prompt past its context, a
    │                            malformed call the server refused): data, an end reason, never unscored
    ├── DeadlineReached          the episode's deadline passed during a model call: the request was cut
    ├── EnvError                 the environment connection failed → error_class "env_error"
    │   ├── EnvCapacityError     every session the server allows is in use: waited on, then env_error
    │   ├── EnvUnreachableError  nothing answers at the env's address (no /health, a refused connection)
    │   ├── EnvSlowError         the server answers /health, but a reset (or /metadata) took too long
    │   ├── EnvDeadError         a reset answered `done`: the env cannot play this episode
    │   └── EnvStepError         the server failed to run a step (OpenEnv's EXECUTION_ERROR)
    ├── TraceError               a run directory that cannot be read or written safely
    ├── NotWritableError         a place evalkit was to write is read-only or not the user's: one line
    ├── DiskFullError            the file system holding a run (or a report) is full: the CLI exits 5
    ├── EpisodeCancelled         the caller stopped the episode (an interrupted batch) → "cancelled", not kept
    └── EpisodeOver              a debugger asked to step an episode past its end

What a model does wrong inside an episode (bad JSON arguments, an unknown tool, no tool call) is not an
exception at all: it is data in the turn. Code classifies failures by these types or by HTTP status codes,
never by the text of a message.
"""

from __future__ import annotations

import errno
import os


class EvalkitError(Exception):
    """Base of every error evalkit raises on purpose."""


class ConfigError(EvalkitError):
    """What was asked cannot be done; nothing has started yet."""


class UnknownProviderError(ConfigError):
    """A model spec names a provider evalkit does not know."""


class MissingKeyError(ConfigError):
    """A requested model needs an API key or an endpoint URL that is not set."""


class KeyRejectedError(ConfigError):
    """A model endpoint answered 401 or 403 after the agent's own retries and fallbacks: the key is wrong,
    expired or not allowed this model, so no episode of that model can succeed. Found only once requests
    are made, so a batch stops that model's episodes and runs the others (`evalkit.run.breaker`)."""

    def __init__(self, model: str, status: int | None, variables: list[str]):
        keys = " or ".join(variables) or "its API key"
        super().__init__(f"{model}: the model endpoint rejected the API key (HTTP {status}); check {keys}")
        self.model, self.status, self.variables = model, status, variables

    def __reduce__(self) -> tuple:  # pickled as made (a Ray task sends it back to the driver)
        return type(self), (self.model, self.status, self.variables)


class EvalsetError(ConfigError):
    """An evalset file is missing, malformed, or names tasks it does not hold."""


class EndpointError(EvalkitError):
    """The model endpoint failed after its retries (5xx, 429, timeouts, connection errors, cut streams)."""

    error_class = "endpoint_error"

    def __init__(self, message: str, status: int | None = None, attempts: list | None = None):
        super().__init__(message)
        self.status = status
        self.attempts: list = list(attempts or [])
        """Every failed request of the call (`evalkit.types.Attempt`), so their usage is still counted."""


class ModelFailure(EvalkitError):
    """The API answered with an error that is the model's own doing, not the provider's: its prompt grew past
    its context window (`kind` "context_overflow": OpenAI's `context_length_exceeded`, Anthropic's "prompt is
    too long", a 413) or it wrote a tool call the server refused to pass on (`kind` "malformed_call": Groq's
    `tool_use_failed`, with the text it generated in `generation`). Asking again cannot help, and the
    episode is the model's to lose: the loop ends the episode (or the turn) as its outcome and the env scores
    it, rather than recording an endpoint error that resume would rerun forever."""

    def __init__(self, message: str, kind: str, status: int | None = None, attempts: list | None = None,
                 generation: str | None = None, code: str | None = None, detail: str = ""):  # fmt: skip
        super().__init__(message)
        self.kind, self.status, self.generation, self.code = kind, status, generation, code
        self.detail = detail
        """What the API said (its error message), for the model to read."""
        self.attempts: list = list(attempts or [])
        """Every failed request of the call, the refused one last (their usage still counts)."""

    def __reduce__(self) -> tuple:
        args = (str(self), self.kind, self.status, self.attempts, self.generation, self.code, self.detail)
        return type(self), args


class DeadlineReached(EvalkitError):
    """The episode's deadline (`--episode-timeout`) passed while its model call was in flight: the request
    was cut (`evalkit.providers.clock`), and the episode ends as `deadline`. `partial` is what had arrived
    of the reply (an `evalkit.types.Turn`, or None), `attempts` every request of the call."""

    def __init__(self, message: str, attempts: list | None = None, partial: object = None):
        super().__init__(message)
        self.attempts: list = list(attempts or [])
        self.partial = partial

    def __reduce__(self) -> tuple:
        return type(self), (str(self), self.attempts, self.partial)


class EnvError(EvalkitError):
    """The environment connection failed or the server broke its protocol."""

    error_class = "env_error"


class EnvCapacityError(EnvError):
    """The server refused a new session because every one it allows is in use (OpenEnv's `CAPACITY_REACHED`).
    Transient while other episodes hold sessions: the loop waits and retries before recording an env error."""

    def __init__(self, message: str, active: int | None = None, limit: int | None = None):
        super().__init__(message)
        self.active, self.limit = active, limit


class EnvUnreachableError(EnvError):
    """Nothing answers at the env's address: the connection was refused or dropped, and `/health` is
    silent. Said apart from `EnvSlowError`, whose server is there but slow."""


class EnvSlowError(EnvError):
    """The server answers `/health`, but a request (`what`: the reset, `/metadata`) took more than `seconds`:
    an env slow to set up (a browser, a sandbox), not an unreachable one."""

    def __init__(self, message: str, what: str = "", seconds: float | None = None):
        super().__init__(message)
        self.what, self.seconds = what, seconds

    def __reduce__(self) -> tuple:  # pickled as made (a Ray task sends it back to the driver)
        return type(self), (str(self), self.what, self.seconds)


class EnvDeadError(EnvError):
    """The env answered its reset with `done: true` (jupyter's `status: error` when a key is missing on the
    server, or a dataset with nothing left): no turn can be played, so the episode ends unscored, without a
    model call. `status` and `detail` are what the server said, scrubbed of anything shaped like a key."""

    def __init__(self, message: str, status: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.status, self.detail = status, detail

    def __reduce__(self) -> tuple:
        return type(self), (str(self), self.status, self.detail)


class EnvStepError(EnvError):
    """The server failed to run a step (its `EXECUTION_ERROR` frame: the env raised, or returned something
    the server could not send) and the session no longer works, or every step has failed from the first:
    the environment's failure, not the model's, so the episode ends unscored. A step the env raised on
    while its session goes on (OpenSpiel's illegal move), an action that does not fit the schema
    (`VALIDATION_ERROR`) or an illegal move the env answers in its observation is not this: the model reads
    it."""

    def __init__(self, message: str, code: str = "EXECUTION_ERROR"):
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple:
        return type(self), (str(self), self.code)


class TraceError(EvalkitError):
    """A run directory or trace file cannot be used safely."""


class NotWritableError(EvalkitError, OSError):
    """A file or folder could not be written at all: its file system is read-only, or the folder is not the
    user's to write (`code`: EROFS, EACCES, EPERM). Said in one line naming it, what it was and what was
    kept; a reader of a read-only run reads it and says what it could not write. Still an OSError (with its
    errno), for code that was ready for the one it replaces."""

    def __new__(cls, *args: object, **kw: object) -> NotWritableError:
        return OSError.__new__(cls)  # (OSError's own would read the arguments as errno, strerror, filename)

    def __init__(self, path: str | os.PathLike, why: str, kept: str, code: int = errno.EROFS):
        self.message = f"cannot write {os.fspath(path)}: {why}; {kept}"
        self.args = (self.message,)
        self.errno, self.strerror = code, why
        self.path, self.why, self.kept = os.fspath(path), why, kept

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple:
        return type(self), (self.path, self.why, self.kept, self.errno)


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
"""The errnos of a write that found no room: the file system is full, or the user's quota on it is."""


def no_space(exc: BaseException) -> bool:
    """Whether `exc` is a write that found no room (classified by errno, never by its text)."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


class DiskFullError(EvalkitError):
    """A write found its file system full (ENOSPC) or the user's quota used up (EDQUOT). Whatever was
    written before is whole, and `kept` says what that is; rerunning once there is room completes the work.
    Its own exit status (`exit_status`), so that a script can tell "make room" from a setup mistake."""

    error_class = "disk_full"
    exit_status = 5

    def __init__(self, path: str | os.PathLike, mount: str, kept: str, code: int = errno.ENOSPC):
        why = "its quota is used up" if code == errno.EDQUOT else "it is full"
        super().__init__(f"cannot write {path}: the file system at {mount} has no room ({why}); {kept}")
        self.path, self.mount, self.kept, self.code = os.fspath(path), mount, kept, code

    def __reduce__(self) -> tuple:  # pickled as made (a Ray task sends it back to the driver)
        return type(self), (self.path, self.mount, self.kept, self.code)


class EpisodeCancelled(EvalkitError):
    """The caller asked the episode to stop (an interrupted batch); such a record is not kept."""

    error_class = "cancelled"


class EpisodeOver(EvalkitError, RuntimeError):
    """`EpisodeStepper.step` past the episode's end: the message says how it ended."""


def error_class_of(exc: BaseException) -> str:
    """The `error_class` an episode that died of `exc` is recorded with."""
    cls = getattr(exc, "error_class", None)
    if isinstance(cls, str):
        return cls
    return "harness_error"


def reason(exc: BaseException) -> str:
    """`exc` as the reason in a one-line message: its type and what it says, else what its cause says,
    else what its type means (a bare `TimeoutError()` says nothing)."""
    text = str(exc).strip()
    cause = exc.__cause__ or exc.__context__
    if not text and cause is not None and str(cause).strip():
        text = str(cause).strip()
    if not text:
        text = (
            "timed out"
            if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__
            else "no reason given"
        )
    return f"{type(exc).__name__}: {' '.join(text.split())[:300]}"


NOT_JSON = (ValueError, RecursionError)
"""What `json.loads` raises on a line it cannot read: ValueError, or RecursionError where arrays or
objects nest deeper than the interpreter's recursion limit allows (~1,000 levels: a hostile line)."""
