"""Inspect logs (`inspect_ai.log`): a `.eval` file (a zip of compressed JSON members) or Inspect's `.json`
log, read through Inspect's own reader (`read_eval_log`; the optional extra `evalkit[inspect]`, imported only
here, when a log is read).

One log is one task run by one model; a sample run several times has one entry per epoch. Field by field
(Inspect → EpisodeRecord):

    eval.model                                → model
    eval.task                                 → env (surface and mode empty)
    sample id, epoch                          → task_id, repeat = epoch − 1
    messages[] system, user (before the
      first assistant message)                → info.prompt
    messages[] assistant {content, tool_calls} → a turn each: text (text parts), reasoning (reasoning
                                                parts), a call per tool call {id, function, arguments}
    messages[] tool {tool_call_id, content,
      error}                                  → that call's result (the ToolEvent's, when it is text); not
                                                ok when `error` is set
    events[] model, in order                  → each turn's usage (else none per turn)
    scores[SCORER].value                      → reward, as Inspect's `value_to_float` reads it: numbers,
                                                booleans, C / I / P / N (1, 0, 0.5, 0), yes / no, numeric
                                                text; another value (a dict, other text) is no reward,
                                                never 0. No score: no reward.
    model_usage                               → usage {input, output, cache_read, cache_write,
                                                reasoning_tokens}; total_cost → cost_usd (else null)
    error                                     → end_reason error, error_class harness_error, unscored
                                                (the score kept in info.harness_reward)
    limit {type}                              → end_reason deadline (time, working), cost_limit (cost),
                                                context_overflow (context), turn_limit (others); else done
    total_time, started_at                    → seconds, started
    metadata.evalkit (a log evalkit wrote)    → identity (so the key is the original's), end reason,
                                                grade, error class, timings
    the first model event's tools             → transcript tools (inline)
    the messages as sent                      → transcript (texts inline; images as not stored; a message
                                                evalkit wrote with a note in its metadata keeps it: a
                                                scripted assistant message opening it is no turn)

SCORER: the log's only scorer; where it has several, the one `scoring(name)` or the environment variable
`EVALKIT_SCORER` names (the CLI's `--scorer`), else the first the log declares, said in a warning that names
the others. Images in messages are not extracted (a record's images are files in its run, and a log is one
file): the transcript marks where they were.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, TraceError
from evalkit.records.importers._common import count, declared_tools, harness, result, skeleton, unscored
from evalkit.records.jsonl import warn_once
from evalkit.types import SCRIPTED

NAME = "inspect"
MARK = "evalkit"
ENV_VAR = "EVALKIT_SCORER"
_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("evalkit_scorer", default=None)
_KEPT = ("split", "evalset_task", "tier", "difficulty_score", "coordinates", "episode_id", "prompt_version",
         "final_doc")  # fmt: skip
"""Fields of a record evalkit wrote that only its `metadata.evalkit` holds, read back as they are."""
# The limits Inspect names whose evalkit end reason is not turn_limit (its message, token, turn, operator and
# custom limits all stop the model before it finished, as a turn limit does).
_LIMIT_ENDS = {"time": "deadline", "working": "deadline", "cost": "cost_limit", "context": "context_overflow"}
_GRADES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # matched exactly, as Inspect matches them
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}  # in any case


@contextlib.contextmanager
def scoring(name: str | None) -> Iterator[None]:
    """Read rewards from the scorer `name` in the Inspect logs read inside this block (None: the default)."""
    token = _chosen.set(name)
    try:
        yield
    finally:
        _chosen.reset(token)


def chosen() -> str | None:
    return _chosen.get() or os.environ.get(ENV_VAR) or None


def cache_tag(path: Path) -> str:
    """A suffix for the name of a log's cached index: the scorer chosen changes every reward."""
    name = chosen()
    if name is None or not is_log_path(path):
        return ""
    return "-s" + hashlib.sha256(name.encode()).hexdigest()[:8]


def is_log_path(path: Path) -> bool:
    return path.suffix == ".eval" or (path.suffix == ".json" and path.is_file() and _looks_json_log(path))


def _looks_json_log(path: Path) -> bool:
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            head = f.read(4096)
        return b'"eval"' in head and b'"version"' in head
    return False


def is_json_log(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("eval"), dict) and "version" in d and "status" in d


def to_float(value: Any) -> float | None:
    """A score's value as a reward, as Inspect's `value_to_float` reads it, except that what it cannot read
    (it warns and says 0) is no reward here: evalkit never makes up a 0."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        if value in _GRADES:
            return _GRADES[value]
        if value.lower() in _WORDS:
            return _WORDS[value.lower()]
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _inspect() -> Any:
    try:
        # start-up: inspect_ai is large; it loads when a log is read
        from inspect_ai import log
    except ImportError:
        raise ConfigError("reading an Inspect log needs inspect-ai: pip install 'evalkit[inspect]'") from None
    return log


def read_log(path: Path) -> Any:
    """The whole log, or one line saying why it cannot be read."""
    log = _inspect()
    try:
        return log.read_eval_log(str(path))
    except Exception as e:  # noqa: BLE001 — any failure of Inspect's reader is a log we cannot read
        raise TraceError(f"{path}: not a readable Inspect log ({type(e).__name__}: {_line(e)})") from None


def _line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or "no reason given"


def _scorer(path: Path, log: Any) -> str | None:
    names: list[str] = []
    for s in (log.eval.scorers or []) if log.eval else []:
        names.append(s.name)
    for s in (log.results.scores if log.results else []) or []:
        if s.scorer not in names:
            names.append(s.scorer)
        if s.name not in names:
            names.append(s.name)
    for sample in log.samples or []:
        for k in sample.scores or {}:
            if k not in names:
                names.append(k)
    want = chosen()
    if want is not None:
        if want not in names:
            raise ConfigError(
                f"{path}: no scorer {want!r} in this log (its scorers: {', '.join(names) or 'none'})"
            )
        return want
    if len(names) > 1:
        warn_once(("scorers", str(path)), f"{path}: rewards from scorer {names[0]!r}; the log also has "
                  f"{', '.join(map(repr, names[1:]))} (choose with scorer= or --scorer)")  # fmt: skip
    return names[0] if names else None


def _attached(s: str, attachments: dict) -> str:
    if s.startswith("attachment://"):
        return attachments.get(s[len("attachment://") :], s)
    return s


def _content(content: Any, attachments: dict) -> tuple[str, str, int]:
    """(text, reasoning, images) of a message's content."""
    if isinstance(content, str):
        return _attached(content, attachments), "", 0
    texts, thoughts, images = [], [], 0
    for part in content or []:
        kind = getattr(part, "type", None)
        if kind == "text":
            texts.append(_attached(part.text, attachments))
        elif kind == "reasoning":
            thoughts.append(_attached(part.reasoning, attachments))
        elif kind == "image":
            images += 1
    return "\n".join(texts), "\n".join(thoughts), images


def _usage(u: Any) -> dict:
    if u is None:
        return {}
    return {
        "input": count(u.input_tokens),
        "output": count(u.output_tokens),
        "cache_read": count(u.input_tokens_cache_read),
        "cache_write": count(u.input_tokens_cache_write),
        "reasoning_tokens": count(u.reasoning_tokens),
    }


def _turns(sample: Any, ek_turns: list) -> tuple[list[dict], list[str], dict]:
    """The turns, the texts before the first one, and what the model was sent in the shape of a record's
    transcript (`evalkit.records.transcripts`; texts inline, images as not stored: a log holds them inline,
    not as files of a run)."""
    att = sample.attachments or {}
    model_events = [e for e in sample.events or [] if getattr(e, "event", None) == "model"]
    # A ToolEvent holds what the tool returned; the tool message, what the model was sent (a harness may
    # append to it, as evalkit's loop appends the turns left).
    returned = {e.id: e.result for e in sample.events or [] if getattr(e, "event", None) == "tool"}
    turns: list[dict] = []
    told: list[str] = []
    by_id: dict[str, dict] = {}
    system: list[str] = []
    opening: dict = {"text": "", "images": []}
    after: dict[str, list] = {}
    before: list[dict] = []
    for m in sample.messages or []:
        meta = m.metadata.get(MARK) if isinstance(getattr(m, "metadata", None), dict) else None
        note = meta.get("note") if isinstance(meta, dict) and isinstance(meta.get("note"), str) else None
        if m.role == "assistant" and not turns and note == SCRIPTED:  # evalkit's: no model call made it
            before.append({"role": "assistant", "text": _content(m.content, att)[0], "note": note})
        elif m.role == "user" and not turns and note:
            before.append({"role": "user", "text": _content(m.content, att)[0], "note": note})
        elif m.role == "assistant":
            n = len(turns) + 1
            extra = ek_turns[n - 1] if len(ek_turns) >= n and isinstance(ek_turns[n - 1], dict) else {}
            turns.append(_turn(m, n, att, extra, model_events[n - 1] if len(model_events) >= n else None))
            by_id.update((call["id"], call) for call in turns[-1]["calls"])
        elif m.role == "tool":
            call = by_id.get(str(m.tool_call_id))
            if call is not None:
                _tool_message(m, call, returned.get(call["id"]), att, turns[-1], after)
        elif m.role in ("system", "user") and not turns:
            text, _, images = _content(m.content, att)
            told.append(text)
            if m.role == "system":
                system.append(text)
            else:
                opening["text"] = "\n\n".join(t for t in (opening["text"], text) if t)
                opening["images"] += _unstored(images)
        elif m.role == "user":
            text, _, images = _content(m.content, att)
            entry = {"role": "user", "text": text, "images": _unstored(images)}
            after.setdefault(str(turns[-1]["turn"]), []).append(entry | ({"note": note} if note else {}))
    transcript: dict = {"version": 1, "opening": opening, "after": after}
    if before:
        opening["before"] = before
    if system:
        transcript["system_text"] = "\n\n".join(system)
    tools = declared_tools(getattr(model_events[0], "tools", None)) if model_events else None
    if tools:
        transcript["tools"] = tools
    return turns, told, transcript


def _turn(m: Any, n: int, att: dict, extra: dict, ev: Any) -> dict:
    """Turn n from its assistant message, with what evalkit wrote of it (`extra`, when evalkit wrote the
    log) and its model event `ev` (None when the log has fewer)."""
    text, reasoning, _ = _content(m.content, att)
    raw = extra.get("raw_args") if isinstance(extra.get("raw_args"), dict) else {}
    calls = []
    for i, c in enumerate(m.tool_calls or []):
        bad = c.parse_error is not None
        args = raw.get(c.id, c.arguments if isinstance(c.arguments, dict) else {})
        calls.append({"id": str(c.id or f"call_{n}_{i}"), "name": str(c.function or ""), "args": args,
                      "ok": not bad,
                      "result": "", "images": [], "parse_error": bad})  # fmt: skip
    out = ev.output if ev is not None else None
    usage = _usage(out.usage) if out is not None else {}
    return {
        "turn": extra["turn"] if isinstance(extra.get("turn"), int) else n,
        "text": text, "reasoning": reasoning,
        "stop": str(extra.get("stop") or (out.stop_reason if out is not None else "")),
        "usage": extra.get("usage") if isinstance(extra.get("usage"), dict) else usage,
        "model_s": float(extra.get("model_s") or (ev.working_time if ev is not None else 0) or 0),
        "env_s": float(extra.get("env_s") or 0), "frame": None, "calls": calls,
    }  # fmt: skip


def _tool_message(m: Any, call: dict, got: Any, att: dict, last: dict, after: dict[str, list]) -> None:
    """A tool message into its call (`got`: what the ToolEvent says the tool returned) and, when the call is
    the last turn's, into what the model was sent after that turn."""
    call["result"] = result(_attached(got, att) if isinstance(got, str) else _content(m.content, att)[0])
    call["ok"] = call["ok"] and m.error is None
    text, _, images = _content(m.content, att)
    ids = [c["id"] for c in last["calls"]]
    if call["id"] in ids:
        after.setdefault(str(last["turn"]), []).append(
            {"call": ids.index(call["id"]), "text": text, "images": _unstored(images)}
        )


def _unstored(n: int) -> list[dict]:
    return [{"path": None, "mime": "image/png"} for _ in range(n)]


def episode(log: Any, sample: Any, scorer: str | None) -> dict:
    meta = sample.metadata if isinstance(sample.metadata, dict) else {}
    ek = meta.get(MARK) if isinstance(meta.get(MARK), dict) else {}
    model = str(ek.get("model") or log.eval.model or "")
    env = str(ek.get("env") or log.eval.task or NAME)
    surface, mode = str(ek.get("surface") or ""), str(ek.get("mode") or "")
    skin = ek.get("skin") if isinstance(ek.get("skin"), str) else None
    task = str(sample.id)
    repeat = max(int(sample.epoch or 1) - 1, 0)
    rec = skeleton(model, env, surface, mode, task, skin, repeat, (task, skin))
    turns, told, transcript = _turns(sample, ek.get("turns") if isinstance(ek.get("turns"), list) else [])
    calls = [c for t in turns for c in t["calls"]]
    score = (sample.scores or {}).get(scorer) if scorer else None
    reward = to_float(score.value) if score is not None else None
    usage: dict = {}
    cost = None
    for u in (sample.model_usage or {}).values():
        for k, v in _usage(u).items():
            usage[k] = usage.get(k, 0) + v
        if u.total_cost is not None:
            cost = (cost or 0.0) + u.total_cost
    limit = getattr(sample.limit, "type", None) if sample.limit else None
    end = _LIMIT_ENDS.get(limit, "turn_limit") if limit else "done"
    err = sample.error.message if sample.error else None
    rec.update(
        {k: ek[k] for k in _KEPT if k in ek},
        reward=reward,
        grade=ek.get("grade") if isinstance(ek.get("grade"), dict) else
        ({k: v.value for k, v in sample.scores.items()} if sample.scores else None),
        end_reason=str(ek.get("end_reason") or end),
        error_class=ek.get("error_class") if isinstance(ek.get("error_class"), str) else None,
        error=ek["error"] if "error" in ek else err,
        traceback=sample.error.traceback if sample.error else None,
        usage=ek.get("usage") if isinstance(ek.get("usage"), dict) else usage,
        cost_usd=cost if "cost_usd" not in ek else ek["cost_usd"],
        n_turns=len(turns),
        tool_calls=sum(not c["parse_error"] for c in calls),
        tool_errors=sum(not c["ok"] and not c["parse_error"] for c in calls),
        parse_errors=sum(c["parse_error"] for c in calls),
        seconds=float(ek.get("seconds") or sample.total_time or 0.0),
        model_seconds=float(ek.get("model_seconds") or 0.0),
        env_seconds=float(ek.get("env_seconds") or 0.0),
        started=ek.get("started") or (str(sample.started_at) if sample.started_at else None),
        turns=turns,
        transcript=transcript,
        info={"importer": NAME, "prompt": "\n\n".join(t for t in told if t), "scorer": scorer,
              "score": _plain(score.value) if score is not None else None},
    )  # fmt: skip
    harness(rec, reward, err)
    if rec["error_class"]:
        rec["reward"] = None
    elif err:
        rec.update(end_reason="error", error_class="harness_error")
        if reward is not None:
            unscored(
                rec, "the sample ended in an error; evalkit leaves an episode the harness broke unscored"
            )
    return rec


def _plain(v: Any) -> Any:
    return v if isinstance(v, str | int | float | bool) else None


def read(path: Path) -> Iterator[dict]:
    log = read_log(path)
    scorer = _scorer(path, log)
    for sample in log.samples or []:
        yield episode(log, sample, scorer)
