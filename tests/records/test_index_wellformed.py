"""The fast index reader reads a line only when the reference finds nothing wrong with its record.

It has no regex over the lines: msgspec decodes each one into Structs derived from `wellformed.kinds`, at
every depth, and refuses what `wellformed.problems` would fault. These lines put a value of the wrong kind in
every declared field of every record (an episode, a turn, a call, a plan; a failed attempt's list), as the
last of duplicate keys and under an escaped key too; values of the right kind; and values the reference
reads but msgspec refuses. The fast frame must be the reference's, row for row, and read the sound lines
itself.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from evalkit import wellformed as W
from evalkit.records import _index, index_cache
from evalkit.types import EpisodeRecord

# Values (as JSON text) that `wellformed._fits` refuses for each kind, and ones it takes.
WRONG = {
    W.STR: ["3", "true", "{}", "[]"],
    W.INT: ['"1"', "true", "9223372036854775808", "-9223372036854775808", "1e400", "NaN", "[]"],
    W.NUM: ['"0.5"', "true", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "{}", str(2**1024)],
    W.BOOL: ["1", '"true"', "0", "[]"],
    W.OBJ: ["[]", '"x"', "1", "false"],
    W.LIST: ["{}", '"x"', "false", "0"],
    W.OBJS: ["{}", '"x"', "[1]", "[null]", '["x"]', "[[]]", "[{}, 2]", "[{}, true]"],
}
RIGHT = {
    W.STR: ['"s"', '"naïve \\u00e9 \\ud83d\\ude00"', "null"],
    W.INT: ["7", "-3", "9223372036854775807", "-9223372036854775807", "0", "-0"],
    W.NUM: [
        "0.25",
        "3",
        "-0",
        "-0.0",
        "1e-400",
        "123456789012345678901234567890",
        "1E+2",
        str(int(sys.float_info.max) + 1),
    ],  # an integer past the largest float that float() still rounds
    W.BOOL: ["true", "false"],
    W.OBJ: ['{"a": [1, {"b": null}]}', "{}"],
    W.LIST: ['[1, "x", null, {}]', "[]"],
    W.OBJS: ["[{}]", "[]"],
    W.ANY: ['{"x": 1e999}', '"x"', "[null]", "3"],
}
# Values the reference finds sound that msgspec refuses: those lines are read by the reference.
STRICT = {
    W.STR: ['"\\ud800"', '"\\udc00x"'],  # a lone surrogate
    W.INT: ["1.5", "2.0", "1e2"],  # the reference takes a float for an integer (and truncates it)
    W.OBJ: ['{"a": NaN}'],
    W.LIST: ["[Infinity]"],
    W.ANY: ["NaN", '{"a": [-Infinity]}', '"\\udfff"'],
}
BASE = '"format_version": 1, "model": "m", "env": "canvas", "surface": "tools", "mode": "reference"'


def places() -> list[tuple[type, str, str]]:
    """Each record class, a name for it, and a line holding one such record (its fields at "@")."""
    turn = W.kinds(EpisodeRecord)["turns"][1]
    call = W.kinds(turn)["calls"][1]
    plan = W.kinds(EpisodeRecord)["plans"][1]
    return [
        (EpisodeRecord, "episode", "{BASE, @}"),
        (turn, "turn", '{BASE, "turns": [{"frame": "f.png"}, {@}]}'),
        (call, "call", '{BASE, "turns": [{"calls": [{"id": "a"}, {@}]}]}'),
        (plan, "plan", '{BASE, "plans": [{@}]}'),
    ]


def lines(values: dict[str, list[str]], skip: tuple[str, ...] = ()) -> list[str]:
    """A line for each value of each field's kind in each record, its key ahead of the field (which may be
    the key itself): as the field's only value, as the last of a duplicate key, and under a key whose first
    letter is escaped. `skip` names (record, field) pairs to leave out."""
    out = []
    for cls, where, line in places():
        for name, (kind, _) in W.kinds(cls).items():
            if (where, name) in skip:
                continue
            good = RIGHT[kind][0]
            esc = f"\\u{ord(name[0]):04x}{name[1:]}"
            for j, v in enumerate(values.get(kind, [])):
                for how, fields in (
                    ("only", f'"{name}": {v}'),
                    ("last", f'"{name}": {good}, "{name}": {v}'),
                    ("escaped", f'"{esc}": {v}'),
                ):
                    base = f'{BASE}, "key": "{where}-{name}-{j}-{how}"'
                    out.append(line.replace("BASE", base).replace("@", fields))
    return out


def run_of(tmp: Path, text: list[str]) -> Path:
    run = tmp / "r"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "trace.jsonl").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    return run


def fast_lines(run: Path) -> int:
    with open(run / "trace.jsonl", "rb") as f:
        parts = _index._scan(f.fileno(), 0, os.fstat(f.fileno()).st_size)
    return sum(f.height for _, f in parts)


def test_a_wrong_kind_anywhere_goes_the_reference_way(tmp_path):
    text = lines(WRONG)
    for t in text:
        json.loads(t)  # every line is an object json.loads reads (NaN and Infinity included)
    run = run_of(tmp_path, text)
    ref = index_cache.build_reference(run)
    # Every line is malformed to the reference (the wrong value is the one json.loads keeps): the fast path,
    # which gives no problem, must read none of them.
    assert ref.height > len(text) // 2 and ref["problem"].null_count() == 0, ref.filter(
        pl.col("problem").is_null()
    )
    assert_frame_equal(index_cache.build(run), ref, check_exact=True)
    assert fast_lines(run) == 0


def test_values_of_the_right_kind_are_read_by_the_fast_path(tmp_path):
    text = lines(RIGHT)
    run = run_of(tmp_path, text)
    ref = index_cache.build_reference(run)
    assert ref.height > len(text) // 2 and ref["problem"].null_count() == ref.height
    assert_frame_equal(index_cache.build(run), ref, check_exact=True)
    assert fast_lines(run) == len(text)  # msgspec reads every one of them itself


def test_values_the_reference_reads_and_msgspec_refuses_go_the_reference_way(tmp_path):
    # Not in the key: the reference itself cannot put a lone surrogate there in a frame (keys are kept as is).
    text = lines(STRICT, skip=(("episode", "key"),))
    run = run_of(tmp_path, text)
    ref = index_cache.build_reference(run)
    assert ref.height > len(text) // 2 and ref["problem"].null_count() == ref.height
    assert_frame_equal(index_cache.build(run), ref, check_exact=True)
    assert fast_lines(run) == 0


def test_numbers_and_keys_read_as_json_loads_reads_them(tmp_path):
    """The index's own fields where msgspec could read a value otherwise than json.loads."""
    text = [
        '{"key": "neg-zero-int", "reward": -0, "repeat": -0, "cost_usd": -0}',
        '{"key": "big-int", "reward": 123456789012345678901234567890, "seconds": -18446744073709551617}',
        '{"key": "tie", "reward": 9007199254740993, "difficulty_score": 18446744073709551615}',
        '{"key": "tiny", "reward": 1e-400, "seconds": 2.4703282292062328e-324}',
        '{"key": "max", "reward": 1.7976931348623158e308, "n_turns": 9223372036854775807}',
        # inf to json.loads: malformed
        '{"key": "over", "reward": 1.7976931348623159e308}',
        '{"key": "min-count", "n_turns": -9223372036854775807, "drafts": -9223372036854775808}',
        '{"key": "dup", "reward": 0.1, "reward": 0.7, "model": "a", "model": "b"}',
        '{"key": "dup-null", "reward": 0.1, "reward": null, "grade": {"total": 1}, "grade": null}',
        '{"key": "dup-obj", "grade": null, "grade": {"total": 0.5}, "usage": {"input": 1}, "usage": {}}',
        '{"key": "escaped", "rew\\u0061rd": 0.25, "\\u006dodel": "m\\u00e9", "tier": "\\u0068ard"}',
        '{"key": "escaped-dup", "reward": 0.5, "rew\\u0061rd": 0.75}',
        '{"key": "nested-escaped", "turns": [{"fr\\u0061me": "f.png"}, {"frame": "g", "fr\\u0061me": ""}]}',
        '{"key": "derived", "problems": "turns is a string", "run_dir": 3, "reward": 0.5}',
        '{"key": "lone-nested", "turns": [{"text": "\\ud800", "frame": "f.png"}], "reward": 0.5}',
        '{"key": "turn-string", "turns": ["frame"], "reward": 0.5}',
        '{"key": "turn-frame-number", "turns": [{"frame": 1}], "reward": 0.5}',
        '{"key": "info-other", "info": {"importer": "x", "note": NaN}, "reward": 0.5}',
        '{"key": "any-inf", "final_doc": {"x": 1e999, "y": -1e999}, "reward": 0.5}',
    ]
    run = run_of(tmp_path, ['{"format_version": 1, ' + t[1:] for t in text])
    ref = index_cache.build_reference(run)
    assert_frame_equal(index_cache.build(run), ref, check_exact=True)
    got = dict(zip(ref["key"], ref["reward"], strict=True))
    assert got["dup"] == 0.7 and got["escaped"] == 0.25 and got["escaped-dup"] == 0.75
    assert str(got["neg-zero-int"]) == "0.0"  # json.loads reads -0 as the integer 0
    fast = {"neg-zero-int", "big-int", "tie", "tiny", "max", "dup", "dup-null", "dup-obj", "escaped"}
    fast |= {"escaped-dup", "nested-escaped", "derived", "any-inf"}
    assert fast_lines(run) == len(fast)


def test_bytes_that_are_not_utf8_in_skipped_text_go_the_reference_way(tmp_path):
    """msgspec skips a field it does not declare without checking that its bytes are UTF-8; json.loads
    reads them otherwise (an encoded surrogate) or refuses the line (an overlong form, a stray byte)."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text("{}")
    bad = [b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\xf5\x80\x80\x80"]
    body = [
        b'{"format_version": 1, "key": "k%d", "final_doc": {"t": "%s"}, "reward": 0.5}' % (i, b)
        for i, b in enumerate(bad)
    ]
    (run / "trace.jsonl").write_bytes(b"\n".join(body + [b'{"format_version": 1, "key": "ok"}', b""]))
    assert_frame_equal(index_cache.build(run), index_cache.build_reference(run), check_exact=True)
    # json.loads reads bytes with "surrogatepass": an encoded surrogate is read (as a lone one), the rest not.
    assert index_cache.build(run)["key"].to_list() == ["k0", "ok"]
