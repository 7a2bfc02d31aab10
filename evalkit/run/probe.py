"""What evalkit sees of an environment, before any episode: `evalkit probe URL` prints it, and `run_batch`
runs the same preflight (the kind of env, its tools, how many sessions its server accepts at once).

One session is opened and reset on a task; while it is held, more sessions are opened (each asked only for
its state) until the server refuses one or enough are open, so the count is what the server accepts now
(`evalkit.envs.client.preflight`, which is what a batch runs too).
With `step`, the probe also takes one step in its session — one the user gives, else one it can fill in
(`example_step`) — and shows its result as a model would get it after its first turn: the opening message
and that result are built as an episode builds them (`evalkit.run.wording`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from evalkit.envs.client import actions, observation, tasks
from evalkit.envs.client.preflight import KINDS, Preflight, preflight
from evalkit.envs.client.resolved import ResolvedEnv, resolve, with_records
from evalkit.errors import ConfigError, EnvError
from evalkit.run import rules, wording
from evalkit.types import ToolOutcome, ToolSpec


@dataclass
class EnvReport:
    """What one probe found: its preflight (`found`), and what a model would be given and not given."""

    found: Preflight
    system: str
    opening: wording.Opening
    hidden: dict[str, str] = field(default_factory=dict)
    """What the reset holds that the model is not shown, key → why (`hidden_from_model`)."""
    pictures: dict[str, bool] = field(default_factory=dict)
    splits: list[dict] | None = None
    """The env's own tasks by split (`{"name", "type", "num_tasks"}`), where it has a Task API."""
    step: tuple[str, dict] | None = None
    """The step the probe took: (tool, arguments); None when it took none."""
    result: ToolOutcome | None = None
    """That step's result as the model gets it (the turns-left note on it, a screenshot added)."""
    no_step: str = ""
    """Why the probe took no step, when it was asked to."""
    step_error: str = ""
    """The probe's step broke the env (its session stopped answering): what was sent, and what broke."""
    seconds: float = 0.0

    @property
    def finish(self) -> str | None:
        finish = rules.finishing_tool(self.found.tools)
        return finish.name if finish else None

    def splits_text(self) -> str:
        """The env's own tasks: `train 3, test 2 (evalkit run --split S --tasks N|all)`."""
        if not self.splits:
            return "no task list (the Task API): tasks are drawn by split and index, or given by --reset-json"
        counts = ", ".join(f"{s['name']} {'?' if s.get('num_tasks') is None else s['num_tasks']}"
                           for s in self.splits)  # fmt: skip
        return f"{counts} (run them with --split S --tasks N or all)"

    def summary(self) -> str:
        """One line: which kind of env this is and how it will be driven."""
        return summary(self.found)

    def to_dict(self) -> dict:
        found = self.found
        return {
            "name": found.env.name,
            "url": found.env.url,
            "kind": found.kind,
            "tools": [asdict(t) for t in found.tools],
            "finishing_tool": self.finish,
            "capacity": found.capacity,
            "capacity_tried": found.tried,
            "pictures": self.pictures,
            "modes": list(found.modes) if found.modes else None,
            "splits": self.splits,
            "reset": found.reset,
            "reset_metadata_keys": sorted(found.meta),
            "observation_fields": sorted(found.observation),
            "system_prompt": self.system,
            "opening_message": self.opening.text,
            "opening_images": [repr(i) for i in self.opening.images],
            "hidden": self.hidden,
            "finishing": wording.auto_submit_text(rules.finishing_tool(found.tools)),
            "step": {"tool": self.step[0], "args": self.step[1]} if self.step else None,
            "step_error": self.step_error or None,
            "step_result": None if self.result is None else {
                "text": self.result.text, "images": [repr(i) for i in self.result.images],
                "is_error": self.result.is_error, "done": self.result.done, "reward": self.result.reward,
            },
            "seconds": round(self.seconds, 3),
        }  # fmt: skip

    def describe(self) -> str:
        """The full report, as `evalkit probe` prints it."""
        found = self.found
        finish = rules.finishing_tool(found.tools)
        lines = [
            f"name:       {found.env.name}" + (f"  ({found.env.url})" if found.env.url else ""),
            f"kind:       {KINDS.get(found.kind, found.kind)}",
            f"sessions:   {found.capacity_text()}",
            f"modes:      {', '.join(found.modes) if found.modes else 'none declared'}",
            f"tasks:      {self.splits_text()}",
            "pictures:   "
            + (", ".join(f"{k} {'yes' if v else 'no'}" for k, v in self.pictures.items()) or "-"),
            f"reset with: {json.dumps(found.reset, default=str)}",
            f"metadata:   {', '.join(sorted(found.meta)) or '(none)'}",
            f"observed:   {', '.join(sorted(found.observation)) or '(no fields)'}",
        ]
        lines += _hidden_lines(self.hidden)
        lines.append(f"tools ({len(found.tools)}):")
        for t in found.tools:
            mark = "   [finishing tool]" if finish is not None and t.name == finish.name else ""
            lines.append(f"  {t.name}: {_first_line(t.description)}{mark}")
            lines.append(f"      {json.dumps(t.parameters, separators=(',', ':'), default=str)}")
        lines.append(f"finishing:  {wording.auto_submit_text(finish)}")
        shot = found.meta.get("screenshot_tool")
        if shot and any(t.name == shot for t in found.tools):
            lines.append(
                f"screen:     {shot}: the loop adds a screenshot to the opening message (not shown "
                "below) and after each turn without one"
            )
        lines.append(
            "system prompt"
            + ("" if found.meta.get("instructions") else " (generic: the env gives none)")
            + ":"
        )
        lines += _quoted(self.system)
        lines.append(f"opening message ({_images(self.opening.images)}):")
        lines += _quoted(self.opening.text)
        if self.step is not None and self.result is not None:
            tool, args = self.step
            how = [_images(self.result.images)]
            how += ["a tool error"] if self.result.is_error else []
            how += ["it ended the episode"] if self.result.done else []
            lines.append(f"step {tool} {json.dumps(args, default=str)}, its result as the model gets it "
                         f"({', '.join(how)}):")  # fmt: skip
            lines += _quoted(self.result.text)
        elif self.no_step:
            lines.append(f"step:       none taken ({self.no_step})")
        elif self.step_error:
            lines.append("step:       it broke the env (said on the line after this report)")
        lines.append(f"probed in {self.seconds:.2f} s")
        return "\n".join(lines)


def _hidden_lines(hidden: dict[str, str]) -> list[str]:
    """`hidden:` and one line per key the model is not shown, with why."""
    if not hidden:
        return ["hidden:     nothing (the model is shown every key and field of the reset)"]
    width = max(len(k) for k in hidden)
    return ["hidden from the model:"] + [f"  {k.ljust(width)}  {why}" for k, why in sorted(hidden.items())]


def hidden_from_model(session: Any, meta: dict, hide: tuple[str, ...] = ()) -> dict[str, str]:
    """What the reset holds that the model is not shown, key → why: what is withheld from it (the
    evaluator's task spec, a Task API record, what `--hide-field` names: never sent, pictures included),
    what the env lists under `hidden_keys`, and evalkit's own bookkeeping (ids, the loop's settings)."""
    fields = dict(getattr(session, "observation", None) or {})
    withheld = getattr(session, "withheld", None)
    if not isinstance(withheld, dict):
        withheld = {**observation.withheld(fields, hide), **observation.withheld(meta, hide)}
    out = dict(withheld)
    for key in observation.hidden_keys(meta):
        if key in meta and key not in out:
            out[key] = "the env lists it under hidden_keys (its pictures are still attached)"
    for key in meta:
        if key in out:
            continue
        if key in observation.BOOKKEEPING:
            out[key] = "evalkit's bookkeeping (ids, the loop's settings, the grade)"
        elif isinstance(key, str) and key.startswith("_"):
            out[key] = "a leading underscore: the env's own"
        elif "reward" in str(key).lower():
            out[key] = "a reward: the score, not the task"
    return out


def _images(images: list) -> str:
    return f"{len(images)} image{'s' if len(images) != 1 else ''}"


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no description)"


def _quoted(text: str, limit: int = 60) -> list[str]:
    lines = text.splitlines() or [""]
    out = [f"  | {line}" for line in lines[:limit]]
    if len(lines) > limit:
        out.append(f"  | … ({len(lines) - limit} more lines)")
    return out


def summary(found: Preflight) -> str:
    """One line: which kind of env this is and how it will be driven (a batch says it before its episodes)."""
    env, tools = found.env, found.tools
    where = f" at {env.url}" if env.url else ""
    if found.kind == "typed":
        params = ", ".join((tools[0].parameters.get("properties") or {}).keys()) if tools else ""
        how = f"typed-action env, driven through one tool step({params})"
    else:
        finish = rules.finishing_tool(tools)
        how = f"{'MCP env' if found.kind == 'mcp' else 'env'}, {len(tools)} tool(s)"
        how += f", finishing tool {finish.name}" if finish else ", no finishing tool"
    sessions = f"; sessions: {found.capacity_text()}" if found.capacity is not None else ""
    return f"{env.name}{where}: {how}{sessions}"


def probe(
    env: ResolvedEnv | Any,
    reset: dict | None = None,
    *,
    sessions: int = 8,
    pictures: bool = True,
    max_turns: int | None = None,
    wait: float = 60.0,
    cancel: threading.Event | None = None,
    step: bool | dict = False,
    hide: tuple[str, ...] | list[str] = (),
) -> EnvReport:
    """Open a session on `env` (a ResolvedEnv, or anything `evalkit.envs.client.resolved.resolve` takes),
    reset it with `reset`, and report what a model would be given (`max_turns` None: the env's own budget,
    as an episode has) and what it would not (`EnvReport.hidden`; `hide` names more, as `--hide-field`
    does). With `sessions` > 1 the server's capacity is measured up to that many sessions. `step` takes one
    step and reports its result as the model gets it: True for one the probe fills in (`example_step`), or
    `{"tool": name, "args": {...}}` (`tool` may be left out for an env with one tool); a step that breaks
    the env is reported (`EnvReport.step_error`), not raised."""
    t0 = time.monotonic()
    hide = tuple(hide)
    env = with_records(resolve(env), [reset or {}]).with_(hide=hide)
    found = preflight(env, reset or {}, sessions=sessions, wait=wait, cancel=cancel, hold=True)
    session, meta, tools = found.session, found.meta, found.tools
    try:
        budget = rules.turn_budget(max_turns, meta)
        shot = rules.screenshot_tool(meta, tools)
        shown, shown_fields = wording.seen(session, meta, hide)
        system = wording.system_prompt(shown, tools, shown_fields)
        opening = _opening(session, meta, budget, pictures, shot, hide)
        report = EnvReport(found, system, opening, hidden_from_model(session, meta, hide))
        if pictures:
            report.pictures = _pictures(session, meta)
        if env.url and not env.embedded:
            report.splits = tasks.summary(env.url)
        if step is not False:
            _take_step(report, session, step, shot, budget)
    finally:
        found.release()
    report.seconds = time.monotonic() - t0
    return report


def _opening(
    session: Any, meta: dict, budget: int, pictures: bool, shot: str | None, hide: tuple[str, ...]
) -> wording.Opening:
    """The opening message as the episode builds it: with the session's target and a screenshot of a
    screen (`pictures`), or only what it says (no picture is read, none shown to anyone)."""
    if not pictures:
        shown, fields = wording.seen(session, meta, hide)
        return wording.opening(shown, fields or {}, budget)
    target = _read(session, "target")
    screen = session.call(shot, {}).images if shot else []
    return wording.session_opening(session, meta, budget, target, screen, hide)


def _read(session: Any, what: str) -> Any:
    fn = getattr(session, what, None)
    return fn() if callable(fn) else None


def _take_step(report: EnvReport, session: Any, step: bool | dict, shot: str | None, budget: int) -> None:
    """One step in the probe's session, its result put as the loop sends it after the first turn."""
    if isinstance(step, dict):
        tool = step.get("tool") or (report.found.tools[0].name if len(report.found.tools) == 1 else None)
        if tool is None or not any(t.name == tool for t in report.found.tools):
            names = ", ".join(t.name for t in report.found.tools)
            raise ConfigError(f"--step-json names no tool of {report.found.env.name} (it has: {names})")
        chosen: tuple[str, dict] | None = (tool, dict(step.get("args") or {}))
    else:
        chosen = example_step(report.found.tools, report.found.meta, report.found.observation, shot)
    if chosen is None:
        report.no_step = "no tool whose arguments it could fill in: give one with --step-json"
        return
    try:
        outcome = session.call(*chosen)
    except EnvError as e:  # the report stands; the step that broke the env is said after it
        report.step = chosen
        report.step_error = f"step {chosen[0]} {json.dumps(chosen[1], default=str)} broke the env: {e}"
        return
    fresh = []
    if shot and chosen[0] != shot and not outcome.done:
        fresh = session.call(shot, {}).images  # the loop's own look at the screen after a turn
    note = "" if outcome.done else wording.turns_left_note(budget - 1, report.finish)
    report.step, report.result = chosen, wording.with_note(outcome, note, fresh)


def example_step(
    tools: list[ToolSpec], meta: dict, fields: dict, shot: str | None = None
) -> tuple[str, dict] | None:
    """A step the probe can take to show a result: the screenshot tool; else the first tool but the
    finishing one whose arguments can be filled in, typed from its schema (`evalkit.envs.client.actions`): one
    of the actions the env lists as legal where it fits, else a default, an enum's first, a minimum. None when
    no tool can be."""
    if shot:
        return shot, {}
    finish = rules.finishing_tool(tools)
    legal = actions.legal_actions(meta, fields)
    return actions.sample_step(tools, legal, skip=finish.name if finish else None)


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
