"""UI-TARS-1.5-7B as released: the `ui-tars` package's prompt (`COMPUTER_USE_DOUBAO`) and action parser
(`parse_action_to_structure_output`) in OSWorld's UI-TARS-1.5 loop.

The loop: system "You are a helpful assistant.", the prompt, then the full response history with only the
last 5 screenshots; temperature 0, top_p 0.9, max_tokens 500, frequency penalty 0 (OSWorld sends 1: an
option). A reply the parser rejects is resampled at temperature 1, three calls in all, then the episode ends
`parse_error`. Coordinates are in the Qwen2.5-VL smart-resize space of the screenshot and map back to page
pixels at the box centre; the pyautogui calls OSWorld would run become Playwright input here.
"""

from __future__ import annotations

import base64
import io
import time
from typing import Any

from evalkit.errors import ConfigError
from evalkit.types import Usage

from .baselines import settle
from .coords import MAX_PIXELS, MIN_PIXELS, box_centre, fit_pixels
from .endpoint import Endpoint, RequestRejected
from .keys import pw_combo, pw_key
from .settings import Settings
from .task import TaskRun

SYSTEM = "You are a helpful assistant."
SCROLL_NOTCH, SCROLL_NOTCHES = 100, 5


def png_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


class UITarsAgent:
    """OSWorld's UITARSAgent.predict (qwen25vl, normal mode) with the `ui-tars` prompt and parser."""

    def __init__(
        self,
        endpoint: Endpoint,
        task: str,
        history_n: int = 5,
        max_tokens: int = 500,
        temperature: float = 0.0,
        top_p: float = 0.9,
        frequency_penalty: float = 0.0,
        language: str = "English",
    ):
        # the released agent's package (evalkit[ownloop]), imported where it is used
        from ui_tars.prompt import COMPUTER_USE_DOUBAO

        self.endpoint = endpoint
        self.prompt = COMPUTER_USE_DOUBAO.format(language=language, instruction=task)
        self.history_n, self.max_tokens = history_n, max_tokens
        self.temperature, self.top_p, self.frequency_penalty = temperature, top_p, frequency_penalty
        self.images: list[tuple[bytes, int, int]] = []
        self.responses: list[str] = []

    @staticmethod
    def prepare(png: bytes) -> tuple[bytes, int, int]:
        """The agent's own resize into [MIN_PIXELS, MAX_PIXELS], as RGB PNG → (png, height, width)."""
        # start-up: Pillow only for a screen
        from PIL import Image

        im = Image.open(io.BytesIO(png))
        size = fit_pixels(im.width, im.height)
        if size != im.size:
            im = im.resize(size)
        if im.mode != "RGB":
            im = im.convert("RGB")
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue(), im.height, im.width

    def messages(self, images: list[tuple[bytes, int, int]]) -> list[dict]:
        # the released agent's package (as above)
        from ui_tars.action_parser import add_box_token

        msgs: list[dict] = [
            {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": [{"type": "text", "text": self.prompt}]},
        ]
        n = 0
        for i, resp in enumerate(self.responses):
            if i + self.history_n > len(self.responses):  # only the newest history_n screenshots go along
                msgs.append(
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": png_url(images[n][0])}}],
                    }
                )
                n += 1
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": add_box_token(resp)}]})
        msgs.append(
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png_url(images[n][0])}}]}
        )
        return msgs

    def predict(self, png: bytes) -> tuple[str | None, list[dict] | None, list[dict], Any]:
        """→ (reply, parsed actions, failed attempts, usage); reply and actions are None after three replies
        the parser rejected."""
        # the released agent's package (as above)
        from ui_tars.action_parser import parse_action_to_structure_output

        # A screenshot is resized and re-encoded once, when it arrives, not at each later step it rides along.
        self.images = (self.images + [self.prepare(png)])[-self.history_n :]
        images = self.images
        msgs = self.messages(images)
        _, h, w = images[-1]
        temperature, fails, usage = self.temperature, [], Usage()
        for _ in range(3):
            reply = self.endpoint.chat(
                msgs,
                max_tokens=self.max_tokens,
                temperature=temperature,
                top_p=self.top_p,
                frequency_penalty=self.frequency_penalty,
            )
            usage = usage + reply.usage
            try:
                parsed = parse_action_to_structure_output(
                    reply.text, 1000, h, w, "qwen25vl", MAX_PIXELS, MIN_PIXELS
                )
            except Exception as e:  # the released parser raises anything on a reply it cannot read
                fails.append({"raw": reply.text, "parse_error": f"{type(e).__name__}: {str(e)[:200]}"})
                temperature = 1.0
                continue
            self.responses.append(reply.text)
            return reply.text, parsed, fails, usage
        return None, None, fails, usage


class UITars:
    """`evalkit ownloop uitars`."""

    viewport = (1280, 800)
    needs_endpoint = True
    coordinates = "qwen25vl-smart-resize"
    prompt_version = "ui-tars-0.5.1:COMPUTER_USE_DOUBAO"

    def check(self, settings: Settings) -> None:
        try:
            import ui_tars.action_parser  # noqa: F401
            import ui_tars.prompt  # noqa: F401
        except ImportError:
            raise ConfigError(
                "uitars needs the ui-tars package: pip install ui-tars==0.5.1 "
                "(or put its --target dir on --path)"
            ) from None

    def run(self, ctx: TaskRun) -> None:
        s = ctx.settings
        endpoint = Endpoint(s.endpoint, s.model, timeout=s.request_timeout, wait=s.retry_wait)
        agent = UITarsAgent(endpoint, ctx.prompt, frequency_penalty=s.frequency_penalty)
        session = ctx.open_browser(s.width, s.height)
        res = ctx.result
        pointer = [s.width / 2, s.height / 2]
        try:
            for i in range(1, s.max_steps + 1):
                if ctx.out_of_time():
                    res["status"] = "timeout"
                    break
                png = ctx.screenshot(session, i)
                url = session.url
                t = time.monotonic()
                with ctx.timed("model"):
                    try:
                        text, parsed, fails, usage = agent.predict(png)
                    except RequestRejected as e:
                        res["status"], res["error"] = "error", str(e)
                        ctx.step(i, raw=None, url=url, model_s=time.monotonic() - t, error=str(e))
                        break
                model_s = time.monotonic() - t
                res["rounds"] = i
                res["parse_fails"] += len(fails)
                if parsed is None:
                    ctx.step(i, raw=None, url=url, fails=fails, model_s=model_s, usage=usage)
                    res["status"] = "parse_error"
                    break
                t = time.monotonic()
                stop, notes = False, []
                for act in parsed:
                    with ctx.timed("action"):
                        try:
                            stop, answer, note = execute(session, act, s.width, s.height, s.wait_s, pointer)
                        except Exception as e:  # Playwright refusing the input is the model's mistake
                            stop, answer, note = False, None, f"{type(e).__name__}: {str(e)[:200]}"
                    res["action_errors"] += bool(note) and note != "call_user"
                    notes.append(note)
                    if stop:
                        res["answer"] = answer
                        res["status"] = "call_user" if note == "call_user" else "finished"
                        break
                actions = [{"type": a.get("action_type"), **(a.get("action_inputs") or {})} for a in parsed]
                ctx.step(
                    i,
                    raw=text,
                    actions=actions,
                    url=url,
                    errors=notes,
                    fails=fails,
                    model_s=model_s,
                    env_s=time.monotonic() - t,
                    usage=usage,
                )
                if stop:
                    break
                with ctx.timed("action"):
                    settle(session)
                    time.sleep(s.settle_s)
            else:
                res["status"] = "max_steps"
            ctx.screenshot(session, res["rounds"] + 1)
        finally:
            ctx.end(session)


def execute(
    session: Any, act: dict, width: int, height: int, wait_s: float, pointer: list[float]
) -> tuple[bool, str | None, str]:
    """One parsed action as Playwright input → (stop, answer, note); `pointer` tracks the mouse."""
    kind, a = act.get("action_type"), act.get("action_inputs") or {}
    sync = session.sync
    if kind == "finished":
        return True, a.get("content", ""), ""
    if kind == "call_user":
        return True, None, "call_user"
    if kind in ("click", "left_single", "left_double", "right_single", "hover"):
        if not a.get("start_box"):
            return False, None, "no start_box"
        x, y = box_centre(a["start_box"], width, height)
        pointer[:] = [x, y]
        if kind == "left_double":
            sync.click(x, y, clicks=2)
        elif kind == "right_single":
            sync.click(x, y, button="right")
        elif kind == "hover":
            sync.move(x, y)
        else:
            sync.click(x, y)
    elif kind in ("drag", "select"):
        if not (a.get("start_box") and a.get("end_box")):
            return False, None, "drag without both boxes"
        (sx, sy), (ex, ey) = (
            box_centre(a["start_box"], width, height),
            box_centre(a["end_box"], width, height),
        )
        sync.drag(sx, sy, ex, ey, steps=20)  # pyautogui.dragTo(duration=1.0)
        pointer[:] = [ex, ey]
    elif kind == "hotkey":
        keys = (a.get("key") or a.get("hotkey") or "").split()
        if keys:
            sync.key_press(pw_combo(keys))
    elif kind in ("press", "keydown", "keyup", "release"):
        key = pw_key(a.get("key") or a.get("press") or "")
        if key:
            if kind == "press":
                sync.key_press(key)
            elif kind == "keydown":
                sync.key_down(key)
            else:
                sync.key_up(key)
    elif kind == "type":
        content = a.get("content", "")
        enter = content.endswith("\n") or content.endswith("\\n")
        text = content.rstrip("\\n").rstrip("\n") if enter else content
        if text:
            sync.type_text(text)
        if enter:
            sync.key_press("Enter")
    elif kind == "scroll":
        direction = (a.get("direction") or "").lower()
        if a.get("start_box"):
            pointer[:] = list(box_centre(a["start_box"], width, height))
        step = SCROLL_NOTCH * SCROLL_NOTCHES
        dx = -step if "left" in direction else step if "right" in direction else 0
        dy = -step if "up" in direction else step if "down" in direction else 0
        sync.scroll(pointer[0], pointer[1], dx, dy)
    elif kind == "wait":
        time.sleep(wait_s)
    else:
        return False, None, f"unrecognized action {kind}"
    return False, None, ""
