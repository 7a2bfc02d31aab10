"""Tool-planning rollouts (seed 003): the record the berth-planning loop's `run_episode` returns, one per
episode, as lines of a `.jsonl` file, a single `.json` file, or a folder of `.json` files.

The seed has no resume: every record is an episode. Records of one model and task are its repeats, numbered
0, 1, 2 … in file order (files of a folder in name order), so keys never collide.

Field by field (seed → EpisodeRecord):

    model, task_id, episode_id, started       → the same
    messages[] system, first user             → info.prompt (what the model was told)
    messages[] assistant {content, reasoning,
               stop, tool_calls[{id, name, arguments}]} → a turn each, counted from 1: text, reasoning,
                                                stop, a call per tool call (arguments parsed; a string
                                                that is not a JSON object is a parse error)
    messages[] tool {tool_call_id, content}   → that call's result; not ok when it is {"error": …}
    steps[] {turn (from 1), tool, plan, result} → plans (every plan sent, with the server's answer: the
                                                call it came from matched in its turn by tool, in order;
                                                not ok when the answer is {"error": …}; the submitted
                                                one final) and drafts (plans checked without error)
    final {submitted, plan, grade, rubric}    → final_doc = plan; grade (+ rubric under grade.rubric)
    reward (0.0 unless the server ended the
            episode, then its reward)         → reward, unless errors (below)
    usage {input_tokens, output_tokens}       → usage {input, output} (the seed's Anthropic input counts
                                                cache reads and writes in)
    turns (a count)                           → n_turns
    end_reason                                → end_reason (below); the seed's own word in info.end_reason
    errors[]                                  → error (joined); see below
    provider_switches, seconds                → the same

    end_reason (seed)                       end_reason      error_class      reward
    submitted                               submitted       —                the server's
    no_tool_call, turn_limit                the same        —                0.0 (the env scores an
                                                                             episode without a plan 0)
    wall_clock                              deadline        —                0.0
    another (the server ended it: its own
      end_reason, or server_ended)          auto_submitted  —                the server's
    errors non-empty (a provider or
      transport failure; end_reason error)  error           endpoint_error   null *
                                                            (harness_error when the recorded exception is
                                                            not one of the provider SDKs' API errors)

(*) the seed scores such an episode as it stands (0.0); evalkit's rule is unscored, and `info.harness_reward`
(the seed's own reward, kept on every record with `info.harness_error`) and `info.unscored_because` say so.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.records.importers._common import (
    count,
    harness,
    number,
    parse_args,
    result,
    skeleton,
    text,
    unscored,
)
from evalkit.records.jsonl import iter_lines, load_json

NAME = "tool-planning"
ENV, SURFACE, MODE = "berth", "tools", "text"
_SAME = {"submitted", "no_tool_call", "turn_limit"}
# The exception classes the Anthropic and OpenAI SDKs raise for a failed request: the seed records an
# error as "<class name>: <message>", and only the class name is read.
_SDK_ERRORS = {
    "APIError", "APIConnectionError", "APITimeoutError", "APIStatusError", "APIResponseValidationError",
    "BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError", "ConflictError",
    "UnprocessableEntityError", "RateLimitError", "InternalServerError", "OverloadedError",
    "ServiceUnavailableError", "DeadlineExceededError",
}  # fmt: skip


def is_planning(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("messages"), list) and ("final" in d or "steps" in d)


def _failed(content: str) -> bool:
    try:
        v = json.loads(content)
    except ValueError:
        return False
    return isinstance(v, dict) and "error" in v


def _turns(messages: list[dict]) -> tuple[list[dict], list[str]]:
    """Turns from the assistant messages (results from the tool messages), and the text the model was told
    before its first turn."""
    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    told: list[str] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            n = len(turns) + 1
            calls = []
            for i, c in enumerate(m.get("tool_calls") or []):
                if not isinstance(c, dict):
                    continue
                args, bad = parse_args(c.get("arguments"))
                call = {"id": str(c.get("id") or f"call_{n}_{i}"), "name": str(c.get("name") or ""),
                        "args": args, "ok": not bad, "result": "", "images": [],
                        "parse_error": bad}  # fmt: skip
                by_id[call["id"]] = call
                calls.append(call)
            turns.append({"turn": n, "text": text(m.get("content")), "reasoning": text(m.get("reasoning")),
                          "stop": str(m.get("stop") or ""), "usage": {}, "model_s": 0.0, "env_s": 0.0,
                          "frame": None, "calls": calls})  # fmt: skip
        elif role == "tool":
            call = by_id.get(str(m.get("tool_call_id")))
            if call is not None:
                out = text(m.get("content"))
                call["result"] = result(out)
                call["ok"] = call["ok"] and not _failed(out)
        elif role in ("system", "user") and not turns:
            told.append(text(m.get("content")))
    return turns, told


def _plans(steps: Any, turns: list[dict], submitted: bool) -> list[dict]:
    """PlanRecord dicts from the seed's steps (see the module doc)."""
    steps = [x for x in steps if isinstance(x, dict)] if isinstance(steps, list) else []
    waiting: dict[tuple[Any, str], list[str]] = {}
    for t in turns:
        for c in t["calls"]:
            waiting.setdefault((t["turn"], c["name"]), []).append(c["id"])
    plans = []
    for i, x in enumerate(steps):
        tool, res = str(x.get("tool") or ""), x.get("result")
        ids = waiting.get((x.get("turn"), tool)) or []
        answer = res["text"] if isinstance(res, dict) and set(res) == {"text"} else res
        plans.append({
            "turn": count(x.get("turn")), "call_id": ids.pop(0) if ids else "", "tool": tool,
            "plan": x.get("plan"), "answer": answer,
            "ok": not (isinstance(res, dict) and "error" in res),
            "final": submitted and tool == "submit_plan" and i == len(steps) - 1,
        })  # fmt: skip
    return plans


def _error_class(errors: list) -> str:
    names = {str(e).split(":", 1)[0].strip() for e in errors}
    return "endpoint_error" if names & _SDK_ERRORS else "harness_error"


def episode(d: dict, repeat: int) -> dict:
    model, task = str(d.get("model") or ""), str(d.get("task_id") or "")
    rec = skeleton(model, ENV, SURFACE, MODE, task, None, repeat, (task, None))
    messages = [m for m in d.get("messages") or [] if isinstance(m, dict)]
    turns, told = _turns(messages)
    final = d.get("final") if isinstance(d.get("final"), dict) else {}
    errors = d.get("errors") if isinstance(d.get("errors"), list) else []
    raw_end = str(d.get("end_reason") or "turn_limit")  # the seed's own default
    end = raw_end if raw_end in _SAME else "deadline" if raw_end == "wall_clock" else "auto_submitted"
    grade = final.get("grade") if isinstance(final.get("grade"), dict) else None
    if grade is not None and final.get("rubric") is not None:
        grade = {**grade, "rubric": final["rubric"]}
    calls = [c for t in turns for c in t["calls"]]
    plans = _plans(d.get("steps"), turns, bool(final.get("submitted")))
    u = d.get("usage") if isinstance(d.get("usage"), dict) else {}
    reward = number(d.get("reward"))
    rec.update(
        episode_id=d.get("episode_id"),
        started=d.get("started"),
        reward=reward,
        grade=grade,
        end_reason=end,
        error_class=None,
        error="; ".join(map(str, errors)) or None,
        provider_switches=d.get("provider_switches") if isinstance(d.get("provider_switches"), list) else [],
        usage={"input": count(u.get("input_tokens")), "output": count(u.get("output_tokens"))},
        n_turns=count(d.get("turns")) or len(turns),
        tool_calls=sum(not c["parse_error"] for c in calls),
        tool_errors=sum(not c["ok"] and not c["parse_error"] for c in calls),
        parse_errors=sum(c["parse_error"] for c in calls),
        seconds=number(d.get("seconds")) or 0.0,
        final_doc=final.get("plan"),
        turns=turns,
        plans=plans,
        drafts=sum(p["ok"] and not p["final"] for p in plans),
        info={
            "importer": NAME,
            "prompt": "\n\n".join(told),
            "end_reason": raw_end,
        },  # fmt: skip
    )
    harness(rec, reward, "; ".join(map(str, errors)))
    if errors:
        rec.update(end_reason="error", error_class=_error_class(errors))
        unscored(rec, "a provider or transport failure ended the episode; the seed scores it as it stands")
    return rec


def _records(path: Path) -> Iterator[Any]:
    if path.is_dir():
        for p in sorted(path.glob("*.json")):
            yield load_json(p)
    elif path.suffix == ".json":
        yield load_json(path)
    else:
        yield from iter_lines(path)


def read(path: Path) -> Iterator[dict]:
    repeats: Counter = Counter()
    for d in _records(path):
        if is_planning(d):
            ident = (d.get("model"), d.get("task_id"))
            yield episode(d, repeats[ident])
            repeats[ident] += 1
