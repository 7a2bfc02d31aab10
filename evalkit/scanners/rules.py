"""The built-in scanners: rules that need no key, each reading turns, calls and results the way a record
holds them. Each is a function of a record (an `EpisodeRecord`, or the lighter record the scan's fast reader
decodes, which has the same fields) and a `Context`; docs/scanners.md says what each looks at and when it
fires.

A call's identity is its tool name and its arguments as canonical JSON (`evalkit.records.calls`). Calls
the loop did not run because the episode had already ended (their result is `NOT_RUN`) are no calls of
the model's here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from evalkit.records.calls import identity, shown
from evalkit.records.calls import short as _short
from evalkit.scanners.base import NOT_FIRED, Context, Finding, Scanner
from evalkit.types import REFUSED_STOPS

NOT_RUN = "not executed: the episode had already ended"
"""The result the loop gives a call it did not run (`evalkit.run.episode.NOT_RUN`; a test holds them
equal)."""
LIMIT_STOPS = frozenset({"max_tokens", "length", "max_output_tokens", "length (harness cap)"})
"""Stop reasons of a turn the output limit cut: Anthropic and Inspect (`max_tokens`), chat completions
(`length`, and evalkit's own cap on a stream), the Responses API's incomplete reason (`max_output_tokens`)."""
CONTEXT_STOPS = frozenset({"model_context_window_exceeded", "model_length"})
"""Stop reasons of a turn that filled the model's context window: Anthropic's, and Inspect's."""
CONTEXT_CODE = re.compile(r"""['"]code['"]\s*:\s*['"]context_length_exceeded['"]""")
"""The documented error code of a prompt too long for the model (OpenAI-compatible APIs), as the `code` field
of the error body an attempt kept."""
TOO_LARGE = 413
TURNS_LEFT = re.compile(r"\[(\d+) turns? left")
TURNS_LEFT_END = re.compile(r"\n\[(\d+) turns? left[^\]\n]*\]\s*$")
"""The turns-left note of evalkit's loop (`evalkit.run.wording.turns_left_note`; a test holds them
together)."""


# ------------------------------------------------------------------------------------------------ reading


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a record part, whether it is a dict (an EpisodeRecord's `info`, `transcript`) or a decoded
    struct."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default) if obj is not None else default


def model_calls(rec: Any) -> Iterator[tuple[int, Any]]:
    """(turn, call) of every call the model made, in order, but those the loop never ran because the
    episode had already ended."""
    for t in rec.turns:
        for c in t.calls:
            if not c.ok and c.result == NOT_RUN:
                continue
            yield t.turn, c


def _steps(turns: Any) -> tuple[int, ...]:
    return tuple(sorted(set(turns)))


def _nudged(rec: Any) -> set[int]:
    """The turns after which the loop nudged the model to call a tool (the transcript's `nudge` notes)."""
    after = _get(rec.transcript, "after") or {}
    out = set()
    for turn, entries in after.items() if isinstance(after, dict) else ():
        for e in entries or ():
            if _get(e, "role") == "user" and _get(e, "note") == "nudge":
                try:
                    out.add(int(turn))
                except ValueError:
                    pass
    return out


# ------------------------------------------------------------------------------------------------ scanners


def repeated_call(rec: Any, ctx: Context, min_repeats: int = 3, max_period: int = 3,
                  ignore: frozenset[str] | tuple = ()) -> Finding:  # fmt: skip
    """The same call (tool and arguments) `min_repeats` times in a row, or a cycle of up to `max_period`
    different calls gone round `min_repeats` times (A B A B A B). Fires at the loop's first call."""
    seq = [(t, identity(c), c) for t, c in model_calls(rec) if c.name not in ignore]
    best: tuple[int, int, int] | None = None  # (start, end exclusive, period)
    for p in range(1, max_period + 1):
        run = 0
        for j in range(p, len(seq) + 1):
            if j < len(seq) and seq[j][1] == seq[j - p][1]:
                run += 1
                continue
            start = j - run - p
            if run >= (min_repeats - 1) * p and (p == 1 or len({s[1] for s in seq[start : start + p]}) > 1):
                if best is None or start < best[0]:
                    best = (start, j, p)
            run = 0
    if best is None:
        return NOT_FIRED
    start, end, p = best
    loop = seq[start:end]
    times = (end - start) // p
    if p == 1:
        what = f"{shown(loop[0][2])} ×{times} in a row"
    else:
        what = f"a cycle of {p} calls ({', '.join(_short(shown(s[2]), 40) for s in loop[:p])}) ×{times}"
    return Finding(True, _steps(s[0] for s in loop), f"{what} from turn {loop[0][0]}")


def error_streak(rec: Any, ctx: Context, min_errors: int = 3) -> Finding:
    """`min_errors` calls in a row that the environment (or the loop, for arguments that did not parse)
    answered with an error. Fires at the streak's first error."""
    streak: list[tuple[int, Any]] = []
    for t, c in model_calls(rec):
        if c.ok:
            if len(streak) >= min_errors:
                break
            streak = []
        else:
            streak.append((t, c))
    if len(streak) < min_errors:
        return NOT_FIRED
    t0, c0 = streak[0]
    said = f"{len(streak)} tool errors in a row from turn {t0}: {c0.name}: {_short(c0.result)}"
    return Finding(True, _steps(t for t, _ in streak), said)


def retry_unchanged(rec: Any, ctx: Context) -> Finding:
    """A call that failed in one turn sent again, with the same arguments, in the model's next turn (after it
    saw the error). Fires at each such retry."""
    retries, first = [], ""
    turns = [t for t in rec.turns if t.calls]
    for before, after in zip(turns, turns[1:], strict=False):
        failed = {identity(c): c for c in before.calls if not c.ok and c.result != NOT_RUN}
        if not failed:
            continue
        again = [c for c in after.calls if identity(c) in failed]
        if again:
            retries.append(after.turn)
            if not first:
                c = failed[identity(again[0])]
                first = (
                    f"{shown(c)} failed at turn {before.turn} ({_short(c.result, 60)}) and was sent "
                    f"again unchanged at turn {after.turn}"
                )
    return Finding(True, _steps(retries), first) if retries else NOT_FIRED


def unknown_tool(rec: Any, ctx: Context) -> Finding:
    """A call of a tool the model was not given. Where the record keeps the tools declared to the model, any
    call of another name; where it does not (another harness's run), a call that failed, of a name the
    environment never answered without an error anywhere in the run."""
    known = ctx.tools
    if known is None and not ctx.succeeded:
        return NOT_FIRED  # nothing to tell a known tool by
    if known is not None:
        bad = [(t, c) for t, c in model_calls(rec) if c.name not in known]
    else:
        bad = [(t, c) for t, c in model_calls(rec) if not c.ok and c.name not in ctx.succeeded]
    if not bad:
        return NOT_FIRED
    t0, c0 = bad[0]
    names = sorted({c.name for _, c in bad})
    if known is not None:
        told = f"not among the {len(known)} tools declared"
    else:
        told = "no call of it succeeded in the run"
    return Finding(True, _steps(t for t, _ in bad), f"{', '.join(names)} at turn {t0} ({told})")


def budget(rec: Any) -> int | None:
    """The episode's turn budget, where the record says it: the turns-left note evalkit's loop appends to
    each turn's last result (`[59 turns left]` after turn 1 of 60), kept apart as the entry's `note`, or (a
    run of evalkit's written out as another harness's) at the very end of the result's text."""
    after = _get(rec.transcript, "after") or {}
    for turn, entries in after.items() if isinstance(after, dict) else ():
        if not str(turn).isdigit():
            continue
        for e in entries or ():
            note = _get(e, "note")
            text = _get(e, "text")
            m = TURNS_LEFT.search(note) if isinstance(note, str) else None
            if m is None and isinstance(text, str):
                m = TURNS_LEFT_END.search(text[-120:])
            if m:
                return int(turn) + int(m.group(1))
    return None


def early_finish(rec: Any, ctx: Context, turns: int = 3, share: float = 0.25, below: float = 0.5) -> Finding:
    """The model ended the episode with the env's finishing tool (end reason `submitted`) early, and the
    reward is below `below`: early is within the first `turns` turns, or the first `share` of the turn
    budget where the record says it (`budget`). An unscored episode (no reward) never fires."""
    if rec.end_reason != "submitted" or rec.reward is None or not rec.turns or rec.reward >= below:
        return NOT_FIRED
    last = rec.turns[-1]
    allowed = budget(rec)
    within = max(turns, int(share * allowed)) if allowed else turns
    if last.turn > within:
        return NOT_FIRED
    done = [c for c in last.calls if c.ok] or list(last.calls)
    how = done[-1].name if done else "the finishing call"
    of = f" of {allowed}" if allowed else ""
    return Finding(True, (last.turn,), f"{how} at turn {last.turn}{of} with reward {rec.reward:.3g}")


def no_tool_call(rec: Any, ctx: Context) -> Finding:
    """A turn that ended in text without a tool call where the loop expected one: the loop nudged the model
    after it, or the episode ended for it (end reason `no_tool_call`). Turns cut by the output limit or the
    context window, and refusals, are their own scanners'."""
    nudged = _nudged(rec)
    last = rec.turns[-1].turn if rec.turns else None
    hits = []
    for t in rec.turns:
        if t.calls or t.stop in LIMIT_STOPS or t.stop in CONTEXT_STOPS or t.stop in REFUSED_STOPS:
            continue
        if t.turn in nudged or (t.turn == last and rec.end_reason == "no_tool_call"):
            hits.append(t)
    if not hits:
        return NOT_FIRED
    said = _short(hits[0].text, 80)
    what = f"turn {hits[0].turn} ended without a tool call" + (f": {said!r}" if said else " (no text)")
    return Finding(True, _steps(t.turn for t in hits), what)


def output_limit(rec: Any, ctx: Context) -> Finding:
    """A turn the output limit cut off (its stop reason is one of LIMIT_STOPS)."""
    cut = [t for t in rec.turns if t.stop in LIMIT_STOPS]
    if not cut:
        return NOT_FIRED
    out = _get(cut[0].usage, "output")
    tokens = f" after {out:,} output tokens" if isinstance(out, int) and out else ""
    what = f"turn {cut[0].turn} cut by the output limit (stop {cut[0].stop}){tokens}"
    return Finding(True, _steps(t.turn for t in cut), what)


def refusal(rec: Any, ctx: Context) -> Finding:
    """The model declined, or the provider's filter cut its reply: a turn whose stop reason is `refusal` or
    `content_filter`, or an episode that ended `refused`."""
    hits = [t for t in rec.turns if t.stop in REFUSED_STOPS]
    if not hits and rec.end_reason == "refused" and rec.turns:
        hits = [rec.turns[-1]]
    if not hits:
        return NOT_FIRED
    said = _short(hits[0].text, 80)
    what = f"turn {hits[0].turn} refused (stop {hits[0].stop or 'refused'})" + (f": {said!r}" if said else "")
    return Finding(True, _steps(t.turn for t in hits), what)


def _overflowed_request(rec: Any) -> tuple[int | None, str] | None:
    """(turn, why) when the episode ended because the endpoint refused a prompt too long for the model: its
    last failed request answered 413, or an error whose code is `context_length_exceeded`."""
    if not rec.error_class:
        return None
    failed = _get(rec.info, "failed_turn")
    attempts = _get(failed, "failed_attempts") or []
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    status, error = _get(last, "status"), str(_get(last, "error") or "")
    if (
        status == TOO_LARGE
        or (status == 400 and CONTEXT_CODE.search(error))
        or CONTEXT_CODE.search(str(rec.error or ""))
    ):
        turn = _get(failed, "turn")
        return (turn if isinstance(turn, int) else None), f"the endpoint refused the prompt (HTTP {status})"
    return None


def context_overflow(rec: Any, ctx: Context) -> Finding:
    """The conversation outgrew the model's context window: a turn stopped for it (CONTEXT_STOPS), the
    endpoint refused a prompt as too long (HTTP 413, or the error code `context_length_exceeded`: images were
    pruned and the request made again, or the episode ended), or the harness ended the episode for it
    (τ²-bench's `context_window_exceeded`)."""
    hits: list[tuple[int, str]] = [(t.turn, f"stop {t.stop}") for t in rec.turns if t.stop in CONTEXT_STOPS]
    for p in _get(rec.info, "rejected_prompt_prunes") or []:
        if _get(p, "status") == TOO_LARGE or _get(p, "code") == "context_length_exceeded":
            turn = _get(p, "turn")
            why = f"prompt refused as too long (HTTP {_get(p, 'status')})"
            hits.append((turn if isinstance(turn, int) else 0, why))
    ended = _overflowed_request(rec)
    if ended is not None:
        hits.append((ended[0] if ended[0] is not None else len(rec.turns) + 1, ended[1]))
    grade = rec.grade if isinstance(rec.grade, dict) else {}
    if grade.get("termination_reason") == "context_window_exceeded":
        hits.append((rec.turns[-1].turn if rec.turns else 0, "the harness ended it: context_window_exceeded"))
    if not hits:
        return NOT_FIRED
    hits.sort()
    return Finding(True, _steps(t for t, _ in hits), f"turn {hits[0][0]}: {hits[0][1]}")


def infra_error(rec: Any, ctx: Context) -> Finding:
    """The infrastructure ended the episode (`error_class` set: the model endpoint or the environment failed
    after its retries, or the harness broke); unscored, never the model's failure. An endpoint that refused a
    prompt too long for the model is `context_overflow`'s, not this."""
    if not rec.error_class or _overflowed_request(rec) is not None:
        return NOT_FIRED
    turn = _get(_get(rec.info, "failed_turn"), "turn")
    step = turn if isinstance(turn, int) else (rec.turns[-1].turn + 1 if rec.turns else 1)
    return Finding(True, (step,), f"{rec.error_class}: {_short(rec.error, 120)}")


def _builtin(fn: Any, phrase: str, kind: str = "model") -> Scanner:
    doc = (fn.__doc__ or "").split("\n\n")[0]
    return Scanner(fn.__name__, fn, phrase=phrase, kind=kind, about=" ".join(doc.split()), fast=True)


BUILTIN: dict[str, Scanner] = {
    s.name: s
    for s in (
        _builtin(repeated_call, "repeats the same call"),
        _builtin(error_streak, "runs into a streak of tool errors"),
        _builtin(retry_unchanged, "retries a failed call unchanged"),
        _builtin(unknown_tool, "calls a tool it was not given"),
        _builtin(early_finish, "finishes early with a low reward"),
        _builtin(no_tool_call, "ends a turn without the tool call expected"),
        _builtin(output_limit, "is cut off by the output limit"),
        _builtin(refusal, "refuses"),
        _builtin(context_overflow, "overflows its context window"),
        _builtin(infra_error, "is stopped by an infrastructure error", kind="infra"),
    )
}
"""The keyless scanners, by name, in the order tables show them."""
