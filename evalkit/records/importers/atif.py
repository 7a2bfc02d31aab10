"""ATIF trajectories (Harbor's Agent Trajectory Interchange Format, ATIF-v1.0 to v1.8): a Harbor job folder
(one trial folder per episode: `agent/trajectory.json` and `result.json`), one trial folder, a folder of
trajectory `.json` files, or one such file.

ATIF has no reward: Harbor's verifier reports it in the trial's `result.json`
(`verifier_result.rewards.reward`, or the only reward there). A trajectory with no result file, or a result
without a reward, is "no reward" (reward null), never 0 — unless the trajectory is one evalkit wrote, whose
`extra.evalkit` carries its outcome (`evalkit.records.exporters`); a result file still wins over it, since a
trial regraded since is newer.

Field by field (ATIF → EpisodeRecord):

    agent.model_name (else a step's model_name,
      else agent.name)                        → model
    result.json task_name (else the trial
      folder's or the file's name)             → task_id; repeats numbered 0, 1 … per model and task
    result.json source (else `atif`)           → env (surface and mode empty); end_reason done
    steps[] source system, user (before the
      first agent step)                        → info.prompt
    steps[] source agent                       → a turn each: message text, reasoning_content,
      tool_calls[{tool_call_id, function_name,   calls (arguments as they are; extra.raw_arguments of a
      arguments}]                                call evalkit wrote whose arguments did not parse)
      observation.results[{source_call_id,     → that call's result (text parts) and images (paths made
      content}]                                  relative to the run; only files inside it)
      metrics {prompt_tokens, completion_tokens,
      cached_tokens}                           → the turn's usage (input = prompt − cached)
    final_metrics total_cost_usd (else the
      agent steps' metrics.cost_usd, when
      every one has it)                        → cost_usd (null when unknown)
    an agent step before the first turn with
      llm_call_count 0 and no tool call (v1.7) → no turn: the harness's scripted message, shown as such
    an agent step with llm_call_count 0 that
      calls tools                              → a turn, stop `dispatch` (no inference behind it)
    audio content parts (v1.8)                 → a line in the text naming the file and its length
    result.json verifier_result.rewards        → reward
    result.json exception_info                 → error; when Harbor says the reward stays valid
                                                 (`reward_valid`: an agent timeout, a full context, a
                                                 non-zero exit) scored, end_reason deadline for a timeout,
                                                 else done; otherwise end_reason error, error_class
                                                 endpoint_error (an API failure) or harness_error,
                                                 unscored (the reward kept in info.harness_reward)
    extra.evalkit (a trajectory evalkit wrote) → identity (so the key is the original's), end reason,
                                                 grade, error class, timings
    the steps as the model was sent them       → transcript (texts inline, images by path)

Multi-step trials (`steps/<name>/agent/`) and continuation files are not read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import TraceError
from evalkit.records.importers._common import (
    count,
    declared_tools,
    harness,
    number,
    repeat_of,
    result,
    skeleton,
    summed_usage,
    unscored,
    whole_cost,
)
from evalkit.records.jsonl import load_json
from evalkit.types import SCRIPTED

NAME = "atif"
MARK = (
    "evalkit"  # evalkit.records.exporters.MARK: importers may not import the exporters (they import rundir)
)
TRAJECTORY = Path("agent") / "trajectory.json"
_KEPT = ("split", "evalset_task", "tier", "difficulty_score", "coordinates", "episode_id", "prompt_version",
         "started", "final_doc")  # fmt: skip
"""Fields of a record evalkit wrote that only its `extra.evalkit` holds, read back as they are."""
_ENDPOINT = frozenset({"RateLimitError", "InternalServerError", "ServiceUnavailableError", "Timeout",
                       "NetworkConnectionError", "UnknownApiError"})  # fmt: skip
"""Exception types of Harbor's (and litellm's) for a model endpoint that failed, besides those named Api…."""


def is_trajectory(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and str(d.get("schema_version") or "").startswith("ATIF-")
        and isinstance(d.get("steps"), list)
    )


def is_trial(p: Path) -> bool:
    """A Harbor trial folder: a trajectory under agent/, or a result.json naming the trial."""
    if (p / TRAJECTORY).is_file():
        return True
    res = p / "result.json"
    if not res.is_file():
        return False
    d = load_json(res)
    return isinstance(d, dict) and "trial_name" in d and "task_name" in d


def is_atif_dir(path: Path) -> bool:
    """A trial, a job (a folder of trials) or a folder of trajectory files."""
    if is_trial(path):
        return True
    subs = [p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if any(is_trial(p) for p in subs):
        return True
    return any(is_trajectory(load_json(p)) for p in sorted(path.glob("*.json")))


def _units(path: Path) -> Iterator[tuple[str, Path | None, Path | None]]:
    """(name, trajectory file, result file) of each episode under `path`, in name order."""
    if path.is_file():
        yield path.stem, path, None
        return
    if is_trial(path):
        trials = [path]
    else:
        trials = [
            p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".") and is_trial(p)
        ]
        for f in sorted(path.glob("*.json")):
            yield f.stem, f, None
    for t in trials:
        traj, res = t / TRAJECTORY, t / "result.json"
        yield t.name, traj if traj.is_file() else None, res if res.is_file() else None


def _load(f: Path, what: str) -> dict:
    d = load_json(f)
    if not isinstance(d, dict):
        raise TraceError(f"{f}: not a readable {what} (no JSON object)")
    return d


def _text(content: Any) -> tuple[str, list[str]]:
    """The text of ATIF content (a string or content parts) and the paths of its images."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        source = part.get("source") if isinstance(part.get("source"), dict) else {}
        if part.get("type") == "text":
            texts.append(str(part.get("text") or ""))
        elif part.get("type") == "image" and source:
            images.append(str(source.get("path") or ""))
        elif part.get("type") == "audio" and source:  # v1.8: a record holds no audio; say where it is
            seconds = number(source.get("duration_sec"))
            length = f", {seconds:g} s" if seconds is not None else ""
            texts.append(f"(audio {source.get('media_type') or ''}: {source.get('path') or '?'}{length})")
    return "\n".join(texts), images


class _Paths:
    """Image paths of a trajectory, made relative to the run: ATIF's are relative to the trajectory's folder
    (or absolute); one outside the run, or not there, is left out (a record never points to nothing)."""

    def __init__(self, root: Path, base: Path):
        self.root, self.base = root.resolve(), base.resolve()

    def rel(self, p: str | None) -> str | None:
        if not p or "://" in p:
            return None
        try:
            target = (self.base / p).resolve()
            return target.relative_to(self.root).as_posix() if target.is_file() else None
        except (OSError, ValueError):
            return None


def _usage(metrics: Any) -> dict:
    if not isinstance(metrics, dict):
        return {}
    extra = metrics.get("extra") if isinstance(metrics.get("extra"), dict) else {}
    cached, write = count(metrics.get("cached_tokens")), count(extra.get("cache_write"))
    u = {
        "input": max(count(metrics.get("prompt_tokens")) - cached - write, 0),
        "output": count(metrics.get("completion_tokens")),
        "cache_read": cached,
        "cache_write": write,
    }
    for k in ("reasoning_tokens", "reasoning_chars"):
        if k in extra:
            u[k] = count(extra[k])
    return u


def _turns(steps: list, paths: _Paths) -> tuple[list[dict], list[str]]:
    turns: list[dict] = []
    told: list[str] = []
    for s in steps:
        if not isinstance(s, dict):
            continue
        extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
        if _scripted(s, turns):
            continue
        if s.get("source") != "agent":
            if not turns:
                told.append(_text(s.get("message"))[0])
            elif isinstance(s.get("observation"), dict) and turns:
                _observe(turns[-1], s["observation"], paths)
            continue
        calls = []
        for i, c in enumerate(s.get("tool_calls") or []):
            if not isinstance(c, dict):
                continue
            cx = c.get("extra") if isinstance(c.get("extra"), dict) else {}
            args = cx["raw_arguments"] if "raw_arguments" in cx else c.get("arguments")
            calls.append({
                "id": str(c.get("tool_call_id") or f"call_{len(turns) + 1}_{i}"),
                "name": str(c.get("function_name") or ""), "args": args if args is not None else {},
                "ok": bool(cx.get("ok", True)), "result": "", "images": [],
                "parse_error": bool(cx.get("parse_error", False)),
            })  # fmt: skip
        usage = extra["usage"] if isinstance(extra.get("usage"), dict) else _usage(s.get("metrics"))
        turn = {
            "turn": extra["turn"] if isinstance(extra.get("turn"), int) else len(turns) + 1,
            "text": _text(s.get("message"))[0],
            "reasoning": str(s.get("reasoning_content") or ""),
            "stop": str(extra.get("stop") or ("dispatch" if s.get("llm_call_count") == 0 else "")),
            "usage": usage,
            "model_s": number(extra.get("model_s")) or 0.0,
            "env_s": number(extra.get("env_s")) or 0.0,
            "frame": paths.rel(extra.get("frame")) if isinstance(extra.get("frame"), str) else None,
            "calls": calls,
        }
        turns.append(turn)
        if isinstance(s.get("observation"), dict):
            _observe(turn, s["observation"], paths)
    return turns, told


def _scripted(step: dict, turns: list) -> bool:
    """An agent step before any model turn that no inference made (ATIF v1.7's `llm_call_count` 0) and that
    calls nothing: a message the harness wrote in the model's name, which opens the conversation."""
    return (
        step.get("source") == "agent" and not turns and step.get("llm_call_count") == 0
        and not step.get("tool_calls")
    )  # fmt: skip


def _observe(turn: dict, obs: dict, paths: _Paths) -> None:
    by_id = {c["id"]: c for c in turn["calls"]}
    for r in obs.get("results") or []:
        if not isinstance(r, dict):
            continue
        call = by_id.get(str(r.get("source_call_id")))
        if call is None:
            continue
        text, images = _text(r.get("content"))
        rx = r.get("extra") if isinstance(r.get("extra"), dict) else {}
        # The observation is what the model was sent; a trajectory evalkit wrote also keeps the call's result
        # as its record had it (without the notes the loop appended) where the two differ.
        call["result"] = result(rx["result"] if isinstance(rx.get("result"), str) else text)
        call["images"] = [p for p in (paths.rel(i) for i in images) if p]
        if "ok" in rx:  # evalkit's own
            call["ok"] = bool(rx["ok"]) and not call["parse_error"]
        elif "is_error" in rx:  # the MCP word, which other ATIF writers use
            call["ok"] = not rx["is_error"] and not call["parse_error"]


def _image(paths: _Paths, p: str) -> dict:
    suffix = p.rsplit(".", 1)[-1].lower()
    mime = {"jpg": "image/jpeg", "jpeg": "image/jpeg"}.get(suffix, f"image/{suffix}")
    return {"path": paths.rel(p), "mime": mime}


def _transcript(steps: list, turns: list[dict], paths: _Paths, tools: list[dict] | None = None) -> dict:
    """What the model was sent, in the shape of a record's transcript (`evalkit.records.transcripts`), texts
    inline: system and user steps before the first agent step are the system prompt and the opening message;
    each agent step's observation results, and user steps after it (nudges), are what answered that turn;
    the agent's tool definitions, the tools (inline)."""
    system: list[str] = []
    opening: dict = {"text": "", "images": []}
    before: list[dict] = []
    after: dict[str, list] = {}
    current: dict | None = None
    agents = iter(turns)
    for s in steps:
        if not isinstance(s, dict):
            continue
        text, images = _text(s.get("message"))
        extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
        if _scripted(s, [] if current is None else [current]):
            before.append({"role": "assistant", "text": text, "note": str(extra.get("note") or SCRIPTED)})
            continue
        if s.get("source") == "agent":
            current = next(agents, None)
        elif current is None:
            if s.get("source") == "system":
                system.append(text)
            elif isinstance(extra.get("note"), str):  # before the opening, marked so by its writer
                before.append({"role": "user", "text": text, "note": extra["note"]})
            else:
                opening["text"] = "\n\n".join(t for t in (opening["text"], text) if t)
                opening["images"] += [_image(paths, p) for p in images]
            continue
        elif s.get("source") == "user":
            entry = {"role": "user", "text": text, "images": [_image(paths, p) for p in images]}
            if isinstance(extra.get("note"), str):
                entry["note"] = extra["note"]
            after.setdefault(str(current["turn"]), []).append(entry)
        if current is None:
            continue
        ids = [c["id"] for c in current["calls"]]
        obs = s.get("observation") if isinstance(s.get("observation"), dict) else {}
        for r in obs.get("results") or []:
            if isinstance(r, dict) and r.get("source_call_id") in ids:
                text, images = _text(r.get("content"))
                entry = {"call": ids.index(r["source_call_id"]), "text": text,
                         "images": [_image(paths, p) for p in images]}  # fmt: skip
                after.setdefault(str(current["turn"]), []).append(entry)
    out: dict = {"version": 1, "opening": opening, "after": after}
    if system:
        out["system_text"] = "\n\n".join(system)
    if before:
        opening["before"] = before
    if tools:
        out["tools"] = tools
    return out


def _reward(res: dict) -> float | None:
    v = res.get("verifier_result")
    rewards = v.get("rewards") if isinstance(v, dict) else None
    if not isinstance(rewards, dict) or not rewards:
        return None
    if "reward" in rewards:
        return number(rewards["reward"])
    return number(next(iter(rewards.values()))) if len(rewards) == 1 else None


def episode(root: Path, name: str, traj: dict | None, res: dict | None, repeats: Counter) -> dict:
    traj = traj or {}
    res = res or {}
    ek = traj.get("extra", {}).get(MARK) if isinstance(traj.get("extra"), dict) else None
    ek = ek if isinstance(ek, dict) else res.get(MARK) if isinstance(res.get(MARK), dict) else {}
    agent = traj.get("agent") if isinstance(traj.get("agent"), dict) else {}
    steps = traj.get("steps") if isinstance(traj.get("steps"), list) else []
    step_model = next(
        (s.get("model_name") for s in steps if isinstance(s, dict) and s.get("model_name")), None
    )
    info_model = (
        (res.get("agent_info") or {}).get("model_info") if isinstance(res.get("agent_info"), dict) else None
    )
    model = str(ek.get("model") or agent.get("model_name") or step_model
                or (info_model or {}).get("name") or agent.get("name") or "")  # fmt: skip
    task = str(ek.get("task_id") or res.get("task_name") or name)
    env, surface, mode = (
        str(ek.get("env") or res.get("source") or NAME),
        str(ek.get("surface") or ""),
        str(ek.get("mode") or ""),
    )
    skin = ek.get("skin") if isinstance(ek.get("skin"), str) else None
    repeat = repeat_of(ek, repeats, model, task)
    rec = skeleton(model, env, surface, mode, task, skin, repeat, (task, skin))
    if ek.get("key") and isinstance(ek["key"], str):
        rec["key"] = ek["key"]
    base = root if root.is_dir() else root.parent
    where = traj.get("_file")
    paths = _Paths(base, Path(where).parent if where else base)
    turns, told = _turns(steps, paths)
    calls = [c for t in turns for c in t["calls"]]
    final = traj.get("final_metrics") if isinstance(traj.get("final_metrics"), dict) else {}
    reward = _reward(res) if res else number(ek.get("reward"))
    exc = res.get("exception_info") if isinstance(res.get("exception_info"), dict) else None
    usage = ek.get("usage") if isinstance(ek.get("usage"), dict) else summed_usage(turns)
    rec.update(
        {k: ek[k] for k in _KEPT if k in ek},
        reward=reward,
        grade=ek.get("grade") if isinstance(ek.get("grade"), dict) else None,
        end_reason=str(ek.get("end_reason") or "done"),
        error_class=ek.get("error_class") if isinstance(ek.get("error_class"), str) else None,
        error=ek.get("error") if isinstance(ek.get("error"), str) else None,
        usage=usage,
        cost_usd=_cost(final, steps),
        n_turns=len(turns),
        tool_calls=sum(not c["parse_error"] for c in calls),
        tool_errors=sum(not c["ok"] and not c["parse_error"] for c in calls),
        parse_errors=sum(c["parse_error"] for c in calls),
        seconds=number(ek.get("seconds")) or number((final.get("extra") or {}).get("seconds")) or 0.0,
        model_seconds=number(ek.get("model_seconds")) or 0.0,
        env_seconds=number(ek.get("env_seconds")) or 0.0,
        turns=turns,
        transcript=_transcript(steps, turns, paths, declared_tools(agent.get("tool_definitions")))
        if steps
        else None,
        info={
            "importer": NAME,
            "prompt": "\n\n".join(t for t in told if t),
            "trial": name,
            "schema_version": traj.get("schema_version"),
            "subagent_trajectories": len(traj.get("subagent_trajectories") or []) or None,
        },
    )
    if not rec.get("started") and isinstance(res.get("started_at"), str):
        rec["started"] = res["started_at"]
    for k in ("target", "render", "frame0"):
        if isinstance(ek.get(k), str):
            rec[k] = paths.rel(ek[k])
    harness(rec, reward, _said(exc) if exc else None)
    if exc and not rec["error_class"]:
        _exception(rec, res, exc, reward)
    elif rec["error_class"]:
        rec["reward"] = None
    if not traj:
        rec["info"]["missing"] = "no agent/trajectory.json in the trial"
    return rec


def _said(exc: dict) -> str:
    return f"{exc.get('exception_type')}: {exc.get('exception_message') or ''}".strip()


def _exception(rec: dict, res: dict, exc: dict, reward: float | None) -> None:
    """A trial that recorded an exception. Harbor classifies each by its type (`reward_valid`, and the
    exception's `policy`): an agent that ran out of time, context or output, or exited non-zero, is graded
    on what it left — evalkit's own rule for an episode its loop ended — while an API, sandbox or verifier
    failure leaves no valid reward: unscored. A result that does not say (written before Harbor recorded
    it) is unscored too: evalkit never reads a reward the infrastructure may have broken."""
    kind = str(exc.get("exception_type") or "")
    policy = exc.get("policy") if isinstance(exc.get("policy"), dict) else {}
    valid = res.get("reward_valid", policy.get("has_valid_reward"))
    rec["error"] = _said(exc)
    if valid is True:
        rec["end_reason"] = "deadline" if kind == "AgentTimeoutError" else "done"
        return
    api = kind.startswith(("Api", "API")) or kind in _ENDPOINT
    rec.update(end_reason="error", error_class="endpoint_error" if api else "harness_error")
    if reward is not None:
        why = "Harbor" if valid is False else "the result (which does not say whether its reward is valid)"
        unscored(rec, f"the trial recorded {kind}, after which {why} holds no valid reward")


def _cost(final: dict, steps: list) -> float | None:
    """final_metrics.total_cost_usd; else the sum of the agent steps' `metrics.cost_usd` when every step
    that made an inference says it (a part of the cost is no cost); else unknown."""
    if number(final.get("total_cost_usd")) is not None:
        return number(final["total_cost_usd"])
    costs = [
        number((s.get("metrics") or {}).get("cost_usd")) if isinstance(s.get("metrics"), dict) else None
        for s in steps
        if isinstance(s, dict) and s.get("source") == "agent" and s.get("llm_call_count") != 0
    ]
    return whole_cost(costs)


def read(path: Path) -> Iterator[dict]:
    repeats: Counter = Counter()
    for name, traj_file, res_file in _units(path):
        traj = _load(traj_file, "ATIF trajectory") if traj_file else None
        if traj is not None:
            if not is_trajectory(traj):
                if traj_file.name != "trajectory.json" and path.is_dir():
                    continue  # another JSON file beside the trajectories
                raise TraceError(f"{traj_file}: not an ATIF trajectory (no schema_version ATIF-… and steps)")
            _check(traj, traj_file)
            traj["_file"] = str(traj_file)
        res = _load(res_file, "Harbor trial result") if res_file else None
        yield episode(path, name, traj, res, repeats)


def _check(traj: dict, f: Path) -> None:
    """The fields without which a trajectory is not ATIF: one line naming the first one missing."""
    agent = traj.get("agent")
    if not isinstance(agent, dict) or not agent.get("name"):
        raise TraceError(f"{f}: ATIF trajectory without agent.name")
    for i, s in enumerate(traj["steps"]):
        if not isinstance(s, dict):
            raise TraceError(f"{f}: ATIF step {i + 1} is not an object")
        for k in ("step_id", "source", "message"):
            if k not in s:
                raise TraceError(f"{f}: ATIF step {i + 1} has no {k}")
        for c in s.get("tool_calls") or []:
            if not isinstance(c, dict) or "tool_call_id" not in c or "function_name" not in c:
                raise TraceError(
                    f"{f}: ATIF step {i + 1} has a tool call without tool_call_id or function_name"
                )
