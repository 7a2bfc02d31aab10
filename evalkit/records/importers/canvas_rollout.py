"""Design-canvas rollout directories (seed 000): `trace.jsonl`, `frames/<stem>/`, `renders/`, `summary.json`.

The seed appends one record per job to `trace.jsonl`: the record its `run_episode` returns, or, when the job
raised, a short failure record. Its resume reruns every job whose record has an `error` and appends the new
record; its summary keeps the last record of each resume key `(model, surface, mode, evalset_task or index,
skin_forced)`. The importer gives every record the evalkit key of that resume key, so the one "latest record
per key" rule of `evalkit.records.rundir` keeps exactly what the seed's summary keeps.

Field by field (seed → EpisodeRecord):

    model, surface, mode, split              → the same
    task_id (from the env's reset)           → task_id; a failed job has none: its `evalset_task`, else
                                               `index:<index>`
    evalset_task (the evalset entry's id)    → part of the key; `evalset_id` of the seed's summary.json
                                               (when present) → evalset_task, evalkit's name for the set
    index (split or evalset position)        → part of the key when there is no evalset_task; info.index
    skin (always set on a finished episode)  → skin; a failed job has only skin_forced
    skin_forced (--skins, else null)         → part of the key; skin when the record has none
    tier, difficulty_score, episode_id,
    prompt_version, coordinates              → the same
    reward (the grade's total, or null)      → reward, unless the episode is unscored (below)
    grade {total, structure, visual, …}      → grade
    auto_submitted (only when it applies)    → auto_submitted
    error, traceback                         → error, traceback
    usage {input, output, cache_read,
           cache_write, reasoning_chars|_tokens} → usage (the same names)
    n_turns, tool_calls, tool_errors         → the same (the seed counts calls whose arguments did not
                                               parse among both tool_calls and tool_errors)
    seconds, frame0, render, final_doc       → the same; paths are relative to the run directory
    renders/<task_id>__target.jpg            → target
    turns[].turn (from 0)                    → turn + 1 (evalkit counts turns from 1; the seed's frame
                                               NNN.png after turn n is n + 1, so frame and turn agree)
    turns[].text, stop, model_s, env_s       → the same (env_s and frame only on turns with tool calls)
    turns[].frame                            → frame (never guessed when absent)
    turns[].calls[] {name, args, ok, result,
                     images (a count), image_paths} → calls: id `t<turn>c<j>`, images = image_paths;
                                               parse_error when the result is the seed's argument error

Outcomes (the seed submits on the model's behalf after every loop exit but a tool that ended the episode):

    record                                         end_reason      error_class     reward
    failed job (traceback, no task_id)             error           harness_error   null
    error "episode exceeded Ns" (its deadline)     deadline        —               grade total
    any other error (the model call raised)        error           endpoint_error  null *
    auto_submitted, ≥ 3 turns without a call       no_tool_call    —               grade total
    auto_submitted otherwise                       turn_limit      —               grade total
    not auto-submitted, last call `submit`         submitted       —               grade total
    not auto-submitted, another tool ended it      auto_submitted  —               grade total

(*) the seed's summary takes the grade of the submission it made after the failure. Every record keeps the
seed's own reward and error (`info.harness_reward`, `info.harness_error`). A submit that returned no grade
leaves reward null without an error: "no reward" to evalkit, which the seed's summary counts as 0.0, as it
counts a failed job (`evalkit.analysis.harness` holds those rules).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.records.importers._common import (
    count,
    harness,
    number,
    parse_args,
    rel,
    result,
    skeleton,
    text,
    unscored,
)
from evalkit.records.jsonl import iter_lines, load_json

NAME = "design-canvas"
ENV = "canvas"
_DEADLINE = re.compile(r"episode exceeded [0-9.]+s")
# The two messages the seed's adapters give a call whose arguments are not a JSON object; the seed sends
# such a call back to the model as "Error: <message>" instead of running it.
_ARG_ERRORS = ("Error: arguments are not valid JSON", "Error: arguments must be a JSON object")
_NUDGES = 3  # the seed leaves its loop at the third turn without a tool call


def is_rollout_record(d: Any) -> bool:
    return isinstance(d, dict) and "format_version" not in d and "surface" in d and "turns" in d


def resume_task(d: dict) -> str:
    """The task part of the seed's resume key, `r.get("evalset_task") or r["index"]`, as text that keeps
    the two kinds apart."""
    ev = d.get("evalset_task")
    return f"evalset_task={ev}" if ev else f"index={d.get('index')}"


def _calls(t: dict, n: int) -> list[dict]:
    out = []
    for j, c in enumerate(t.get("calls") or []):
        if not isinstance(c, dict):
            continue
        res = str(c.get("result") or "")
        bad = not c.get("ok", True) and res.startswith(_ARG_ERRORS)
        args, _ = parse_args(c.get("args"))
        paths = c.get("image_paths")
        out.append(
            {
                "id": f"t{n}c{j}",
                "name": str(c.get("name") or ""),
                "args": args,
                "ok": bool(c.get("ok", True)),
                "result": result(res),
                "images": [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else [],
                "parse_error": bad,
            }
        )
    return out


def _turns(d: dict) -> list[dict]:
    turns = []
    for t in d.get("turns") or []:
        if not isinstance(t, dict):
            continue
        n = count(t.get("turn")) + 1
        turns.append(
            {
                "turn": n,
                "text": text(t.get("text")),
                "reasoning": "",
                "stop": str(t.get("stop") or ""),
                "usage": {},
                "model_s": number(t.get("model_s")) or 0.0,
                "env_s": number(t.get("env_s")) or 0.0,
                "frame": t["frame"] if isinstance(t.get("frame"), str) else None,
                "calls": _calls(t, n),
            }
        )
    return turns


def _outcome(d: dict, turns: list[dict]) -> tuple[str, str | None]:
    """(end_reason, error_class) from what the seed's loop leaves in the record (see the table above)."""
    error = d.get("error")
    if error and ("traceback" in d or "task_id" not in d):
        return "error", "harness_error"
    if error:
        return ("deadline", None) if _DEADLINE.fullmatch(str(error)) else ("error", "endpoint_error")
    if d.get("auto_submitted"):
        idle = sum(1 for t in turns if not t["calls"])
        last_idle = bool(turns) and not turns[-1]["calls"]
        return ("no_tool_call" if last_idle and idle >= _NUDGES else "turn_limit"), None
    last = next((t["calls"][-1]["name"] for t in reversed(turns) if t["calls"]), None)
    return ("submitted" if last == "submit" else "auto_submitted"), None


def episode(root: Path, d: dict, evalset_id: str | None) -> dict:
    model = str(d.get("model") or "")
    surface, mode = str(d.get("surface") or ""), str(d.get("mode") or "")
    index = d.get("index")
    task = d.get("task_id") or d.get("evalset_task") or f"index:{index}"
    skin = d.get("skin") or d.get("skin_forced")
    rec = skeleton(model, ENV, surface, mode, str(task), skin, 0, (resume_task(d), d.get("skin_forced")))
    turns = _turns(d)
    end_reason, error_class = _outcome(d, turns)
    reward = number(d.get("reward"))
    grade = d.get("grade") if isinstance(d.get("grade"), dict) else None
    target = rel(root, root / "renders" / f"{task}__target.jpg")
    rec.update(
        split=d.get("split"),
        evalset_task=evalset_id if d.get("evalset_task") else None,
        tier=d.get("tier"),
        difficulty_score=number(d.get("difficulty_score")),
        coordinates=d.get("coordinates"),
        episode_id=d.get("episode_id"),
        prompt_version=d.get("prompt_version"),
        reward=reward,
        grade=grade,
        end_reason=end_reason,
        error_class=error_class,
        error=d.get("error") or None,
        traceback=d.get("traceback"),
        auto_submitted=bool(d.get("auto_submitted")),
        usage=d.get("usage") if isinstance(d.get("usage"), dict) else {},
        cost_usd=None,
        n_turns=count(d.get("n_turns")),
        tool_calls=count(d.get("tool_calls")),
        tool_errors=count(d.get("tool_errors")),
        parse_errors=sum(c["parse_error"] for t in turns for c in t["calls"]),
        seconds=number(d.get("seconds")) or 0.0,
        model_seconds=round(sum(t["model_s"] for t in turns), 3),
        env_seconds=round(sum(t["env_s"] for t in turns), 3),
        target=target,
        frame0=d.get("frame0") if isinstance(d.get("frame0"), str) else None,
        render=d.get("render") if isinstance(d.get("render"), str) else None,
        final_doc=d.get("final_doc"),
        turns=turns,
        info={"importer": NAME, "index": index, "skin_forced": d.get("skin_forced")},
    )
    if d.get("evalset_task"):
        rec["info"]["evalset_task"] = d["evalset_task"]
    harness(rec, reward, d.get("error"))
    if error_class == "endpoint_error":
        unscored(rec, "the model call failed (an infrastructure error); the seed scored the grade of the "
                 "submission it made after the failure")  # fmt: skip
    elif error_class:
        unscored(rec, "the job failed before the episode ran; the seed counts it as 0.0")
    return rec


def read(root: Path) -> Iterator[dict]:
    summary = load_json(root / "summary.json")
    ev = summary.get("evalset_id") if isinstance(summary, dict) else None
    evalset_id = ev if isinstance(ev, str) else None
    for d in iter_lines(root / "trace.jsonl"):
        if is_rollout_record(d):
            yield episode(root, d, evalset_id)
