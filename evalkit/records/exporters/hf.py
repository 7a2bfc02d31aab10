"""A run as a Hugging Face dataset folder: the Hub's trace viewer opens each episode's conversation, Data
Studio and `datasets.load_dataset(OUT)` the episodes table.

```
OUT/
  README.md                        the dataset card: YAML front matter (configs, models, env, counts) and a
                                   summary
  data/episodes.parquet            one row per episode: the columns of `load_runs` (run as its name, no
                                   byte offset) and `session`, the path of its conversation
  sessions/<task>__<key>.jsonl     one Session Trace Simple Format file per episode
  sessions/images/<sha256>.png     the pictures the sessions show, stored once, named by content
```

A session file is STS (the Hub's Session Trace Simple Format): a header line `{"type": "session", "harness":
"evalkit", "id": key, "name": …}`, then one `{"type": "message", "message": {…}}` line per message of the
conversation as the model saw it (`evalkit.records.transcripts.messages`): `role`, `content`,
`reasoningContent`, `toolCalls` (`[{"id", "function": {"name", "arguments"}}]`, arguments a JSON string),
`toolCallId` on a tool result, `timestamp` (epoch ms, when the episode's start is known), `model`. STS has no
place for pictures, outcomes or timings: the header's `evalkit` holds the episode's identity and outcome
(`exporters.outcome`), and each line's `evalkit` what the message adds (its turn, images by path relative to
the session file, a call's `ok`, a turn's stop reason, usage and seconds, the loop's notes), so that
`evalkit.records.importers.sessions` reads the folder back to the same keys, rewards, turns and calls.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from evalkit.errors import ConfigError
from evalkit.records import rundir, transcripts
from evalkit.records.exporters import MARK, Converted, outcome, version
from evalkit.records.exporters.atif import Images, trial_name
from evalkit.types import EpisodeRecord

HARNESS = "evalkit"
SESSIONS = "sessions"
EPISODES = "data/episodes.parquet"
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def _start(rec: EpisodeRecord) -> datetime | None:
    try:
        t = datetime.fromisoformat(str(rec.started).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.astimezone()


def _images(images: list[dict], store: Images) -> list[dict]:
    """The message's images as paths relative to the session file (null for one the run did not store:
    pruned from the conversation, or never kept)."""
    out = []
    for img in images:
        entry: dict[str, Any] = {"path": store.put(img.get("path")), "mime": img.get("mime") or "image/png"}
        if img.get("pruned"):
            entry["pruned_at"] = img.get("pruned_at")
        out.append(entry)
    return out


def _arguments(args: Any) -> str:
    """STS wants a JSON string; arguments that did not parse are the string the model sent."""
    return args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)


def session(rec: EpisodeRecord, run: Path, store: Images) -> list[dict]:
    """The STS lines of one episode (see the module doc)."""
    turns = {t.turn: t for t in rec.turns}
    calls = {(t.turn, c.id): c for t in rec.turns for c in t.calls}
    start = _start(rec)
    clock = 0.0
    head = {
        "type": "session", "harness": HARNESS, "id": rec.key or rec.episode_id or "",
        "name": " · ".join(str(x) for x in (rec.model, rec.env, rec.task_id, f"repeat {rec.repeat}") if x),
        MARK: {**outcome(rec), "evalkit_version": version(),
               **{k: store.put(getattr(rec, k)) for k in ("target", "render", "frame0")}},
    }  # fmt: skip
    lines = [head]
    for m in transcripts.messages(rec, run):
        msg: dict[str, Any] = {"role": m.role, "content": m.text}
        extra: dict[str, Any] = {"turn": m.turn}
        if m.images:
            extra["images"] = _images(m.images, store)
        if m.note:
            extra["note"] = m.note
        if m.role == "assistant":
            t = turns.get(m.turn) if m.note != transcripts.SCRIPTED else None
            if m.reasoning:
                msg["reasoningContent"] = m.reasoning
            if m.calls:
                msg["toolCalls"] = [{"id": c["id"], "function": {"name": c["name"],
                                     "arguments": _arguments(c.get("args"))}} for c in m.calls]  # fmt: skip
                extra["parse_errors"] = [c["id"] for c in m.calls if not isinstance(c.get("args"), dict)]
            if rec.model and t is not None:
                msg["model"] = rec.model
            if t is not None:
                extra |= {"stop": t.stop, "usage": dict(t.usage or {}), "model_s": t.model_s,
                          "env_s": t.env_s, "frame": store.put(t.frame)}  # fmt: skip
        elif m.role == "tool":
            msg["toolCallId"] = m.call_id or ""
            c = calls.get((m.turn, m.call_id))
            extra |= {"name": m.name, "ok": not m.error}
            if c is not None and c.result != m.text:  # the loop appended a note to what it sent
                extra["result"] = c.result
        if start is not None:
            msg["timestamp"] = int((start + timedelta(seconds=clock)).timestamp() * 1000)
        if m.role == "assistant" and (t := turns.get(m.turn)) is not None and m.note != transcripts.SCRIPTED:
            clock += (t.model_s or 0.0) + (t.env_s or 0.0)
        lines.append({"type": "message", "message": msg, MARK: extra})
    return lines


def _table(run: Path, names: dict[str, str]) -> pl.DataFrame:
    # start-up: Polars only for the dataset's files
    from evalkit.records.loading import load_runs

    df = load_runs(run, cache="read")
    return df.with_columns(
        pl.col("run_name").alias("run"),
        pl.lit(None, pl.Int64).alias("offset"),
        pl.col("key").replace_strict(names, default=None, return_dtype=pl.Utf8).alias("session"),
    )


def _size(n: int) -> str:
    return next((label for top, label in _SIZES if n < top), "n>1M")


def card(df: pl.DataFrame, name: str, summary: str | None) -> str:
    """The dataset card: YAML front matter through huggingface_hub's DatasetCardData (configs that point
    `load_dataset` at the episodes table and the sessions, the models, envs and counts), then a page."""
    # start-up: huggingface_hub (evalkit[hf]) only for a card or an upload
    from huggingface_hub import DatasetCard, DatasetCardData

    models = sorted(df["model"].drop_nulls().unique().to_list())
    envs = sorted(df["env"].drop_nulls().unique().to_list())
    counts = {
        "episodes": df.height, "tasks": df.select("env", "task_id").n_unique(),
        "scored": int(df["scored"].sum()), "unscored": int(df["error_class"].is_not_null().sum()),
        "no_reward": int((df["reward"].is_null() & df["error_class"].is_null()).sum()),
    }  # fmt: skip
    data = DatasetCardData(
        pretty_name=f"{name}: agent episodes (evalkit)",
        size_categories=[_size(df.height)],
        tags=["agent-traces", "evaluation", "evalkit"],
        configs=[
            {"config_name": "default", "data_files": [{"split": "train", "path": EPISODES}]},
        ],
        evalkit={"models": models, "envs": envs, **counts, "version": version()},
    )
    body = [
        f"# {name}",
        "",
        f"Agent episodes written by evalkit {version()}: {counts['episodes']:,} episodes of "
        f"{', '.join(models) or 'no model'} on {', '.join(envs) or 'no env'} ({counts['tasks']:,} tasks; "
        f"{counts['scored']:,} scored, {counts['unscored']:,} unscored by an infrastructure error, "
        f"{counts['no_reward']:,} without a reward).",
        "",
        f"- `{EPISODES}`: one row per episode (model, env, task, repeat, reward, end reason, tokens, cost, "
        '…) and `session`, the file of its conversation: `datasets.load_dataset("<this repo>")`.',
        f"- `{SESSIONS}/`: one conversation per episode in the Session Trace Simple Format (the Hub's trace "
        "viewer opens them), pictures beside them under `images/`.",
        "",
        'evalkit reads this folder back: `evalkit summarise <folder>`, `ek.load_runs("<folder>")`.',
    ]
    if summary:
        body += ["", "## Summary", "", summary.strip()]
    page = "---\n{{ card_data }}\n---\n\n" + "\n".join(body) + "\n"
    return DatasetCard.from_template(data, template_str=page)


def write(run: Path, out: Path, summary: str | None = None) -> Converted:
    """Every episode of `run` into the dataset folder `out` (see the module doc); `summary`, Markdown, goes
    into the card (the CLI gives evalkit's summary table: records do not import the analysis)."""
    try:  # the card's front matter is written by the library that keeps its format
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ConfigError(
            "writing a Hugging Face dataset needs huggingface_hub: pip install 'evalkit[hf]'"
        ) from None
    done = Converted(paths=[out])
    where = out / SESSIONS
    where.mkdir(parents=True, exist_ok=True)
    store = Images(run, where)
    names: dict[str, str] = {}
    used: Counter = Counter()
    for n, rec in enumerate(rundir.read_records(run)):
        name = trial_name(rec, n)
        used[name] += 1
        if used[name] > 1:
            name = f"{name}-{used[name]}"
        lines = session(rec, run, store)
        text = "\n".join(json.dumps(x, ensure_ascii=False, default=str) for x in lines) + "\n"
        rundir.atomic_write(where / f"{name}.jsonl", text, sync=False)
        if rec.key:
            names[rec.key] = f"{SESSIONS}/{name}.jsonl"
        done.episodes += 1
    done.images = store.count
    df = _table(run, names)
    (out / EPISODES).parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(out / EPISODES)
    rundir.atomic_write(out / "README.md", str(card(df, run.name or str(run), summary)), sync=False)
    return done


def token() -> str | None:
    """The Hugging Face token huggingface_hub would use (HF_TOKEN, or the one `hf auth login` saved)."""
    for var in TOKEN_VARS:
        if os.environ.get(var):
            return os.environ[var]
    try:
        # start-up (as above)
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def push(folder: Path, repo: str) -> str:
    """Upload the dataset folder to the Hub as the dataset repo `repo` (created if it does not exist, private
    unless it exists already): huggingface_hub's `upload_folder`. The URL of the commit."""
    try:
        # start-up (as above)
        from huggingface_hub import create_repo, upload_folder
    except ImportError:
        raise ConfigError("--push needs huggingface_hub: pip install 'evalkit[hf]'") from None
    create_repo(repo, repo_type="dataset", private=True, exist_ok=True)
    info = upload_folder(repo_id=repo, folder_path=str(folder), repo_type="dataset",
                         commit_message="evalkit convert --to hf")  # fmt: skip
    return str(getattr(info, "commit_url", info))
