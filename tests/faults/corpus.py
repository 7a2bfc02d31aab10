"""A hostile run directory, for the fault suite and `benchmarks/faults.py`: every way a trace line can be
wrong (wrongly typed fields at each depth, non-finite and out-of-range numbers, values that are not objects,
invalid UTF-8, lone surrogates, a torn last line), huge fields, HTML and Markdown injection, and path tricks
(traversal, absolute paths, a symlink out of the run) aimed at a file beside the run. The run's own folder
name holds glob characters.

`hostile_run` returns what a reader must make of it: how many records are sound (analysed), malformed
(left out, with their problems), and how many lines are unreadable.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from PIL import Image as PILImage

from evalkit.records.rundir import FrameStore, write_run_json
from evalkit.types import CallRecord, EpisodeRecord, Image, TurnRecord, episode_key

SECRET = "sentinel-outside-the-run-3141592653"
"""The content of a file beside the run that a path trick points at: it must never come out."""
SCRIPT = '<script>alert("pwned")</script>'
INJECTIONS = (SCRIPT, "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))", "![x](http://e/x.png)")
HUGE = 3_000_000
"""Characters of each huge field."""
NAME = "hostile [1] *?"


def _png(color: tuple[int, int, int]) -> Image:
    buf = io.BytesIO()
    PILImage.new("RGB", (32, 24), color).save(buf, "PNG")
    return Image(buf.getvalue())


def _sound(i: int, model: str = "m-good", **kw) -> dict:
    task = kw.pop("task_id", f"canvas-test-{i:04d}")
    rec = EpisodeRecord(
        key=episode_key(model, "canvas", "tools", "reference", task, None, 0), model=model, env="canvas",
        surface="tools", mode="reference", task_id=task, tier=("easy", "medium", "hard")[i % 3],
        reward=0.25 + 0.05 * (i % 10), grade={"total": 0.25 + 0.05 * (i % 10)}, end_reason="submitted",
        usage={"input": 10, "output": 5}, n_turns=1, tool_calls=1,
        turns=[TurnRecord(turn=1, text="adding", usage={"input": 10, "output": 5}, calls=[
            CallRecord(id="c1", name="add_element", args={"kind": "rect"}, result="ok")])],
    )  # fmt: skip
    d = rec.to_dict()
    d.update(kw)
    return d


def _malformed(i: int, **kw) -> dict:
    d = _sound(i, "m-broken")
    d.update(kw)
    return d


def hostile_run(root: Path) -> dict:
    """Write the hostile run under `root` (with the secret file beside it); returns its path and counts."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "secret.txt").write_text(SECRET)
    run = root / NAME
    run.mkdir()
    write_run_json(run, {"models": ["m-good"], "env": "canvas"})
    store = FrameStore(run)
    frame = store.put(_png((200, 30, 30)))
    os.symlink(root / "secret.txt", run / "frames" / "evil.png")

    sound = [_sound(i) for i in range(6)]
    sound[0]["turns"][0]["frame"] = frame
    sound[0]["frame0"] = frame
    injected = [
        _sound(10, model=SCRIPT, task_id="[click](javascript:alert(1))", error=None,
               turns=[{"turn": 1, "text": " ".join(INJECTIONS) + " **bold** | a | b |", "calls": [
                   {"id": "c", "name": "<b>tool</b>", "args": {"html": SCRIPT}, "result": SCRIPT}]}],
               grade={"total": 0.5, "<script>": SCRIPT}, reward=0.5),
        _sound(11, task_id="canvas-test-0011", tier=SCRIPT, skin="<i>skin</i>", info={"note": SCRIPT}),
    ]  # fmt: skip
    huge = [
        _sound(20, turns=[{"turn": 1, "text": "x" * HUGE, "reasoning": "r" * HUGE, "calls": [
            {"id": "c", "name": "t", "args": {"a": "y" * HUGE}, "result": "z" * HUGE}]}]),
        _sound(21, model="m-" + "w" * 100_000, error="e" * HUGE, grade={"total": 0.3, "note": "g" * HUGE}),
    ]  # fmt: skip
    paths = [
        _sound(30, target="../secret.txt", frame0="/" + str(root / "secret.txt").lstrip("/"),
               render="frames/evil.png",
               turns=[{"turn": 1, "frame": "frames/../../secret.txt",
                       "calls": [{"id": "c", "name": "t",
                                  "images": ["../../secret.txt", "\x00", "/etc/passwd"]}]}]),
    ]  # fmt: skip
    malformed = [
        _malformed(40, turns="oops"),
        _malformed(41, turns=[{"turn": 1, "calls": "not a list"}]),
        _malformed(42, turns=[{"turn": 1, "calls": [1, "two", None]}]),
        _malformed(43, turns=[7, "turn"]),
        _malformed(44, reward="0.5", n_turns="3"),
        _malformed(45, usage=[1, 2], grade="great", info="none"),
        _malformed(46, plans={"a": 1}, provider_switches="x"),
        _malformed(47, repeat=10**30),
        _malformed(48, turns=[{"turn": "one", "text": 5, "usage": "x", "frame": 3, "usage_known": "yes"}]),
        _malformed(49, auto_submitted="no", format_version="1"),
    ]
    lines = [json.dumps(d) for d in sound + injected + huge + paths + malformed]
    lines += [
        json.dumps(_malformed(50)).replace('"reward": 0.25', '"reward": NaN'),
        json.dumps(_malformed(51)).replace('"reward": 0.3', '"reward": -Infinity'),
        json.dumps(_malformed(52)).replace('"seconds": 0.0', '"seconds": 1e999'),
        json.dumps(_malformed(53, turns="oops")).replace('"turns"', '"\\u0074urns"'),  # a key escaped
        json.dumps(_sound(54, task_id="lone \ud800 surrogate")),
        json.dumps(_sound(55, key="a lone \udc00 in the key")),
        # an integer no float holds (json.loads keeps it whole); arrays nested past the recursion limit
        json.dumps(_malformed(56, reward=0.5)).replace('"reward": 0.5,', '"reward": 1' + "0" * 400 + ","),
        json.dumps(_sound(57))[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ]
    raw = [line.encode() for line in lines]
    unreadable = [
        b"[1, 2, 3]",
        b"42",
        b'{"format_version": 1, "key": "bad-utf8", "model": "m-good", "task_id": "\xff\xfe"}',
        b"not json at all <script>",
        b'{"format_version": 1, "key": "cut", "model": "m-g',  # a torn last line: the batch was killed
    ]
    body = b"\n".join(raw[:3] + [b"", b"   "] + raw[3:] + unreadable[:-1]) + b"\n" + unreadable[-1]
    (run / "trace.jsonl").write_bytes(body)
    # 1e999 seconds and the \u0074urns line are malformed; NaN, -Infinity and 10^400 rewards are the one
    # problem of their records, which analysis counts as episodes whose reward is not a number
    n_malformed = len(malformed) + 1
    return {
        "run": run,
        "secret": root / "secret.txt",
        "sound": len(sound) + len(injected) + len(huge) + len(paths) + 2,  # + the lone surrogates
        "reward_only": 3,
        "malformed": n_malformed + 1,
        "unreadable": len(unreadable) + 1,  # + the line nested too deep for json.loads
    }
