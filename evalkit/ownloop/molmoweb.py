"""MolmoWeb-4B / -8B as released: AllenAI's MultimodalAgent, SimpleEnv (with its action executor) and
Episode from `--path` (a clone of allenai/molmoweb), with their benchmark settings — the "molmo_web_think"
prompts, the last 10 steps as text, no past images, temperature 0.7, top_p 0.8, 1024 new tokens, a
1280×720 viewport.

Only the predictor is swapped: their HF predictor's single user turn (prompt text, then the screenshot) goes
to an OpenAI-compatible endpoint. Serve the model so that attention over image tokens stays causal, as their
HF predictor runs it — vLLM's Molmo2 default is a bidirectional prefix LM:
`vllm serve allenai/MolmoWeb-8B --trust-remote-code --hf-overrides '{"is_mm_prefix_lm": false}'`.
The answer is read as their benchmark evaluation reads it: the last "[ANSWER] …" message, else the last
message that is not "[EXIT]", else the last thought.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

from evalkit.errors import EndpointError

from .endpoint import Endpoint
from .task import Released, TaskRun
from .uitars import png_url

VIEWPORT = (1280, 720)


def _png(array: Any) -> bytes:
    # start-up: numpy and Pillow only for a screen
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(array).astype("uint8")).convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


class EndpointPredictor:
    """Their predictor's request, to the endpoint. An exception here is the Episode's prediction error,
    which ends the episode: the deadline, or the endpoint failing after the harness's retries."""

    def __init__(
        self, ctx: TaskRun, endpoint: Endpoint, temperature: float, top_p: float, max_tokens: int = 1024
    ):
        self.ctx, self.endpoint = ctx, endpoint
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.failed: str | None = None
        self.timed_out = False
        self.replies: list[tuple[float, Any]] = []

    def predict(self, prompt: str, image_np: Any, past_actions: Any = None, **kw: Any) -> str | None:
        if self.ctx.out_of_time():
            self.timed_out = True
            raise TimeoutError("task timeout")
        content: list[dict] = [{"type": "text", "text": prompt}]
        for im in image_np if isinstance(image_np, list) else [image_np]:
            content.append({"type": "image_url", "image_url": {"url": png_url(_png(im))}})
        t = time.monotonic()
        try:
            with self.ctx.timed("model"):
                reply = self.endpoint.chat(
                    [{"role": "user", "content": content}],
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                    top_p=self.top_p,
                )
        except EndpointError as e:
            self.failed = str(e)
            raise
        self.replies.append((time.monotonic() - t, reply.usage))
        return reply.text or None


def answer_of(interactions: list[Any]) -> str | None:
    """The last "[ANSWER] …" message, else the last message that is not [EXIT], else the last thought."""
    last_answer = last_msg = last_thought = None
    for it in interactions:
        if not it.action:
            continue
        msg = getattr(it.action["action_output"].action, "msg", None)
        if msg is not None:
            if "[ANSWER]" in msg:
                last_answer = msg.split("[ANSWER]", 1)[1].strip()
            elif "[EXIT]" not in msg:
                last_msg = msg
        if it.action.get("thought"):
            last_thought = it.action["thought"]
    return last_answer if last_answer is not None else last_msg if last_msg is not None else last_thought


def _env_class(ctx: TaskRun) -> type:
    """Their local-Chromium SimpleEnv on this task's session: our Chromium and context, the session flags
    first."""
    # the released agent's code, on the path given at run time (evalkit[ownloop])
    from utils.envs.browser_env import SimpleEnv, _start_playwright

    from evalkit.browser import context_options, launch_options

    s = ctx.settings
    opts = ctx.session_options(s.width, s.height)

    class Env(SimpleEnv):
        def _launch(self) -> None:
            self.playwright = _start_playwright()
            self.browser = self.playwright.chromium.launch(**launch_options())
            self.context = self.browser.new_context(**context_options(opts))
            self.context.grant_permissions(list(opts.permissions))
            self.context.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith(ctx.base)
                    else route.abort("blockedbyclient")
                ),
            )
            self.page = self.context.new_page()
            cdp = self.context.new_cdp_session(self.page)
            cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": True})

        def _navigate_to_start(self, url: str, goal: str) -> str:
            r = self.context.request.get(ctx.flags_url, headers=ctx.site.admin_headers)
            if r.status != 200:
                raise RuntimeError(f"{ctx.flags_url} answered {r.status}")
            self.page.goto(url, wait_until="domcontentloaded", timeout=60000)
            time.sleep(s.settle_s)
            return goal

        def _get_obs(self) -> dict:
            with ctx.timed("screenshot"):
                return super()._get_obs()

    return Env


class MolmoWeb(Released):
    """`evalkit ownloop molmoweb`."""

    NAME, viewport, coordinates, prompt_version = "molmoweb", VIEWPORT, "percent", "molmoweb:molmo_web_think"

    def load(self) -> None:
        # the released agent's code, on the path given at run time (evalkit[ownloop])
        from agent.multimodal_agent import MultimodalAgent  # noqa: F401
        from utils.envs.browser_env import SimpleEnv  # noqa: F401
        from utils.eval_utils.episode import Episode  # noqa: F401

    def run(self, ctx: TaskRun) -> None:
        # the released agent's code, on the path given at run time (evalkit[ownloop])
        from agent.actions import SendMsgToUser
        from agent.multimodal_agent import MultimodalAgent
        from utils.eval_utils.episode import Episode

        s, res = ctx.settings, ctx.result
        temperature = 0.7 if s.temperature is None else s.temperature
        top_p = 0.8 if s.top_p is None else s.top_p
        env = _env_class(ctx)(
            start_url=ctx.start_url, goal=ctx.prompt, viewport_width=s.width, viewport_height=s.height
        )
        agent = MultimodalAgent(
            endpoint_or_checkpoint=s.endpoint,
            inference_mode="fastapi",
            system_message="molmo_web_think",
            max_past_steps=s.max_past_steps,
            max_past_images=0,
            sampling_temperature=temperature,
            sampling_top_p=top_p,
        )
        endpoint = Endpoint(s.endpoint, s.model, timeout=s.request_timeout, wait=s.retry_wait)
        agent.predictor = predictor = EndpointPredictor(ctx, endpoint, temperature, top_p)
        episode = Episode(env=env, agent=agent, eps_name=ctx.raw_task["task_id"])
        t0 = time.monotonic()
        try:
            inters, _ = episode.run_episode(max_steps=s.max_steps)
        except Exception as e:  # their episode raising (not recording) is still the session's outcome
            inters = episode.interactions
            res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        ctx.timing["action"] += max(
            0.0, time.monotonic() - t0 - ctx.timing["model"] - ctx.timing["screenshot"]
        )
        try:
            self._collect(ctx, inters, predictor, SendMsgToUser)
            if env.context is not None:
                for key in ("record", "log"):
                    r = env.context.request.get(f"{ctx.base}/_admin/{key}", headers=ctx.site.admin_headers)
                    res[key] = (r.json() or {}).get("entries", [])
        except Exception as e:  # without the record the session cannot be graded
            ctx.backend_failed(e)
        finally:
            try:
                env.close()
            except Exception as e:  # a browser already gone has nothing left to close
                res["error"] = res["error"] or f"close: {type(e).__name__}"
        if predictor.failed:
            raise EndpointError(predictor.failed)

    @staticmethod
    def _collect(ctx: TaskRun, inters: list[Any], predictor: EndpointPredictor, send_msg: type) -> None:
        res = ctx.result
        replies = list(predictor.replies)
        for i, it in enumerate(inters, 1):
            obs = it.state.get("obs") or {}
            if obs.get("screenshot") is not None:
                ctx.shot(i, _png(obs["screenshot"]))
            a = it.action or {}
            thought = a.get("thought") or ""
            res["parse_fails"] += thought.startswith("Could not parse predicted action")
            nxt = (it.next_state or {}).get("obs") or {}
            res["action_errors"] += bool(nxt.get("last_action_error"))
            model_s, usage = replies[i - 1] if i - 1 < len(replies) else (0.0, None)
            action = a.get("action")
            ctx.step(
                i,
                raw=it.raw_output,
                actions=[{"type": action.get("name"), **action}] if action else [],
                model_s=model_s,
                usage=usage,
                url=obs.get("url"),
                action_str=a.get("action_str"),
                thought=thought,
                error=it.error,
                action_error=nxt.get("last_action_error") or None,
                errors=[nxt.get("last_action_error") or ""] if action else None,
            )
        if inters and ((inters[-1].next_state or {}).get("obs") or {}).get("screenshot") is not None:
            ctx.shot(len(inters) + 1, _png(inters[-1].next_state["obs"]["screenshot"]))
        res["rounds"] = len(inters)
        res["answer"] = answer_of(inters)
        last = inters[-1] if inters else None
        if last is None:
            res["status"] = "no_steps"
        elif last.error:
            res["status"] = (
                "endpoint_error" if predictor.failed else "timeout" if predictor.timed_out else "error"
            )
            res["error"] = res["error"] or json.dumps(last.error)[:300]
        elif (
            last.action
            and isinstance(last.action["action_output"].action, send_msg)
            and (last.action["action_output"].action.msg or "").startswith("[EXIT]")
        ):
            res["status"] = "exit"
        else:
            res["status"] = "max_steps"
