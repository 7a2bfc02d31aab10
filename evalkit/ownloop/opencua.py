"""OpenCUA-7B as released: OSWorld's `OpenCUAAgent` (mm_agents/opencua, from `--path`) with the OpenCUA-7B
command's settings — qwen25 coordinates, the old (V1) system prompt, l2 chain of thought, action history,
3 images, temperature 0, top_p 0.9, max_tokens 2048 — on a 1920×1080 page, in the loop of OSWorld's
`run_single_example_opencua`.

Only `call_llm` is swapped for the endpoint. Theirs re-posts a reply that did not finish with "stop" up to
20 times; at temperature 0 a re-post repeats itself, so here such a reply returns nothing at once and the
agent's own retries (5 calls, temperature ≥ 0.2 after the first) apply. The VM's `python -c` becomes the
safe interpreter of `evalkit.ownloop.pyautogui`; each action is followed by OSWorld's 5 s pause.
"""

from __future__ import annotations

import ast
import re
import threading
import time
from typing import Any

from evalkit.errors import EndpointError
from evalkit.types import Usage

from .baselines import settle
from .endpoint import Endpoint, RequestRejected
from .pyautogui import PyAutoGUI, run_pyautogui
from .task import Released, TaskRun

_lock = threading.Lock()
_classes: dict[str, type] = {}


def agent_class() -> type:
    """Their OpenCUAAgent with `call_llm` pointed at an Endpoint; everything else is theirs."""
    with _lock:
        if "cls" in _classes:
            return _classes["cls"]
        try:
            # the released agent's code, on the path given at run time (evalkit[ownloop])
            from loguru import logger

            logger.remove()  # their module logs every prompt and response through loguru
        except ImportError:
            pass
        # the released agent's code (as above)
        from mm_agents.opencua.opencua_agent import OpenCUAAgent

        class EndpointOpenCUAAgent(OpenCUAAgent):
            def __init__(self, endpoint: Endpoint, deadline: float, **kw: Any):
                super().__init__(**kw)
                self.endpoint, self.deadline = endpoint, deadline
                self.calls: list[dict] = []
                self.endpoint_failed: str | None = None
                self.timed_out = False
                self.usages: list = []

            def call_llm(self, payload: dict, model: str) -> str | None:
                # Their predict() catches every exception as a failed try: remember why, so the loop can
                # tell a broken endpoint (unscored) or the deadline from the model's own failures.
                if self.endpoint_failed:
                    raise EndpointError(self.endpoint_failed)
                if time.monotonic() > self.deadline:
                    self.timed_out = True
                    raise TimeoutError("task timeout")
                body = {k: v for k, v in payload.items() if k not in ("model", "messages")}
                try:
                    reply = self.endpoint.chat(payload["messages"], **body)
                except EndpointError as e:
                    self.endpoint_failed = str(e)
                    raise
                except RequestRejected as e:
                    self.calls.append({"error": str(e), "temperature": payload.get("temperature")})
                    raise
                self.usages.append(reply.usage)
                self.calls.append(
                    {
                        "raw": reply.text,
                        "finish_reason": reply.finish_reason,
                        "temperature": payload.get("temperature"),
                    }
                )
                return reply.text if reply.finish_reason == "stop" else None

        _classes["cls"] = EndpointOpenCUAAgent
        return EndpointOpenCUAAgent


def answer_of(cot: dict) -> str | None:
    """A terminate step's answer: its `answer=` argument if it has one, else its Thought and Action text (the
    V1 prompt's terminate takes no answer)."""
    code = cot.get("original_code") or ""
    try:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "terminate":
                for k in node.keywords:
                    if k.arg == "answer":
                        return str(ast.literal_eval(k.value))
    except (SyntaxError, ValueError):
        m = re.search(r"answer\s*=\s*('''|\"\"\"|'|\")(.*?)\1", code, re.S)
        if m:
            return m.group(2)
    return "\n".join(p for p in (cot.get("thought"), cot.get("action")) if p) or None


def _name(code: str) -> str:
    if code in ("DONE", "FAIL", "WAIT"):
        return code
    m = re.search(r"pyautogui\.(\w+)", code)
    return m.group(1) if m else "code"


class OpenCUA(Released):
    """`evalkit ownloop opencua`."""

    NAME, viewport, coordinates, prompt_version = "opencua", (1920, 1080), "qwen25", "osworld-opencua:v1-l2"

    def load(self) -> None:
        agent_class()

    def run(self, ctx: TaskRun) -> None:
        """OSWorld's `run_single_example_opencua`: a screenshot, a prediction, its actions, until the agent
        stops, the step budget is spent or the task's time is up."""
        s, res = ctx.settings, ctx.result
        agent = self._agent(ctx)
        session = ctx.open_browser(s.width, s.height)
        gui = PyAutoGUI(session)
        try:
            for i in range(1, s.max_steps + 1):
                if ctx.out_of_time():
                    res["status"] = "timeout"
                    break
                if self._step(ctx, agent, session, gui, i):
                    break
            else:
                res["status"] = "max_steps"
            ctx.screenshot(session, res["rounds"] + 1)
        finally:
            ctx.end(session)

    @staticmethod
    def _agent(ctx: TaskRun) -> Any:
        """Their agent with the OpenCUA-7B command's settings."""
        s = ctx.settings
        endpoint = Endpoint(s.endpoint, s.model, timeout=s.request_timeout, wait=s.retry_wait)
        return agent_class()(
            endpoint,
            ctx.deadline,
            model=s.model,
            history_type="action_history",
            max_steps=s.max_steps,
            max_image_history_length=3,
            platform="ubuntu",
            max_tokens=s.opencua_max_tokens,
            top_p=0.9,
            temperature=0.0,
            action_space="pyautogui",
            observation_type="screenshot",
            cot_level="l2",
            screen_size=(s.width, s.height),
            coordinate_type="qwen25",
            use_old_sys_prompt=True,
        )

    def _step(self, ctx: TaskRun, agent: Any, session: Any, gui: PyAutoGUI, i: int) -> bool:
        """Step i, recorded; True when it ended the session (its status set)."""
        res = ctx.result
        png = ctx.screenshot(session, i)
        url = session.url
        n_actions, n_calls, n_usages = len(agent.actions), len(agent.calls), len(agent.usages)
        t = time.monotonic()
        with ctx.timed("model"):
            response, actions, cot = agent.predict(ctx.prompt, {"screenshot": png})
        model_s = time.monotonic() - t
        usage = sum(agent.usages[n_usages:], Usage())
        calls, accepted = agent.calls[n_calls:], len(agent.actions) > n_actions
        res["rounds"] = i
        res["parse_fails"] += len(calls) - accepted
        row = {
            "url": url,
            "attempts": calls if len(calls) != 1 or not accepted else None,
            "action": cot.get("action"),
            "code": cot.get("original_code"),
            "executed": actions,
        }
        if agent.endpoint_failed or agent.timed_out or not accepted:
            ctx.step(i, raw=None, model_s=model_s, usage=usage, error=response, **row)
            if agent.endpoint_failed:
                raise EndpointError(agent.endpoint_failed)
            res["status"] = "timeout" if agent.timed_out else "parse_error"
            res["error"] = str(response)[:300]
            return True
        if not actions or actions[0] == "" or str(actions[0]).lower().startswith("error"):
            ctx.step(i, raw=response, model_s=model_s, usage=usage, **row)
            res["status"] = "no_action"
            return True
        t = time.monotonic()
        stop, notes = self._execute(ctx, gui, actions)
        with ctx.timed("action"):
            settle(session)
        ctx.step(
            i,
            raw=response,
            actions=[{"type": _name(c), "code": c} for c in actions],
            errors=notes,
            model_s=model_s,
            env_s=time.monotonic() - t,
            usage=usage,
            **row,
        )
        if stop:
            code = (cot.get("original_code") or "").lower()
            if "computer.terminate" in code:  # theirs: "fail" anywhere in the code means failure
                res["status"] = "fail" if "fail" in code else "done"
                res["answer"] = answer_of(cot)
            else:  # their predict() forces FAIL at the step budget
                res["status"] = "max_steps"
        return stop

    @staticmethod
    def _execute(ctx: TaskRun, gui: PyAutoGUI, actions: list) -> tuple[bool, list[str]]:
        """A prediction's actions as their env.step runs them: whether one stopped the session, and each
        one's error (empty when it ran)."""
        stop, notes = False, []
        for code in actions:
            note = ""
            if code in ("DONE", "FAIL"):
                stop = True
            elif code == "WAIT":
                ctx.pause(ctx.settings.wait_s)  # their env.step sleeps for WAIT, then once more below
            else:
                with ctx.timed("action"):
                    try:
                        run_pyautogui(code, gui)
                    except Exception as e:  # refused code or input is the model's mistake: data
                        note = f"{type(e).__name__}: {str(e)[:200]}"
                        ctx.result["action_errors"] += 1
            notes.append(note)
            if stop:
                break
            ctx.pause(ctx.settings.wait_s)
        return stop, notes
