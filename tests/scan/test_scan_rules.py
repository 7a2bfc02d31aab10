"""The built-in scanners, one by one, on records written by hand: where each fires, the turns it points to,
its evidence, and the near misses where it must not fire; and the constants they share with the loop and the
providers, held equal to them."""

from __future__ import annotations

import pytest

from evalkit.scanners import rules
from evalkit.scanners.base import Context, Finding, Scanner, as_scanner, finding
from evalkit.types import CallRecord, EpisodeRecord, TurnRecord

CTX = Context("run", tools=frozenset({"add", "look", "submit", "update"}))


def call(name: str, ok: bool = True, result: str = "", **args) -> CallRecord:
    return CallRecord(id=name, name=name, args=args, ok=ok, result=result)


def rec(*turns: list[CallRecord] | TurnRecord, **kw) -> EpisodeRecord:
    out = []
    for i, t in enumerate(turns, start=1):
        out.append(t if isinstance(t, TurnRecord) else TurnRecord(turn=i, calls=list(t), stop="tool_use"))
    return EpisodeRecord(key="k", turns=out, end_reason=kw.pop("end_reason", "submitted"), **kw)


def fired(name: str, r: EpisodeRecord, ctx: Context = CTX, **settings) -> Finding:
    s = rules.BUILTIN[name]
    return (s.with_(**settings) if settings else s)(r, ctx)


def test_repeated_call_three_in_a_row_and_cycles_not_twice():
    same = [call("look", x=1, y=2)]
    f = fired(
        "repeated_call", rec([call("add", n=1)], same, same, [call("look", y=2, x=1)], [call("submit")])
    )
    assert f.fired and f.steps == (2, 3, 4)  # keys in another order are the same call
    assert "look" in f.evidence and "×3" in f.evidence and "turn 2" in f.evidence
    assert not fired("repeated_call", rec(same, same, [call("add")], same)).fired
    cycle = rec([call("add", n=1)], [call("look"), call("add", n=2)], [call("look"), call("add", n=2)],
                [call("look"), call("add", n=2)])  # fmt: skip
    f = fired("repeated_call", cycle)
    assert f.fired and f.steps[0] == 2 and "cycle of 2" in f.evidence
    two_rounds = rec([call("look"), call("add", n=2)], [call("look"), call("add", n=2)])
    assert not fired("repeated_call", two_rounds).fired
    assert not fired("repeated_call", rec(same, same, same), ignore=("look",)).fired
    assert fired("repeated_call", rec(same, same, [call("add")]), min_repeats=2).fired


def test_error_streak_needs_three_errors_in_a_row():
    bad = [call("update", ok=False, result="no element e9", id="e9")]
    f = fired(
        "error_streak", rec([call("add")], bad, [call("update", ok=False, id="e8")], bad, [call("add")])
    )
    assert f.fired and f.steps == (2, 3, 4) and "3 tool errors in a row from turn 2" in f.evidence
    assert "no element e9" in f.evidence
    assert not fired("error_streak", rec(bad, bad, [call("add")], bad)).fired


def test_calls_the_loop_never_ran_are_no_errors_of_the_model():
    not_run = call("add", ok=False, result=rules.NOT_RUN)
    r = rec(
        [call("update", ok=False, id=1), call("update", ok=False, id=2), call("submit"), not_run, not_run]
    )
    assert not fired("error_streak", r).fired


def test_retry_unchanged_is_the_failed_call_sent_again_in_the_next_turn():
    bad = call("update", ok=False, result="no element e9", id="e9")
    f = fired("retry_unchanged", rec([call("add")], [bad], [bad, call("add", n=3)], [call("submit")]))
    assert f.fired and f.steps == (3,)
    assert "failed at turn 2" in f.evidence and "again unchanged at turn 3" in f.evidence
    fixed = call("update", ok=True, id="e1")
    assert not fired("retry_unchanged", rec([bad], [fixed])).fired  # corrected: other arguments
    assert not fired("retry_unchanged", rec([bad], [call("add")], [bad])).fired  # not the next turn
    assert not fired("retry_unchanged", rec([bad, bad])).fired  # one turn: it had not seen the error


def test_unknown_tool_by_the_declared_tools_or_else_what_succeeded_in_the_run():
    r = rec([call("add")], [call("draw_star", ok=False, result="unknown tool", points=5)])
    f = fired("unknown_tool", r)
    assert f.fired and f.steps == (2,) and "draw_star" in f.evidence and "4 tools declared" in f.evidence
    foreign = Context("run", tools=None, succeeded=frozenset({"add"}))
    assert fired("unknown_tool", r, foreign).fired
    assert not fired("unknown_tool", r, Context("run", None, frozenset({"add", "draw_star"}))).fired
    assert not fired("unknown_tool", r, Context("run")).fired  # nothing to tell a known tool by


def test_early_finish_counts_turns_against_the_budget_the_loop_noted():
    def ended(turn: int, reward: float | None, note: str | None = None) -> EpisodeRecord:
        turns = [[call("add", n=i)] for i in range(1, turn)] + [[call("submit")]]
        tx = {"version": 1, "after": {"1": [{"call": 0, "note": note}]}} if note else None
        return rec(*turns, reward=reward, transcript=tx)

    f = fired("early_finish", ended(2, 0.1))
    assert f.fired and f.steps == (2,) and "submit at turn 2 with reward 0.1" in f.evidence
    assert not fired("early_finish", ended(2, 0.9)).fired
    assert not fired("early_finish", ended(2, None)).fired  # unscored: never a low reward
    assert not fired("early_finish", ended(5, 0.1)).fired
    f = fired("early_finish", ended(9, 0.1, "\n[59 turns left]"))  # a quarter of 60
    assert f.fired and "of 60" in f.evidence
    assert not fired("early_finish", ended(16, 0.1, "\n[59 turns left]")).fired
    assert not fired(
        "early_finish", rec([call("add")], [call("add")], end_reason="turn_limit", reward=0.1)
    ).fired


def test_no_tool_call_where_the_loop_nudged_or_the_episode_ended_for_it():
    quiet = TurnRecord(turn=2, text="I give up.", stop="end_turn")
    nudged = {"version": 1, "after": {"2": [{"role": "user", "note": "nudge", "text": "call a tool"}]}}
    f = fired("no_tool_call", rec([call("add")], quiet, [call("submit")], transcript=nudged))
    assert f.fired and f.steps == (2,) and "I give up." in f.evidence
    assert not fired("no_tool_call", rec([call("add")], quiet, [call("submit")])).fired
    last = TurnRecord(turn=2, text="", stop="end_turn")
    assert fired("no_tool_call", rec([call("add")], last, end_reason="no_tool_call")).fired
    answered = TurnRecord(turn=2, text="42", stop="end_turn")
    assert not fired("no_tool_call", rec([call("add")], answered, end_reason="answered")).fired
    cut = TurnRecord(turn=2, stop="max_tokens")
    cut_nudged = {"version": 1, "after": {"2": [{"role": "user", "note": "nudge"}]}}
    assert not fired("no_tool_call", rec([call("add")], cut, transcript=cut_nudged)).fired


def test_output_limit_refusal_and_context_overflow_read_the_stop_reasons():
    for stop in ("max_tokens", "length", "max_output_tokens", "length (harness cap)"):
        cut = TurnRecord(turn=2, stop=stop, usage={"output": 16000})
        f = fired("output_limit", rec([call("add")], cut))
        assert f.fired and f.steps == (2,) and "16,000 output tokens" in f.evidence
    for stop in ("refusal", "content_filter"):
        r = rec([call("add")], TurnRecord(turn=2, text="I can't help.", stop=stop), end_reason="refused")
        assert fired("refusal", r).steps == (2,)
    for stop in ("model_context_window_exceeded", "model_length"):
        assert fired("context_overflow", rec([call("add")], TurnRecord(turn=2, stop=stop))).steps == (2,)
    assert not any(fired(n, rec([call("add")], [call("submit")])).fired for n in rules.BUILTIN)


def _broken(status: int, error: str, code: str | None = None) -> EpisodeRecord:
    attempt = {"status": status, "kind": "rejected", "error": error}
    return rec([call("add")], end_reason="error", error_class="endpoint_error", error=error,
               info={"failed_turn": {"turn": 2, "failed_attempts": [attempt]}})  # fmt: skip


def test_a_prompt_too_long_is_a_context_overflow_and_no_infrastructure_error():
    too_long = _broken(
        400, "BadRequestError 400: {'error': {'message': '…', 'code': 'context_length_exceeded'}}"
    )
    assert fired("context_overflow", too_long).steps == (2,)
    assert not fired("infra_error", too_long).fired
    assert fired("context_overflow", _broken(413, "PayloadTooLarge 413")).fired
    down = _broken(503, "ServiceUnavailable 503: the message says context_length_exceeded in prose")
    assert not fired("context_overflow", down).fired  # the code field, never the prose
    f = fired("infra_error", down)
    assert f.fired and f.steps == (2,) and f.evidence.startswith("endpoint_error:")
    pruned = rec([call("add")], info={"rejected_prompt_prunes": [{"turn": 1, "status": 413, "code": None}]})
    assert fired("context_overflow", pruned).steps == (1,)
    tau = rec([call("add")], end_reason="done", grade={"termination_reason": "context_window_exceeded"})
    assert fired("context_overflow", tau).fired


def test_infra_error_points_at_the_turn_that_never_came():
    r = rec([call("add")], [call("add", n=2)], end_reason="error", error_class="env_error", error="lost")
    assert fired("infra_error", r).steps == (3,)
    assert rules.BUILTIN["infra_error"].kind == "infra"
    assert {s.kind for n, s in rules.BUILTIN.items() if n != "infra_error"} == {"model"}


def test_a_users_scanner_is_a_plain_function_and_its_answers_read_as_findings():
    def two_submits(r):
        """Two submits."""
        subs = [t.turn for t in r.turns for c in t.calls if c.name == "submit"]
        return len(subs) > 1, subs, "submitted twice"

    s = as_scanner(two_submits)
    assert s.name == "two_submits" and s.about == "Two submits." and s.phrase == "trips two_submits"
    f = s(rec([call("submit")], [call("submit")]))
    assert f == Finding(True, (1, 2), "submitted twice")
    assert finding(None) == finding(False) == Finding(False)
    assert finding(True) == Finding(True)
    assert finding({"fired": True, "steps": 3}) == Finding(True, (3,), "")
    with pytest.raises(TypeError):
        finding("yes")
    with pytest.raises(ValueError, match="no scanner named"):
        as_scanner("nope", rules.BUILTIN)
    with_ctx = Scanner("ctx", lambda r, ctx: ctx.tools is not None)
    assert with_ctx(rec(), CTX).fired


def test_the_constants_are_the_loops_and_the_providers():
    from evalkit.providers.chat_completions import HARNESS_CAP
    from evalkit.run import wording
    from evalkit.run.episode import NOT_RUN

    assert rules.NOT_RUN == NOT_RUN
    assert HARNESS_CAP in rules.LIMIT_STOPS
    from evalkit.types import ToolOutcome

    for left in (1, 2, 59):
        note = wording.turns_left_note(left, "submit")
        m = rules.TURNS_LEFT.search(note)
        assert m and int(m.group(1)) == left
        sent = wording.with_note(ToolOutcome('{"id": "e1"}'), note).text  # as another harness keeps it
        assert int(rules.TURNS_LEFT_END.search(sent).group(1)) == left


def test_the_cli_names_every_scanner():
    from evalkit.cli import _scanner_names
    from evalkit.scanners.judge import QUESTIONS

    assert _scanner_names() == [*rules.BUILTIN, *QUESTIONS]
