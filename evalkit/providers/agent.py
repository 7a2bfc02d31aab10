"""What every wire-API agent does the same way: `WireAgent`, the base of the three wire modules' agents.

It owns one episode's conversation and the model call around the wire:
- the history, a list of wire-format messages (`messages`): user turns, tool results and notes added to it,
  a message joined to the one before where the wire wants alternating roles, images withheld from a model
  that takes none, the image budget applied (the opening message spared), and for the record the image
  ledger (which frame each image block holds, which ones a prune dropped) and, with `keep_raw`, the last
  request and reply;
- each model call (`step`): the route (behind a router spec, the provider in use, chosen by the run's
  `ProviderHealth`), the retry policy, the requests themselves (`evalkit.providers.attempts`, within the
  episode's deadline, `clock`), the fallback after a 400 that refused a feature the request carried
  (`capabilities`), a switch to the next route when a provider fails, and the usage of failed requests
  folded into the turn.

A wire module's subclass supplies only its wire: how a user turn, tool results and a tool look on it, the
request (`params`), the I/O of one request (`_call`), what a reply makes (`_take`: the Turn, and what goes
back into the history), which 400 refuses what (`_refused`, `_words`), and the type names of its image and
text blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from evalkit.errors import EndpointError, ModelFailure
from evalkit.providers import capabilities, clock
from evalkit.providers import images as imgs
from evalkit.providers.attempts import FALLBACK, Policy, persist, request, settle
from evalkit.providers.capabilities import Caps
from evalkit.providers.common import exchange, notes_text, sdk
from evalkit.providers.health import ProviderHealth, Routes, provider_failure
from evalkit.types import AgentOptions, Attempt, Call, Image, ToolOutcome, ToolSpec, Turn


class WireAgent:
    """One episode's conversation with a model over one wire API (see the module doc)."""

    wire: ClassVar[str] = ""
    """The capability table's wire (`evalkit.providers.capabilities`)."""
    provider: str = ""
    """The spec's provider: the label's prefix, and who answered (but behind a router: `answered_by`)."""
    sdk_name: ClassVar[str] = ""
    """The SDK of the wire's client and errors, imported when it is first needed (`common.sdk`)."""
    image_type: ClassVar[str] = ""
    """The `type` of an image block in the history."""
    text_type: ClassVar[str] = "text"
    """The `type` of a text block, which a pruned image becomes."""
    joins: ClassVar[tuple[str, ...]] = ()
    """Roles whose consecutive messages are joined into one (an API or a chat template that wants the roles
    to alternate)."""
    streamed: ClassVar[dict] = {"stream": True}
    """What a streamed request adds to its body."""
    stream = True
    """Stream replies (the default); tests switch it off to exercise the plain JSON path."""

    @staticmethod
    def tool_to_wire(tool: ToolSpec) -> dict:
        raise NotImplementedError

    def __init__(
        self,
        client: Any,
        model: str,
        thinking: str | None,
        *,
        system: str,
        tools: list[ToolSpec],
        options: AgentOptions,
        provider: str | None = None,
        health: ProviderHealth | None = None,
        routes: list[str] | None = None,
    ):
        self.client = client
        self.provider = provider or self.provider
        self.model_id = model
        self.model = f"{self.provider}:{model}" + (f"@{thinking}" if thinking else "")
        self.thinking = thinking
        self.system = system
        self.tools = [self.tool_to_wire(t) for t in tools]
        self.options = options
        self.messages: list[dict] = []
        """The history, as the wire sends it."""
        self.info: dict = {}
        """What the record keeps of this agent's doing: fallbacks, provider switches, images withheld, …"""
        self.routes = Routes(
            routes or [model],
            health if health is not None else ProviderHealth(),
            lambda switch: self.info.setdefault("provider_switches", []).append(switch),
        )
        self.ledger = imgs.Ledger()
        self.keep_raw = False
        """Keep the last call's request and response in `last_raw` (`--save-raw`)."""
        self.last_raw: dict | None = None
        self._sent: dict | None = None
        self._opening: int | None = None
        self._turn = 0
        self._caps: Caps = capabilities.caps(self.wire, self.route)
        """What the model accepts, as the last request was built from it."""
        self.takes_images = self._caps.images
        """False for a model that accepts no image inputs (`evalkit.providers.capabilities`): its images are
        replaced by a line saying so, counted in `info["images_withheld"]`."""

    # ---- the wire's part ---------------------------------------------------------------------------------

    def params(self) -> dict:
        """The body of the next request (the stepper shows it as the request the agent would send)."""
        raise NotImplementedError

    def _declared(self) -> dict:
        """What every wire's request carries under the same names, where it has one: the tools declared and
        the temperature asked for."""
        p: dict[str, Any] = {"tools": self.tools} if self.tools else {}
        if self.options.temperature is not None:
            p["temperature"] = self.options.temperature
        return p

    def _call(self, body: dict) -> dict:
        """Send `body` (streamed or not, as `stream` says) and read the reply into the wire's JSON."""
        raise NotImplementedError

    def _user_message(self, text: str, images: Sequence[Image]) -> dict:
        """A user turn as the wire's message."""
        raise NotImplementedError

    def _result_messages(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[dict]:
        """Tool results as the wire's messages, in the order the calls were made."""
        raise NotImplementedError

    def _result_images(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[Image]:
        """The images of `pairs` in the order `_result_messages` holds them."""
        return [i for _, out in pairs for i in out.images]

    def _take(self, reply: dict) -> Turn:
        """The Turn a reply makes; what of it goes back to the model is added to the history."""
        raise NotImplementedError

    def _refused(self, exc: EndpointError, sent: dict) -> dict | None:
        """The change to what the model accepts that a 400 asks for, when it refused a feature `sent` carried
        (`evalkit.providers.thinking`); None otherwise."""
        return None

    def _words(self, caps: Caps) -> str:
        """What a request built from `caps` carries of the thinking level, in words."""
        return ""

    def _ready(self, policy: Policy, log: list[Attempt]) -> None:
        """Before each request (chat completions: find how `@off` is asked of the route)."""

    def _mended(self, exc: EndpointError | ModelFailure) -> bool:
        """Whether the refused request was changed so that asking once more may succeed."""
        return False

    # ---- the history -------------------------------------------------------------------------------------

    def user(self, text: str, images: Sequence[Image] = ()) -> None:
        """A user turn; the first is the opening message, which no image budget touches. An empty one sends
        nothing (every API refuses an empty message)."""
        text, images = self.withhold(text, images)
        message = self._user_message(text, images)
        if not message.get("content"):
            return
        self.ledger.add(message, images, self.is_image)
        self._append(message)
        if self._opening is None:
            self._opening = len(self.messages) - 1

    def results(self, pairs: list[tuple[Call, ToolOutcome]]) -> None:
        pairs = self.withhold_results(pairs)
        messages = self._result_messages(pairs)
        self.ledger.add(messages, self._result_images(pairs), self.is_image)
        for message in messages:
            self._append(message)

    def notes(self, text: str) -> None:
        self.user(notes_text(text))

    def _append(self, message: dict) -> None:
        last = self.messages[-1] if self.messages else None
        role = message.get("role")
        if last and role in self.joins and last.get("role") == role and isinstance(last.get("content"), list):
            last["content"].extend(message["content"])
        else:
            self.messages.append(message)

    def is_image(self, block: dict) -> bool:
        return block.get("type") == self.image_type

    def placeholder(self) -> dict:
        return {"type": self.text_type, "text": imgs.PLACEHOLDER}

    def prune_images(self, keep: int, window: int | None = None) -> None:
        imgs.prune(self.messages, keep, window, is_image=self.is_image, placeholder=self.placeholder,
                   opening=self._opening, ledger=self.ledger)  # fmt: skip

    def keep_newest_images(self, n: int) -> int:
        """Drop all but the newest `n` images after the opening message, whatever the budget; how many
        went."""
        return imgs.keep_newest(self.messages, n, is_image=self.is_image, placeholder=self.placeholder,
                                opening=self._opening, ledger=self.ledger)  # fmt: skip

    def withhold(self, text: str, images: Sequence[Image]) -> tuple[str, list[Image]]:
        """(text, images) as this model can take them: a model without image inputs gets a line instead."""
        if self.takes_images or not images:
            return text, list(images)
        self.info["images_withheld"] = self.info.get("images_withheld", 0) + len(images)
        line = f"[{len(images)} image(s) not shown: this model takes no image input]"
        return (f"{text}\n{line}" if text else line), []

    def withhold_results(self, pairs: list[tuple[Call, ToolOutcome]]) -> list[tuple[Call, ToolOutcome]]:
        """Tool results as this model can take them (`withhold`)."""
        if self.takes_images:
            return pairs
        kept = []
        for call, out in pairs:
            text, images = self.withhold(out.text, out.images)
            kept.append((call, dataclasses.replace(out, text=text, images=images)))
        return kept

    @property
    def dropped_images(self) -> list[str]:
        """Frame paths of the images an image budget (or a refused prompt) took out, oldest first."""
        return self.ledger.dropped

    # ---- the model call ----------------------------------------------------------------------------------

    @property
    def route(self) -> str:
        """The model id requests name: behind a router spec (`org/m:a|b`), the provider route in use (the
        first, before the first step chose one)."""
        return self.routes.current or self.routes.routes[0]

    @property
    def answered_by(self) -> str:
        """The provider of the route in use: behind the router (`org/m:a`), `a`; else the spec's provider."""
        route = self.route
        return route.rpartition(":")[2] if self.provider == "hf" and ":" in route else self.provider

    def step(self) -> Turn:
        self._turn += 1
        self.routes.begin(self._turn)
        if self._turn == 1:  # what earlier episodes learned about the route, in the record from turn 0
            capabilities.applied(self.wire, self.route, self.info)
        log: list[Attempt] = []
        turn = self._ask(log)
        return settle(turn, log, self.route, self.answered_by)

    def _ask(self, log: list[Attempt]) -> Turn:
        """One reply, as a Turn kept in the history; its failed requests go to `log`."""
        reply = self._reply(log)
        if self.keep_raw:
            self.last_raw = exchange(self._sent, reply, self.is_image, self.ledger.frame)
        return self._take(reply)

    def _reply(self, log: list[Attempt]) -> dict:
        """The reply of the first request that gets one, through the policy's retries, the fallbacks after a
        refused feature or a refused prompt, and the routes behind a router."""
        while True:
            # With another route behind this one, a failure moves on at once instead of retrying here.
            policy = FALLBACK if self.routes.fallback_left else persist(self.options.max_retries)
            try:
                self._ready(policy, log)
                url, seconds = str(self.client.base_url), clock.request_seconds(self.options)
                reply = request(self._send, sdk(self.sdk_name), route=self.route, url=url, policy=policy,
                                log=log, timeout=seconds)  # fmt: skip
            except (EndpointError, ModelFailure) as exc:
                if not self._recovered(exc):
                    raise
                continue
            self.routes.succeeded()
            return reply

    def _send(self) -> dict:
        self._caps = capabilities.caps(self.wire, self.route)  # what an earlier episode learned, at once
        params = self.params()
        self._sent = {**self.streamed, **params} if self.stream else params
        return self._call(self._sent)

    def _recovered(self, exc: EndpointError | ModelFailure) -> bool:
        """Whether the call goes on after `exc`: without a feature the model refused (learned for its later
        requests), mended (`_mended`), or on the next route when the failure is the provider's."""
        if isinstance(exc, EndpointError) and self._fell_back(exc):
            return True
        if self._mended(exc):
            return True
        last = exc.attempts[-1]
        if isinstance(exc, ModelFailure) or not provider_failure(last, exc.__cause__):
            return False
        return self.routes.failed(last, self._turn)

    def _fell_back(self, exc: EndpointError) -> bool:
        change = self._refused(exc, self._sent or {})
        if change and self._caps.but(**change) == self._caps:
            # The refused request was built so already (what it carried comes from elsewhere: chat's @off
            # switch): asked again, it would be refused again, without end.
            return False
        return capabilities.fall_back(
            exc, self.wire, self.route, self._caps, change, self._words, self.info, self._turn
        )
