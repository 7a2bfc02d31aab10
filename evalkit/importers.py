"""Runs written by other harnesses, read as native EpisodeRecord dicts.

`read_foreign(path)` recognises three formats by their shape (never by a file name alone) and yields one
dict per episode in the shape of `EpisodeRecord.to_dict()`, image fields as paths relative to `path`:

- **design-canvas rollout** — a directory with `trace.jsonl` whose lines carry `surface`, `index`, `turns`
  (no `format_version`), frames under `frames/<stem>/NNN.png`, targets as `renders/<task_id>__target.jpg`;
- **tool-planning rollout** — a `.jsonl` file (or a directory of `.json` files) of episodes with `messages`,
  `steps` and `final`;
- **own-loop GUI run** — one folder per task holding `session.json` (or `session_failed.json`, an unscored
  infrastructure failure), `steps.jsonl` and `screens/step_NN.png`.

Each record's `info` says which importer read it. Anything else raises TraceError with one line.

An episode without a reward is an infrastructure failure (unscored, `error_class` set) only when the format
says something failed (an `error`, a list of `errors`, an end reason that is an error, `session_failed.json`).
One with no reward and no error (an env that gives none) keeps `error_class` None: `evalkit.analysis`
counts it as "no reward", apart from both the scored and the unscored episodes.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import TraceError
from evalkit.traces import iter_lines
from evalkit.types import END_REASONS, FORMAT_VERSION, RESULT_CAP, episode_key

SOLVED = {"success", "succeeded", "solved", "pass", "passed", "correct", "completed"}


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content if p is not None
        ).strip()
    return json.dumps(content, default=str)


def _args(raw: Any) -> tuple[Any, bool]:
    """(parsed arguments, parse_error)."""
    if isinstance(raw, dict):
        return raw, False
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw, True
        return (v, False) if isinstance(v, dict) else (raw, True)
    return raw if raw is not None else {}, raw is not None


def _result(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s[:RESULT_CAP]


def _rel(root: Path, p: Path) -> str | None:
    return p.relative_to(root).as_posix() if p.is_file() else None


class _Repeats:
    """Numbers repeated (model, task, …) jobs 0, 1, 2 … in the order they appear."""

    def __init__(self) -> None:
        self.seen: Counter = Counter()

    def __call__(self, *ident: Any) -> int:
        n = self.seen[ident]
        self.seen[ident] += 1
        return n


def _base(model: str, env: str, surface: str, mode: str, task_id: str, skin: str | None, repeat: int) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "key": episode_key(model, env, surface, mode, task_id, skin, repeat),
        "model": model,
        "env": env,
        "surface": surface,
        "mode": mode,
        "task_id": task_id,
        "skin": skin,
        "repeat": repeat,
    }


# ---------------------------------------------------------------- design-canvas rollout


def _canvas_episode(root: Path, d: dict, repeat: int) -> dict:
    model, task = str(d.get("model") or "unknown"), str(d.get("task_id") or d.get("index") or "")
    surface, mode, skin = str(d.get("surface") or "tools"), str(d.get("mode") or "reference"), d.get("skin")
    rec = _base(model, "canvas", surface, mode, task, skin, repeat)
    reward = d.get("reward")
    error = d.get("error") or None
    # The format keeps only a message, not what failed: a missing reward with an error is a harness error.
    unscored = reward is None and error is not None
    stem = _canvas_stem(d)
    turns = []
    n_calls = n_err = n_parse = 0
    for t in d.get("turns") or []:
        calls = []
        for i, c in enumerate(t.get("calls") or []):
            args, bad = _args(c.get("args"))
            imgs = c.get("image_paths") if isinstance(c.get("image_paths"), list) else c.get("images")
            ok = bool(c.get("ok", True)) and not bad
            n_calls += 1
            n_err += not ok
            n_parse += bad
            calls.append(
                {
                    "id": str(c.get("id") or f"call_{t.get('turn', 0)}_{i}"),
                    "name": str(c.get("name") or ""),
                    "args": args,
                    "ok": ok,
                    "result": _result(c.get("result") or ""),
                    "images": [str(x) for x in imgs]
                    if isinstance(imgs, list) and all(isinstance(x, str) for x in imgs)
                    else [],
                    "parse_error": bad,
                }
            )
        turns.append(
            {
                "turn": int(t.get("turn") or len(turns)),
                "text": _text(t.get("text")),
                "reasoning": _text(t.get("reasoning")),
                "stop": str(t.get("stop") or ""),
                "usage": t.get("usage") or {},
                "model_s": float(t.get("model_s") or 0),
                "env_s": float(t.get("env_s") or 0),
                "frame": t["frame"] if "frame" in t else _canvas_frame(root, stem, t.get("turn")),
                "calls": calls,
            }
        )
    auto = bool(d.get("auto_submitted"))
    target = _rel(root, root / "renders" / f"{task}__target.jpg") or _rel(
        root, root / "renders" / f"{task}__target.png"
    )
    rec.update(
        split=d.get("split"),
        evalset_task=d.get("evalset_task"),
        tier=d.get("tier"),
        difficulty_score=d.get("difficulty_score"),
        episode_id=d.get("episode_id"),
        reward=None if reward is None else float(reward),
        grade=d.get("grade") if isinstance(d.get("grade"), dict) else None,
        end_reason="error" if unscored else ("auto_submitted" if auto else "submitted"),
        error_class="harness_error" if unscored else None,
        error=error,
        auto_submitted=auto,
        usage=d.get("usage") or {},
        n_turns=int(d.get("n_turns") or len(turns)),
        tool_calls=int(d.get("tool_calls") if d.get("tool_calls") is not None else n_calls),
        tool_errors=int(d.get("tool_errors") if d.get("tool_errors") is not None else n_err),
        parse_errors=n_parse,
        seconds=float(d.get("seconds") or 0),
        model_seconds=sum(t["model_s"] for t in turns),
        env_seconds=sum(t["env_s"] for t in turns),
        target=target,
        frame0=d.get("frame0"),
        render=d.get("render"),
        final_doc=d.get("final_doc"),
        turns=turns,
        info={"importer": "design-canvas", "index": d.get("index")},
    )
    return rec


_FRAME_PATH = re.compile(r"frames/([^/]+)/\d+\.png")
_RENDER_PATH = re.compile(r"renders/([^/]+)\.png")


def _canvas_stem(d: dict) -> str | None:
    """The episode's folder under `frames/`, from its first frame (`frames/<stem>/000.png`) or its final
    render (`renders/<stem>.png`)."""
    for rx, v in ((_FRAME_PATH, d.get("frame0")), (_RENDER_PATH, d.get("render"))):
        m = rx.fullmatch(v) if isinstance(v, str) else None
        if m:
            return m.group(1)
    return None


def _canvas_frame(root: Path, stem: str | None, turn: Any) -> str | None:
    """A turn written without a `frame` field: its picture is `frames/<stem>/NNN.png`, NNN its turn number."""
    if stem is None or not isinstance(turn, int) or isinstance(turn, bool) or turn < 0:
        return None
    return _rel(root, root / "frames" / stem / f"{turn:03d}.png")


def read_design_canvas(root: Path) -> Iterator[dict]:
    rep = _Repeats()
    for d in iter_lines(root / "trace.jsonl"):
        yield _canvas_episode(
            root, d, rep(d.get("model"), d.get("surface"), d.get("mode"), d.get("task_id"), d.get("skin"))
        )


# ---------------------------------------------------------------- tool-planning rollout


def _planning_episode(d: dict, repeat: int) -> dict:
    model, task = str(d.get("model") or "unknown"), str(d.get("task_id") or "")
    env = str(d.get("env") or "planning")
    rec = _base(model, env, "tools", "text", task, None, repeat)
    final = d.get("final") if isinstance(d.get("final"), dict) else {}
    messages = [m for m in d.get("messages") or [] if isinstance(m, dict)]
    failed = _failed_calls(
        d.get("steps"),
        [
            [_call_name(c) for c in m.get("tool_calls") or []]
            for m in messages
            if m.get("role") == "assistant"
        ],
    )
    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    system = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            n = len(turns)
            calls = []
            for i, c in enumerate(m.get("tool_calls") or []):
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                name = _call_name(c)
                args, bad = _args(c.get("arguments", fn.get("arguments")))
                call = {
                    "id": str(c.get("id") or f"call_{n}_{i}"),
                    "name": name,
                    "args": args,
                    "ok": not bad and (n, i) not in failed,
                    "result": "",
                    "images": [],
                    "parse_error": bad,
                }
                by_id[call["id"]] = call
                calls.append(call)
            turns.append(
                {
                    "turn": n,
                    "text": _text(m.get("content")),
                    "reasoning": _text(m.get("reasoning")),
                    "stop": str(m.get("stop") or ""),
                    "usage": {},
                    "model_s": 0.0,
                    "env_s": 0.0,
                    "frame": None,
                    "calls": calls,
                }
            )
        elif role == "tool":
            call = by_id.get(str(m.get("tool_call_id")))
            if call is not None:
                call["result"] = _result(_text(m.get("content")))
        elif role in ("system", "user") and not turns:
            system.append(_text(m.get("content")))
    reward = d.get("reward")
    errors = d.get("errors")
    err_list = errors if isinstance(errors, list) else []
    raw_end = str(d.get("end_reason") or "")
    # No reward is an infrastructure failure only when the episode says something failed.
    failed_run = reward is None and bool(
        err_list
        or (isinstance(errors, int) and not isinstance(errors, bool) and errors > 0)
        or raw_end == "error"
        or raw_end.endswith("_error")
    )
    end = (
        raw_end
        if raw_end in END_REASONS
        else ("submitted" if final.get("submitted") else raw_end or "turn_limit")
    )
    all_calls = [c for t in turns for c in t["calls"]]
    grade = final.get("grade") if isinstance(final.get("grade"), dict) else None
    if grade is None and reward is not None:
        grade = {"total": reward}
    if grade is not None and isinstance(final.get("rubric"), dict | list):
        grade = {**grade, "rubric": final["rubric"]}
    u = d.get("usage") or {}
    rec.update(
        episode_id=d.get("episode_id"),
        reward=None if reward is None else float(reward),
        grade=grade,
        end_reason="error" if failed_run else end,
        error_class="harness_error" if failed_run else None,
        error="; ".join(map(str, err_list))
        or (f"no reward ({raw_end or 'unknown'})" if failed_run else None),
        provider_switches=d.get("provider_switches") if isinstance(d.get("provider_switches"), list) else [],
        usage={
            "input": int(u.get("input_tokens") or u.get("input") or 0),
            "output": int(u.get("output_tokens") or u.get("output") or 0),
        },
        n_turns=int(d.get("turns") if isinstance(d.get("turns"), int) else len(turns)),
        tool_calls=len(all_calls),
        tool_errors=sum(not c["ok"] for c in all_calls),
        parse_errors=sum(c["parse_error"] for c in all_calls),
        seconds=float(d.get("seconds") or 0),
        started=d.get("started"),
        final_doc=final.get("plan"),
        turns=turns,
        info={
            "importer": "tool-planning",
            "prompt": "\n\n".join(system)[:20000],
            "errors": errors if isinstance(errors, int) else len(err_list),
        },
    )
    return rec


def _call_name(c: Any) -> str:
    if not isinstance(c, dict):
        return ""
    fn = c.get("function") if isinstance(c.get("function"), dict) else {}
    return str(c.get("name") or fn.get("name") or "")


def _step_failed(s: dict) -> bool:
    res = s.get("result")
    return isinstance(res, dict) and bool(res.get("error") or res.get("ok") is False)


def _failed_calls(steps: Any, names: list[list[str]]) -> set[tuple[int, int]]:
    """(assistant turn, call index) of the calls whose step reports a failure, given each turn's call names.

    Steps name their turn, but writers count turns from 0 or from 1: the base taken is the one under which
    every step lands on a call of its tool in that turn (0 first). When neither fits, steps are matched to
    calls by tool name and order. Several calls of one tool in a turn take its steps in order."""
    steps = [s for s in steps or [] if isinstance(s, dict)]

    def assign(
        step_key: Callable[[dict], Any], call_key: Callable[[int, str], Any], strict: bool
    ) -> set | None:
        free: dict[Any, deque] = defaultdict(deque)
        for n, turn in enumerate(names):
            for i, name in enumerate(turn):
                free[call_key(n, name)].append((n, i))
        out = set()
        for s in steps:
            q = free.get(step_key(s))
            if not q:
                if strict:
                    return None
                continue
            pos = q.popleft()
            if _step_failed(s):
                out.add(pos)
        return out

    def turn_key(s: dict, base: int) -> Any:
        t = s.get("turn")
        return (
            (t - base, str(s.get("tool") or "")) if isinstance(t, int) and not isinstance(t, bool) else None
        )

    for base in (0, 1):
        got = assign(lambda s, base=base: turn_key(s, base), lambda n, name: (n, name), strict=True)
        if got is not None:
            return got
    return assign(lambda s: str(s.get("tool") or ""), lambda n, name: name, strict=False) or set()


def _is_planning(d: dict) -> bool:
    return isinstance(d.get("messages"), list) and ("final" in d or "steps" in d)


def read_tool_planning(path: Path) -> Iterator[dict]:
    rep = _Repeats()
    if path.is_file():
        if path.suffix == ".json":
            rows: Any = [json.loads(path.read_text())]
        else:
            rows = iter_lines(path)
    else:
        rows = (_load_json(p) for p in sorted(path.glob("*.json")))
    for d in rows:
        if isinstance(d, dict) and _is_planning(d):
            yield _planning_episode(d, rep(d.get("model"), d.get("task_id")))


def _load_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- own-loop GUI run

_STEP_META = {"step", "url", "raw", "notes", "fails", "error", "usage", "seconds"}


def _ownloop_episode(root: Path, folder: Path, model: str, repeat: int) -> dict | None:
    failed = (folder / "session_failed.json").is_file() and not (folder / "session.json").is_file()
    s = _load_json(folder / ("session_failed.json" if failed else "session.json"))
    if not isinstance(s, dict):
        return None
    task = str(s.get("task_id") or folder.name)
    model = str(s.get("model") or model)
    rec = _base(model, "webapp", "gui", "ownloop", task, None, repeat)
    turns = []
    steps = list(iter_lines(folder / "steps.jsonl")) if (folder / "steps.jsonl").is_file() else []
    for n, st in enumerate(steps):
        k = int(st.get("step") if st.get("step") is not None else n)
        frame = _rel(root, folder / "screens" / f"step_{k:02d}.png")
        action = {a: v for a, v in st.items() if a not in _STEP_META}
        name = str(action.pop("action", action.pop("type", "")) or "")
        err = st.get("error")
        calls = [
            {
                "id": f"step_{k}",
                "name": name,
                "args": action,
                "ok": not err,
                "result": _result(err or st.get("notes") or ""),
                "images": [],
                "parse_error": not name,
            }
        ]
        turns.append(
            {
                "turn": k,
                "text": _text(st.get("raw")),
                "reasoning": _text(st.get("notes")),
                "stop": "",
                "usage": st.get("usage") or {},
                "model_s": float(st.get("seconds") or 0),
                "env_s": 0.0,
                "frame": frame,
                "calls": calls if name else [],
            }
        )
    status = str(s.get("status") or "")
    if failed:
        reward = None
    elif isinstance(s.get("reward"), int | float):
        reward = float(s["reward"])
    else:
        reward = 1.0 if status.lower() in SOLVED else 0.0
    frames = [t["frame"] for t in turns if t["frame"]]
    rec.update(
        reward=reward,
        grade=None
        if reward is None
        else {
            "total": reward,
            "status": status,
            "answer": s.get("answer"),
            "record": s.get("record"),
        },
        end_reason="error" if failed else ("submitted" if s.get("answer") is not None else "turn_limit"),
        # session_failed.json is the harness saying the browser session itself broke, not the model.
        error_class="env_error" if failed else None,
        error=s.get("error") or None,
        n_turns=int(s.get("rounds") or len(turns)),
        tool_calls=sum(len(t["calls"]) for t in turns),
        tool_errors=int(s.get("action_errors") or 0),
        parse_errors=int(s.get("parse_fails") or 0),
        seconds=float(s.get("seconds") or 0),
        frame0=frames[0] if frames else None,
        render=frames[-1] if frames else None,
        final_doc=s.get("answer"),
        turns=turns,
        info={"importer": "ownloop-gui", "base": s.get("base"), "log": s.get("log"), "folder": folder.name},
    )
    return rec


def read_ownloop(root: Path) -> Iterator[dict]:
    meta = _load_json(root / "run.json")
    model = str(meta.get("model")) if isinstance(meta, dict) and meta.get("model") else f"ownloop:{root.name}"
    rep = _Repeats()
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        rec = _ownloop_episode(root, folder, model, 0)
        if rec is not None:
            r = rep(rec["model"], rec["task_id"])
            if r:
                rec.update(
                    repeat=r,
                    key=episode_key(rec["model"], "webapp", "gui", "ownloop", rec["task_id"], None, r),
                )
            yield rec


# ---------------------------------------------------------------- detection


def detect(path: str | Path) -> str:
    """`design-canvas`, `tool-planning` or `ownloop-gui`; TraceError for anything else."""
    path = Path(path)
    if path.is_file():
        if path.suffix in (".jsonl", ".json"):
            first = next(iter_lines(path), None) if path.suffix == ".jsonl" else _load_json(path)
            if isinstance(first, dict) and _is_planning(first):
                return "tool-planning"
        raise TraceError(f"{path}: not a run directory or a rollout file evalkit can read")
    if not path.is_dir():
        raise TraceError(f"{path}: no such run directory")
    trace = path / "trace.jsonl"
    if trace.is_file():
        first = next(iter_lines(trace), None)
        if isinstance(first, dict):
            if "turns" in first and ("surface" in first or "index" in first):
                return "design-canvas"
            if _is_planning(first):
                return "tool-planning"
    if any(
        p.is_dir() and ((p / "session.json").is_file() or (p / "session_failed.json").is_file())
        for p in path.iterdir()
    ):
        return "ownloop-gui"
    for p in sorted(path.glob("*.json")):
        d = _load_json(p)
        if isinstance(d, dict) and _is_planning(d):
            return "tool-planning"
    raise TraceError(
        f"{path}: no evalkit trace and no known rollout format (design-canvas, tool-planning, own-loop GUI)"
    )


def read_foreign(path: str | Path) -> Iterator[dict]:
    """Episode dicts in the native EpisodeRecord shape from a run another harness wrote."""
    path = Path(path)
    kind = detect(path)
    if kind == "design-canvas":
        yield from read_design_canvas(path)
    elif kind == "tool-planning":
        yield from read_tool_planning(
            path / "trace.jsonl" if path.is_dir() and (path / "trace.jsonl").is_file() else path
        )
    else:
        yield from read_ownloop(path)
