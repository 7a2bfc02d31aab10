"""The grader: a finished session (its record of state changes and its answer) against the task's check.

Predicates over the record:

- `{"has": MATCH}` — some entry matches; `{"none": MATCH}` — no entry matches;
- `{"count": MATCH, "n": 2}` — exactly n entries match.

A MATCH is `{"type": "order_placed", "items": {"P04": 1}, "body~": ["12:30", "half past twelve"]}`: every
key must hold in the entry. Plain values compare equal (strings case- and space-insensitively, numbers to a
cent, objects exactly); a key ending in `~` wants the entry's text to contain one of the given strings. The
answer check `{"any": [...], "number": x}` passes when the answer contains one of the strings, or a number
equal to x. The reward is 1.0 when every check passes and 0.0 otherwise; a session that was never finished
is not graded at all (the caller keeps its reward None).
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _norm(text: Any) -> str:
    return " ".join(str(text).lower().split())


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, int | float) and isinstance(got, int | float):
        return abs(float(want) - float(got)) < 0.005
    if isinstance(want, str) and isinstance(got, str):
        return _norm(want) == _norm(got)
    return want == got


def matches(entry: dict, match: dict) -> bool:
    for key, want in match.items():
        if key.endswith("~"):
            text = _norm(entry.get(key[:-1], ""))
            options = want if isinstance(want, list) else [want]
            if not any(_norm(o) in text for o in options):
                return False
        elif key not in entry or not _same(want, entry[key]):
            return False
    return True


def check_predicate(pred: dict, entries: list[dict]) -> bool:
    if "has" in pred:
        return any(matches(e, pred["has"]) for e in entries)
    if "none" in pred:
        return not any(matches(e, pred["none"]) for e in entries)
    if "count" in pred:
        return sum(matches(e, pred["count"]) for e in entries) == int(pred.get("n", 1))
    raise ValueError(f"unknown predicate {sorted(pred)}: use has, none or count")


def numbers(text: str) -> list[float]:
    out = []
    for m in _NUMBER.findall(text):
        try:
            out.append(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


def check_answer(spec: dict, answer: Any) -> bool:
    if answer is None:
        return False
    text = _norm(answer)
    if any(_norm(s) in text for s in spec.get("any", [])):
        return True
    if spec.get("number") is not None:
        return any(abs(n - float(spec["number"])) < 0.005 for n in numbers(text.replace("$", " ")))
    return False


def grade(task: dict, record: list[dict], answer: Any) -> dict:
    """{"total": 1.0 or 0.0, "checks": [{"check", "passed"}], "passed", "n_checks"} for one session."""
    check = task.get("check") or {}
    results = []
    for pred in check.get("record") or []:
        results.append({"check": pred, "passed": check_predicate(pred, record)})
    if check.get("answer") is not None:
        results.append(
            {"check": {"answer": check["answer"]}, "passed": check_answer(check["answer"], answer)}
        )
    passed = sum(r["passed"] for r in results)
    ok = bool(results) and passed == len(results)
    return {
        "total": 1.0 if ok else 0.0,
        "passed": passed,
        "n_checks": len(results),
        "checks": results,
        "answer": answer,
    }
