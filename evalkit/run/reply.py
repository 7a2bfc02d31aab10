"""One model call of an episode, and what its failures mean.

`ask` calls the agent under the episode's deadline and says what came of it (`Reply`): the model's turn, or
the end it brought instead. What the API says the model did wrong (`evalkit.errors.ModelFailure`) is the
model's: a tool call the server refused to pass on is a turn of the model's (its text kept, stop
MALFORMED_STOP: the loop tells it and nudges), a prompt past its context window ends the episode
(`context_overflow`). The deadline passing during the call cuts the request (`deadline`). An endpoint that
refuses the key stops every episode of the model alike: a configuration error (`breaker.refused_key`);
other failures are the infrastructure's, raised to the episode boundary. Whatever a failed request reported
still counts, and whatever it may have cost without saying makes the episode's cost unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.errors import DeadlineReached, EndpointError, ModelFailure
from evalkit.providers import clock
from evalkit.providers.attempts import log_usage
from evalkit.run.breaker import refused_key
from evalkit.run.recording import Recording
from evalkit.types import MALFORMED_STOP, Agent, Turn


@dataclass
class Reply:
    """What one model call brought: the model's turn, or the end of the episode instead."""

    turn: Turn | None = None
    end: str | None = None
    """`deadline` or `context_overflow`, when the call ended the episode."""
    refused: str = ""
    """What the server said of a tool call it refused to pass on (the turn is then MALFORMED_STOP)."""


def ask(agent: Agent, n: int, deadline: float | None, model: str, recording: Recording) -> Reply:
    """Turn `n`'s model call, cut at `deadline`; what its failed requests reported goes into `recording`."""
    try:
        with clock.until(deadline):  # a request in flight at the deadline is cut
            return Reply(agent.step())
    except ModelFailure as e:
        return _model_failed(n, e, recording)
    except DeadlineReached as e:
        recording.failed_requests(n, e.attempts)
        partial = e.partial
        if partial is not None and (partial.text or partial.reasoning):  # what had come of the reply
            recording.note(cut_turn={"turn": n, "text": partial.text, "reasoning": partial.reasoning})
        return Reply(end="deadline")
    except EndpointError as e:
        refused = refused_key(model, e)
        if refused is not None:  # every episode of this model would fail alike: not data, a config error
            raise refused from e
        recording.failed_requests(n, e.attempts)
        raise
    except Exception:
        recording.usage_lost()  # the request may have been answered, and billed, before the break
        raise


def _model_failed(n: int, e: ModelFailure, recording: Recording) -> Reply:
    """A malformed call is a turn of the model's, its generated text kept; a prompt past its context ends
    the episode, scored as the env scores an unfinished one."""
    last = e.attempts[-1] if e.attempts else None
    said = {"turn": n, "kind": e.kind, "status": e.status, "code": e.code,
            "error": last.error if last is not None else str(e)}  # fmt: skip
    recording.add("model_failures", said)
    if e.kind == "malformed_call":
        usage, known = log_usage(e.attempts)
        turn = Turn(text=e.generation or "", stop=MALFORMED_STOP, usage=usage, usage_known=known,
                    attempts=list(e.attempts[:-1]), route=getattr(last, "route", ""))  # fmt: skip
        return Reply(turn, refused=e.detail or e.code or "")
    recording.failed_requests(n, e.attempts)
    return Reply(end="context_overflow")
