"""Scanners a model answers: `ask("Did the agent misread the task?", judge="anthropic:claude-haiku-4-5")`.

Per episode, the judge is sent the conversation the model under test saw (`evalkit.records.transcripts`: its
instructions, the task, each turn's message, calls and what came back; images on request), cut to a budget
of characters, and the question; it answers through the providers evalkit runs models with, by calling one
tool, `answer`, whose arguments are the structured answer: one of the allowed answers, the turn it rests on,
a short reason. A reply without a usable call is asked again (at most `TRIES` requests in all).

Each answer is appended to the run's cache (`evalkit.records.scans`, on disk before the next is asked) under
the digest of everything the request holds (judge, instructions, question and answers, the transcript as
cut, its images): a rerun, or a scan killed half-way and run again, pays only for what was never answered.
Requests run `concurrency` at a time; each is retried by the provider as a batch's model calls are
(transient statuses, with back-off); a judge that fails after its retries leaves that episode unanswered
(`fired` null: unscored, asked again next time), a refused key stops the scan (a configuration error), and
after `MAX_FAILURES` failures in a row the rest is left unasked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalkit.errors import ConfigError, EndpointError, KeyRejectedError
from evalkit.providers import AUTH_STATUSES, check_keys, key_variables, make_agent
from evalkit.providers.prices import cost_usd
from evalkit.records import rundir, transcripts
from evalkit.records import scans as store
from evalkit.scanners.base import Context, Finding, Scanner
from evalkit.types import SCRIPTED, AgentOptions, EpisodeRecord, Image, ToolOutcome, ToolSpec, Usage

FORMAT = 1
"""Part of every request's digest: a change to how requests are made asks every question again."""
TRIES = 3
MAX_FAILURES = 5
REASON_CAP = 600
MAX_IMAGES = 8

SYSTEM = """You review one episode of an AI agent working in an environment, and answer one question about it.
The transcript is what the agent was shown and what it did: its instructions, the task, then turn by turn
(numbered from 1) its message, its tool calls and what came back. Parts may be left out to fit a budget;
that is said where it happens.
Answer by calling the tool `answer` exactly once, with `answer`: one of {answers}; `step`: the number of the
turn your answer rests on most (null when no turn does); `reason`: one or two sentences on what in the
transcript made you answer so."""


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "_".join(words)[:48].strip("_") or "question"


@dataclass(frozen=True)
class Judged(Scanner):
    """A scanner a model answers (made by `ask`). Called on one record it asks (or reads the cache)."""

    question: str = ""
    judge: str = ""
    answers: tuple[str, ...] = ("yes", "no")
    fires: tuple[str, ...] = ("yes",)
    images: bool = False
    max_chars: int = 60_000
    concurrency: int = 8
    options: AgentOptions = field(default_factory=lambda: AgentOptions(max_tokens=8192))
    judged: ClassVar[bool] = True

    def check(self) -> None:
        """Before any work: an unknown provider or a missing key is a ConfigError naming it."""
        check_keys([self.judge])

    def __call__(self, rec: Any, ctx: Context | None = None) -> Finding:
        run = (ctx.run if ctx is not None else None) or getattr(rec, "run_dir", None)
        if not run:
            raise ConfigError("a judged scanner needs the run a record was read from (rec.run_dir)")
        row = self.answer_one(str(run), rec, store.judged(run), threading.Lock())
        return Finding(bool(row["fired"]), tuple(row["steps"]), row["evidence"] or "")

    def answer_all(
        self, run: str, eps: Sequence[Any], progress: Callable[[str], None] | None = None
    ) -> list[dict]:
        """One row (the judged columns of a scan) per episode of `run`, in order."""
        cache = store.judged(run)
        guard = threading.Lock()
        rows: list[dict | None] = [None] * len(eps)
        failures = 0
        done = cached = 0
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="evalkit-judge") as pool:
            todo = iter(enumerate(eps))
            pending: dict[Future, int] = {}
            try:
                while True:
                    while len(pending) < self.concurrency and failures < MAX_FAILURES:
                        nxt = next(todo, None)
                        if nxt is None:
                            break
                        i, ep = nxt
                        pending[pool.submit(self.answer_one, run, ep.full, cache, guard)] = i
                    if not pending:
                        break
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        i = pending.pop(f)
                        rows[i] = row = f.result()
                        failures = failures + 1 if row["fired"] is None and row.get("_endpoint") else 0
                        done += 1
                        cached += bool(row["cached"])
                    if progress is not None and (done % 25 == 0 or not pending):
                        progress(f"{self.name}: {done}/{len(eps)} episodes judged ({cached} from the cache)")
            except BaseException:
                for f in pending:
                    f.cancel()
                raise
        left = f"not asked: the judge failed {MAX_FAILURES} times in a row; scan again to ask"
        return [r if r is not None else _unanswered(self.judge, left) for r in rows]

    def answer_one(self, run: str, rec: EpisodeRecord, cache: dict, guard: threading.Lock) -> dict:
        text, images, n_turns = render(rec, run, self.max_chars, self.images)
        system = SYSTEM.format(answers=" / ".join(self.answers))
        user = f"Question: {self.question}\n\n<transcript>\n{text}\n</transcript>"
        rid = hashlib.sha256(
            json.dumps(
                [FORMAT, self.judge, system, list(self.answers), user, [i.sha256 for i in images]]
            ).encode()
        ).hexdigest()
        with guard:
            kept = cache.get(rid)
        if kept is not None:
            return self._row(kept, cached=True)
        try:
            got = self._ask(system, user, images, n_turns)
        except EndpointError as e:
            if e.status in AUTH_STATUSES:
                raise KeyRejectedError(self.judge, e.status, key_variables(self.judge)) from e
            row = _unanswered(self.judge, f"no answer: {e}")
            row["_endpoint"] = True
            return row
        if got is None:
            return _unanswered(self.judge, f"no answer: the judge did not call `answer` in {TRIES} tries")
        answer, step, reason, usage, known = got
        entry = {
            "format": FORMAT, "id": rid, "key": rec.key, "scanner": self.name, "question": self.question,
            "answers": list(self.answers), "judge": self.judge, "answer": answer, "step": step,
            "reason": reason, "usage": usage.to_dict(), "usage_known": known,
            "cost_usd": cost_usd(self.judge, usage) if known else None,
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }  # fmt: skip
        store.keep_judged(run, entry)
        with guard:
            cache[rid] = entry
        return self._row(entry, cached=False)

    def _row(self, entry: dict, cached: bool) -> dict:
        answer, step = entry.get("answer"), entry.get("step")
        return {
            "fired": answer in self.fires,
            "steps": [step] if isinstance(step, int) else [],
            "evidence": f"{answer}: {entry.get('reason') or ''}".strip(),
            "judge": self.judge,
            "answer": answer,
            "explanation": entry.get("reason"),
            "cost_usd": entry.get("cost_usd"),
            "cached": cached,
        }

    def _ask(self, system: str, user: str, images: list[Image], n_turns: int) -> tuple | None:
        """(answer, step, reason, usage, usage known) from the judge, or None when it never answered."""
        agent = make_agent(self.judge, system=system, tools=[self._tool()], options=self.options)
        agent.user(user, images)
        usage, known = Usage(), True
        for _ in range(TRIES):
            turn = agent.step()
            usage, known = usage + turn.usage, known and turn.usage_known
            if turn.refused:
                return None
            call = next((c for c in turn.calls if c.name == "answer"), None)
            parsed, why = self._parse(call, n_turns)
            if parsed is not None:
                return (*parsed, usage, known)
            if turn.calls:
                said = [ToolOutcome(why if c is call else "ignored: call `answer` only", is_error=True)
                        for c in turn.calls]  # fmt: skip
                agent.results(list(zip(turn.calls, said, strict=True)))
            else:
                agent.user(why)
        return None

    def _parse(self, call: Any, n_turns: int) -> tuple[tuple | None, str]:
        wanted = " / ".join(self.answers)
        if call is None:
            return None, f"Answer by calling the tool `answer` (answer: one of {wanted})."
        args = call.args if call.error is None and isinstance(call.args, dict) else {}
        said = str(args.get("answer", "")).strip().lower()
        answer = next((a for a in self.answers if a.lower() == said), None)
        if answer is None:
            return None, f"`answer` must be one of {wanted}; got {args.get('answer')!r}. Call `answer` again."
        step = args.get("step")
        if isinstance(step, str) and step.strip().isdigit():
            step = int(step)
        if not isinstance(step, int) or isinstance(step, bool) or not 1 <= step <= n_turns:
            step = None  # no turn, or one the episode does not have: the answer stands without it
        reason = " ".join(str(args.get("reason") or "").split())[:REASON_CAP]
        return (answer, step, reason), ""

    def _tool(self) -> ToolSpec:
        return ToolSpec(
            "answer",
            "Give your answer to the question about the episode.",
            {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "enum": list(self.answers)},
                    "step": {"type": ["integer", "null"],
                             "description": "The turn (from 1) your answer rests on most; null if none."},
                    "reason": {"type": "string", "description": "One or two sentences: why."},
                },
                "required": ["answer", "step", "reason"],
            },
        )  # fmt: skip


def _unanswered(judge: str, why: str) -> dict:
    return {"fired": None, "steps": [], "evidence": why[:300], "judge": judge, "answer": None,
            "explanation": None, "cost_usd": None, "cached": False}  # fmt: skip


def ask(
    question: str,
    judge: str = "anthropic:claude-haiku-4-5",
    *,
    answers: Sequence[str] = ("yes", "no"),
    fires: Sequence[str] | None = None,
    name: str | None = None,
    phrase: str | None = None,
    images: bool = False,
    max_chars: int = 60_000,
    concurrency: int = 8,
    options: AgentOptions | None = None,
) -> Judged:
    """A scanner that asks `judge` (a model spec, as `evalkit run --models` takes) `question` about each
    episode. `answers`: what it may answer (yes / no, or named categories); `fires`: the answers that count
    as the failure being there (default: "yes" for yes / no, else every answer but "no", "none" and
    "other"). `images`: send the pictures the model saw too (at most MAX_IMAGES, the task's and the newest);
    `max_chars`: the transcript's budget, cut in the middle where it is longer (the instructions, the task
    and the latest turns kept). `name` defaults to the question's words; `phrase` is how its rate is said.
    `options`: the judge's AgentOptions (default: 8,192 output tokens, room for a thinking judge's
    reasoning and its one call; the provider's retries as a batch has them)."""
    answers = tuple(str(a).strip() for a in answers)
    if len(answers) < 2 or len({a.lower() for a in answers}) < len(answers) or not all(answers):
        raise ConfigError("ask: give at least two different answers")
    if fires is None:
        yes_no = {a.lower() for a in answers} == {"yes", "no"}
        fires = [a for a in answers if a.lower() == "yes"] if yes_no else [
            a for a in answers if a.lower() not in ("no", "none", "other")]  # fmt: skip
    unknown = [f for f in fires if f not in answers]
    if unknown:
        raise ConfigError(f"ask: fires names answers it cannot give: {', '.join(unknown)}")
    if not question or not question.strip():
        raise ConfigError("ask: the question is empty")
    if max_chars < 2000:
        raise ConfigError("ask: max_chars below 2,000 leaves no room for a transcript")
    first = fires[0] if fires else answers[0]
    return Judged(
        name=name or _slug(question),
        fn=_no_rule,
        phrase=phrase or f"gets “{first}” to “{question.strip()}”",
        about=question.strip(),
        question=question.strip(),
        judge=judge,
        answers=answers,
        fires=tuple(fires),
        images=images,
        max_chars=int(max_chars),
        concurrency=max(1, int(concurrency)),
        options=options or AgentOptions(max_tokens=8192),
    )


QUESTIONS = {
    "misread_task": "Did the agent misread or misunderstand what the task asked for?",
    "false_success": "Did the agent claim or act as if the task was done when it was not?",
    "ignored_feedback": "Did the agent ignore an error or feedback the environment gave it, as if unsaid?",
}
"""Questions `evalkit scan --judge MODEL` asks when no other is named, by the name its rows carry."""


def question(name: str, judge: str, **kw: Any) -> Judged:
    """A built-in question (`QUESTIONS`) as a scanner asking `judge`."""
    return ask(QUESTIONS[name], judge, name=name, **kw)


def _no_rule(rec: Any) -> None:  # a judged scanner is called through Judged.__call__
    raise TypeError("a judged scanner asks its model: call it, or scan with it")


# --------------------------------------------------------------------------------------- the transcript


def _block(m: transcripts.Message, cap: int) -> str:
    if m.role == "system":
        head = "### The agent's instructions"
    elif m.role == "user" and m.turn == 0:
        head = "### The task" if m.note != SCRIPTED else "### Before the task"
    elif m.role == "assistant":
        head = f"### Turn {m.turn}: the agent"
    elif m.role == "tool":
        head = f"### Turn {m.turn}: result of {m.name or 'a tool'}" + (" (an error)" if m.error else "")
    else:
        head = f"### Turn {m.turn}: the loop to the agent" + (f" ({m.note})" if m.note else "")
    parts = []
    if m.reasoning:
        parts.append("(reasoning) " + _cut(m.reasoning, cap // 3))
    if m.text:
        parts.append(m.text)
    for c in m.calls:
        args = c.get("args")
        body = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
        parts.append(f"→ {c.get('name')}({body})")
    if m.stop and m.role == "assistant" and m.stop not in ("tool_use", "end_turn", "stop", "tool_calls"):
        parts.append(f"(stopped: {m.stop})")
    shown_images = [i for i in m.images if i.get("path")]
    if shown_images:
        parts.append(f"[{len(shown_images)} image(s)]")
    return head + "\n" + _cut("\n".join(parts), cap)


def _cut(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    half = max(cap // 2 - 20, 1)
    return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters left out …]\n{text[-half:]}"


def render(
    rec: EpisodeRecord, run: str, max_chars: int, images: bool = False
) -> tuple[str, list[Image], int]:
    """The transcript of one episode as the judge reads it, within `max_chars`: each message a block (no
    block over an eighth of the budget), and where the whole is longer, the instructions and the task kept
    (up to 40% of it), then as many of the latest turns as fit, the turns left out said. With `images`,
    the task's pictures and the newest others (MAX_IMAGES in all). Also the number of turns."""
    msgs = transcripts.messages(rec, run)
    cap = max(1000, max_chars // 8)
    blocks = [(m, _block(m, cap)) for m in msgs]
    head = [(m, b) for m, b in blocks if m.turn == 0]
    tail = [(m, b) for m, b in blocks if m.turn != 0]
    total = sum(len(b) + 2 for _, b in blocks)
    if total > max_chars:
        head_budget = int(max_chars * 0.4)
        head = [(m, _cut(b, max(200, head_budget // max(1, len(head))))) for m, b in head]
        room = max_chars - sum(len(b) + 2 for _, b in head) - 80
        kept: list = []
        for m, b in reversed(tail):
            if room - len(b) - 2 < 0:
                break
            kept.append((m, b))
            room -= len(b) + 2
        kept.reverse()
        dropped = tail[: len(tail) - len(kept)]
        if dropped:
            first, last = dropped[0][0].turn, dropped[-1][0].turn
            note = f"[… turns {first}–{last} left out to fit the budget …]" if first != last else (
                f"[… turn {first} left out to fit the budget …]")  # fmt: skip
            kept = [(None, note), *kept]
        tail = kept
    text = "\n\n".join(b for _, b in head + tail)
    pics = _images([m for m, _ in head + tail if m is not None], run) if images else []
    return text, pics, len(rec.turns)


def _images(msgs: list[transcripts.Message], run: str) -> list[Image]:
    """The pictures of the messages shown, as the model saw them: the task's, then the newest others."""
    found: list[tuple[bool, str, str]] = []
    for m in msgs:
        for i in m.images:
            if i.get("path"):
                found.append((m.turn == 0, i["path"], i.get("mime") or "image/png"))
    opening = [f for f in found if f[0]][:MAX_IMAGES]
    later = [f for f in found if not f[0]]
    chosen = opening + later[max(0, len(later) - (MAX_IMAGES - len(opening))) :]
    out = []
    for _, rel, mime in chosen:
        path = rundir.safe_path(run, rel)
        if path is not None:
            try:
                out.append(Image(path.read_bytes(), mime))
            except OSError:
                continue
    return out
