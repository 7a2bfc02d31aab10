"""Agent sessions as the Hugging Face Hub's trace viewer reads them: Session Trace Simple Format files (STS:
a `{"type": "session", "harness", "id"}` header, then `{"type": "message", "message": {…}}` lines), Pi's
session files (the same envelope, its own message shapes), Claude Code's and Codex's session logs; one file,
a folder of them (up to three levels down), or a dataset folder `evalkit convert --to hf` wrote.

A session is an episode. What evalkit wrote (`evalkit.records.exporters.hf`) comes back whole: its header's
`evalkit` holds the identity and outcome, each line's `evalkit` the turn, images, a call's `ok`, usage and
timings. Another harness's session has no reward: "no reward" (never 0) until grades are merged (by task
id = the session id). Field by field:

    STS / Pi                              Claude Code                     Codex
    header harness (Pi: `pi`) → env       `claude-code`                   `codex`
    header id → task_id                   sessionId                       session_meta id
    message.model (Pi: model) → model     message.model                   turn_context model
    role system (before the first
      assistant message) → system text    —                               session_meta instructions,
                                                                          developer messages
    role user → the opening, then user    type user, text blocks          message role user
      messages after turns
    role assistant → a turn: content,     type assistant (lines of one    reasoning, message role
      reasoningContent (Pi: thinking      message.id are one turn):       assistant, function_call and
      blocks), toolCalls {id, function     text, thinking, tool_use        custom_tool_call items up to
      {name, arguments}} (Pi: toolCall     {id, name, input}; usage        the next output: one turn;
      blocks)                                                              token_count → usage
    role tool {toolCallId} (Pi:           tool_result {tool_use_id,       function_call_output {call_id,
      toolResult, isError) → that call's    content, is_error}              output}
      result

Images inside a foreign session (base64 in Pi's and Claude Code's blocks) are marked as not stored: a
foreign folder is never written into. Claude Code's side chains (subagents) are left out; of Pi's branches,
the one its last entry is on.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import NOT_JSON, TraceError
from evalkit.records.importers._common import (
    count,
    fields,
    finite,
    harness,
    items,
    parse_args,
    repeat_of,
    result,
    skeleton,
    summed_usage,
    whole_cost,
)
from evalkit.records.jsonl import iter_lines
from evalkit.types import SCRIPTED

NAME = "sessions"
MARK = "evalkit"
STS, PI, CLAUDE, CODEX = "sts", "pi", "claude-code", "codex"
_SNIFF = 30
"""Lines read to tell a session file's kind: Claude Code's first lines may be bookkeeping."""
_KEPT = ("split", "evalset_task", "tier", "difficulty_score", "coordinates", "episode_id", "prompt_version",
         "started", "final_doc")  # fmt: skip


# ---------------------------------------------------------------------------------------------- detecting


def _head(path: Path, n: int = _SNIFF) -> list[Any]:
    out = []
    try:
        with open(path, "rb") as f:
            for raw in f:
                if len(out) >= n:
                    break
                if raw.strip():
                    try:
                        out.append(json.loads(raw))
                    except NOT_JSON:
                        return out
    except OSError:
        return []
    return out


def kind_of(path: Path) -> str | None:
    """Which session format a `.jsonl` file is in, from its first lines; None for another file."""
    lines = [d for d in _head(path) if isinstance(d, dict)]
    if not lines:
        return None
    first = lines[0]
    if first.get("type") == "session" and first.get("id") is not None:
        return STS if first.get("harness") else PI
    if first.get("type") == "session_meta" or (
        isinstance(first.get("payload"), dict) and first.get("type") in ("response_item", "turn_context")
    ):
        return CODEX
    if any(d.get("type") in ("user", "assistant") and isinstance(d.get("message"), dict) and "sessionId" in d
           for d in lines):  # fmt: skip
        return CLAUDE
    return None


def session_files(path: Path) -> list[Path]:
    """The session files of `path`: the file itself, or those of a folder up to three levels down."""
    if path.is_file():
        return [path] if kind_of(path) else []
    found = []
    for pattern in ("*.jsonl", "*/*.jsonl", "*/*/*.jsonl"):
        found += [p for p in sorted(path.glob(pattern)) if not any(x.startswith(".") for x in p.parts[-3:])]
    return [p for p in found if kind_of(p)]


def is_dataset(path: Path) -> bool:
    """A folder `evalkit convert --to hf` wrote (or laid out alike): session files under `sessions/`."""
    where = path / "sessions"
    return where.is_dir() and any(kind_of(p) for p in sorted(where.glob("*.jsonl")))


def is_sessions_dir(path: Path) -> bool:
    """A dataset folder, or a folder of session files up to three levels down — but not a folder that holds
    dataset folders: each of those is a run of its own."""
    if is_dataset(path):
        return True
    subs = [p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if any(is_dataset(p) for p in subs):
        return False
    for pattern in ("*.jsonl", "*/*.jsonl", "*/*/*.jsonl"):
        if any(p.name != "trace.jsonl" and kind_of(p) for p in sorted(path.glob(pattern))):
            return True
    return False


# ---------------------------------------------------------------------------------------------- messages
# Each reader turns a file into neutral messages: {"role": system | user | assistant | tool, "text",
# "reasoning", "calls": [{"id", "name", "args", "parse_error"}], "call_id", "error", "images", "model",
# "usage", "stop", "note", "cont" (an assistant message that continues the turn before it), "ek" (evalkit's
# own line extras)}.


def _blocks(content: Any) -> tuple[str, str, list[dict], int]:
    """(text, reasoning, tool calls, images) of a string or a list of content blocks (Pi's, Claude's,
    Codex's shapes)."""
    if isinstance(content, str):
        return content, "", [], 0
    texts, thoughts, calls, images = [], [], [], 0
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind in ("text", "input_text", "output_text"):
            texts.append(str(b.get("text") or ""))
        elif kind in ("thinking", "reasoning"):
            thoughts.append(str(b.get("thinking") or b.get("text") or ""))
        elif kind in ("toolCall", "tool_use"):
            args = b.get("arguments", b.get("input"))
            calls.append(_call(b.get("id"), b.get("name"), args))
        elif kind in ("image", "input_image"):
            images += 1
        elif kind == "tool_result":
            texts.append(_blocks(b.get("content"))[0])
    return "\n".join(t for t in texts if t), "\n".join(t for t in thoughts if t), calls, images


def _call(cid: Any, name: Any, raw: Any) -> dict:
    args, bad = parse_args(raw)
    return {"id": str(cid or ""), "name": str(name or ""), "args": args, "parse_error": bad}


def _msg(role: str, text: str = "", **kw: Any) -> dict:
    return {
        "role": role,
        "text": text,
        "reasoning": "",
        "calls": [],
        "call_id": None,
        "error": False,
        "images": [],
        "model": None,
        "usage": {},
        "stop": "",
        "note": None,
        "cont": False,
        "ek": {},
        "cost": None,
        **kw,
    }


def _unstored(n: int) -> list[dict]:
    return [{"path": None, "mime": "image/png"} for _ in range(n)]


def _usage(u: Any) -> dict:
    if not isinstance(u, dict):
        return {}
    return {
        "input": count(u.get("input", u.get("input_tokens"))),
        "output": count(u.get("output", u.get("output_tokens"))),
        "cache_read": count(u.get("cacheRead", u.get("cache_read_input_tokens"))),
        "cache_write": count(u.get("cacheWrite", u.get("cache_creation_input_tokens"))),
    }


def _sts(lines: list[dict], base: Path, root: Path) -> Iterator[dict]:
    """STS and Pi: the `message` of each `message` line (Pi: of its last branch)."""
    for d in _branch(lines):
        if d.get("type") != "message" or not isinstance(d.get("message"), dict):
            continue
        m, ek = d["message"], d.get(MARK) if isinstance(d.get(MARK), dict) else {}
        role = {"toolResult": "tool"}.get(str(m.get("role")), str(m.get("role") or ""))
        text, thinking, calls, n_images = _blocks(m.get("content"))
        for c in items(m.get("toolCalls")):
            if isinstance(c, dict) and isinstance(c.get("function"), dict):
                calls.append(_call(c.get("id"), c["function"].get("name"), c["function"].get("arguments")))
        images = _images(ek.get("images"), base, root) if "images" in ek else _unstored(n_images)
        cost = (m.get("usage") or {}).get("cost") if isinstance(m.get("usage"), dict) else None
        out = _msg(role, text, reasoning=str(m.get("reasoningContent") or thinking), calls=calls,
                   call_id=m.get("toolCallId"), error=bool(m.get("isError")) or ek.get("ok") is False,
                   images=images, model=m.get("model"), usage=_usage(m.get("usage")),
                   stop=str(m.get("stopReason") or ""), note=ek.get("note"), ek=ek,
                   cost=finite(cost.get("total")) if isinstance(cost, dict) else None)  # fmt: skip
        if role not in ("system", "user", "assistant", "tool"):  # Pi's bash runs, summaries, custom messages
            out.update(role="user", note=role, text=text or str(m.get("summary") or m.get("output") or ""))
        yield out


def _branch(lines: list[dict]) -> list[dict]:
    """Pi's entries form a tree by id/parentId: the path from the root to the last entry. A file without ids
    (STS) is read in order."""
    entries = [d for d in lines if d.get("type") != "session"]
    by_id = {d["id"]: d for d in entries if isinstance(d.get("id"), str) and d["id"]}
    if not entries or not by_id or entries[-1].get("id") not in by_id:
        return entries
    path, at, seen = [], entries[-1], set()
    while at is not None and at["id"] not in seen:
        seen.add(at["id"])
        path.append(at)
        parent = at.get("parentId")
        at = by_id.get(parent) if isinstance(parent, str) else None
    return path[::-1]


def _images(entries: Any, base: Path, root: Path) -> list[dict]:
    out = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict):
            img = {"path": _rel(root, base, e.get("path")), "mime": e.get("mime") or "image/png"}
            if e.get("pruned_at") is not None:
                img["pruned"] = e["pruned_at"]
            out.append(img)
    return out


def _rel(root: Path, base: Path, p: Any) -> str | None:
    """A path relative to the session file as a path relative to the run; None outside it or absent."""
    if not isinstance(p, str) or not p or "://" in p:
        return None
    try:
        target = (base / p).resolve()
        return target.relative_to(root.resolve()).as_posix() if target.is_file() else None
    except (OSError, ValueError):
        return None


def _claude(lines: list[dict]) -> Iterator[dict]:
    last_id = None
    for d in lines:
        m = d.get("message")
        if d.get("type") not in ("user", "assistant") or not isinstance(m, dict) or d.get("isSidechain"):
            continue
        text, thinking, calls, n_images = _blocks(m.get("content"))
        if d["type"] == "assistant":
            cont = bool(m.get("id")) and m.get("id") == last_id
            last_id = m.get("id")
            model = m.get("model") if m.get("model") != "<synthetic>" else None
            stop = str(m.get("stop_reason") or "")
            yield _msg("assistant", text, reasoning=thinking, calls=calls, model=model,
                       usage=_usage(m.get("usage")), stop=stop, cont=cont)  # fmt: skip
            continue
        last_id = None
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for b in results:
            body, _, _, n = _blocks(b.get("content"))
            yield _msg("tool", body, call_id=b.get("tool_use_id"), error=bool(b.get("is_error")),
                       images=_unstored(n))  # fmt: skip
        if not results and (text or n_images):
            yield _msg("user", text, images=_unstored(n_images), note="meta" if d.get("isMeta") else None)


def _codex(lines: list[dict]) -> Iterator[dict]:
    model, in_turn = None, False
    for d in lines:
        p = d.get("payload") if isinstance(d.get("payload"), dict) else {}
        kind, item = d.get("type"), p.get("type")
        if kind == "session_meta":
            said = p.get("instructions") or fields(p.get("base_instructions")).get("text")
            if isinstance(said, str) and said:
                yield _msg("system", said)
        elif kind == "turn_context" and p.get("model"):
            model = str(p["model"])
        elif kind == "event_msg" and item == "token_count" and isinstance(p.get("info"), dict):
            u = p["info"].get("last_token_usage")
            u = u if isinstance(u, dict) else {}
            cached = count(u.get("cached_input_tokens"))
            usage = {
                "input": max(count(u.get("input_tokens")) - cached, 0),
                "output": count(u.get("output_tokens")),
                "cache_read": cached,
                "reasoning_tokens": count(u.get("reasoning_output_tokens")),
            }
            yield _msg("usage", usage=usage)
        elif kind != "response_item":
            continue
        elif item == "message":
            text, _, _, n = _blocks(p.get("content"))
            role = str(p.get("role") or "user")
            if role == "assistant":
                yield _msg("assistant", text, model=model, cont=in_turn)
                in_turn = True
                continue
            in_turn = False
            yield _msg("system" if role in ("developer", "system") else "user", text, images=_unstored(n))
        elif item == "reasoning":
            summary = [s.get("text") for s in items(p.get("summary")) if isinstance(s, dict)]
            thought = "\n".join(str(s) for s in summary if s)
            yield _msg("assistant", reasoning=thought, model=model, cont=in_turn)
            in_turn = True
        elif item in ("function_call", "custom_tool_call", "local_shell_call"):
            raw = p.get("arguments") if item == "function_call" else (
                {"input": p.get("input")} if item == "custom_tool_call" else p.get("action"))  # fmt: skip
            call = _call(p.get("call_id") or p.get("id"), p.get("name") or item, raw)
            yield _msg("assistant", calls=[call], model=model, cont=in_turn)
            in_turn = True
        elif item in ("function_call_output", "custom_tool_call_output"):
            out = p.get("output")
            body = out if isinstance(out, str) else json.dumps(out, default=str)
            if isinstance(out, dict):  # an output with content parts
                body = _blocks(out.get("content"))[0]
            in_turn = False
            yield _msg("tool", body, call_id=p.get("call_id"))


# ---------------------------------------------------------------------------------------------- episodes


class _Build:
    """Neutral messages → the turns and the transcript (`evalkit.records.transcripts`, texts inline)."""

    def __init__(self) -> None:
        self.turns: list[dict] = []
        self.system: list[str] = []
        self.before: list[dict] = []
        self.opening: dict = {"text": "", "images": []}
        self.after: dict[str, list] = {}
        self.models: list[str] = []
        self.costs: list[float | None] = []

    def add(self, m: dict) -> None:
        role, ek = m["role"], m["ek"]
        if role == "usage":
            if self.turns:
                u = self.turns[-1]["usage"]
                for k, v in m["usage"].items():
                    u[k] = u.get(k, 0) + v
            return
        if role == "assistant" and (m["note"] == SCRIPTED or ek.get("turn") == 0):
            self.before.append({"role": "assistant", "text": m["text"], "note": m["note"] or SCRIPTED})
        elif role == "assistant":
            self._assistant(m)
        elif role == "tool":
            self._tool(m)
        elif role == "system" and not self.turns:
            self.system.append(m["text"])
        elif not self.turns:
            if m["note"]:
                self.before.append({"role": "user", "text": m["text"], "note": m["note"]})
            else:
                self.opening["text"] = "\n\n".join(t for t in (self.opening["text"], m["text"]) if t)
                self.opening["images"] += m["images"]
        else:
            note = m["note"] or ("system message" if role == "system" else None)
            entry = {"role": "user", "text": m["text"], "images": m["images"]}
            self._after(entry | ({"note": note} if note else {}))

    def _after(self, entry: dict) -> None:
        self.after.setdefault(str(self.turns[-1]["turn"]), []).append(entry)

    def _assistant(self, m: dict) -> None:
        ek = m["ek"]
        if m["model"]:
            self.models.append(str(m["model"]))
        self.costs.append(m["cost"])
        bad = {x for x in items(ek.get("parse_errors")) if isinstance(x, str)}
        calls = [{**c, "ok": not (c["parse_error"] or c["id"] in bad), "result": "", "images": [],
                  "parse_error": c["parse_error"] or c["id"] in bad} for c in m["calls"]]  # fmt: skip
        if m["cont"] and self.turns:
            t = self.turns[-1]
            t["text"] = "\n".join(x for x in (t["text"], m["text"]) if x)
            t["reasoning"] = "\n".join(x for x in (t["reasoning"], m["reasoning"]) if x)
            t["calls"] += calls
            t["usage"] = m["usage"] or t["usage"]
            t["stop"] = m["stop"] or t["stop"]
            return
        n = ek.get("turn") if isinstance(ek.get("turn"), int) else len(self.turns) + 1
        self.turns.append({
            "turn": n, "text": m["text"], "reasoning": m["reasoning"],
            "stop": str(ek.get("stop") or m["stop"] or ("tool_calls" if calls else "stop")),
            "usage": ek["usage"] if isinstance(ek.get("usage"), dict) else dict(m["usage"]),
            "model_s": finite(ek.get("model_s")) or 0.0, "env_s": finite(ek.get("env_s")) or 0.0,
            "frame": ek.get("_frame"), "calls": calls,
        })  # fmt: skip

    def _tool(self, m: dict) -> None:
        ek = m["ek"]
        for t in reversed(self.turns):
            ids = [c["id"] for c in t["calls"]]
            if m["call_id"] is not None and str(m["call_id"]) in ids:
                i = ids.index(str(m["call_id"]))
                call = t["calls"][i]
                call["result"] = result(ek["result"] if isinstance(ek.get("result"), str) else m["text"])
                call["images"] = [x["path"] for x in m["images"] if x.get("path")]
                call["ok"] = not m["error"] and not call["parse_error"]
                entry = {"call": i, "text": m["text"], "images": m["images"]}
                sent = ek.get("result")
                if isinstance(sent, str) and m["text"].startswith(sent) and m["text"] != sent:
                    # What the loop appended to the result (the turns left): a tool entry's note is that text.
                    entry.update(text=sent, note=m["text"][len(sent) :])
                self.after.setdefault(str(t["turn"]), []).append(entry)
                return
        if self.turns:  # a result no call of this session asked for
            self._after({"role": "user", "text": m["text"], "images": m["images"], "note": "tool result"})

    def transcript(self) -> dict:
        tx: dict = {"version": 1, "opening": self.opening, "after": self.after}
        if self.system:
            tx["system_text"] = "\n\n".join(self.system)
        if self.before:
            self.opening["before"] = self.before
        return tx


def _messages(kind: str, lines: list[dict], base: Path, root: Path) -> Iterator[dict]:
    if kind in (STS, PI):
        yield from _sts(lines, base, root)
    elif kind == CLAUDE:
        yield from _claude(lines)
    else:
        yield from _codex(lines)


def _identity(kind: str, lines: list[dict], f: Path) -> tuple[str, str, dict]:
    """(env, session id, evalkit's block) of a session file."""
    first = lines[0] if lines else {}
    ek = first.get(MARK) if kind == STS and isinstance(first.get(MARK), dict) else {}
    if kind in (STS, PI):
        return str(first.get("harness") or PI), str(first.get("id") or f.stem), ek
    if kind == CODEX:
        meta = fields(next((d.get("payload") for d in lines if d.get("type") == "session_meta"), None))
        return CODEX, str(meta.get("id") or f.stem), {}
    sid = next((d.get("sessionId") for d in lines if d.get("sessionId")), None)
    return CLAUDE, str(sid or f.stem), {}


def episode(root: Path, f: Path, repeats: Counter) -> dict:
    kind = kind_of(f)
    lines = [d for d in iter_lines(f)]
    if not lines:
        raise TraceError(f"{f}: an empty session file")
    env, sid, ek = _identity(str(kind), lines, f)
    build = _Build()
    base = f.parent
    for m in _messages(str(kind), lines, base, root):
        if m["role"] == "assistant" and isinstance(m["ek"].get("frame"), str):
            m["ek"]["_frame"] = _rel(root, base, m["ek"]["frame"])
        build.add(m)
    turns = build.turns
    model = str(ek.get("model") or next(iter(build.models), "") or "")
    task = str(ek.get("task_id") or sid)
    surface, mode = str(ek.get("surface") or ""), str(ek.get("mode") or "")
    skin = ek.get("skin") if isinstance(ek.get("skin"), str) else None
    repeat = repeat_of(ek, repeats, model, task)
    rec = skeleton(model, str(ek.get("env") or env), surface, mode, task, skin, repeat, (task, skin))
    if isinstance(ek.get("key"), str) and ek["key"]:
        rec["key"] = ek["key"]
    calls = [c for t in turns for c in t["calls"]]
    usage = ek.get("usage") if isinstance(ek.get("usage"), dict) else summed_usage(turns)
    started = next((d.get("timestamp") for d in lines if isinstance(d.get("timestamp"), str)), None)
    rec.update(
        {k: ek[k] for k in _KEPT if k in ek},
        reward=finite(ek.get("reward")) if not ek.get("unscored") else None,
        grade=ek.get("grade") if isinstance(ek.get("grade"), dict) else None,
        end_reason=str(ek.get("end_reason") or "done"),
        error_class=ek.get("error_class") if isinstance(ek.get("error_class"), str) else None,
        error=ek.get("error") if isinstance(ek.get("error"), str) else None,
        usage=usage, cost_usd=finite(ek.get("cost_usd")) if ek else whole_cost(build.costs),
        n_turns=len(turns),
        tool_calls=sum(not c["parse_error"] for c in calls),
        tool_errors=sum(not c["ok"] and not c["parse_error"] for c in calls),
        parse_errors=sum(c["parse_error"] for c in calls),
        seconds=finite(ek.get("seconds")) or 0.0, model_seconds=finite(ek.get("model_seconds")) or 0.0,
        env_seconds=finite(ek.get("env_seconds")) or 0.0, turns=turns, transcript=build.transcript(),
        info={**(ek.get("info") if isinstance(ek.get("info"), dict) else {}), "importer": NAME,
              "session_format": kind, "session": f.relative_to(root).as_posix() if root != f else f.name,
              "prompt": build.opening["text"]},
    )  # fmt: skip
    rec.setdefault("started", started)
    for k in ("target", "render", "frame0"):
        if isinstance(ek.get(k), str):
            rec[k] = _rel(root, base, ek[k])
    if not ek:
        harness(rec, None, None)
    return rec


def read(path: Path) -> Iterator[dict]:
    files = session_files(path)
    if not files:
        raise TraceError(f"{path}: no session files (STS, Pi, Claude Code or Codex) in it")
    root = path if path.is_dir() else path.parent
    repeats: Counter = Counter()
    for f in files:
        yield episode(root, f, repeats)
