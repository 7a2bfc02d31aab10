"""τ²-bench results (sierra-research/tau2-bench): its results JSON (`info`, `tasks`, `simulations`), a bare
list of simulations (as some leaderboard submissions hold them), τ²'s directory format (`results.json` and
`simulations/<id>.json`), or a leaderboard submission folder (`submission.json` and `trajectories/`).

τ² simulates a customer (an LLM user simulator) talking to the agent under test, which calls the domain's
tools; the domain is the env, and the agent's model is the model. Field by field (τ² → EpisodeRecord):

    info.agent_info.llm (else submission.json
      model_name, else the model an agent
      message's raw response names, else the
      file name before `_<domain>_`)          → model
    info.environment_info.domain_name (else
      submission trajectory_files, else a
      known domain in the file name)          → env (surface and mode empty)
    task_id, trial (else counted per task)    → task_id, repeat
    info.environment_info.policy (or the
      simulation's own policy)                → the system message (τ²'s agent sends it inside its own
                                                instructions, which the file does not hold)
    messages[] assistant                      → a turn each: content, tool_calls {id, name, arguments},
                                                usage {prompt_tokens, completion_tokens}, generation time,
                                                the raw response's finish_reason and reasoning_content;
                                                a leading assistant message with no usage (τ²'s scripted
                                                greeting) is no turn: the transcript shows it as scripted
    messages[] tool (requestor assistant)     → that call's result; not ok when `error`
    messages[] user                           → the opening (the first), then user messages after turns
    messages[] user tool calls and results    → shown in the transcript as the user's own, marked as not
      (requestor user: telecom's device tools)  sent to the agent
    reward_info.reward                        → reward (none without reward_info: never 0)
    reward_info.reward_breakdown, reward_basis,
      db_check, action/env/nl/communicate
      checks, termination_reason              → grade {db, communicate, …: the breakdown; termination_reason;
                                                counts of checks met}; the whole reward_info in info
    agent_cost                                → cost_usd (null when absent); user_cost in info.user_cost
    duration, start_time                      → seconds, started

    termination_reason            end_reason   error_class            reward
    user_stop                     done         —                      τ²'s
    agent_stop                    submitted    —                      τ²'s
    max_steps                     turn_limit   —                      τ²'s (0: τ² scores a premature end 0)
    timeout                       deadline     —                      τ²'s
    too_many_errors, agent_error,
      context_window_exceeded     done         —                      τ²'s (the agent's own doing: data)
    user_error, unexpected_error  error        harness_error          null * (the user simulator or τ²
                                                                      broke it)
    infrastructure_error          error        endpoint_error (an API
                                               error type in info.error_type) or harness_error   null

(*) τ²'s own mean counts these as scored; `info.harness_reward` keeps its reward and `info.unscored_because`
says why evalkit does not. τ²'s own metrics leave infrastructure errors out, as evalkit does.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import TraceError
from evalkit.records.importers._common import (
    count,
    fields,
    finite,
    harness,
    items,
    result,
    skeleton,
    unscored,
)
from evalkit.records.jsonl import load_json
from evalkit.types import SCRIPTED

NAME = "tau2-bench"
SUBMISSION = "submission.json"
DOMAINS = ("banking_knowledge", "telecom-workflow", "airline", "retail", "telecom", "mock")
"""τ²'s domains (its data/tau2/domains, and telecom's workflow variant), longest first: a bare list of
simulations does not name its domain, and leaderboard files are named `<model>_<domain>_…`."""
_END = {
    "user_stop": "done", "agent_stop": "submitted", "max_steps": "turn_limit", "timeout": "deadline",
    "too_many_errors": "done", "agent_error": "done", "context_window_exceeded": "done",
}  # fmt: skip
_BROKEN = {
    "user_error": "the user simulator broke τ²'s protocol; evalkit leaves an episode the harness broke "
    "unscored",
    "unexpected_error": "τ² ended the simulation on an unexpected error",
    "infrastructure_error": "an infrastructure error ended the simulation",
}
_ENDPOINT = frozenset({"RateLimitError", "InternalServerError", "ServiceUnavailableError", "Timeout",
                       "APIConnectionError", "APIError", "BadGatewayError"})  # fmt: skip
"""litellm's exception types (τ² calls models through litellm) for a model endpoint that failed."""
_USER_CALL = "the user's own tool call, not sent to the agent"
_USER_RESULT = "the result of the user's own tool call, not sent to the agent"
_HEAD = 1 << 16


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD)
    except OSError:
        return b""


def sniff(path: Path) -> bool:
    """Whether a `.json` file looks like τ² results from its first 64 KB, without parsing a file that may
    be hundreds of megabytes: the results' `info` names τ²'s agent, user and environment blocks; a bare
    list starts with a simulation's fields."""
    head = _head(path).lstrip()
    if head.startswith(b"{"):
        return all(k in head for k in (b'"agent_info"', b'"user_info"', b'"environment_info"'))
    if head.startswith(b"["):
        return all(k in head for k in (b'"task_id"', b'"termination_reason"', b'"start_time"'))
    return False


def is_results(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("info"), dict) and isinstance(d.get("simulations"), list)


def is_simulations(d: Any) -> bool:
    return (
        isinstance(d, list)
        and bool(d)
        and all(isinstance(s, dict) and "task_id" in s and "termination_reason" in s for s in d[:5])
    )


def is_dir_run(path: Path) -> bool:
    """τ²'s directory format, or a leaderboard submission folder."""
    if (path / "simulations").is_dir() and (path / "results.json").is_file():
        return sniff(path / "results.json")
    sub = load_json(path / SUBMISSION) if (path / SUBMISSION).is_file() else None
    return isinstance(sub, dict) and (path / "trajectories").is_dir()


class _Source:
    """One results file (or directory-format run) and what names its model and domain."""

    def __init__(self, path: Path, data: Any, domain: str | None = None, model: str | None = None):
        self.path, self.data = path, data
        info = data.get("info") if isinstance(data, dict) else None
        self.info = info if isinstance(info, dict) else {}
        agent = self.info.get("agent_info") if isinstance(self.info.get("agent_info"), dict) else {}
        env = self.info.get("environment_info") if isinstance(self.info.get("environment_info"), dict) else {}
        self.user = self.info.get("user_info") if isinstance(self.info.get("user_info"), dict) else {}
        self.agent = agent
        self.domain = str(env.get("domain_name") or domain or _domain_in(path.stem) or "tau2")
        self.model_hint = agent.get("llm") or model
        self.policy = env.get("policy") if isinstance(env.get("policy"), str) else None

    def simulations(self) -> list:
        sims = self.data.get("simulations") if isinstance(self.data, dict) else self.data
        return sims if isinstance(sims, list) else []

    def model(self, sims: list) -> str:
        if self.model_hint:
            return str(self.model_hint)
        for s in sims:
            for m in items(s.get("messages")) if isinstance(s, dict) else []:
                raw = m.get("raw_data") if isinstance(m, dict) else None
                if isinstance(raw, dict) and isinstance(raw.get("model"), str) and raw["model"]:
                    return raw["model"]
        stem = self.path.stem if self.path.is_file() else self.path.name
        return stem.split(f"_{self.domain}_", 1)[0] if f"_{self.domain}_" in stem else stem


def _domain_in(name: str) -> str | None:
    return next((d for d in DOMAINS if f"_{d}_" in f"_{name}_"), None)


def _load(path: Path) -> Any:
    d = load_json(path)
    if not (is_results(d) or is_simulations(d)):
        raise TraceError(f"{path}: not τ²-bench results (no info and simulations, nor a list of simulations)")
    return d


def _sources(path: Path) -> Iterator[_Source]:
    if path.is_file():
        yield _Source(path, _load(path))
        return
    if (path / "simulations").is_dir() and (path / "results.json").is_file():
        meta = load_json(path / "results.json")
        if not isinstance(meta, dict):
            raise TraceError(f"{path / 'results.json'}: not readable JSON")
        sims = [load_json(f) for f in sorted((path / "simulations").glob("*.json"))]
        yield _Source(path, {**meta, "simulations": [s for s in sims if isinstance(s, dict)]})
        return
    sub = fields(load_json(path / SUBMISSION))
    files = fields(sub.get("trajectory_files"))
    named = {str(f): str(d) for d, f in files.items()}
    for f in sorted((path / "trajectories").glob("*.json")):
        yield _Source(f, _load(f), named.get(f.name), sub.get("model_name"))


def _content(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else json.dumps(v, ensure_ascii=False, default=str)


def _call_text(c: dict) -> str:
    return f"{c.get('name') or '?'}({json.dumps(c.get('arguments') or {}, ensure_ascii=False, default=str)})"


def _flat(messages: Any) -> Iterator[dict]:
    """τ²'s messages with each MultiToolMessage (a tool message holding `tool_messages`) opened up."""
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool" and isinstance(m.get("tool_messages"), list):  # a MultiToolMessage
            yield from (t for t in m["tool_messages"] if isinstance(t, dict))
        else:
            yield m


def _scripted(m: dict) -> bool:
    """τ²'s greeting: an assistant message the orchestrator writes, no model call behind it."""
    return not m.get("usage") and not m.get("raw_data") and not m.get("tool_calls") and not m.get("cost")


def _turn(m: dict, n: int) -> dict:
    raw = m.get("raw_data") if isinstance(m.get("raw_data"), dict) else {}
    choice = (raw.get("choices") or [{}])[0] if isinstance(raw.get("choices"), list) else {}
    choice = choice if isinstance(choice, dict) else {}
    said = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    u = m.get("usage") if isinstance(m.get("usage"), dict) else {}
    calls = [
        {"id": str(c.get("id") or f"call_{n}_{i}"), "name": str(c.get("name") or ""),
         "args": c.get("arguments") if isinstance(c.get("arguments"), dict) else {},
         "ok": isinstance(c.get("arguments"), dict),
         "result": "", "images": [], "parse_error": not isinstance(c.get("arguments"), dict)}
        for i, c in enumerate(items(m.get("tool_calls"))) if isinstance(c, dict)
    ]  # fmt: skip
    return {
        "turn": n,
        "text": _content(m.get("content")),
        "reasoning": str(said.get("reasoning_content") or ""),
        "stop": str(choice.get("finish_reason") or ("tool_calls" if calls else "stop")),
        "usage": {"input": count(u.get("prompt_tokens")), "output": count(u.get("completion_tokens"))},
        "model_s": finite(m.get("generation_time_seconds")) or 0.0,
        "env_s": 0.0,
        "frame": None,
        "calls": calls,
    }


def conversation(sim: dict) -> tuple[list[dict], dict]:
    """The turns of the agent under test, and what it was sent in the shape of a record's transcript
    (`evalkit.records.transcripts`, texts inline): the first user message is the opening; after each turn,
    its tool results (by call id) and the user's replies; the user simulator's own tool calls and their
    results are there too, marked as not sent to the agent."""
    turns: list[dict] = []
    before: list[dict] = []
    opening: dict = {"text": "", "images": []}
    after: dict[str, list] = {}
    opened = False
    for m in _flat(sim.get("messages")):
        role = m.get("role")
        if role == "assistant":
            if not turns and not opened and _scripted(m):
                before.append({"role": "assistant", "text": _content(m.get("content")), "note": SCRIPTED})
                continue
            turns.append(_turn(m, len(turns) + 1))
            continue
        entries: list[dict] = []
        if role == "user":
            text = _content(m.get("content"))
            if text or not m.get("tool_calls"):
                entries.append({"role": "user", "text": text, "images": []})
            for c in items(m.get("tool_calls")):
                if isinstance(c, dict):
                    entries.append({"role": "user", "text": _call_text(c), "note": _USER_CALL, "images": []})
        elif role == "tool" and m.get("requestor") == "user":
            entries.append({"role": "user", "text": _content(m.get("content")), "note": _USER_RESULT,
                            "images": []})  # fmt: skip
        elif role == "tool" and turns:
            calls = turns[-1]["calls"]
            i = next((j for j, c in enumerate(calls) if c["id"] == str(m.get("id"))), None)
            if i is not None:
                calls[i]["result"] = result(_content(m.get("content")))
                calls[i]["ok"] = not m.get("error") and not calls[i]["parse_error"]
                entries.append({"call": i, "text": _content(m.get("content")), "images": []})
        if not entries:
            continue
        if turns:
            after.setdefault(str(turns[-1]["turn"]), []).extend(entries)
            continue
        for e in entries:  # before the agent's first turn: the user's opening, and the user's own tools
            if e.get("note") is None and "call" not in e:
                opening["text"] = "\n\n".join(t for t in (opening["text"], e["text"]) if t)
                opened = True
            else:
                before.append({"role": "user", "text": e["text"], "note": e.get("note")})
        continue
    tx: dict = {"version": 1, "opening": opening, "after": after}
    if before:
        opening["before"] = before
    return turns, tx


def _grade(sim: dict, ri: dict | None) -> dict:
    """The reward's breakdown as a flat grade: each component of τ²'s `reward_breakdown` (lower case, so the
    analysis's grade components list them), the basis, how many of each kind of check were met, the
    termination reason, and τ²'s note (a premature end, no evaluation criteria)."""
    grade: dict = {"termination_reason": str(sim.get("termination_reason") or "")}
    if not ri:
        return grade
    for k, v in fields(ri.get("reward_breakdown")).items():
        if finite(v) is not None:
            grade[str(k).lower()] = finite(v)
    if isinstance(ri.get("reward_basis"), list):
        grade["reward_basis"] = [str(b) for b in ri["reward_basis"]]
    db = ri.get("db_check")
    if isinstance(db, dict) and "db_match" in db:
        grade["db_match"] = bool(db["db_match"])
    kinds = (
        ("actions", "action_checks", "action_match"),
        ("env_assertions", "env_assertions", "met"),
        ("nl_assertions", "nl_assertions", "met"),
        ("communicate", "communicate_checks", "met"),
    )
    for name, field, met in kinds:
        checks = [c for c in items(ri.get(field)) if isinstance(c, dict)]
        if checks:
            grade[f"n_{name}"] = len(checks)
            grade[f"n_{name}_met"] = sum(bool(c.get(met)) for c in checks)
    note = fields(ri.get("info")).get("note")
    if note:
        grade["note"] = str(note)
    return grade


def _error_class(sim: dict) -> str:
    info = sim.get("info") if isinstance(sim.get("info"), dict) else {}
    kind = str(info.get("error_type") or "")
    api = kind.startswith(("Api", "API")) or kind in _ENDPOINT
    infra = sim.get("termination_reason") == "infrastructure_error"
    return "endpoint_error" if infra and api else "harness_error"


def episode(src: _Source, sim: dict, model: str, repeats: Counter) -> dict:
    task = str(sim.get("task_id"))
    trial = sim.get("trial")
    if isinstance(trial, int) and not isinstance(trial, bool):
        repeat = trial
    else:
        repeat = repeats[task]
        repeats[task] += 1
    rec = skeleton(model, src.domain, "", "", task, None, repeat, (task, None))
    turns, tx = conversation(sim)
    policy = sim.get("policy") if isinstance(sim.get("policy"), str) else src.policy
    if policy:
        tx["system_text"] = policy
    calls = [c for t in turns for c in t["calls"]]
    ri = sim.get("reward_info") if isinstance(sim.get("reward_info"), dict) else None
    reward = finite(ri.get("reward")) if ri else None
    why = str(sim.get("termination_reason") or "")
    usage = {k: sum(t["usage"][k] for t in turns) for k in ("input", "output")}
    extra = sim.get("info") if isinstance(sim.get("info"), dict) else {}
    rec.update(
        episode_id=str(sim.get("id") or "") or None,
        reward=reward,
        grade=_grade(sim, ri),
        end_reason=_END.get(why, "error" if why in _BROKEN else "done"),
        error_class=None,
        error=str(extra["error"]) if extra.get("error") else None,
        usage=usage,
        cost_usd=finite(sim.get("agent_cost")),
        n_turns=len(turns),
        tool_calls=sum(not c["parse_error"] for c in calls),
        tool_errors=sum(not c["ok"] and not c["parse_error"] for c in calls),
        parse_errors=sum(c["parse_error"] for c in calls),
        seconds=finite(sim.get("duration")) or 0.0,
        model_seconds=sum(t["model_s"] for t in turns),
        env_seconds=0.0,
        started=str(sim.get("start_time") or "") or None,
        turns=turns,
        transcript=tx,
        info={
            "importer": NAME, "prompt": tx["opening"]["text"], "file": src.path.name,
            "simulation_id": sim.get("id"), "trial": sim.get("trial"), "termination_reason": why,
            "user_cost": finite(sim.get("user_cost")), "user_llm": src.user.get("llm"),
            "agent_implementation": src.agent.get("implementation"), "reward_info": ri,
        },
    )  # fmt: skip
    harness(rec, reward, why if why in _BROKEN else extra.get("error"))
    if why in _BROKEN:
        rec["error_class"] = _error_class(sim)
        rec["error"] = rec["error"] or f"τ² termination_reason {why}"
        if reward is not None:
            unscored(rec, _BROKEN[why])
        rec["reward"] = None
    return rec


def read(path: Path) -> Iterator[dict]:
    for src in _sources(path):
        sims = [s for s in src.simulations() if isinstance(s, dict) and "task_id" in s]
        model = src.model(sims)
        repeats: Counter = Counter()
        for sim in sims:
            yield episode(src, sim, model, repeats)
