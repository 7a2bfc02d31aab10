"""Episodes as Inspect logs (`.eval`), built from Inspect's own classes and written by its `write_eval_log`
(the optional extra `evalkit[inspect]`, imported only here, when a log is written), so that `inspect view`
and Inspect's dataframes open them.

An Inspect log is one task run by one model: a run's episodes are split by model × env × surface × mode ×
skin, one log each. In a log, a sample per episode: id = task, epoch = repeat + 1.

Record → Inspect: the conversation as the model saw it (`evalkit.records.transcripts.messages`) becomes
the sample's messages — system, user (text and images, as data URIs Inspect moves into attachments), each
turn an assistant message (text, reasoning, tool calls) and a tool message per call (error set when the
call failed); a ModelEvent per turn (its input, output, usage, time) and a ToolEvent per call, which
Inspect's dataframes need; the reward as the score of scorer `evalkit` (no score when there is no reward:
never 0); an infrastructure error as the sample's error; usage and cost (when known) as its model usage;
`eval.dataset.sample_ids` set, without which Inspect's sample reader refuses the log. Everything else
(identity, end reason, grade, per-turn timings) goes in `metadata.evalkit`.
"""

from __future__ import annotations

import base64
import re
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError
from evalkit.records import rundir, transcripts
from evalkit.records.exporters import MARK, Converted, outcome, version
from evalkit.records.outputs import writing
from evalkit.types import SCRIPTED, EpisodeRecord

SCORER = "evalkit"
_STOP = {"tool_use": "tool_calls", "tool_calls": "tool_calls", "end_turn": "stop", "stop": "stop",
         "max_tokens": "max_tokens", "length": "max_tokens", "content_filter": "content_filter"}  # fmt: skip
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
         ".gif": "image/gif"}  # fmt: skip


def _inspect() -> Any:
    try:
        # start-up: inspect_ai is large; it loads when a log is written
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
        import inspect_ai.tool as tool
    except ImportError:
        raise ConfigError("writing an Inspect log needs inspect-ai: pip install 'evalkit[inspect]'") from None
    return log, model, scorer, tool


def group_of(rec: EpisodeRecord) -> tuple:
    return (rec.model, rec.env, rec.surface, rec.mode, rec.skin)


def _slug(group: tuple) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(str(g) for g in group if g)).strip("._-") or "run"


def _time(s: str | None, plus: float = 0.0) -> datetime | None:
    try:
        t = datetime.fromisoformat(str(s).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)) + timedelta(seconds=plus)


class _Builder:
    def __init__(self, run: Path):
        self.run = run
        self.log, self.model, self.scorer, self.tool = _inspect()
        self._uris: dict[str, str | None] = {}
        self._tools: dict[str, list] = {}

    def image(self, rel: str | None) -> Any:
        """A ContentImage of the run's image `rel` (a data URI), or a text part when the run lacks it."""
        M = self.model
        if rel not in self._uris:
            path = rundir.safe_path(self.run, rel) if self.run.is_dir() else None
            mime = _MIME.get(path.suffix.lower()) if path is not None else None
            self._uris[rel] = (
                f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}" if mime else None
            )
        uri = self._uris[rel]
        return M.ContentImage(image=uri) if uri else M.ContentText(text="(an image the run did not store)")

    def content(self, text: str, images: list[dict]) -> Any:
        if not images:
            return text
        parts = [self.model.ContentText(text=text)] if text else []
        return parts + [self.image(i.get("path")) for i in images]

    def usage(self, u: dict) -> Any:
        i, o = int(u.get("input") or 0), int(u.get("output") or 0)
        cr, cw = int(u.get("cache_read") or 0), int(u.get("cache_write") or 0)
        return self.model.ModelUsage(
            input_tokens=i, output_tokens=o, total_tokens=i + o + cr + cw, input_tokens_cache_read=cr or None,
            input_tokens_cache_write=cw or None, reasoning_tokens=int(u.get("reasoning_tokens") or 0) or None,
        )  # fmt: skip

    def tools(self, rec: EpisodeRecord) -> list:
        """The tools as declared to the model, as Inspect's ToolInfo; built once per tool list (a run's
        episodes share one, stored once in its text store)."""
        tx = rec.transcript if isinstance(rec.transcript, dict) else {}
        ref = tx.get("tools") if isinstance(tx.get("tools"), str) else None
        if ref is not None and ref in self._tools:
            return self._tools[ref]
        out = []
        for t in transcripts.tools(rec, self.run) if self.run.is_dir() else []:
            try:
                out.append(self.tool.ToolInfo.model_validate(
                    {"name": t.get("name"), "description": t.get("description") or "",
                     "parameters": t.get("parameters") or {"type": "object"}}
                ))  # fmt: skip
            except ValueError:  # a schema Inspect's model does not take: the name alone
                out.append(
                    self.tool.ToolInfo(name=str(t.get("name")), description=t.get("description") or "")
                )
        if ref is not None:
            self._tools[ref] = out
        return out

    def conversation(self, rec: EpisodeRecord, start: datetime) -> tuple[list, list]:
        """The episode's messages as Inspect's, and a model event per turn and a tool event per call, timed
        from `start` by the turns' model and env seconds."""
        M, T = self.model, self.tool
        # start-up (as above)
        from inspect_ai.event import ModelEvent, ToolEvent

        tools = self.tools(rec)
        calls = {(t.turn, c.id): c for t in rec.turns for c in t.calls}
        turns = {t.turn: t for t in rec.turns}
        messages: list = []
        events: list = []
        clock = 0.0
        for m in transcripts.messages(rec, self.run):
            if m.role == "system":
                messages.append(M.ChatMessageSystem(content=m.text))
            elif m.role == "user":
                meta = {MARK: {"note": m.note}} if m.note else None
                messages.append(M.ChatMessageUser(content=self.content(m.text, m.images), metadata=meta))
            elif m.role == "assistant" and m.note == SCRIPTED:  # no model call made it: no ModelEvent
                messages.append(M.ChatMessageAssistant(content=m.text, metadata={MARK: {"note": m.note}}))
            elif m.role == "assistant":
                content: Any = m.text
                if m.reasoning:
                    content = [M.ContentReasoning(reasoning=m.reasoning), M.ContentText(text=m.text)]
                tcs = []
                for c in m.calls:
                    args = c.get("args")
                    bad = None if isinstance(args, dict) else f"arguments did not parse: {str(args)[:200]}"
                    obj = args if isinstance(args, dict) else {}
                    tcs.append(T.ToolCall(id=c["id"], function=c["name"], arguments=obj, parse_error=bad))
                msg = M.ChatMessageAssistant(content=content, tool_calls=tcs or None, model=rec.model)
                turn = turns.get(m.turn)
                stop = _STOP.get(m.stop, "tool_calls" if tcs else "unknown")
                choice = M.ChatCompletionChoice(message=msg, stop_reason=stop)
                out = M.ModelOutput(
                    model=rec.model, choices=[choice], usage=self.usage(m.usage), time=m.latency_s
                )
                events.append(ModelEvent(
                    model=rec.model, input=list(messages), tools=tools, tool_choice="auto",
                    config=M.GenerateConfig(), output=out, working_time=m.latency_s,
                    timestamp=start + timedelta(seconds=clock),
                ))  # fmt: skip
                clock += (turn.model_s if turn else 0.0) or 0.0
                messages.append(msg)
            elif m.role == "tool":
                c = calls.get((m.turn, m.call_id))
                err = T.ToolCallError(type="unknown", message=m.text[:500]) if m.error else None
                body = self.content(m.text, m.images)
                messages.append(
                    M.ChatMessageTool(content=body, tool_call_id=m.call_id, function=m.name, error=err)
                )
                if c is not None:
                    events.append(ToolEvent(
                        id=c.id, function=c.name, arguments=c.args if isinstance(c.args, dict) else {},
                        result=c.result or "", error=err, timestamp=start + timedelta(seconds=clock),
                        working_time=_share(turns.get(m.turn)),
                    ))  # fmt: skip
                    clock += _share(turns.get(m.turn)) or 0.0
        return messages, events

    def sample(self, rec: EpisodeRecord) -> Any:
        L, M = self.log, self.model
        start = _time(rec.started) or datetime.now(UTC)
        messages, events = self.conversation(rec, start)
        mark = outcome(rec)
        # What Inspect's messages do not say of each turn, in order. Its tool call takes arguments as an
        # object: arguments that did not parse are kept here.
        mark["turns"] = [{"turn": t.turn, "stop": t.stop, "usage": dict(t.usage or {}), "model_s": t.model_s,
                          "env_s": t.env_s,
                          "raw_args": {c.id: c.args for c in t.calls if not isinstance(c.args, dict)}}
                         for t in rec.turns]  # fmt: skip
        final = [M.ChatCompletionChoice(message=last)] if (last := _last(messages)) else []
        first_user = next((x for x in messages if x.role == "user"), None)
        usage = self.usage(rec.usage or {})
        if rec.cost_usd is not None:
            usage.total_cost = rec.cost_usd
        error = None
        if rec.error_class:
            tb = rec.traceback or ""
            error = L.EvalError(
                message=f"{rec.error_class}: {rec.error or ''}", traceback=tb, traceback_ansi=tb
            )
        sample = L.EvalSample(
            id=rec.task_id, epoch=rec.repeat + 1,
            input=[first_user] if first_user is not None else "",
            target="",
            messages=messages,
            output=M.ModelOutput(model=rec.model, choices=final),
            scores={SCORER: self.scorer.Score(value=rec.reward, explanation=rec.end_reason)}
            if rec.reward is not None else None,
            metadata={MARK: mark},
            events=events,
            model_usage={rec.model: usage},
            started_at=start.isoformat(),
            completed_at=(start + timedelta(seconds=rec.seconds or 0)).isoformat(),
            total_time=rec.seconds, working_time=rec.seconds,
            error=error,
        )  # fmt: skip
        return sample  # write_eval_log condenses it (images and repeated texts into attachments)

    def eval_log(self, run_name: str, group: tuple, recs: list[EpisodeRecord]) -> Any:
        from inspect_ai.log._log import EvalScorer  # not re-exported by inspect_ai.log

        L = self.log
        model, env, surface, mode, skin = group
        samples = [self.sample(r) for r in recs]
        ids = list(dict.fromkeys(r.task_id for r in recs))
        rewards = [r.reward for r in recs if r.scored]
        starts = [t for r in recs if (t := _time(r.started))]
        started = min(starts) if starts else datetime.now(UTC)
        ended = max((_time(r.started, r.seconds or 0) or started for r in recs), default=started)
        total = self.model.ModelUsage()
        for r in recs:
            total = total + self.usage(r.usage or {})
        costs = [r.cost_usd for r in recs if r.cost_usd is not None]
        if costs and len(costs) == len(recs):  # a sum of some costs would read as the whole cost
            total.total_cost = sum(costs)
        # Inspect reduces a sample's epochs to their mean before its metric, as evalkit makes each task one
        # value before any mean: the mean of the tasks' means, the same number in both.
        by_task: dict[str, list[float]] = defaultdict(list)
        for r in recs:
            if r.scored:
                by_task[r.task_id].append(r.reward)
        means = [statistics.fmean(v) for v in by_task.values()]
        metrics = {"mean": L.EvalMetric(name="mean", value=statistics.fmean(means))} if means else {}
        return L.EvalLog(
            version=2,
            status="success",
            eval=L.EvalSpec(
                created=started.isoformat(),
                task="-".join(x for x in (env, surface, mode, skin) if x) or "evalkit",
                task_id=_slug(group),
                run_id=run_name,
                dataset=L.EvalDataset(name=env, samples=len(ids), sample_ids=ids),
                model=model,
                config=L.EvalConfig(epochs=max((r.repeat for r in recs), default=0) + 1),
                scorers=[EvalScorer(name=SCORER)],
                packages={"evalkit": version()},
                metadata={
                    MARK: {
                        "run": run_name,
                        "model": model,
                        "env": env,
                        "surface": surface,
                        "mode": mode,
                        "skin": skin,
                    }
                },  # fmt: skip
            ),
            results=L.EvalResults(
                total_samples=len(recs),
                completed_samples=len(recs),
                scores=[
                    L.EvalScore(
                        name=SCORER,
                        scorer=SCORER,
                        scored_samples=len(rewards),
                        unscored_samples=len(recs) - len(rewards),
                        metrics=metrics,
                    )
                ],
            ),  # fmt: skip
            stats=L.EvalStats(
                started_at=started.isoformat(), completed_at=ended.isoformat(), model_usage={model: total}
            ),  # fmt: skip
            samples=samples,
        )


def _last(messages: list) -> Any:
    return next((x for x in reversed(messages) if x.role == "assistant"), None)


def _share(turn: Any) -> float | None:
    """A call's share of its turn's env time (a turn's calls run one after another; their own times are
    not recorded)."""
    return turn.env_s / max(len(turn.calls), 1) if turn is not None else None


def paths_for(out: Path, groups: list[tuple]) -> dict[tuple, Path]:
    """`out` for a run of one group; else `out` with each group's name added to its stem."""
    if len(groups) == 1:
        return {groups[0]: out}
    return {g: out.with_name(f"{out.stem}-{_slug(g)}{out.suffix or '.eval'}") for g in groups}


def write(run: Path, out: Path) -> Converted:
    by: dict[tuple, list[EpisodeRecord]] = defaultdict(list)
    for rec in rundir.read_records(run):
        by[group_of(rec)].append(rec)
    b = _Builder(run)
    done = Converted()
    out.parent.mkdir(parents=True, exist_ok=True)
    for group, path in paths_for(out, list(by)).items():
        recs = by[group]
        with writing(path, path.name) as tmp:  # whole or not there: Inspect writes the file itself
            b.log.write_eval_log(b.eval_log(run.name or str(run), group, recs), str(tmp), format="eval")
        done.paths.append(path)
        done.episodes += len(recs)
    return done
