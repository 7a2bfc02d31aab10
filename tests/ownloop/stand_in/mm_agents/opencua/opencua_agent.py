"""A stand-in for OSWorld's `mm_agents.opencua.opencua_agent.OpenCUAAgent`, written for these tests from its
documented interface and behaviour (it is not their code): the constructor's settings, `predict(instruction,
obs) -> (response, actions, cot)` with up to 5 tries (temperature ≥ 0.2 after the first), `# Step N:` action
history with the last 3 screenshots, the `## Action` / code-block reply, qwen25 coordinate projection, and
`computer.terminate` as DONE / FAIL. It lets the harness's glue run on every test run; the released class
is exercised when OSWorld is on OWNLOOP_PATH."""

from __future__ import annotations

import base64
import re

from evalkit.ownloop.coords import smart_resize

SYSTEM = "You are a GUI agent. You are given a task and a screenshot of the screen. (stand-in V1 L2 prompt)"


class OpenCUAAgent:
    def __init__(
        self,
        model,
        history_type,
        max_steps,
        max_image_history_length=3,
        platform="ubuntu",
        max_tokens=1500,
        top_p=0.9,
        temperature=0,
        action_space="pyautogui",
        observation_type="screenshot",
        cot_level="l2",
        screen_size=(1920, 1080),
        coordinate_type="relative",
        use_old_sys_prompt=False,
        **kw,
    ):
        assert coordinate_type == "qwen25" and use_old_sys_prompt and cot_level == "l2"
        self.model, self.max_steps, self.max_images = model, max_steps, max_image_history_length
        self.max_tokens, self.top_p, self.temperature, self.screen_size = (
            max_tokens,
            top_p,
            temperature,
            screen_size,
        )
        self.actions, self.observations, self.cots = [], [], []

    def _project(self, code):
        w, h = self.screen_size
        rh, rw = smart_resize(h, w, min_pixels=3136, max_pixels=12845056)

        def one(m):
            x, y = float(m.group(2)), float(m.group(3))
            return f"{m.group(1)}({int(x / rw * w)}, {int(y / rh * h)}"

        return re.sub(
            r"(pyautogui\.(?:click|moveTo|doubleClick|rightClick|dragTo))\((?:x=)?([\d.]+),\s*(?:y=)?([\d.]+)",
            one,
            code,
        )

    def _parse(self, text):
        cot = {}
        for key in ("thought", "action"):
            m = re.search(rf"^##\s*{key.title()}\s*:?[\n\r]+(.*?)(?=^##|\Z)", text, re.S | re.M)
            if m:
                cot[key] = m.group(1).strip()
        blocks = re.findall(r"```(?:code|python)?\s*(.*?)\s*```", text, re.S)
        if not blocks or "action" not in cot:
            return "<Error>: no code", ["FAIL"], cot
        code = cot["original_code"] = blocks[-1].strip()
        if "computer.terminate" in code.lower():
            return code, ["FAIL" if "fail" in code.lower() else "DONE"], cot
        return cot["action"], [self._project(code)], cot

    def predict(self, instruction, obs, **kw):
        def image(png):
            return {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()},
            }

        messages = [{"role": "system", "content": SYSTEM}]
        for i, cot in enumerate(self.cots):
            if i > len(self.actions) - self.max_images:
                messages.append({"role": "user", "content": [image(self.observations[i]["screenshot"])]})
            messages.append(
                {"role": "assistant", "content": f"# Step {i + 1}:\n## Action:\n{cot.get('action')}\n"}
            )
        messages.append(
            {
                "role": "user",
                "content": [
                    image(obs["screenshot"]),
                    {"type": "text", "text": f"# Task Instruction:\n{instruction}"},
                ],
            }
        )
        for attempt in range(5):
            try:
                response = self.call_llm(
                    {
                        "model": self.model,
                        "messages": messages,
                        "max_tokens": self.max_tokens,
                        "top_p": self.top_p,
                        "temperature": self.temperature if attempt == 0 else max(0.2, self.temperature),
                    },
                    self.model,
                )
                if not response:
                    raise ValueError("no response")
                low, actions, cot = self._parse(response)
                if "<Error>" in low:
                    raise ValueError(low)
                break
            except Exception as e:
                if attempt == 4:
                    return str(e), ["FAIL"], {}
        self.observations.append(obs)
        self.actions.append(low)
        self.cots.append(cot)
        if len(self.actions) >= self.max_steps and "computer.terminate" not in actions[0].lower():
            actions = ["FAIL"]
        return response, actions, cot

    def call_llm(self, payload, model):
        raise NotImplementedError("the harness swaps this")
