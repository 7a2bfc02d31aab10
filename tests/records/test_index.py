"""The fast index reader (`evalkit.records._index`) against the reference, `json.loads` one line at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalkit import analysis as A
from evalkit.records import _index, index_cache
from evalkit.records.rundir import TraceWriter
from evalkit.types import CallRecord, EpisodeRecord, TurnRecord, episode_key


def turn(k: int, frame: str | None = None, text: str = "ok", **call_args) -> TurnRecord:
    return TurnRecord(
        turn=k,
        text=text,
        reasoning="hmm" if k % 2 else "",
        stop="tool_use",
        usage={"input": 10, "output": 3},
        frame=frame,
        calls=[CallRecord(id=f"c{k}", name="add", args={"x": k, **call_args}, result="ok")],
    )


def rec(i: int, reward: float | None = 0.5, frames: int = 0, **kw) -> EpisodeRecord:
    fields = dict(
        key=episode_key("m", "canvas", "tools", "reference", f"t{i}", None, 0),
        model="m",
        env="canvas",
        surface="tools",
        mode="reference",
        task_id=f"t{i}",
        tier=("easy", "medium", "hard")[i % 3],
        reward=reward,
        grade=None if reward is None else {"total": reward, "structure": 1.0, "n_gt": 3},
        end_reason="submitted" if reward is not None else "error",
        error_class=None if reward is not None else "endpoint_error",
        usage={"input": 100 + i, "output": 20, "cache_read": 5, "reasoning_tokens": 7},
        cost_usd=0.01 * i,
        n_turns=max(frames, 1),
        tool_calls=2,
        seconds=1.5,
        turns=[turn(k, f"frames/ab/{i}-{k}.png" if k < frames else None) for k in range(max(frames, 1))],
    )
    return EpisodeRecord(**(fields | kw))


def odd_lines() -> list[str]:
    """Lines other writers (or accidents) may leave: each must come out as the reference reads it."""
    base = {"format_version": 1, "model": "m", "env": "canvas", "surface": "tools", "mode": "reference"}

    def d(key: str, **kw) -> str:
        return json.dumps(base | {"key": key, "task_id": key} | kw)

    return [
        d("minimal"),  # every optional field missing
        d("nan-reward", reward=float("nan")),  # json.dumps writes NaN: Polars refuses it, json.loads does not
        d("int-reward", reward=1, difficulty_score=2, repeat=None, grade={"total": 1}),
        d("text-reward", reward="0.25", n_turns=2.0, tool_calls=True),
        d("not-text", tier=3, model=True, error={"why": "x"}, started=1.5),
        d("empty-grade", reward=0.1, grade={}),
        d("list-grade", reward=0.1, grade=[1, 2]),
        d("string-grade", reward=0.1, grade="great"),
        d("nested-grade", reward=0.2, grade={"total": 0.2, "parts": {"a": 1.0}}),
        d("tricky-grade", reward=0.3, grade={"total": 0.3, "note": "}, {", "é": "ü"}),
        d("grade-no-total", reward=0.3, grade={"structure": 0.5}),
        d("grade-text-total", reward=0.3, grade={"total": "0.75"}),
        d("nested-grade-key", turns=[{"frame": "f.png", "calls": [{"args": {"grade": {"total": 9}}}]}]),
        d("grades-everywhere", reward=0.4, grade={"total": 0.4}, final_doc={"grade": {"total": 1.0}})[:-1]
        + ', "turns": [{"frame": "f.png", "calls": [{"args": {"grade": {"total": 9}}}]}]}',
        # the top-level grade after a nested one: not the first "grade" key of the line
        json.dumps(
            base | {"key": "grade-after-turns", "turns": [{"grade": {"total": 9}}], "grade": {"total": 0.1}}
        ),
        json.dumps(
            base | {"key": "grade-after-list", "provider_switches": [{"grade": 1}], "grade": {"total": 0.2}}
        ),
        json.dumps(
            base | {"key": "grade-after-nested", "usage": {"grade": {"total": 3}}, "grade": {"total": 0.3}}
        ),
        '{"format_version": 1, "key": "escaped-key", "x\\"grade": {"total": 5}, "grade": {"total": 0.6}}',
        '{"format_version": 1, "key": "escaped-grade", "gr\\u0061de": {"total": 0.7}, "reward": 0.7}',
        d("frame-in-args", turns=[{"frame": "", "calls": [{"args": {"frame": "elsewhere"}}]}, None]),
        d("falsy-frames", turns=[{"frame": None}, {"frame": ""}, {"frame": "a"}, {}]),
        d("odd-frames", turns=[{"frame": 0}, {"frame": "b"}]),
        d("turns-dict", turns={"frame": "x"}),
        d("unicode", tier="hárd", error="ошибка " * 80, grade={"total": 0.5, "note": "naïve 🙂"}, reward=0.5),
        d("lone-surrogate-free", end_reason="✓ done 🙂"),
        d("importer", info={"importer": "inspect", "other": [1, 2]}, provider_switches=[{"turn": 1}, {}]),
        d("empty-importer", info={"importer": ""}, error_class="", reward=0.4),
        # a harness's own reward and error, which only imported records carry: the reference reads them
        d("harness", info={"importer": "x", "harness_reward": 0.2, "harness_error": "APIError: overloaded"}),
        d("harness-odd", info={"harness_reward": "0.5", "harness_error": 3}, reward=None, error_class="e"),
        d("harness-elsewhere", final_doc={"harness_reward": 1}, reward=0.3),
        d("usage-null", usage=None, auto_submitted=None),
        d("usage-partial", usage={"output": 4}, auto_submitted=True),
        d("", reward=0.6),  # an empty key is no key, like a missing one: counted on its own
        json.dumps({k: v for k, v in base.items()} | {"task_id": "no-key"}),
        "",
        "   ",
        "[1, 2]",
        "3",
        '{"format_version": 1, "key": "corrupt", bad}',  # ends in "}": Polars has to reject it
        '{"format_version": 1, "key": "cut", "turns": [{"a": {"b": 1}',
        '  {"format_version": 1, "key": "indented", "model": "m"}  ',
        '{"format_version": 1, "key": "ctl", "error": "tab\there"}',  # a raw tab: json.loads refuses it
        '{"format_version": 1, "key": 1, "reward": 0.1}',  # a key that is not a string is no key
        '{"format_version": 1, "key": "1", "reward": 0.2}',
        '{"format_version": 1, "key": 1.0, "reward": 0.3}',
        # what msgspec reads otherwise than json.loads, or skips unchecked: each must come out as json.loads
        '{"format_version": 1, "key": "big-int", "repeat": 99999999999999999999, "reward": 0.1}',
        '{"format_version": 1, "key": "min-int", "n_turns": -9223372036854775808, "reward": 0.1}',
        '{"format_version": 1, "key": "huge-float", "reward": 1e400}',
        '{"format_version": 1, "key": "lone-in-doc", "final_doc": {"t": "\\ud800"}, "reward": 0.2}',
        '{"format_version": 1, "key": "lone-in-model", "model": "\\ud800x"}',
        '{"format_version": 1, "key": "pair", "model": "\\ud83d\\ude00", "reward": 0.2}',
        '{"format_version": 1, "key": "dup-key", "key": "dup-key-2", "reward": 0.5}',
        '{"format_version": 1, "key": "two-values"} {"key": "on-one-line"}',
        '{"format_version": 1, "key": "null-harness", "info": {"harness_reward": null, "importer": null}}',
        '{"format_version": 1, "key": "usage-float", "usage": {"input": 1.5, "output": true}}',
        '{"format_version": 1, "key": "usage-list", "usage": [1]}',
        '{"format_version": 1, "key": "switches-text", "provider_switches": "ab"}',
        '{"format_version": 1, "key": "neg-zero", "reward": -0.0, "grade": {"total": -0.0}}',
        '{"format_version":1,"key":"zero-int","reward":0,"grade":{"total":0}}',
        '{"format_version":1,"key":"zero-float","reward":0.0,"grade":{"total":0.0}}',
        '{"format_version":1,"key":"null-reward","reward":null,"grade":null}',
        '{"format_version":1,"key":"bool-reward","reward":true,"auto_submitted":1}',
        '{"format_version":1,"key":"frames-odd","turns":[{"frame":"a"},{"frame":""},{"frame":null},{}],"reward":1}',
        '{"format_version": 1, "key": "dup-grade-key", "grade": {"total": 0.1, "a": 1, "total": 0.5}}',
        '{"format_version": 1, "key": "spaced-grade", "reward": 0.5, "grade": { "total" : 0.5 ,"a":[1, 2] }}',
        '{"format_version": 1, "key": "dup-line", "reward": 0.1}',
        '{"format_version": 1, "key": "dup-line", "reward": 0.9}',  # the later record of a key wins
    ]


def make(run: Path, n: int, frames: int, every: int = 1, seed_lines: bool = True) -> Path:
    """A trace of n records (every `every`-th with `frames` frames), a re-run key, unicode, no turns, and
    unless `seed_lines` the odd lines above and a torn last line."""
    w = TraceWriter(run)
    recs = [
        rec(i, None if i % 7 == 3 else round(0.1 * (i % 10), 3), 0 if i % every else frames) for i in range(n)
    ]
    recs.append(rec(2, 0.99, frames))  # key of record 2 again: re-run on resume, this one counts
    recs.append(rec(n + 1, 0.4, tier="ünï", turns=[turn(0, "f.png", text="naïve ünïcode 🙂 中文")]))
    recs.append(rec(n + 2, None, grade=None, error="x" * 500, info={"note": "no turns"}, turns=[]))
    for r in recs:
        w.append(r)
    if seed_lines:
        with open(run / "trace.jsonl", "a", encoding="utf-8") as f:
            for line in odd_lines():
                f.write(line + "\n")
            f.write(rec(n + 3, 0.7).to_json() + "\n")
            f.write('{"format_version": 1, "key": "torn", "model": "m", "rew')  # killed mid-write
    return run


SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample-run" / "trace.jsonl"


def real_lines() -> list[str]:
    """Lines of a real run (data/sample-run) whose final_doc carries the grade again (the episodes an
    endpoint error ended have none)."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    graded = [line for line in lines if '"grade":' in line.split('"final_doc":', 1)[1]]
    assert len(graded) >= len(lines) - 2 >= 30
    return graded


def fast_lines(run: Path) -> int:
    """How many lines of the run's trace the fast path read itself."""
    with open(run / "trace.jsonl", "rb") as f:
        parts = _index._scan(f.fileno(), 0, os.fstat(f.fileno()).st_size)
    return sum(f.height for _, f in parts)


def same_as_reference(run: Path) -> pl.DataFrame:
    fast = index_cache.build(run)
    ref = index_cache.build_reference(run)
    assert_frame_equal(fast, ref, check_exact=True)
    return fast


# Turns are read with the other fields when most records have frames, apart for the few otherwise.
@pytest.mark.parametrize("frames,every", [(0, 1), (2, 5), (3, 1)], ids=["no-frames", "few-frames", "frames"])
def test_fast_index_equals_reference(tmp_path, frames, every):
    df = same_as_reference(make(tmp_path / "r", 40, frames, every))
    assert df.filter(pl.col("key") == "dup-line")["reward"].to_list() == [0.9]
    assert "torn" not in df["key"].to_list() and "corrupt" not in df["key"].to_list()
    assert df.filter(pl.col("task_id") == "t2")["reward"].to_list() == [0.99]
    assert df.filter(pl.col("key") == "falsy-frames")["n_frames"].to_list() == [1]
    own = df.filter(pl.col("key").str.starts_with("harness")).sort("key")
    assert own.select("harness_reward", "harness_error").rows() == [
        (0.2, "APIError: overloaded"),
        (None, None),
        (0.5, "3"),
    ]


def test_blocks_msgspec_refuses_are_read_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setattr(_index, "_BLOCK", 3)  # many blocks, several with a line msgspec refuses
    run = make(tmp_path / "r", 60, 2, 3)
    same_as_reference(run)
    monkeypatch.setattr(_index, "_BLOCK", 10**6)
    assert fast_lines(run) >= 60


def test_clean_trace_and_empty_traces(tmp_path):
    df = same_as_reference(make(tmp_path / "clean", 30, 2, 2, seed_lines=False))
    assert df.height == 30 + 2
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "trace.jsonl").write_text("")
    (tmp_path / "empty" / "run.json").write_text("{}")
    assert index_cache.build(tmp_path / "empty").equals(index_cache.build_reference(tmp_path / "empty"))
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "run.json").write_text("{}")
    (junk / "trace.jsonl").write_bytes(
        b'{"format_version": 1, "key": "a"}\n\xff\xfe{"key": "b"}\n{"x": "\xe9"}\n'
    )
    assert_frame_equal(index_cache.build(junk), index_cache.build_reference(junk), check_exact=True)


def test_real_records_take_the_fast_path(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text("{}")
    lines = real_lines()
    (run / "trace.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    df = same_as_reference(run)
    assert df.height == len(lines) and df["grade_total"].null_count() == 0
    assert fast_lines(run) == len(lines)  # every one of them, not json.loads


def test_grade_keys_inside_final_doc_and_tool_args(tmp_path):
    inner = {"grade": {"total": 0.01, "note": "not this one"}}
    recs = [
        rec(
            i,
            0.5,
            2,
            final_doc=inner | {"elements": [{"id": "e1", "grade": "x"}]},
            turns=[turn(0, "f.png", grade=inner)],
        )
        for i in range(5)
    ]
    run = tmp_path / "r"
    w = TraceWriter(run)
    for r in recs:
        w.append(r)
    with open(run / "trace.jsonl", "a", encoding="utf-8") as f:
        for line in real_lines():
            f.write(line + "\n")
        for line in odd_lines():
            f.write(line + "\n")
    df = same_as_reference(run)
    assert df.filter(pl.col("task_id") == "t1")["grade_total"].to_list() == [0.5]
    assert df.filter(pl.col("key") == "grades-everywhere")["grade_total"].to_list() == [0.4]
    assert df.filter(pl.col("key") == "grade-after-turns")["grade_total"].to_list() == [0.1]
    assert fast_lines(run) >= len(recs) + len(real_lines())


def test_load_runs_uses_the_fast_index(tmp_path):
    run = make(tmp_path / "r", 20, 1, 2)
    df = A.load_runs(run, cache=False)
    ref = index_cache.build_reference(run)
    # A record whose one problem is its reward is an episode with no score (NaN reward, not scored).
    only_reward = pl.col("problem").str.starts_with("reward is ") & ~pl.col("problem").str.contains("; ")
    ref = (
        ref.with_columns(
            pl.when(only_reward).then(float("nan")).otherwise(pl.col("reward")).alias("reward"),
            pl.when(only_reward).then(False).otherwise(pl.col("scored")).alias("scored"),
        )
        .filter(pl.col("problem").is_null() | only_reward)
        .drop("problem")
    )
    assert df.columns == list(A.EPISODE_COLUMNS) and df.schema == A.EPISODE_SCHEMA
    assert_frame_equal(df.drop("run", "run_name", "env_config"), ref, check_exact=True)
    assert_frame_equal(A.load_runs(run), df, check_exact=True)  # written to the cache
    assert_frame_equal(A.load_runs(run), df, check_exact=True)  # read back from it


def test_grades_edited_as_text_are_what_json_dumps_writes():
    """The fast reader turns a plain grade's compact text (its object as msgspec re-encodes it: of a
    duplicate key, the last value in the first one's place, as json.loads) into its `json.dumps` text by a
    string edit: for every grade it takes that way, the text and total are the exact path's (`json.loads`
    of the raw text, then `json.dumps`), and what it cannot be sure of (a "-0", "1.50", 1e-05, a total
    written as text, {}) goes the exact way."""
    import json
    import random

    import msgspec
    import polars as pl

    from evalkit.records._index import _grades, _plain_grades

    tricky = ['{"a":-0}', '{"total":"0.5"}', '{"a":1.50}', '{"a":0.00001}', "{}",
              '{"a":"x,y"}', '{"a":0.1234567890123456}', '{"a":1e5}', '{"total":true}']  # fmt: skip
    dups = ['{"a":1,"b":2,"a":3}', '{ "total" : 0.5 , "total":0.25}', '{"a":1,"a":{"b":2}}']
    rng = random.Random(0)
    made = []
    for _ in range(5000):
        big = rng.random() * 10 ** rng.randint(-8, 18)
        values = [
            round(rng.random(), rng.randint(0, 17)),
            rng.randint(-5, 5),
            big,
            None,
            True,
            "s t",
            -0.0,
            0.0001,
        ]
        keys = rng.sample(["structure", "visual", "coverage", "order", "total", "n_gt"], rng.randint(1, 6))
        made.append(json.dumps({k: rng.choice(values) for k in keys}, separators=(",", ":")))
    raw = tricky + dups + made
    compact = [msgspec.json.encode(msgspec.json.decode(g, type=dict[str, msgspec.Raw])).decode() for g in raw]
    plain, text, total = _plain_grades(pl.Series(compact))
    want_text, want_total = _grades(raw)
    assert not any(plain.to_list()[: len(tricky)])
    assert plain.to_list()[len(tricky) : len(tricky) + 3] == [True, True, False]
    assert plain.sum() > 1000  # most grades as a batch writes them take the string edit
    assert _grades(compact) == (want_text, want_total)  # and the others the exact way, from the compact text
    for p, t, tot, wt, wtot in zip(plain, text, total, want_text, want_total, strict=True):
        if p:
            assert (t, tot) == (wt, wtot)
