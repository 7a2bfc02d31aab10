"""Own-loop GUI runs (seed 001): one folder per task, `<task_id>/session.json` (or `session_failed.json`),
`steps.jsonl` and `screens/step_NN.png`, written by the UI-TARS, MolmoWeb, Fara-7B and OpenCUA runners.

The files hold no reward: a separate grading step reads them. Every episode therefore imports ungraded
(reward null, "no reward" to evalkit, never 0) until a grades file is merged (`load_runs(..., grades=)`).
Nothing in the files names the served model; the agent is recognised from what its runner writes (a
`fara7b/` folder, the shape of its step rows), and episodes are labelled `<agent>:<run folder name>`.

Field by field (seed → EpisodeRecord):

    task_id (the folder's name)           → task_id and the key (the seed resumes by folder)
    status                                → end_reason, error_class (table below)
    answer                                → final_doc
    rounds                                → n_turns
    error                                 → error
    seconds                               → seconds
    parse_fails, action_errors            → parse_errors, tool_errors
    base, record, log (what the grader reads) → info.base, info.record, info.log
    error_attempts (Fara-7B's re-runs)    → info.error_attempts, each with its folder; every
                                            `error_attempt_N/attempt.json` is also read as an earlier record
                                            of the same key, which the final session replaces
    screens/step_01.png                   → frame0 (what the first step saw)
    screens/step_{i+1}.png                → the frame of turn i (the screen after its action); the last one,
                                            step_{rounds+1}.png, is also the render
    steps.jsonl row i                     → turn i: raw → text, and the calls below
      UI-TARS   actions[] {action_type, action_inputs, thought}, notes[], fails[]
                                          → a call per action (name action_type, args action_inputs, not ok
                                            when its note is an error); each failed parse attempt in fails
                                            → a call with parse_error and the raw output as its args
      Fara-7B   action {action: name, …}, parse_error → one call named by `action`, args the whole dict
      MolmoWeb  action, action_str, thought, error, action_error → thought is the reasoning; one call
      OpenCUA   action (its CoT action), code, executed[], notes[], attempts[] → the CoT action is the
                reasoning; a call per executed statement (DONE / FAIL / WAIT, or the pyautogui call it
                starts with); failed attempts → parse-error calls

Statuses (the agent ended the episode itself, ran out, or the harness broke):

    status                                         end_reason      error_class
    finished (UI-TARS), terminate (Fara-7B),
      done / fail (OpenCUA), exit (MolmoWeb),
      call_user (UI-TARS)                          submitted       —          ungraded
    max_steps                                      turn_limit      —          ungraded
    timeout                                        deadline        —          ungraded
    parse_error, no_action, no_steps               no_tool_call    —          ungraded
    error of Fara-7B / MolmoWeb (the agent's own
      loop stopped on a parse or action error)     error           —          ungraded
    session_failed.json: crash                     error           harness_error   unscored
    session_failed.json: endpoint_error            error           endpoint_error  unscored
    any other status with an `error` (OpenCUA's
      "error", UI-TARS' null: the harness raised)  error           harness_error   unscored *
    `error` ending " | backend read: …" (the app's
      record and log, which grading needs, were
      not read)                                    as the status   env_error       unscored *

(*) the seed keeps these as session.json and grades them; `info.unscored_because` says why evalkit does not.
Every record keeps the session's own error as `info.harness_error`; `info.harness_reward` is null (the
files hold no reward) until a grades file gives the grader's reward (`evalkit.records.grades`), which then
also reaches the episodes evalkit leaves unscored, so that the grader's own mean can be rebuilt.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.records.importers._common import count, harness, number, rel, result, skeleton, text
from evalkit.records.jsonl import iter_lines, load_json

NAME = "ownloop-gui"
ENV, SURFACE, MODE = "webapp", "gui", "ownloop"
SESSION, FAILED = "session.json", "session_failed.json"

_END = {
    "finished": "submitted",
    "terminate": "submitted",
    "done": "submitted",
    "fail": "submitted",
    "exit": "submitted",
    "call_user": "submitted",
    "max_steps": "turn_limit",
    "timeout": "deadline",
    "parse_error": "no_tool_call",
    "no_action": "no_tool_call",
    "no_steps": "no_tool_call",
    "error": "error",
}
# Statuses whose `error` is the agent loop's own account of how it ended, not a harness exception.
_OWN_ERROR = {"timeout", "parse_error", "endpoint_error"}
_BACKEND = " | backend read: "
# MolmoWeb's episode records a response it could not parse as a thought starting so; the seed counts those
# as its parse_fails the same way.
_MOLMO_PARSE_FAILURE = "Could not parse predicted action"
_CALL = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")


def is_task_folder(p: Path) -> bool:
    return p.is_dir() and ((p / SESSION).is_file() or (p / FAILED).is_file())


def agent_of(folder: Path, rows: list[dict], session: dict) -> str | None:
    """Which runner wrote a task folder, from what only that runner writes."""
    if (folder / "fara7b").is_dir() or "error_attempts" in session:
        return "fara7b"
    keys = set().union(*rows) if rows else set()
    if keys & {"actions", "fails"}:
        return "uitars"
    if keys & {"action_str", "thought", "action_error"}:
        return "molmoweb"
    if keys & {"code", "executed", "attempts"}:
        return "opencua"
    return None


def _parse_failure(n: int, k: int, raw: Any, why: Any) -> dict:
    return {
        "id": f"s{n}f{k}",
        "name": "",
        "args": raw,
        "ok": False,
        "result": result(why or "could not parse an action"),
        "images": [],
        "parse_error": True,
    }


def _call(n: int, k: int, name: Any, args: Any, note: Any = None) -> dict:
    bad = bool(note) and note != "call_user"  # UI-TARS notes call_user without an error
    return {
        "id": f"s{n}a{k}",
        "name": str(name or ""),
        "args": args,
        "ok": not bad,
        "result": result(note or ""),
        "images": [],
        "parse_error": False,
    }


def _named(action: Any, action_str: Any) -> str:
    """A call's name: the action dict's own name field, else the function an action string calls."""
    if isinstance(action, dict):
        for k in ("action", "name", "type", "action_type"):
            if isinstance(action.get(k), str):
                return action[k]
    s = action_str if isinstance(action_str, str) else action if isinstance(action, str) else ""
    m = _CALL.match(s)
    return m.group(1) if m else s.strip().split(" ", 1)[0][:60]


def _calls(row: dict, n: int) -> list[dict]:
    """The calls of one steps.jsonl row, recognised by the row's shape (so rows of an unknown runner that
    reuse one of these shapes read too)."""
    calls: list[dict] = []
    notes = row.get("notes") if isinstance(row.get("notes"), list) else []
    for k, f in enumerate(row.get("fails") or []):  # UI-TARS: attempts before the one that parsed
        if isinstance(f, dict):
            calls.append(_parse_failure(n, k, f.get("raw"), f.get("parse_error")))
    attempts = row.get("attempts") if isinstance(row.get("attempts"), list) else []
    failed = attempts if row.get("raw") is None else attempts[:-1]  # OpenCUA: the last one was taken
    for k, a in enumerate(failed):
        if isinstance(a, dict):
            why = a.get("error") or f"finish_reason {a.get('finish_reason')}"
            calls.append(_parse_failure(n, len(calls) + k, a.get("raw"), why))
    if isinstance(row.get("actions"), list):
        for k, a in enumerate(row["actions"]):
            a = a if isinstance(a, dict) else {}
            note = notes[k] if k < len(notes) else None
            calls.append(_call(n, k, a.get("action_type"), a.get("action_inputs") or {}, note))
    elif isinstance(row.get("executed"), list):
        for k, code in enumerate(row["executed"]):
            note = notes[k] if k < len(notes) else None
            calls.append(_call(n, k, _named(None, str(code)), {"code": code}, note))
    elif row.get("parse_error") is True:  # Fara-7B: the response held no tool call
        calls.append(_parse_failure(n, 0, None, "no tool call could be parsed from the response"))
    elif str(row.get("thought") or "").startswith(_MOLMO_PARSE_FAILURE):
        calls.append(_parse_failure(n, 0, row.get("action_str") or row.get("action"), row["thought"]))
    elif row.get("action") is not None or row.get("action_str"):
        action = row.get("action")
        args = action if isinstance(action, dict) else {"action": row.get("action_str") or action}
        note = row.get("action_error") or row.get("error")
        calls.append(_call(n, 0, _named(action, row.get("action_str")), args, note))
    return calls


def _turns(root: Path, where: Path, rows: list[dict]) -> list[dict]:
    turns = []
    for i, row in enumerate(rows, 1):
        n = count(row.get("step")) or i
        raw = row.get("raw")
        if raw is None and isinstance(row.get("fails"), list) and row["fails"]:
            raw = (row["fails"][-1] or {}).get("raw")
        reasoning = row.get("thought") if "thought" in row else row.get("action") if "code" in row else ""
        turns.append(
            {
                "turn": n,
                "text": text(raw),
                "reasoning": text(reasoning),
                "stop": "",
                "usage": {},
                "model_s": 0.0,
                "env_s": 0.0,
                "frame": rel(root, where / "screens" / f"step_{n + 1:02d}.png"),
                "calls": _calls(row, n),
            }
        )
    return turns


def _outcome(session: dict, agent: str | None, failed_file: bool) -> tuple[str, str | None, str | None]:
    """(end_reason, error_class, why evalkit leaves it unscored where the seed grades it)."""
    status = session.get("status")
    error = str(session.get("error") or "")
    own, _, backend = error.partition(_BACKEND)
    end = _END.get(str(status), "error")
    if failed_file:
        return "error", ("endpoint_error" if status == "endpoint_error" else "harness_error"), None
    if status == "endpoint_error":
        return "error", "endpoint_error", "the model server failed"
    loop_error = status in _OWN_ERROR or (status == "error" and agent in ("fara7b", "molmoweb"))
    if own.strip() and not loop_error:
        return "error", "harness_error", "the harness raised during the episode; the seed grades what it left"
    if backend:
        return end, "env_error", "the app's record and log, which the grader reads, could not be read"
    return end, None, None


def _episode(root: Path, where: Path, session: dict, rows: list[dict] | None, model: str,
             agent: str | None, failed_file: bool) -> dict:  # fmt: skip
    """One session as a record; `rows` None for a session whose steps and screens a later run replaced."""
    task = str(session.get("task_id") or where.name)
    rec = skeleton(model, ENV, SURFACE, MODE, task, None, 0, (task, None))
    turns = _turns(root, where, rows or [])
    end, error_class, why = _outcome(session, agent, failed_file)
    reward = number(session.get("reward"))  # the seed writes none; a grader that adds one is honoured
    frame0 = None if rows is None else rel(root, where / "screens" / "step_01.png")
    last = next((t["frame"] for t in reversed(turns) if t["frame"]), None)
    info: dict[str, Any] = {
        "importer": NAME,
        "agent": agent,
        "status": session.get("status"),
        "file": (where / (FAILED if failed_file else SESSION)).relative_to(root).as_posix(),
        "base": session.get("base"),
        "record": session.get("record"),
        "log": session.get("log"),
    }
    if why:
        info["unscored_because"] = why
    rec.update(
        reward=None if error_class else reward,
        end_reason=end,
        error_class=error_class,
        error=session.get("error") or None,
        n_turns=count(session.get("rounds")) or len(turns),
        tool_calls=sum(1 for t in turns for c in t["calls"] if not c["parse_error"]),
        tool_errors=count(session.get("action_errors")),
        parse_errors=count(session.get("parse_fails")),
        seconds=number(session.get("seconds")) or 0.0,
        frame0=frame0,
        render=last,
        final_doc=session.get("answer"),
        turns=turns,
        info=info,
    )
    harness(rec, reward, session.get("error"))
    return rec


def _rows(where: Path) -> list[dict]:
    path = where / "steps.jsonl"
    return list(iter_lines(path)) if path.is_file() else []


def _first_row(where: Path) -> list[dict]:
    """The first step row alone: enough to tell the runner, without reading every step of every task."""
    try:
        with open(where / "steps.jsonl", "rb") as f:
            d = json.loads(f.readline() or b"null")
    except (OSError, ValueError):
        return []
    return [d] if isinstance(d, dict) else []


def _attempts(folder: Path) -> list[Path]:
    found = [p for p in folder.glob("error_attempt_*") if p.is_dir() and p.name[14:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[14:]))


def _task(root: Path, folder: Path, model: str, agent: str | None) -> Iterator[dict]:
    """The records of one task folder, oldest first, all with one key: Fara-7B's error attempts, an earlier
    failed session that a resume ran again, the final session."""
    final = load_json(folder / SESSION)
    failed = load_json(folder / FAILED)
    attempts = []
    for at in _attempts(folder):
        s = load_json(at / "attempt.json")
        if isinstance(s, dict):
            rec = _episode(root, at, s | {"task_id": s.get("task_id") or folder.name}, _rows(at), model,
                           agent, False)  # fmt: skip
            attempts.append(rec)
            yield rec
    if isinstance(failed, dict):
        yield _episode(root, folder, failed, None if isinstance(final, dict) else _rows(folder), model,
                       agent, True)  # fmt: skip
    if isinstance(final, dict):
        rec = _episode(root, folder, final, _rows(folder), model, agent, False)
        if attempts or final.get("error_attempts"):
            listed = final.get("error_attempts") if isinstance(final.get("error_attempts"), list) else []
            rec["info"]["error_attempts"] = [
                {**(listed[i] if i < len(listed) and isinstance(listed[i], dict) else {}),
                 "attempt": i + 1, "folder": (folder / f"error_attempt_{i + 1}").relative_to(root).as_posix()}
                for i in range(max(len(listed), len(attempts)))
            ]  # fmt: skip
        yield rec


def read(root: Path) -> Iterator[dict]:
    folders = sorted(p for p in root.iterdir() if is_task_folder(p))
    agents: Counter = Counter()
    for folder in folders:
        s = load_json(folder / SESSION) or load_json(folder / FAILED)
        agents[agent_of(folder, _first_row(folder), s if isinstance(s, dict) else {})] += 1
    agents.pop(None, None)
    agent = agents.most_common(1)[0][0] if agents else None
    for folder in folders:
        s = load_json(folder / SESSION) or load_json(folder / FAILED) or {}
        named = s.get("model") if isinstance(s, dict) and isinstance(s.get("model"), str) else None
        yield from _task(root, folder, named or f"{agent or 'ownloop'}:{root.name}", agent)
