"""Writes design-canvas rollout directories exactly as seed 000's rollout script does.

The seed's `run_episode`, its job wrapper, its resume and its `summarise` are re-enacted statement by
statement, with a scripted model and a scripted environment in place of the real ones: every record field,
frame folder, render and summary file comes out of the same code path as in the seed, so the importer is
tested on what that script really writes (not on hand-made records). Jobs run one after another rather than
in a thread pool: that changes only the order records are appended in.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import statistics
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

SKINS = ("figma", "canva", "photoshop", "slides", "powerpoint", "inkscape")
TIERS = ("easy", "medium", "hard")
DEFAULT_TURNS = {"tools": 60, "html": 20, "gui": 200}
EPISODE_TIMEOUT = 2400.0
GRADE_KEYS = (
    "total",
    "structure",
    "visual",
    "coverage",
    "order",
    "background",
    "n_gt",
    "n_submitted",
    "n_matched",
)


def png(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (12, 8), color).save(buf, "PNG")
    return buf.getvalue()


def grade(total: float) -> dict:
    """A grade as the env returns it (more keys than the seed keeps)."""
    return {
        "total": total,
        "structure": total,
        "visual": 0.9,
        "coverage": total,
        "order": 1.0,
        "background": 1.0,
        "n_gt": 4,
        "n_submitted": 3,
        "n_matched": 2,
        "details": ["kept out"],
    }


class APIConnectionError(Exception):
    """Named as the SDK's: the seed records an exception as "<class name>: <message>"."""


@dataclass
class Call:
    """A tool call the scripted model makes, and what the scripted env answers."""

    name: str
    args: dict = field(default_factory=dict)
    text: str = "ok"
    is_error: bool = False
    done: bool = False
    image: bool = False
    parse_error: str | None = None


@dataclass
class Plan:
    """One episode: per turn a list of calls ([] for none), or an exception the model call raises."""

    turns: list
    reward: float | None = 0.5
    """The grade total the env gives on submit (None: the submit returns no grade)."""
    deadline_at: int | None = None
    crash: str | None = None
    """The job raises this before the episode runs (a failed job record)."""
    max_turns: int = 4


class _Env:
    def __init__(self, plan: Plan, surface: str):
        self.plan, self.surface, self.shots = plan, surface, 0

    def run_tool(self, name: str, call: Call | None = None) -> dict:
        g = grade(self.plan.reward) if self.plan.reward is not None else None
        if name == "submit":
            return {"text": "submitted", "images": [], "is_error": False, "done": True, "grade": g}
        if name == "screenshot" or (call is not None and call.image):
            self.shots += 1
            img = ("image/png", base64.b64encode(png((10 * self.shots % 255, 90, 30))).decode())
            return {"text": "(image)", "images": [img], "is_error": False, "done": False, "grade": None}
        assert call is not None
        return {
            "text": call.text,
            "images": [],
            "is_error": call.is_error,
            "done": call.done,
            "grade": g if call.done else None,
        }


def save_frame(frames: Path | None, n: int | str, image: Any) -> str | None:
    if frames is None or not image:
        return None
    if isinstance(image, tuple):
        media, data = image
        raw, ext = base64.b64decode(data), media.split("/")[-1].replace("jpeg", "jpg")
    else:
        raw, ext = image, "png"
    frames.mkdir(parents=True, exist_ok=True)
    path = frames / (f"{n:03d}.{ext}" if isinstance(n, int) else f"{n}.{ext}")
    path.write_bytes(raw)
    return str(path.relative_to(frames.parents[1]))


def _usage(spec: str, turn_no: int) -> dict:
    if spec.startswith("anthropic:"):
        return {
            "input": 100,
            "output": 40,
            "cache_read": 300 * turn_no,
            "cache_write": 50,
            "reasoning_chars": 120,
        }
    if spec.startswith("openai:"):
        return {"input": 90, "output": 60, "reasoning_tokens": 25, "cache_read": 64}
    return {"input": 110, "output": 30, "reasoning_chars": 0}


def run_episode(
    spec, surface, mode, split, index, out_dir: Path, entry, skin, plan: Plan, no_frames=False
) -> dict:
    """The seed's `run_episode` with the model and the env scripted by `plan`."""
    if plan.crash:
        raise ConnectionError(plan.crash)
    t = 1000.0  # a clock that moves one second per model call
    record: dict[str, Any] = {
        "model": spec,
        "surface": surface,
        "mode": mode,
        "split": split,
        "index": index,
        "turns": [],
        "tool_calls": 0,
        "tool_errors": 0,
        "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0},
    }
    skin = skin or SKINS[index % len(SKINS)]
    if entry:
        record.update(tier=entry["tier"], difficulty_score=entry["score"], evalset_task=entry["task_id"])
    task_id = entry["task_id"] if entry else f"canvas-{split}-{index:04d}"
    episode_id = hashlib.sha256(repr((spec, surface, mode, task_id, skin)).encode()).hexdigest()[:12]
    env = _Env(plan, surface)
    coords = (
        ("normalized" if spec.startswith(("hf:", "vllm:")) else "pixels") if surface == "gui" else "pixels"
    )
    record.update(task_id=task_id, episode_id=episode_id, skin=skin, prompt_version="v3", coordinates=coords)
    frames = (
        None
        if no_frames
        else (
            out_dir
            / "frames"
            / (
                f"{spec.replace(':', '_').replace('/', '_')}__{surface}__{mode}__{task_id}"
                + (f"__{skin}" if surface == "gui" else "")
            )
        )
    )

    def canvas() -> bytes:
        return png((len(record["turns"]) * 40 % 255, 200, 100))

    if surface == "gui":
        shot = env.run_tool("screenshot")
        record["frame0"] = save_frame(frames, 0, shot["images"][-1] if shot["images"] else None)
    else:
        record["frame0"] = save_frame(frames, 0, canvas())
    done, grade_, nudges = False, None, 0
    max_turns = plan.max_turns or DEFAULT_TURNS[surface]
    for turn_no in range(max_turns):
        if plan.deadline_at is not None and turn_no >= plan.deadline_at:
            record["error"] = f"episode exceeded {EPISODE_TIMEOUT}s"
            break
        step = plan.turns[turn_no] if turn_no < len(plan.turns) else []
        try:
            if isinstance(step, Exception):
                raise step
            calls = step
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"[:800]
            break
        for k, v in _usage(spec, turn_no).items():
            record["usage"][k] = record["usage"].get(k, 0) + (v or 0)
        t += 1.0
        entry_ = {
            "turn": turn_no,
            "text": f"turn {turn_no}: working",
            "stop": "tool_use" if calls else "end_turn",
            "calls": [],
            "model_s": 1.25,
        }
        if not calls:
            record["turns"].append(entry_)
            nudges += 1
            if nudges > 2:
                break
            continue
        pairs = []
        for call in calls:
            if call.parse_error:
                out = {
                    "text": f"Error: {call.parse_error}",
                    "images": [],
                    "is_error": True,
                    "done": False,
                    "grade": None,
                }
            else:
                out = env.run_tool(call.name, call)
            record["tool_calls"] += 1
            record["tool_errors"] += int(out["is_error"])
            k = len(entry_["calls"])
            entry_["calls"].append(
                {
                    "name": call.name,
                    "args": {} if call.parse_error else call.args,
                    "ok": not out["is_error"],
                    "result": out["text"][:400],
                    "images": len(out["images"]),
                    "image_paths": [
                        p
                        for j, im in enumerate(out["images"])
                        if (p := save_frame(frames, f"t{turn_no:03d}c{k}i{j}", im))
                    ],
                }
            )
            pairs.append((call, out))
            if out["done"]:
                done, grade_ = True, out["grade"]
                break
        record["turns"].append(entry_)
        if done:
            break
        if surface == "gui" and not any(c.name == "screenshot" for c, _ in pairs):
            shot = env.run_tool("screenshot")
            pairs[-1][1]["images"].extend(shot["images"])
        if surface == "gui":
            shots = [im for c, o in pairs for im in o["images"]]
            entry_["frame"] = save_frame(frames, turn_no + 1, shots[-1] if shots else None)
        else:
            entry_["frame"] = save_frame(frames, turn_no + 1, canvas())
        entry_["env_s"] = 0.5
    if not done:
        out = env.run_tool("submit")
        grade_ = out["grade"]
        record["auto_submitted"] = True
    record["reward"] = grade_["total"] if grade_ else None
    record["grade"] = {k: grade_[k] for k in GRADE_KEYS} if grade_ else None
    record["seconds"] = round(t - 1000.0 + 0.4, 1)
    record["n_turns"] = len(record["turns"])
    stem = (
        f"{spec.replace(':', '_').replace('/', '_')}__{surface}__{mode}__{record.get('task_id', index)}"
        + (f"__{skin}" if surface == "gui" else "")
    )
    record["final_doc"] = {"elements": [{"id": "e1", "kind": "rect"}], "grade": {"total": 0.01}}
    (out_dir / "renders").mkdir(parents=True, exist_ok=True)
    (out_dir / "renders" / f"{stem}.png").write_bytes(png((1, 2, 3)))
    record["render"] = f"renders/{stem}.png"
    if mode == "reference" and record.get("episode_id"):
        (out_dir / "renders" / f"{record['task_id']}__target.jpg").write_bytes(png((200, 0, 0)))
    return record


def bootstrap_ci(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(n))
    return round(means[int(0.025 * n)], 4), round(means[int(0.975 * n) - 1], 4)


def summarise(records: list[dict]) -> tuple[dict, str]:
    """The seed's summary: per (model, surface, mode) over the latest record of each resume key, a missing
    reward counted as 0.0 and `failed` the records with an error."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["model"], r["surface"], r["mode"]), []).append(r)
    rows, table = (
        [],
        [
            "| model | surface | mode | n | mean reward | min | max | turns | tool calls | errors | "
            "failed | reasoning / turn |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ],
    )
    for (model, surface, mode), rs in sorted(groups.items()):
        rewards = [r["reward"] if r["reward"] is not None else 0.0 for r in rs]
        failed = sum(1 for r in rs if r.get("error"))
        row = {
            "model": model,
            "surface": surface,
            "mode": mode,
            "n": len(rs),
            "mean_reward": round(statistics.mean(rewards), 4),
            "min": round(min(rewards), 4),
            "max": round(max(rewards), 4),
            "mean_turns": round(statistics.mean(r["n_turns"] for r in rs), 1),
            "mean_tool_calls": round(statistics.mean(r["tool_calls"] for r in rs), 1),
            "tool_errors": sum(r["tool_errors"] for r in rs),
            "failed": failed,
            "input_tokens": sum(r["usage"].get("input", 0) for r in rs),
            "output_tokens": sum(r["usage"].get("output", 0) for r in rs),
        }
        turns = max(1, sum(r["n_turns"] for r in rs))
        rtok = sum(r["usage"].get("reasoning_tokens", 0) for r in rs)
        rchr = sum(r["usage"].get("reasoning_chars", 0) for r in rs)
        row["reasoning_tokens"], row["reasoning_chars"] = rtok, rchr
        reasoning = f"{rtok / turns:.0f} tok" if rtok else f"{rchr / turns:.0f} chars"
        rows.append(row)
        table.append(
            f"| {model} | {surface} | {mode} | {row['n']} | {row['mean_reward']:.3f} | {row['min']:.3f} | "
            f"{row['max']:.3f} | {row['mean_turns']} | {row['mean_tool_calls']} | {row['tool_errors']} | "
            f"{failed} | {reasoning} |"
        )
    groups_t: dict[tuple, list[float]] = {}
    for r in records:
        if r.get("tier"):
            rw = r["reward"] if r["reward"] is not None else 0.0
            groups_t.setdefault((r["model"], r["surface"], r["mode"], r["tier"]), []).append(rw)
            groups_t.setdefault((r["model"], r["surface"], r["mode"], "all"), []).append(rw)
    order = {t: i for i, t in enumerate((*TIERS, "all"))}
    tiers = [
        {
            "model": m,
            "surface": s,
            "mode": mode,
            "tier": t,
            "n": len(v),
            "mean_reward": round(statistics.fmean(v), 4),
            "ci95": bootstrap_ci(v),
        }
        for (m, s, mode, t), v in sorted(groups_t.items(), key=lambda kv: (*kv[0][:3], order[kv[0][3]]))
    ]
    if tiers:
        table += [
            "",
            "| model | surface | mode | tier | n | mean reward | 95% CI |",
            "|---|---|---|---|---:|---:|---|",
        ]
        table += [
            f"| {t['model']} | {t['surface']} | {t['mode']} | {t['tier']} | {t['n']} | "
            f"{t['mean_reward']:.3f} | {t['ci95'][0]:.3f}–{t['ci95'][1]:.3f} |"
            for t in tiers
        ]
    return {"groups": rows, "tiers": tiers}, "\n".join(table)


def seed_key(r: dict) -> tuple:
    return (r["model"], r["surface"], r["mode"], r.get("evalset_task") or r["index"], r.get("skin_forced"))


def rollout(
    out: Path,
    models,
    surfaces,
    modes,
    refs,
    plans,
    entries=None,
    skins=None,
    split="test",
    evalset_id=None,
    no_frames=False,
) -> list[dict]:
    """One invocation of the seed's `main`: resume, the jobs still to do, the trace appended, the summary of
    the latest records. `plans(job)` scripts each job; returns the records this invocation appended."""
    entries = entries or {}
    out.mkdir(parents=True, exist_ok=True)
    skins = skins or [None]
    jobs = [
        (m, s, mode, ref, sk)
        for m in models
        for s in surfaces
        for mode in modes
        for ref in refs
        for sk in (skins if s == "gui" else [None])
    ]
    previous = []
    trace_path = out / "trace.jsonl"
    if trace_path.exists():
        previous = [json.loads(line) for line in trace_path.read_text().splitlines() if line.strip()]
    done_keys = {seed_key(r) for r in previous if not r.get("error")}
    todo = [j for j in jobs if j not in done_keys]
    records = []
    with open(trace_path, "a") as trace:
        for j in todo:
            m, s, mode, ref, sk = j
            pos, entry = entries.get(ref, (ref, None))
            idx = pos
            try:
                rec = run_episode(m, s, mode, split, pos, out, entry, sk, plans(j), no_frames)
                rec["skin_forced"] = sk
            except Exception as exc:
                rec = {
                    "model": m,
                    "surface": s,
                    "mode": mode,
                    "index": idx,
                    "reward": None,
                    "skin_forced": sk,
                    **({"tier": entry["tier"], "evalset_task": entry["task_id"]} if entry else {}),
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-2000:],
                    "turns": [],
                    "n_turns": 0,
                    "tool_calls": 0,
                    "tool_errors": 0,
                    "usage": {},
                }
            trace.write(json.dumps(rec, ensure_ascii=False) + "\n")
            trace.flush()
            records.append(rec)
    latest: dict = {}
    for r in previous + records:
        latest[seed_key(r)] = r
    summary, table = summarise(list(latest.values()))
    summary.update(
        base_url="http://127.0.0.1:8765",
        split=split,
        started=out.name,
        models=list(models),
        surfaces=list(surfaces),
        modes=list(modes),
        evalset_id=evalset_id,
        subset="lite" if evalset_id else None,
        tiers=None,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text(table + "\n")
    return records


# ---------------------------------------------------------------- the runs the tests read

A, B = "anthropic:claude-sonnet-5", "hf:Qwen/Qwen3.6-35B-A3B:scaleway"
EVALSET_ID = "3f9a0c1d2e4b5a6978877665544332211"
TASKS = [{"task_id": f"crello-test-{i:04d}", "tier": TIERS[i % 3], "score": 1.5 + i} for i in range(4)]


def _submit(reward_turns: int = 2) -> list:
    return [[Call("add_element", {"kind": "rect", "x": k})] for k in range(reward_turns - 1)] + [
        [Call("submit")]
    ]


def issue_run(out: Path) -> Path:
    """The issue's example: one model, three tasks; the second task's job fails and a resume reruns it.
    The seed's summary: n 3, mean 0.567."""
    entries = {e["task_id"]: (pos, e) for pos, e in enumerate(TASKS[:3])}
    rewards = {"crello-test-0000": 0.8, "crello-test-0001": 0.5, "crello-test-0002": 0.4}
    first = {"crello-test-0001": Plan([], crash="cannot connect to the env server")}
    for attempt in (first, {}):
        rollout(
            out,
            [A],
            ["tools"],
            ["reference"],
            list(entries),
            entries=entries,
            evalset_id=EVALSET_ID,
            plans=lambda j, at=attempt: at.get(j[3]) or Plan(_submit(), reward=rewards[j[3]]),
        )
    return out


def every_status_run(out: Path) -> Path:
    """Two models on the tools and gui surfaces (gui in two forced skins), four evalset tasks, two invocations
    (the second one resumes). What the records end up holding, per job:

    A tools: submitted 0.8 | job failed, resumed: submitted 0.5 | turn limit, auto-submitted 0.4 |
             three turns without a call, auto-submitted 0.3
    B tools: the model call raised (auto-submitted 0.6), raised again on resume (no grade) | deadline
             (auto-submitted 0.45), again on resume (0.35) | the env ended it on its step limit 0.7 |
             a call with broken arguments, and a submit that returned no grade
    gui:     submitted after screenshots in each skin; B's job on the third task in canva fails twice
    """
    entries = {e["task_id"]: (pos, e) for pos, e in enumerate(TASKS)}
    t = [e["task_id"] for e in TASKS]
    shots = [[Call("screenshot", image=True)], [Call("click", {"x": 10, "y": 20})], [Call("submit")]]

    def plans(job, attempt):
        m, s, _, ref, sk = job
        i = t.index(ref)
        if s == "gui":
            if m == B and i == 2 and sk == "canva":
                return Plan([], crash="browser context closed")
            return Plan(shots, reward=round(0.2 + 0.1 * i + (0.05 if sk == "canva" else 0), 2))
        if m == A:
            return [
                Plan(_submit(3), reward=0.8),
                Plan([], crash="cannot connect") if attempt == 0 else Plan(_submit(), reward=0.5),
                Plan([[Call("add_element", {"x": k})] for k in range(3)], reward=0.4, max_turns=3),
                Plan([[Call("add_element")], [], [], []], reward=0.3, max_turns=6),
            ][i]
        return [
            Plan([[Call("add_element")], APIConnectionError("overloaded")], reward=0.6)
            if attempt == 0
            else Plan([ConnectionError("Connection reset by peer")], reward=None),
            Plan(
                [[Call("add_element")], [Call("add_element")]],
                reward=0.45 if attempt == 0 else 0.35,
                deadline_at=2,
            ),
            Plan([[Call("add_element")], [Call("add_element", done=True)]], reward=0.7),
            Plan(
                [
                    [Call("add_element", parse_error="arguments are not valid JSON: Expecting value")],
                    [Call("add_element", {"x": 1}, text="error: x out of range", is_error=True)],
                    [Call("submit")],
                ],
                reward=None,
            ),
        ][i]

    for attempt in (0, 1):
        rollout(
            out,
            [A, B],
            ["tools", "gui"],
            ["reference"],
            t,
            entries=entries,
            skins=["figma", "canva"],
            evalset_id=EVALSET_ID,
            plans=lambda j, a=attempt: plans(j, a),
        )
    return out


def indexed_run(out: Path) -> Path:
    """No evalset: tasks by split index (0 and 7), description mode, no frames. The job at index 0 fails, then
    succeeds on resume."""

    def plans(job, attempt):
        if job[3] == 0 and attempt == 0:
            return Plan([], crash="refused")
        return Plan(_submit(), reward=0.9 if job[3] == 0 else 0.1)

    for attempt in (0, 1):
        rollout(
            out,
            [A],
            ["tools"],
            ["description"],
            [0, 7],
            no_frames=True,
            plans=lambda j, a=attempt: plans(j, a),
        )
    return out
