"""What evalkit sees of an environment, before any episode: `evalkit probe URL` prints it, and `run_batch`
uses it as its preflight (the kind of env, its tools, how many sessions its server accepts at once).

One session is opened and reset on a task; while it is held, more sessions are opened (each asked only for
its state) until the server refuses one or enough are open, so the count is what the server accepts now.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from evalkit.envs.sessions import close_quietly, env_name, open_session
from evalkit.errors import EnvCapacityError, EnvError
from evalkit.run import wording
from evalkit.types import ToolSpec

KINDS = {
    "mcp": "MCP env: its tools are listed and called over the session",
    "typed": "typed-action env: driven through one tool, step, whose parameters are its action schema",
    "session": "a Python EnvSession",
}


@dataclass
class EnvReport:
    """What one probe found."""

    name: str
    url: str | None
    kind: str
    """`mcp`, `typed`, or `session` (an EnvSession given as a Python object)."""
    tools: list[ToolSpec]
    finish: str | None
    meta: dict
    """The reset observation's metadata."""
    observation: dict
    """The reset observation's own fields."""
    system: str
    opening: wording.Opening
    reset: dict
    capacity: int | None = None
    """Sessions the server accepted at once (counting the probe's own); None when not measured."""
    tried: int = 0
    """Sessions the probe tried at most: a capacity equal to it means "at least that many"."""
    pictures: dict[str, bool] = field(default_factory=dict)
    modes: tuple[str, ...] | None = None
    seconds: float = 0.0

    def capacity_text(self) -> str:
        if self.capacity is None:
            return "not measured"
        if self.capacity >= self.tried:
            return f"at least {self.capacity} at once"
        return f"{self.capacity} at a time"

    def summary(self) -> str:
        """One line: which kind of env this is and how it will be driven."""
        where = f" at {self.url}" if self.url else ""
        if self.kind == "typed":
            params = (
                ", ".join((self.tools[0].parameters.get("properties") or {}).keys()) if self.tools else ""
            )
            how = f"typed-action env, driven through one tool step({params})"
        else:
            how = f"{'MCP env' if self.kind == 'mcp' else 'env'}, {len(self.tools)} tool(s)"
            how += f", finishing tool {self.finish}" if self.finish else ", no finishing tool"
        sessions = f"; sessions: {self.capacity_text()}" if self.capacity is not None else ""
        return f"{self.name}{where}: {how}{sessions}"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "url": self.url,
            "kind": self.kind,
            "tools": [asdict(t) for t in self.tools],
            "finishing_tool": self.finish,
            "capacity": self.capacity,
            "capacity_tried": self.tried,
            "pictures": self.pictures,
            "modes": list(self.modes) if self.modes else None,
            "reset": self.reset,
            "reset_metadata_keys": sorted(self.meta),
            "observation_fields": sorted(self.observation),
            "system_prompt": self.system,
            "opening_message": self.opening.text,
            "opening_images": [repr(i) for i in self.opening.images],
            "seconds": round(self.seconds, 3),
        }

    def describe(self) -> str:
        """The full report, as `evalkit probe` prints it."""
        finish = wording.finishing_tool(self.tools)
        lines = [
            f"name:       {self.name}" + (f"  ({self.url})" if self.url else ""),
            f"kind:       {KINDS.get(self.kind, self.kind)}",
            f"sessions:   {self.capacity_text()}",
            f"modes:      {', '.join(self.modes) if self.modes else 'none declared'}",
            "pictures:   "
            + (", ".join(f"{k} {'yes' if v else 'no'}" for k, v in self.pictures.items()) or "-"),
            f"reset with: {json.dumps(self.reset, default=str)}",
            f"metadata:   {', '.join(sorted(self.meta)) or '(none)'}",
            f"observed:   {', '.join(sorted(self.observation)) or '(no fields)'}",
            f"tools ({len(self.tools)}):",
        ]
        for t in self.tools:
            mark = "   [finishing tool]" if finish is not None and t.name == finish.name else ""
            lines.append(f"  {t.name}: {_first_line(t.description)}{mark}")
            lines.append(f"      {json.dumps(t.parameters, separators=(',', ':'), default=str)}")
        if finish is None:
            lines.append(
                "finishing:  none: the model ends by answering in text (or the env ends the episode)"
            )
        elif wording.can_auto_submit(finish):
            lines.append(f"finishing:  {finish.name}; called for the model if it never does")
        else:
            lines.append(
                f"finishing:  {finish.name}; it needs arguments, so it is never called for the model"
            )
        shot = self.meta.get("screenshot_tool")
        if shot and any(t.name == shot for t in self.tools):
            lines.append(
                f"screen:     {shot}: the loop adds a screenshot to the opening message (not shown "
                "below) and after each turn without one"
            )
        lines.append(
            "system prompt"
            + ("" if self.meta.get("instructions") else " (generic: the env gives none)")
            + ":"
        )
        lines += _quoted(self.system)
        n = len(self.opening.images)
        lines.append(f"opening message ({n} image{'s' if n != 1 else ''}):")
        lines += _quoted(self.opening.text)
        lines.append(f"probed in {self.seconds:.2f} s")
        return "\n".join(lines)


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no description)"


def _quoted(text: str, limit: int = 60) -> list[str]:
    lines = text.splitlines() or [""]
    out = [f"  | {line}" for line in lines[:limit]]
    if len(lines) > limit:
        out.append(f"  | … ({len(lines) - limit} more lines)")
    return out


def count_sessions(url: str, most: int, timeout: float = 10.0) -> int:
    """How many more sessions the server at `url` opens now, up to `most` (all are closed again)."""
    from evalkit.envs.wire import Connection

    held: list[Connection] = []
    try:
        for _ in range(most):
            try:
                conn = Connection(url, timeout=timeout)
            except EnvError:
                break
            try:
                conn.request("state")
            except EnvCapacityError:
                break
            except EnvError:
                pass  # the session exists; its env just cannot say its state before a reset
            held.append(conn)
    finally:
        for conn in held:
            conn.close()
    return len(held)


def probe(
    env: Any,
    reset: dict | None = None,
    *,
    sessions: int = 8,
    pictures: bool = True,
    max_turns: int | None = None,
    wait: float = 60.0,
    cancel: threading.Event | None = None,
) -> EnvReport:
    """Open a session on `env`, reset it with `reset`, and report what a model would be given (`max_turns`
    None: the env's own budget, as an episode has). With `sessions` > 1 the server's capacity is measured up
    to that many sessions."""
    from evalkit.envs import MODES
    from evalkit.envs.openenv import http_url

    t0 = time.monotonic()
    name = env_name(env)
    url = env if isinstance(env, str) else getattr(env, "base_url", None)
    reset = {k: v for k, v in (reset or {}).items() if v is not None}
    session, meta, _ = open_session(env, reset, cancel, wait=wait)
    try:
        try:
            tools = session.tools()
        except EnvError as e:
            raise EnvError(f"it did not list its tools: {e}") from e
        fields = dict(getattr(session, "observation", None) or {})
        finish = wording.finishing_tool(tools)
        report = EnvReport(
            name=name,
            url=http_url(url) if url else None,
            kind=getattr(session, "kind", "session"),
            tools=tools,
            finish=finish.name if finish else None,
            meta=meta,
            observation=fields,
            system=wording.system_prompt(meta, tools),
            opening=wording.opening(meta, fields, wording.turn_budget(max_turns, meta)),
            reset=reset,
        )
        declared = meta.get("modes")
        report.modes = MODES.get(name) or (
            tuple(str(m) for m in declared) if isinstance(declared, list) and declared else None
        )
        if pictures:
            report.pictures = _pictures(session, meta)
        if url and sessions > 1:
            report.capacity = 1 + count_sessions(url, sessions - 1)
            report.tried = sessions
    finally:
        close_quietly(session)
    report.seconds = time.monotonic() - t0
    return report


def _pictures(session: Any, meta: dict) -> dict[str, bool]:
    """Which picture sources answered for the probe's episode."""

    def answers(what: str) -> bool:
        fn = getattr(session, what, None)
        try:
            return callable(fn) and fn() is not None
        except EnvError:
            return False

    return {
        "render": answers("render"),
        "target": answers("target"),
        "document": answers("document"),
        "reset images": bool(wording.opening(meta, getattr(session, "observation", None) or {}, 1).images),
    }
