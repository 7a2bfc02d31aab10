"""Episodes as ATIF trajectories (Harbor's Agent Trajectory Interchange Format, written as ATIF-v1.7), laid
out as a Harbor job so that tools reading Harbor jobs find each trajectory and its reward:

```
OUT/<task>__<key>/             one trial per episode
  agent/trajectory.json        the ATIF trajectory
  agent/images/<sha256>.png    the images its steps show (paths in the trajectory are relative to agent/)
  verifier/reward.txt          the reward, when the episode has one
  result.json                  the trial's result, in the shape of Harbor's TrialResult: the reward under
                               verifier_result.rewards.reward, an infrastructure error as exception_info
  config.json                  the trial's config (Harbor's TrialConfig: the task, the model)
OUT/config.json                the job's config (Harbor's JobConfig: its name, the models)
```

Record → ATIF: the system prompt is a `system` step; the opening message (with the target image) and any
later user message (a nudge) are `user` steps; each model turn is an `agent` step with its text, reasoning,
tool calls, the tool results the model was sent (as `observation.results`, matched by `source_call_id`, with
their images) and its usage as `metrics` (prompt_tokens counts cache reads and writes in, as ATIF defines it).
`final_metrics` sums them, with the episode's cost (absent when unknown). ATIF has no outcome field: the
reward, grade, end reason and whether the episode is unscored go in `extra.evalkit` (`exporters.outcome`)
and in result.json. The layout of a trial is Harbor's (`harbor.models.trial.paths`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from evalkit.records import rundir, transcripts
from evalkit.records.exporters import MARK, Converted, outcome, version
from evalkit.types import SCRIPTED, EpisodeRecord

SCHEMA = "ATIF-v1.7"
"""v1.7 is the first with `extra` on tool calls and observation results, which carry a call's `ok`, and with
`llm_call_count` (1 on each model turn; 0 on a message the harness wrote in the model's name). v1.8 adds
audio content only, which evalkit's runs do not hold: v1.7 is what older readers also accept."""
AGENT = "evalkit"
_MEDIA = {
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
}


def trial_name(rec: EpisodeRecord, n: int) -> str:
    """`<task>__<key>`, as Harbor names trials `<task>__<id>`: unique per episode, safe as a folder name."""
    task = re.sub(r"[^A-Za-z0-9._-]+", "_", rec.task_id or "task").strip("._")[:48] or "task"
    return f"{task}__{rec.key or f'episode{n}'}"


class Images:
    """Copies of the run's images into one trial's `agent/images/`, named by content (a hard link where the
    filesystem allows: a thousand trials showing the same target cost no extra space)."""

    def __init__(self, run: Path, agent_dir: Path):
        self.run, self.dir = run, agent_dir / "images"
        self.count = 0
        self._done: dict[str, str | None] = {}

    def put(self, rel: str | None) -> str | None:
        """The path, relative to agent/, of the copy of the run's image `rel`; None when it is not there."""
        if rel in self._done:
            return self._done[rel]
        src = rundir.safe_path(self.run, rel) if self.run.is_dir() else None
        out = None
        if src is not None and src.suffix.lstrip(".").lower() in _MEDIA:
            digest = src.stem if re.fullmatch(r"[0-9a-f]{64}", src.stem) else _sha(src)
            name = f"{digest}{src.suffix.lower()}"
            dst = self.dir / name
            if not dst.exists():
                if not self.count:
                    self.dir.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
                self.count += 1
            out = f"images/{name}"
        self._done[rel] = out
        return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _content(text: str, images: list[dict], store: Images) -> str | list[dict]:
    """A string when there is no image; else ATIF content parts. An image the run does not hold (pruned
    from the conversation without being stored) is said in a text part rather than dropped silently."""
    if not images:
        return text
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    for img in images:
        path = store.put(img.get("path"))
        if path is None:
            parts.append({"type": "text", "text": "(an image the run did not store)"})
        else:
            media = _MEDIA[path.rsplit(".", 1)[-1]]
            parts.append({"type": "image", "source": {"media_type": media, "path": path}})
    return parts or ""


def _metrics(usage: dict) -> dict | None:
    if not usage:
        return None
    cache_read, cache_write = int(usage.get("cache_read") or 0), int(usage.get("cache_write") or 0)
    return {
        "prompt_tokens": int(usage.get("input") or 0) + cache_read + cache_write,
        "completion_tokens": int(usage.get("output") or 0),
        "cached_tokens": cache_read,
        "extra": {k: usage[k] for k in ("cache_write", "reasoning_tokens", "reasoning_chars") if k in usage},
    }


def _tool_definitions(rec: EpisodeRecord, run: Path) -> list[dict] | None:
    tools = transcripts.tools(rec, run) if run.is_dir() else []
    defs = [
        {"type": "function", "function": {"name": t.get("name", ""), "description": t.get("description", ""),
                                          "parameters": t.get("parameters") or {"type": "object"}}}
        for t in tools if isinstance(t, dict)
    ]  # fmt: skip
    return defs or None


def _steps(rec: EpisodeRecord, run: Path, store: Images) -> list[dict]:
    steps: list[dict] = []
    agent: dict | None = None
    calls_of: dict[int, dict] = {t.turn: {c.id: c for c in t.calls} for t in rec.turns}
    turn_of = {t.turn: t for t in rec.turns}
    start = _start(rec)
    clock = 0.0  # seconds into the episode: a turn's step is timed when its request went out

    def at() -> dict:
        return {"timestamp": (start + timedelta(seconds=clock)).isoformat()} if start else {}

    for m in transcripts.messages(rec, run):
        if m.role == "system":
            steps.append({**at(), "source": "system", "message": m.text})
        elif m.role == "user":
            agent = None
            step = {**at(), "source": "user", "message": _content(m.text, m.images, store)}
            if m.note:
                step["extra"] = {"note": m.note}
            steps.append(step)
        elif m.role == "assistant" and m.note == SCRIPTED:
            # Written by the harness in the model's name, no inference behind it: ATIF v1.7's deterministic
            # dispatch (llm_call_count 0), so that a reader counts no model turn.
            agent = None
            steps.append({**at(), "source": "agent", "message": m.text, "llm_call_count": 0,
                          "extra": {"turn": m.turn, "note": m.note}})  # fmt: skip
        elif m.role == "assistant":
            t = turn_of.get(m.turn)
            agent = {**at(), "source": "agent", "model_name": rec.model or None, "message": m.text,
                     "llm_call_count": 1}  # fmt: skip
            clock += (t.model_s + t.env_s) if t is not None else 0.0
            if m.reasoning:
                agent["reasoning_content"] = m.reasoning
            if m.calls:
                agent["tool_calls"] = [_tool_call(c, calls_of.get(m.turn, {}).get(c["id"])) for c in m.calls]
            if (metrics := _metrics(m.usage)) is not None:
                agent["metrics"] = metrics
            extra = {"turn": m.turn, "stop": m.stop}
            if t is not None:
                extra |= {"model_s": t.model_s, "env_s": t.env_s, "frame": store.put(t.frame),
                          "usage": dict(t.usage or {})}  # fmt: skip
            agent["extra"] = extra
            steps.append(agent)
        elif m.role == "tool":
            result = {"content": _content(m.text, m.images, store), "extra": {"ok": not m.error}}
            if m.name:
                result["extra"]["name"] = m.name
            if m.note:
                result["extra"]["note"] = m.note
            call = calls_of.get(m.turn, {}).get(m.call_id)
            if call is not None and call.result != m.text:  # the loop appended a note to what it sent
                result["extra"]["result"] = call.result
            ids = {c["tool_call_id"] for c in (agent or {}).get("tool_calls") or []}
            if agent is None:  # a result with no turn before it: ATIF puts observations on a step
                agent = {"source": "system", "message": ""}
                steps.append(agent)
            result["source_call_id"] = m.call_id if m.call_id in ids else None
            agent.setdefault("observation", {"results": []})["results"].append(result)
    return [{"step_id": i, **s} for i, s in enumerate(steps, 1)]


def _tool_call(c: dict, rec_call: object) -> dict:
    """An ATIF tool call: its arguments must be an object, so arguments that did not parse go to `extra`
    (with the call's `ok`, which ATIF has no field for)."""
    args = c.get("args")
    out = {
        "tool_call_id": c["id"],
        "function_name": c["name"],
        "arguments": args if isinstance(args, dict) else {},
    }
    extra = {
        "ok": bool(getattr(rec_call, "ok", True)),
        "parse_error": bool(getattr(rec_call, "parse_error", False)),
    }
    if not isinstance(args, dict) and args is not None:
        extra["raw_arguments"] = args
    out["extra"] = extra
    return out


def trajectory(rec: EpisodeRecord, run: Path, agent_dir: Path) -> tuple[dict, int]:
    """The ATIF trajectory of one episode (a plain dict, fields ordered as ATIF lists them), and how many
    image files it copied into `agent_dir/images/`."""
    store = Images(run, agent_dir)
    steps = _steps(rec, run, store)
    # The episode's usage, not the steps' sum: it also counts requests that failed and were retried, which
    # were billed but are no step. A record that kept no usage at all sums its steps (zero when none).
    metrics = [s["metrics"] for s in steps if "metrics" in s]
    total = _metrics(rec.usage or {}) or {
        k: sum(m[k] for m in metrics) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
    }
    final = {
        "total_prompt_tokens": total["prompt_tokens"],
        "total_completion_tokens": total["completion_tokens"],
        "total_cached_tokens": total["cached_tokens"],
        "total_steps": len(steps),
        "extra": {"seconds": rec.seconds, "model_seconds": rec.model_seconds, "env_seconds": rec.env_seconds,
                  "tool_calls": rec.tool_calls, "tool_errors": rec.tool_errors, "n_turns": rec.n_turns},
    }  # fmt: skip
    if rec.cost_usd is not None:  # unknown cost stays absent, never 0
        final["total_cost_usd"] = rec.cost_usd
    mark = outcome(rec)
    mark |= {
        "target": store.put(rec.target),
        "render": store.put(rec.render),
        "frame0": store.put(rec.frame0),
    }
    agent = {"name": AGENT, "version": version(), "model_name": rec.model or None}
    if (tools := _tool_definitions(rec, run)) is not None:
        agent["tool_definitions"] = tools
    traj = {
        "schema_version": SCHEMA,
        "session_id": rec.episode_id or rec.key or None,
        "trajectory_id": rec.key or None,
        "agent": agent,
        "steps": steps
        or [{"step_id": 1, "source": "system", "message": "(the episode recorded no message)"}],
        "final_metrics": final,
        "extra": {MARK: mark},
    }
    return _drop_none(traj), store.count


def _drop_none(d: dict) -> dict:
    """ATIF writers leave out what they do not know (Harbor's `to_json_dict` drops None)."""
    return {k: v for k, v in d.items() if v is not None}


def _start(rec: EpisodeRecord) -> datetime | None:
    try:
        return datetime.fromisoformat(str(rec.started).replace("Z", "+00:00"))
    except ValueError:
        return None


def _when(rec: EpisodeRecord) -> tuple[str | None, str | None]:
    start = _start(rec)
    if start is None:
        return None, None
    return start.isoformat(), (start + timedelta(seconds=rec.seconds or 0)).isoformat()


def trial_result(rec: EpisodeRecord, name: str, trial_dir: Path) -> dict:
    """The trial's result.json, in the shape of Harbor's TrialResult: the fields Harbor requires, the reward
    as its verifier reports one (`verifier_result.rewards.reward`), none when the episode has no reward
    (never 0), an infrastructure error as `exception_info`; evalkit's outcome under `evalkit`."""
    started, finished = _when(rec)
    u = rec.usage or {}
    provider = rec.model.split(":", 1)[0] if ":" in rec.model else None
    task = rec.task_id or name
    result = {
        "schema_version": 1,
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalkit:{rec.key or name}")),
        "task_name": task,
        "trial_name": name,
        "trial_uri": trial_dir.resolve().as_uri(),
        "task_id": {"path": task},
        "source": rec.env or None,
        "task_checksum": hashlib.sha256(task.encode()).hexdigest(),
        "config": {"task": {"path": task, "source": rec.env or None}, "trial_name": name,
                   "agent": {"name": AGENT, "model_name": rec.model or None}},
        "agent_info": {"name": AGENT, "version": version(),
                       "model_info": {"name": rec.model, "provider": provider}},
        "agent_result": {
            "n_input_tokens": sum(int(u.get(k) or 0) for k in ("input", "cache_read", "cache_write")),
            "n_cache_tokens": int(u.get("cache_read") or 0),
            "n_output_tokens": int(u.get("output") or 0),
            "cost_usd": rec.cost_usd,
        },
        "verifier_result": {"rewards": {"reward": rec.reward}} if rec.reward is not None else None,
        "exception_info": None,
        "started_at": started,
        "finished_at": finished,
        MARK: outcome(rec),
    }  # fmt: skip
    if rec.error_class:
        result["exception_info"] = {
            "exception_type": rec.error_class,
            "exception_message": rec.error or "",
            "exception_traceback": rec.traceback or "",
            "occurred_at": finished or started or datetime.now().astimezone().isoformat(),
        }
    return result


def write(run: Path, out: Path, home: Path | None = None) -> Converted:
    """Every episode of `run` as a trial of the job folder `out` (see the module doc); `home` is where the
    folder will be (named in the job and its trials' URIs) when it is built elsewhere first."""
    home = home or out
    done = Converted(paths=[out])
    out.mkdir(parents=True, exist_ok=True)
    models: dict[str, None] = {}
    for n, rec in enumerate(rundir.read_records(run)):
        models[rec.model] = None
        name = trial_name(rec, n)
        trial = out / name
        traj, images = trajectory(rec, run, trial / "agent")
        # Not fsynced: a conversion interrupted is simply run again, and a thousand fsyncs cost seconds. Not
        # indented: that is json's pure-Python encoder, several times slower on a long trajectory.
        rundir.atomic_write(
            trial / "agent" / "trajectory.json", json.dumps(traj, ensure_ascii=False), sync=False
        )
        result = trial_result(rec, name, home / name)
        rundir.atomic_write(
            trial / "result.json", json.dumps(result, indent=2, ensure_ascii=False, default=str), sync=False
        )
        rundir.atomic_write(trial / "config.json", json.dumps(result["config"], indent=2), sync=False)
        if rec.reward is not None:
            rundir.atomic_write(trial / "verifier" / "reward.txt", f"{rec.reward}\n", sync=False)
        done.episodes += 1
        done.images += images
    # A job's config.json is how Harbor's viewer tells a folder of jobs from one of tasks.
    job = {"schema_version": 1, "job_name": home.name,
           "agents": [{"name": AGENT, "model_name": m or None} for m in models]}  # fmt: skip
    rundir.atomic_write(out / "config.json", json.dumps(job, indent=2), sync=False)
    return done
