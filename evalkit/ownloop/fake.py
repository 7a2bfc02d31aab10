"""A fake OpenAI-compatible model server for own-loop runs without a GPU: real HTTP, real JSON, each
agent's own output format.

`FakeEndpoint(policy)` serves `/v1/models` and `/v1/chat/completions` on a loopback port; `policy(request)`
writes each reply. `PlanPolicy` replays plans — generic actions in page pixels — writing each action as the
agent being tested would: UI-TARS's `click(point='<point>x y</point>')` in smart-resize pixels (the form its
released prompt asks for), OpenCUA's pyautogui code, Fara's `<tool_call>` JSON, MolmoWeb's percentages.
`TaskPolicy` needs no plans: it solves each web-app task from its task definition the first time the task's
prompt arrives, the DOM solver doing it on a web-app server of its own (`baselines.plan_task`). A run
against it clicks real elements only if the runner maps coordinates back the way the released agent does,
so the tests and benchmarks that use it can fail.

`evalkit ownloop AGENT --endpoint fake` serves a `TaskPolicy` for the length of the run;
`python -m evalkit.ownloop.fake AGENT` serves one until interrupted, for a run started elsewhere.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from evalkit.errors import EvalkitError
from evalkit.serving import ThreadedServer

from .coords import smart_resize, to_smart
from .runners import runner_for

Policy = Callable[[dict], str]


def images_of(request: dict) -> list[tuple[int, int]]:
    """(width, height) of every image in a chat request, in order."""
    # start-up: Pillow only to draw the scripted screens
    from PIL import Image

    sizes = []
    for m in request.get("messages") or []:
        content = m.get("content")
        for part in content if isinstance(content, list) else []:
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if url.startswith("data:"):
                im = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
                sizes.append(im.size)
    return sizes


def text_of(request: dict) -> str:
    out = []
    for m in request.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "text":
                out.append(str(part.get("text", "")))
    return "\n".join(out)


class FakeEndpoint(ThreadedServer):
    """The fake server. `fail_first` requests are answered `fail_status` (a model server falling over);
    `requests` keeps each request with its images reduced to their sizes."""

    def __init__(
        self,
        policy: Policy,
        model: str = "fake-model",
        fail_first: int = 0,
        fail_status: int = 500,
        port: int | None = None,
        delay_s: float = 0.0,
    ):
        self.policy, self.model, self.fail_first, self.fail_status = policy, model, fail_first, fail_status
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        routes = [
            Route("/health", self._health),
            Route("/v1/models", self._models),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
        ]
        super().__init__(Starlette(routes=routes), port=port, name="fake-endpoint", access_log=False)
        self.url = f"{self.base_url}/v1"

    def stop(self) -> None:
        super().stop()
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "healthy"})

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        )

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        sizes = images_of(body)
        with self._lock:
            n = len(self.requests)
            self.requests.append(
                {
                    **{k: v for k, v in body.items() if k != "messages"},
                    "images": sizes,
                    "text": text_of(body),
                    "roles": [m.get("role") for m in body.get("messages") or []],
                }
            )
        if n < self.fail_first:
            return JSONResponse(
                {"error": {"message": "overloaded", "type": "server_error"}}, status_code=self.fail_status
            )
        if body.get("model") != self.model:
            return JSONResponse(
                {"error": {"message": f"model {body.get('model')} not found"}}, status_code=404
            )
        if self.delay_s:
            time.sleep(self.delay_s)
        # A policy may take seconds (a task solved on first sight): off the event loop, which serves the rest.
        text = await run_in_threadpool(self.policy, body)
        prompt_tokens = len(text_of(body)) // 4 + 765 * len(sizes)
        return JSONResponse(
            {
                "id": f"chatcmpl-fake-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": max(1, len(text) // 4),
                    "total_tokens": prompt_tokens + max(1, len(text) // 4),
                },
            }
        )


# ---------------------------------------------------------------- plans in each agent's words


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def uitars_reply(action: dict, size: tuple[int, int]) -> str:
    """UI-TARS-1.5's `Thought: ... Action: ...` with `<point>x y</point>` in the smart-resize pixels of a
    `size` screenshot, as its released prompt (`COMPUTER_USE_DOUBAO`) writes the action space."""
    w, h = size
    kind = action["type"]
    if kind == "click":
        x, y = to_smart(action["x"], action["y"], w, h)
        act = f"click(point='<point>{x} {y}</point>')"
    elif kind == "type":
        act = f"type(content='{_quote(action['text'])}')"
    elif kind == "press":
        act = (
            "hotkey(key='"
            + " ".join(k.lower().replace("control", "ctrl") for k in action["key"].split("+"))
            + "')"
        )
    elif kind == "scroll":
        x, y = to_smart(action["x"], action["y"], w, h)
        act = f"scroll(point='<point>{x} {y}</point>', direction='{'down' if action['dy'] > 0 else 'up'}')"
    elif kind == "finish":
        act = f"finished(content='{_quote(str(action.get('answer') or ''))}')"
    else:
        raise ValueError(f"no UI-TARS form for {kind}")
    return f"Thought: Next I {kind} as planned.\nAction: {act}"


def opencua_reply(action: dict, size: tuple[int, int]) -> str:
    """OpenCUA-7B's l2 reply (Thought, Action, Code) with qwen25 coordinates: pixels of the screenshot as its
    processor resizes it (min 3136, max 12845056 pixels)."""
    w, h = size
    rh, rw = smart_resize(h, w, min_pixels=3136, max_pixels=12845056)

    def point(x: float, y: float) -> tuple[int, int]:
        return round(x * rw / w), round(y * rh / h)

    kind, fence = action["type"], "python"
    if kind == "click":
        x, y = point(action["x"], action["y"])
        code, what = f"pyautogui.click(x={x}, y={y})", "Click the target."
    elif kind == "type":
        code, what = f"pyautogui.write({action['text']!r})", f"Type {action['text']!r}."
    elif kind == "press":
        keys = [k.lower().replace("control", "ctrl") for k in action["key"].split("+")]
        code = (
            f"pyautogui.press({keys[0]!r})"
            if len(keys) == 1
            else f"pyautogui.hotkey({', '.join(map(repr, keys))})"
        )
        what = f"Press {action['key']}."
    elif kind == "scroll":
        x, y = point(action["x"], action["y"])  # their projection covers moveTo, not scroll's own x and y
        code = f"pyautogui.moveTo({x}, {y})\npyautogui.scroll({-round(action['dy'] / 100)})"
        what = "Scroll the page."
    elif kind == "finish":
        code, fence = "computer.terminate(status='success')", "code"
        what = f"The task is done. The answer is: {action.get('answer') or 'done'}"
    else:
        raise ValueError(f"no OpenCUA form for {kind}")
    return f"## Thought:\nI follow my plan.\n\n## Action:\n{what}\n\n## Code:\n```{fence}\n{code}\n```"


FINISH = {"type": "finish", "answer": None}


def fara_reply(plan: list[dict], k: int, size: tuple[int, int]) -> str:
    """Fara-7B's thoughts and `<tool_call>` JSON, in the pixels of the resized screenshot it was shown (its
    page is always 1440×900)."""
    action = plan[k] if k < len(plan) else FINISH
    sx, sy = size[0] / 1440, size[1] / 900

    def point(x: float, y: float) -> list[int]:
        return [round(x * sx), round(y * sy)]

    kind, thoughts = action["type"], "I follow my plan."
    if kind == "click":
        args = {"action": "left_click", "coordinate": point(action["x"], action["y"])}
    elif kind == "type":  # their type acts only at a coordinate: the field the plan clicked last
        field = next((a for a in reversed(plan[:k]) if a["type"] == "click"), None)
        args = {
            "action": "type",
            "text": action["text"],
            "press_enter": False,
            "delete_existing_text": True,
            "coordinate": point(field["x"], field["y"]) if field else [720, 450],
        }
    elif kind == "press":
        args = {"action": "key", "keys": action["key"].split("+")}
    elif kind == "scroll":
        args = {"action": "scroll", "pixels": -int(action["dy"])}
    elif kind == "finish":
        args, thoughts = (
            {"action": "terminate", "status": "success"},
            f"Done. The answer is {action.get('answer')}.",
        )
    else:
        raise ValueError(f"no Fara form for {kind}")
    return f"{thoughts}\n<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': args})}\n</tool_call>"


def molmoweb_reply(plan: list[dict], k: int, size: tuple[int, int]) -> str:
    """MolmoWeb's JSON (thought and action) with points as percentages of the screenshot; a plan's finish is
    an `[ANSWER] …` message, then `[EXIT]`."""
    w, h = size
    action = plan[k] if k < len(plan) else {"type": "exit"}
    kind = action["type"]
    if kind == "click":
        act = {"name": "click", "x": round(action["x"] / w * 100, 3), "y": round(action["y"] / h * 100, 3)}
    elif kind == "type":
        act = {"name": "keyboard_type", "text": action["text"]}
    elif kind == "press":
        act = {"name": "keyboard_press", "key": action["key"].replace("Control+", "ControlOrMeta+")}
    elif kind == "scroll":
        act = {"name": "scroll", "delta_x": 0, "delta_y": round(action["dy"] / h * 100, 3)}
    elif kind == "finish":
        act = {"name": "send_msg_to_user", "msg": f"[ANSWER] {action.get('answer') or ''}"}
    elif kind == "exit":
        act = {"name": "send_msg_to_user", "msg": "[EXIT]"}
    else:
        raise ValueError(f"no MolmoWeb form for {kind}")
    return json.dumps({"thought": "I follow my plan.", "action": act})


def _one(render: Callable[[dict, tuple[int, int]], str]) -> Callable[[list[dict], int, tuple[int, int]], str]:
    return lambda plan, k, size: render(plan[k] if k < len(plan) else FINISH, size)


RENDERERS: dict[str, Callable[[list[dict], int, tuple[int, int]], str]] = {
    "uitars": _one(uitars_reply),
    "opencua": _one(opencua_reply),
    "fara7b": fara_reply,
    "molmoweb": molmoweb_reply,
}


def _assistant_texts(request: dict) -> list[str]:
    out = []
    for m in request.get("messages") or []:
        if m.get("role") == "assistant":
            c = m.get("content")
            out.append(c if isinstance(c, str) else text_of({"messages": [m]}))
    return out


def _step_uitars(request: dict) -> int:
    return len(_assistant_texts(request))


def _step_opencua(request: dict) -> int:
    """Their history writes each past step as `# Step N:`."""
    return sum(len(re.findall(r"^# Step \d+:", t, re.M)) for t in _assistant_texts(request))


def _step_molmoweb(request: dict) -> int:
    """Their prompt lists the last past steps as `## Step N` (N counts from 1)."""
    return max((int(n) for n in re.findall(r"^## Step (\d+)", text_of(request), re.M)), default=0)


STEP_COUNTERS: dict[str, Callable[[dict], int]] = {
    "uitars": _step_uitars,
    "opencua": _step_opencua,
    "fara7b": _step_uitars,
    "molmoweb": _step_molmoweb,
}


class PlanPolicy:
    """Replays `plans` (task prompt → generic actions) in `style`. The task is the one whose prompt (up to
    any `{BASE}`) the request contains; the step is read off the conversation as the agent keeps it."""

    def __init__(self, plans: dict[str, list[dict] | None], style: str, garbage: str | None = None):
        if style not in RENDERERS:
            raise ValueError(f"no fake replies for {style!r} (have: {', '.join(RENDERERS)})")
        self.plans = {_prompt_key(prompt): plan for prompt, plan in plans.items()}
        self.style, self.garbage = style, garbage

    def task_key(self, text: str) -> str | None:
        """The task whose prompt the request holds (the longest that matches, should one begin another)."""
        found = [key for key in self.plans if key and key in text]
        return max(found, key=len) if found else None

    def plan(self, key: str) -> list[dict] | None:
        return self.plans[key]

    def __call__(self, request: dict) -> str:
        if self.garbage is not None:
            return self.garbage
        key = self.task_key(text_of(request))
        plan = self.plan(key) if key is not None else None
        if plan is None:
            return "I do not know this task."
        k = STEP_COUNTERS[self.style](request)
        sizes = images_of(request)
        size = sizes[-1] if sizes else (1280, 800)
        return RENDERERS[self.style](plan, k, size)


def _prompt_key(prompt: str) -> str:
    """What of a task's prompt a request holds whatever server the task runs on: up to any `{BASE}`."""
    return prompt.split("{BASE}")[0].strip()


class TaskPolicy(PlanPolicy):
    """A scripted model that solves the web-app tasks from their task definitions (`tasks`: a task file,
    default the webapp evalset), with no prior run: the first request of a task has the DOM solver do it on
    a web-app server of this policy's own, in a browser of the agent's viewport (`width` × `height`), and
    the actions it took are the plan, replayed in `style`. Sessions on a server are apart, so solving a task
    there leaves the agent's own server as it was."""

    def __init__(self, style: str, width: int, height: int, tasks: str | Path | None = None):
        # start-up: the web app's tasks and server only for a scripted run
        from evalkit.envs.embedded.webapp.tasks import load_tasks

        defined = load_tasks(tasks)
        super().__init__({t["prompt"]: None for t in defined}, style)
        self.tasks = {_prompt_key(t["prompt"]): t for t in defined}
        self.size = (width, height)
        self._site: Any = None
        self._lock = threading.Lock()

    def plan(self, key: str) -> list[dict]:
        # start-up (as above)
        from .baselines import plan_task

        with self._lock:  # one solve per task, however many workers ask for it at once
            if self.plans[key] is None:
                if self._site is None:
                    # start-up (as above)
                    from evalkit.envs.embedded.webapp.serve import SiteServer

                    self._site = SiteServer()
                self.plans[key] = plan_task(self.tasks[key], self._site, *self.size)
            return self.plans[key]

    def close(self) -> None:
        with self._lock:
            if self._site is not None:
                self._site.stop()
                self._site = None


def smart_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) of the smart-resized image of a page."""
    h, w = smart_resize(height, width)
    return w, h


def main(argv: list[str] | None = None) -> int:
    """Serve a `TaskPolicy` for one agent until interrupted, for an own-loop run started elsewhere."""
    p = argparse.ArgumentParser(
        prog="python -m evalkit.ownloop.fake",
        description="A scripted model that answers as an own-loop agent would and solves the web-app tasks "
        "from their definitions; then run: evalkit ownloop AGENT --endpoint URL --model NAME --out RUN",
    )
    p.add_argument("agent", choices=sorted(RENDERERS))
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default="fake", help="the model name it serves (default: fake)")
    p.add_argument("--tasks", help="task file (default: data/evalsets/webapp-v1.json)")
    p.add_argument("--width", type=int, help="the run's viewport (default: the agent's released one)")
    p.add_argument("--height", type=int)
    a = p.parse_args(argv)
    width, height = runner_for(a.agent).viewport
    try:
        policy = TaskPolicy(a.agent, a.width or width, a.height or height, a.tasks)
        with FakeEndpoint(policy, model=a.model, port=a.port) as fake:
            print(f"a fake {a.agent} at {fake.url} (model {a.model}); run: evalkit ownloop {a.agent} "
                  f"--endpoint {fake.url} --model {a.model} --out RUN", flush=True)  # fmt: skip
            threading.Event().wait()
    except EvalkitError as e:
        print(f"evalkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
