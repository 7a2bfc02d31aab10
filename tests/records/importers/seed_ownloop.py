"""Writes own-loop GUI run directories exactly as seed 001's runners do.

Each runner's bookkeeping (`res`, `Rec.step` rows, `Rec.shot` screens, the status it settles on, Fara-7B's
error attempts moved aside, the driver's session.json / session_failed.json and its resume) is re-enacted
statement by statement; only the model and the browser are scripted. One run directory per agent, as the
seed's `--out` is per invocation.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

BASE = "http://127.0.0.1:8312"
ADMIN_RECORD = [{"kind": "order", "id": 7, "status": "placed"}]
ADMIN_LOG = [{"path": "/login", "status": 200}]


def png(n: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 10), (n * 37 % 255, 120, 60)).save(buf, "PNG")
    return buf.getvalue()


class EndpointError(RuntimeError):
    """The model server failed (not the model): the task is left unsaved, for a rerun."""


class Rec:
    def __init__(self, ep: Path):
        self.ep = ep
        (ep / "screens").mkdir(parents=True, exist_ok=True)
        self.f = open(ep / "steps.jsonl", "w")

    def step(self, **row: Any) -> None:
        self.f.write(json.dumps(row, default=str) + "\n")
        self.f.flush()

    def shot(self, i: int, data: bytes) -> None:
        (self.ep / "screens" / f"step_{i:02d}.png").write_bytes(data)

    def close(self) -> None:
        self.f.close()


def _res(task_id: str) -> dict:
    return {
        "task_id": task_id,
        "base": BASE,
        "answer": None,
        "status": None,
        "rounds": 0,
        "error": None,
        "record": [],
        "log": [],
        "seconds": None,
        "parse_fails": 0,
        "action_errors": 0,
    }


def _backend(res: dict, fails: bool) -> None:
    if fails:
        res["error"] = (res["error"] or "") + " | backend read: TimeoutError: admin endpoint did not answer"
    else:
        res["record"], res["log"] = list(ADMIN_RECORD), list(ADMIN_LOG)


@dataclass
class Script:
    """What the scripted model and page do in one task."""

    steps: list = field(default_factory=list)
    max_steps: int = 5
    timeout_at: int | None = None
    backend_fails: bool = False
    crash: bool = False
    """The runner itself raises (the driver writes a `crash` session)."""


# ---------------------------------------------------------------- UI-TARS-1.5


def uitars_step(actions: list[tuple[str, dict, tuple]], fails: int = 0) -> dict:
    """A predicted step: the parsed actions with what executing each gives (stop, answer, note)."""
    text = (
        "Thought: " + "; ".join(a for a, _, _ in actions) + "\nAction: " + ", ".join(a for a, _, _ in actions)
    )
    parsed = [
        {
            "reflection": None,
            "thought": f"I will {a}",
            "action_type": a,
            "action_inputs": inputs,
            "text": text,
        }
        for a, inputs, _ in actions
    ]
    return {
        "text": text,
        "parsed": parsed,
        "outcomes": [o for _, _, o in actions],
        "fails": [{"raw": "Action: clik(", "parse_error": "ValueError: bad action"}] * fails,
    }


def uitars_parse_failure() -> dict:
    return {
        "text": None,
        "parsed": None,
        "outcomes": [],
        "fails": [{"raw": f"garbled {k}", "parse_error": "ValueError: no action"} for k in range(3)],
    }


def run_uitars(t: dict, ep: Path, s: Script) -> dict:
    res, clock = _res(t["task_id"]), 0.0
    rec = Rec(ep)
    url = f"{BASE}/start"
    try:
        for i in range(1, s.max_steps + 1):
            if s.timeout_at is not None and i >= s.timeout_at:
                res["status"] = "timeout"
                break
            rec.shot(i, png(i))
            step = s.steps[i - 1]
            if isinstance(step, Exception):
                raise step
            text, parsed, fails = step["text"], step["parsed"], step["fails"]
            res["rounds"] = i
            res["parse_fails"] += sum("parse_error" in f for f in fails)
            if parsed is None:
                rec.step(step=i, url=url, raw=None, fails=fails)
                res["status"] = "parse_error"
                break
            stop, notes = False, []
            for _act, outcome in zip(parsed, step["outcomes"], strict=True):
                stop, answer, note = outcome
                res["action_errors"] += bool(note) and note != "call_user"
                notes.append(note)
                if stop:
                    res["answer"], res["status"] = answer, "finished" if note != "call_user" else "call_user"
                    break
            rec.step(
                step=i,
                url=url,
                raw=text,
                actions=[{k: v for k, v in a.items() if k != "text"} for a in parsed],
                notes=notes,
                fails=fails,
            )
            if stop:
                break
            url = f"{BASE}/page{i}"
        else:
            res["status"] = "max_steps"
        rec.shot(res["rounds"] + 1, png(99))
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if isinstance(e, EndpointError):
            res["status"] = "endpoint_error"
    _backend(res, s.backend_fails)
    rec.close()
    res["seconds"] = round(clock + 12.5, 1)
    return res


# ---------------------------------------------------------------- Fara-7B


def fara_response(action: str, **args: Any) -> str:
    call = {"name": "computer_use", "arguments": {"action": action, **args}}
    return f"I see the page. I will {action}.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"


def fara7b_parse(text: str) -> tuple[bool, dict | None]:
    """Their _parse_thoughts_and_action, as far as the record needs it."""
    m = re.search(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.S)
    try:
        action = json.loads(m.group(1)) if m else None
    except ValueError:
        action = None
    ok = (
        isinstance(action, dict)
        and isinstance(action.get("arguments"), dict)
        and "action" in action["arguments"]
    )
    return ok, action if ok else None


@dataclass
class FaraAttempt:
    responses: list[str]
    raises: str | None = None
    """"timeout", "endpoint" or "error": how agent.run ended, if by an exception."""
    answer: str | None = "The order is placed."


def _fara7b(t: dict, ep: Path, a: FaraAttempt, backend_fails: bool) -> dict:
    res = _res(t["task_id"])
    rec = Rec(ep)
    fdir = ep / "fara7b"
    fdir.mkdir(parents=True, exist_ok=True)
    (fdir / "web_surfer.log").write_text("Thought: ...\n")
    (fdir / "stdout.log").write_text("")
    for n in range(len(a.responses) + 1):  # screenshot{n}: after n actions
        (fdir / f"screenshot{n}.png").write_bytes(png(n))
    if a.raises == "timeout":
        res["status"], res["error"] = "timeout", "TimeoutError: "
    elif a.raises == "endpoint":
        res["status"], res["error"] = "endpoint_error", "APIConnectionError: Connection error."
    elif a.raises == "error":
        res["status"], res["error"] = "error", "ValueError: could not execute action"
    responses = a.responses
    res["rounds"] = len(responses)
    parsed = [fara7b_parse(r) for r in responses]
    for i, (text, (ok, action)) in enumerate(zip(responses, parsed, strict=True), 1):
        rec.step(step=i, raw=text, action=(action or {}).get("arguments") if ok else None, parse_error=not ok)
    last_ok, last = parsed[-1] if parsed else (True, None)
    if res["status"] is None:
        if last_ok and last and last["arguments"]["action"] in ("terminate", "stop"):
            res["status"], res["answer"] = "terminate", a.answer
        else:
            res["status"] = "max_steps"
    elif res["status"] == "error" and responses and not last_ok:
        res["status"], res["parse_fails"] = "parse_error", 1
    elif res["status"] == "error":
        res["action_errors"] = 1
    for shot in fdir.glob("screenshot*.png"):
        m = re.fullmatch(r"screenshot(\d+)\.png", shot.name)
        if m:
            shot.replace(ep / "screens" / f"step_{int(m.group(1)) + 1:02d}.png")
    _backend(res, backend_fails)
    rec.close()
    res["seconds"] = 20.0
    return res


def run_fara7b(t: dict, ep: Path, attempts: list[FaraAttempt], retries: int = 5, backend_fails=False) -> dict:
    failed: list[dict] = []
    k = 0
    while True:
        res = _fara7b(t, ep, attempts[min(k, len(attempts) - 1)], backend_fails)
        k += 1
        if res["status"] not in ("error", "parse_error") or len(failed) >= retries:
            break
        keep = ep / f"error_attempt_{len(failed) + 1}"
        keep.mkdir()
        for p in list(ep.iterdir()):
            if not p.name.startswith("error_attempt_"):
                shutil.move(str(p), str(keep / p.name))
        (keep / "attempt.json").write_text(json.dumps(res, default=str))
        failed.append(
            {k_: res[k_] for k_ in ("status", "rounds", "error", "seconds", "parse_fails", "action_errors")}
        )
    res["error_attempts"] = failed
    res["parse_fails"] += sum(f["parse_fails"] for f in failed)
    res["action_errors"] += sum(f["action_errors"] for f in failed)
    res["seconds"] = round(20.0 * k, 1)
    return res


# ---------------------------------------------------------------- MolmoWeb


@dataclass
class Interaction:
    action: dict | None
    action_str: str | None
    thought: str
    raw: str | None
    error: dict | None = None
    action_error: str | None = None
    exit: bool = False


def run_molmoweb(
    t: dict, ep: Path, inters: list[Interaction], raises: bool = False, backend_fails=False
) -> dict:
    res = _res(t["task_id"])
    rec = Rec(ep)
    if raises:
        res["error"] = "RuntimeError: browser crashed"
    for i, it in enumerate(inters, 1):
        rec.shot(i, png(i))
        res["parse_fails"] += it.thought.startswith("Could not parse predicted action")
        res["action_errors"] += bool(it.action_error)
        rec.step(
            step=i,
            url=f"{BASE}/p{i}",
            raw=it.raw,
            action=it.action,
            action_str=it.action_str,
            thought=it.thought,
            error=it.error,
            action_error=it.action_error,
        )
    if inters:
        rec.shot(len(inters) + 1, png(50))
    res["rounds"] = len(inters)
    res["answer"] = next(
        (
            it.action_str[len("send_msg_to_user('[ANSWER] ") : -2]
            for it in reversed(inters)
            if it.action_str and "[ANSWER]" in it.action_str
        ),
        None,
    )
    last = inters[-1] if inters else None
    if last is None:
        res["status"] = "no_steps"
    elif last.error:
        err = json.dumps(last.error)
        res["status"] = (
            "timeout" if "task timeout" in err else "endpoint_error" if "EndpointError" in err else "error"
        )
        res["error"] = res["error"] or json.dumps(last.error)[:300]
    elif last.exit:
        res["status"] = "exit"
    else:
        res["status"] = "max_steps"
    _backend(res, backend_fails)
    rec.close()
    res["seconds"] = 31.0
    return res


# ---------------------------------------------------------------- OpenCUA


@dataclass
class CuaStep:
    response: str | None
    calls: list[dict]
    action: str | None = None
    code: str | None = None
    actions: list[str] = field(default_factory=list)
    notes: list[str] | None = None


def run_opencua(t: dict, ep: Path, s: Script) -> dict:
    res = _res(t["task_id"])
    rec = Rec(ep)
    try:
        for i in range(1, s.max_steps + 1):
            rec.shot(i, png(i))
            st = s.steps[i - 1]
            if isinstance(st, Exception):
                raise st
            accepted = st.response is not None
            res["rounds"] = i
            res["parse_fails"] += len(st.calls) - accepted
            row = {
                "step": i,
                "url": f"{BASE}/p{i}",
                "raw": st.response if accepted else None,
                "attempts": st.calls if len(st.calls) != 1 or not accepted else None,
                "action": st.action,
                "code": st.code,
                "executed": st.actions,
            }
            if not accepted:
                rec.step(**row, error=st.response)
                res["status"] = "parse_error"
                res["error"] = str(st.response)[:300]
                break
            if not st.actions or st.actions[0] == "" or st.actions[0].lower().startswith("error"):
                rec.step(**row)
                res["status"] = "no_action"
                break
            stop, notes = False, []
            for k, a in enumerate(st.actions):
                note = (st.notes or [])[k] if st.notes and k < len(st.notes) else ""
                if a in ("DONE", "FAIL"):
                    stop = True
                res["action_errors"] += bool(note)
                notes.append(note)
                if stop:
                    break
            rec.step(**row, notes=notes)
            if stop:
                code = (st.code or "").lower()
                if "computer.terminate" in code:
                    res["status"] = "fail" if "fail" in code else "done"
                    res["answer"] = st.action
                else:
                    res["status"] = "max_steps"
                break
        else:
            res["status"] = "max_steps"
        rec.shot(res["rounds"] + 1, png(77))
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        res["status"] = res["status"] or "error"
    _backend(res, s.backend_fails)
    rec.close()
    res["seconds"] = 44.0
    return res


# ---------------------------------------------------------------- the driver


def drive(out: Path, tasks: list[dict], run) -> None:
    """The seed's `main` worker loop: resume skips tasks with a session.json; a harness or model-server
    failure is kept aside as session_failed.json so that a rerun repeats the task."""
    done = {p.parent.name for p in out.glob("*/session.json")}
    for t in [t for t in tasks if t["task_id"] not in done]:
        ep = out / t["task_id"]
        ep.mkdir(parents=True, exist_ok=True)
        try:
            r = run(t, ep)
        except Exception as e:
            r = {
                "task_id": t["task_id"],
                "base": BASE,
                "answer": None,
                "status": "crash",
                "rounds": 0,
                "error": f"{type(e).__name__}: {str(e)[:300]}",
                "record": [],
                "log": [],
            }
        name = "session_failed.json" if r["status"] in ("crash", "endpoint_error") else "session.json"
        (ep / name).write_text(json.dumps(r, default=str))


def _tasks(*ids: str) -> list[dict]:
    return [{"task_id": i, "start": "{BASE}/start", "prompt": f"Do {i}", "needs_login": False} for i in ids]


def uitars_run(out: Path) -> Path:
    click = ("click", {"start_box": "[0.1,0.2,0.1,0.2]"}, (False, None, ""))
    finish = ("finished", {"content": "all done"}, (True, "all done", ""))
    scripts = {
        "u-finish": Script([uitars_step([click], fails=1), uitars_step([click, finish])]),
        "u-maxsteps": Script([uitars_step([("click", {}, (False, None, "no start_box"))])] * 3, max_steps=3),
        "u-parse": Script([uitars_step([click]), uitars_parse_failure()]),
        "u-calluser": Script([uitars_step([("call_user", {}, (True, None, "call_user"))])]),
        "u-harness": Script([uitars_step([click]), KeyError("viewport")]),
        "u-timeout": Script([uitars_step([click])] * 4, timeout_at=3),
        "u-endpoint": Script([uitars_step([click]), EndpointError("APIConnectionError: refused")]),
        "u-crash": Script(crash=True),
        "u-backend": Script([uitars_step([finish])], backend_fails=True),
    }
    rerun = {"u-endpoint": Script([uitars_step([finish])])}
    tasks = _tasks(*scripts)
    for attempt in (scripts, {**scripts, **rerun}):

        def run(t, ep, sc=attempt):
            if sc[t["task_id"]].crash:
                raise OSError("playwright driver closed")
            return run_uitars(t, ep, sc[t["task_id"]])

        drive(out, tasks, run)
    return out


def fara7b_run(out: Path) -> Path:
    click, done = (
        fara_response("left_click", coordinate=[100, 200]),
        fara_response("terminate", status="success"),
    )
    plans = {
        "f-terminate": [FaraAttempt([click, click, done])],
        "f-retry": [
            FaraAttempt([click], raises="error"),
            FaraAttempt([click, "I am confused"], raises="error"),
            FaraAttempt([click, done]),
        ],
        "f-maxsteps": [FaraAttempt([click, click])],
        "f-timeout": [FaraAttempt([click], raises="timeout")],
        "f-exhausted": [FaraAttempt([click], raises="error")],
        "f-endpoint": [FaraAttempt([click], raises="endpoint")],
    }
    drive(
        out,
        _tasks(*plans),
        lambda t, ep: run_fara7b(
            t, ep, plans[t["task_id"]], retries=2 if t["task_id"] == "f-exhausted" else 5
        ),
    )
    return out


def molmoweb_run(out: Path) -> Path:
    def click(k: int) -> Interaction:
        return Interaction(
            {"name": "click", "x": 0.1 * k, "y": 0.5},
            f"click(x={0.1 * k:.1f}, y=0.5)",
            f"step {k}: I click",
            f'{{"action": "click", "k": {k}}}',
        )

    answer = Interaction(
        {"name": "send_msg_to_user", "msg": "[ANSWER] 42"},
        "send_msg_to_user('[ANSWER] 42')",
        "I know it",
        "...",
    )
    exit_ = Interaction(
        {"name": "send_msg_to_user", "msg": "[EXIT]"}, "send_msg_to_user('[EXIT]')", "done", "...", exit=True
    )
    unparsed = Interaction(None, None, "Could not parse predicted action: garbage", "garbage")
    broken = Interaction(
        {"name": "type", "text": "x"},
        "type('x')",
        "typing",
        "...",
        error={"type": "ACTION_PREDICTION_ERROR", "msg": "ValueError: bad"},
    )
    missed = Interaction(
        {"name": "click"}, "click(x=9, y=9)", "oops", "...", action_error="element not found"
    )
    plans = {
        "m-exit": ([click(1), answer, exit_], False),
        "m-max": ([click(1), missed, click(3)], False),
        "m-error": ([click(1), broken], False),
        "m-nosteps": ([], True),
        "m-parse": ([unparsed, click(2), exit_], False),
    }
    drive(out, _tasks(*plans), lambda t, ep: run_molmoweb(t, ep, *plans[t["task_id"]]))
    return out


def opencua_run(out: Path) -> Path:
    def act(code: str, note: str = "") -> CuaStep:
        return CuaStep(
            f"## Action: {code}\n```python\n{code}\n```",
            [{"raw": "r", "finish_reason": "stop", "temperature": 0.0}],
            "Click the button",
            code,
            [code],
            [note],
        )

    terminate = CuaStep(
        "## Action: finish",
        [{"raw": "r", "finish_reason": "stop", "temperature": 0}],
        "The order is placed",
        "computer.terminate(status='success')",
        ["DONE"],
    )
    give_up = CuaStep(
        "## Action: give up",
        [{"raw": "r", "finish_reason": "stop", "temperature": 0}],
        "It cannot be done",
        "computer.terminate(status='failure')",
        ["FAIL"],
    )
    unparsed = CuaStep(
        None, [{"raw": "x", "finish_reason": "length", "temperature": t} for t in (0, 0.2, 0.4, 0.6, 0.8)]
    )
    retried = CuaStep(
        "## Action: click\n```python\npyautogui.click(5, 5)\n```",
        [
            {"raw": "x", "finish_reason": "length", "temperature": 0},
            {"raw": "ok", "finish_reason": "stop", "temperature": 0.2},
        ],
        "Click",
        "pyautogui.click(5, 5)",
        ["pyautogui.click(5, 5)"],
        [""],
    )
    nothing = CuaStep(
        "## Action: none", [{"raw": "r", "finish_reason": "stop", "temperature": 0}], "Nothing", "", []
    )
    scripts = {
        "o-done": Script([act("pyautogui.click(10, 20)"), retried, terminate]),
        "o-fail": Script([give_up]),
        "o-noaction": Script([nothing]),
        "o-parse": Script([act("pyautogui.click(1, 1)"), unparsed]),
        "o-harness": Script([act("pyautogui.click(1, 1)"), RuntimeError("page crashed")]),
        "o-max": Script(
            [act("WAIT"), act("pyautogui.write('x')", "UnsupportedCode: computer.x is not defined")],
            max_steps=2,
        ),
        "o-backend": Script([terminate], backend_fails=True),
    }
    drive(out, _tasks(*scripts), lambda t, ep: run_opencua(t, ep, scripts[t["task_id"]]))
    return out


def write_runs(root: Path) -> dict[str, Path]:
    """All four agents' runs under `root`."""
    return {
        "uitars": uitars_run(root / "uitars15-7b"),
        "fara7b": fara7b_run(root / "fara-7b"),
        "molmoweb": molmoweb_run(root / "molmoweb-4b"),
        "opencua": opencua_run(root / "opencua-7b"),
    }


def grader(run: Path) -> dict[str, float]:
    """What a separate grading step gives the tasks it grades (every task with a session.json): a reward
    derived from the task name, so tests can recompute it."""
    return {
        p.parent.name: round((sum(map(ord, p.parent.name)) % 10) / 10, 1)
        for p in sorted(run.glob("*/session.json"))
    }
