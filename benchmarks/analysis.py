"""Analysis speed: vectorised summaries and tier CIs against plain Python, and trace load time.

    python benchmarks/analysis.py [--episodes 30000] [--load 100000] [--append 100] [--repeat 3] [--reference]
        [--kept-appends 300] [--against REV] [--decode-bounds]

1. 30,000 synthetic episodes, 3 models × 3 tiers (tasks repeated 4 times, 2% unscored): `summarise` +
   `by_tier` (its default interval on both reward means; the plain-Python side draws 2,000 task-clustered
   bootstrap resamples) against the same summary written
   here in plain Python (dict grouping, `random.choices` resampling). Prints the ratio (goal ≥ 10×).
2. A 100,000-episode trace.jsonl: `load_runs` cold (parse + write the index) and with the cached index
   (goals ≤ 1.0 s and ≤ 0.3 s on the development machine). Prints the ratio and the seconds; the cold load
   again in one process, where it reads the later half of the trace in a second one (a machine with two
   CPUs or more); with `--reference`, also the reference reader (`json.loads` per line) against the fast one.
3. The same trace while a batch still runs: `--append` more episodes appended, then `load_runs` again, which
   extends the cached index with the new lines instead of reading the whole trace. Prints the ratio of that
   reload to the cold load.
4. A run evalkit wrote: its writer keeps the index beside the trace (`evalkit.records.kept`), so a load with
   no cached index reads that instead of the trace (the goal: no cold load). The trace above was written
   without a writer, as another program would: a `TraceWriter` opened on it first catches it up whole
   (printed: what a writer pays once on a run an older evalkit wrote), then `load_runs` with no cached
   index is timed against the cold load; and what keeping the index adds to each append (`--kept-appends`
   records through a writer, with and without it).

The cold load also prints its CPU: this process's, the fork's (`beside`), and the critical path (this
process's CPU before it waits for the fork's part, or the fork's whole CPU if longer, plus what this process
does after the wait), which a loaded machine inflates less than the wall time. `--against REV` loads the trace
cold with `evalkit/records/_index.py` as it was at git revision REV and with this checkout's, alternating,
and prints the ratios of their medians (the same frame is asserted). `--decode-bounds` asks what a
shallower msgspec decode could save: the cold load as it is, alternating with two decoders that are not
readers (their frames may be wrong on a malformed trace; the bench's is sound): one that leaves out the check
of the nested records (turns read for their frames only, calls and plans only checked to be objects), what
deferring that check to an episode's opening would save; and one that reads the index's fields alone (no
turns: `n_frames` wrong), the floor of any decode of this shape. Prints the medians and their ratios.

Episodes are shaped like a real canvas run's (data/sample-run): the grade, a final document with its
elements (and the grade again), a frame per turn, tool calls with arguments and results — ~7 KB a line, so
the 100,000-episode trace is ~710 MB.

Times are medians of `--repeat` runs (the plain-Python summary runs once): the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import defaultdict
from pathlib import Path

from evalkit import analysis
from evalkit.records import _index, beside, index_cache, kept
from evalkit.records.rundir import TraceWriter
from evalkit.types import EpisodeRecord, episode_key

MODELS = ("model-a", "model-b", "model-c")
TIERS = ("easy", "medium", "hard")


COLORS = ("#ff7f0e", "#ffffff", "#f4a261", "#15e6e9", "#043c78", "#98c993", "#d82b8a", "#264653")
WORDS = "header card button pricing hero footer title logo banner panel column grid".split()


def _sha(rng: random.Random) -> str:
    h = f"{rng.getrandbits(256):064x}"
    return f"frames/{h[:2]}/{h}.png"


def _element(rng: random.Random, i: int) -> dict:
    kind = rng.choice(("rect", "rect", "text", "line", "ellipse"))
    return {
        "id": f"e{i}",
        "kind": kind,
        "x": round(rng.uniform(0, 600), 1),
        "y": round(rng.uniform(0, 600), 1),
        "width": round(rng.uniform(0, 400), 1),
        "height": round(rng.uniform(0, 400), 1),
        "fill": None if kind == "line" else rng.choice(COLORS),
        "stroke": rng.choice(COLORS) if kind == "line" else None,
        "stroke_width": rng.randint(1, 3) if kind == "line" else 0,
        "radius": rng.choice((0, 0, 8, 16)),
        "text": rng.choice(WORDS).title() if kind == "text" else "",
        "font_size": rng.choice((12, 16, 24, 32)),
    }


def episode(rng: random.Random, model: str, mi: int, task: int, rep: int) -> dict:
    """One episode shaped as `EpisodeRecord.to_dict()` writes a canvas run (as in data/sample-run): a grade,
    a final document with its elements (and the grade again), frames per turn, tool calls with their
    arguments and results, the last one a submit returning the grade."""
    tier = TIERS[task % 3]
    unscored = rng.random() < 0.02
    reward = (
        None if unscored else round(min(1.0, max(0.0, rng.gauss(0.7 - 0.2 * (task % 3) + 0.05 * mi, 0.2))), 4)
    )
    n_turns = rng.randint(1, 12)
    elements = [_element(rng, i + 1) for i in range(rng.randint(1, 12))]
    grade = None
    if reward is not None:
        grade = {
            k: round(rng.random(), 4) for k in ("structure", "visual", "coverage", "order", "background")
        }
        grade |= {"total": reward, "n_gt": len(elements), "n_submitted": len(elements), "n_matched": 2}
    usage = {"input": 900 * n_turns, "output": 200 * n_turns, "cache_read": 400 * n_turns, "cache_write": 0}
    usage |= {"reasoning_tokens": 50 * n_turns, "reasoning_chars": 180 * n_turns}
    calls = [("set_background", {"color": rng.choice(COLORS)}, '{"background": "#f7f3e9"}')]
    for e in elements:
        args = {k: v for k, v in e.items() if k != "id" and v not in (None, "", 0)}
        calls.append(("add_element", args, json.dumps({"id": e["id"]})))
    calls.append(("submit", {}, json.dumps(grade) if grade else "error: endpoint overloaded"))
    per_turn = [calls[k::n_turns] for k in range(n_turns)]  # spread over the turns, in order enough
    turns, n = [], 0
    for k, cs in enumerate(per_turn):
        tc = []
        for name, args, result in cs:
            n += 1
            tc.append(
                {"id": f"call_{n}", "name": name, "args": args, "ok": True, "result": result}
                | {"images": [], "parse_error": False}
            )
        turns.append(
            {
                "turn": k + 1,
                "text": f"Turn {k + 1}: placing the {rng.choice(WORDS)} and the {rng.choice(WORDS)} "
                "to match the target's layout.",
                "reasoning": "The target shows a card on the left; its colour is close to orange. " * (k % 3),
                "stop": "tool_use",
                "usage": {"input": 900, "output": 200, "cache_read": 400, "cache_write": 0}
                | {"reasoning_tokens": 50, "reasoning_chars": 180},
                "model_s": round(rng.uniform(1, 9), 3),
                "env_s": round(rng.uniform(0.1, 0.5), 3),
                "frame": _sha(rng),
                "calls": tc,
            }
        )
    key = episode_key(model, "canvas", "tools", "reference", f"t{task}", None, rep)
    return {
        "format_version": 1,
        "key": key,
        "model": model,
        "env": "canvas",
        "surface": "tools",
        "mode": "reference",
        "split": "test",
        "task_id": f"t{task}",
        "evalset_task": f"{task:012x}",
        "tier": tier,
        "difficulty_score": round(rng.random(), 4),
        "skin": None,
        "coordinates": "pixels",
        "repeat": rep,
        "episode_id": f"{rng.getrandbits(128):032x}",
        "prompt_version": "canvas-tools-1",
        "reward": reward,
        "grade": grade,
        "end_reason": "error" if unscored else "submitted",
        "error_class": "endpoint_error" if unscored else None,
        "error": "EndpointError: 529 overloaded" if unscored else None,
        "traceback": None,
        "auto_submitted": False,
        "provider_switches": [],
        "usage": usage,
        "cost_usd": round(0.002 * n_turns, 6),
        "n_turns": n_turns,
        "tool_calls": len(calls),
        "tool_errors": rng.randint(0, 2),
        "parse_errors": 0,
        "seconds": round(3.0 * n_turns, 3),
        "model_seconds": round(2.5 * n_turns, 4),
        "env_seconds": round(0.4 * n_turns, 4),
        "started": "2026-11-30T14:25:24+00:00",
        "target": f"renders/t{task}__target.jpg",
        "frame0": _sha(rng),
        "render": f"renders/{key}__final.png",
        "final_doc": {
            "episode_id": f"{rng.getrandbits(128):032x}",
            "task_id": f"t{task}",
            "done": True,
            "steps": len(calls),
            "grade": grade,
            "width": 640,
            "height": 640,
            "background": rng.choice(COLORS),
            "elements": elements,
        },
        "turns": turns,
        "info": {},
    }


def write_trace(path: Path, n: int, seed: int = 0) -> list[dict]:
    """Write n episodes of 3 models (tasks repeated 4 times, 2% unscored) as `TraceWriter` does; return
    their top-level fields (without final_doc and turns) for the plain-Python summary."""
    rng = random.Random(seed)
    per_model = n // len(MODELS)
    n_tasks = max(1, per_model // 4)
    heads = []
    with open(path, "w", encoding="utf-8") as f:
        for mi, model in enumerate(MODELS):
            for i in range(per_model):
                d = episode(rng, model, mi, i % n_tasks, i // n_tasks)
                f.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")
                heads.append({k: v for k, v in d.items() if k not in ("final_doc", "turns")})
    return heads


def append_trace(path: Path, n: int, seed: int) -> None:
    """Append n new episodes (new keys: repeats no earlier episode has) as `TraceWriter` would."""
    rng = random.Random(seed)
    with open(path, "a", encoding="utf-8") as f:
        for i in range(n):
            d = episode(rng, MODELS[i % len(MODELS)], i % len(MODELS), i, 1_000_000 + seed)
            f.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")


def python_summary(rows: list[dict], n_boot: int = 2000, seed: int = 0) -> dict:
    """The same numbers as summarise + by_tier, the way one writes them without a dataframe library."""
    rng = random.Random(seed)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        g = (r["model"], r["env"], r["surface"], r["mode"])
        groups[g].append(r)
        groups[g + (r["tier"],)].append(r)
        groups[g + ("all",)].append(r)
    out = {}
    for g, rs in groups.items():
        scored = [r["reward"] for r in rs if r["error_class"] is None and r["reward"] is not None]
        n_turns = sum(r["n_turns"] for r in rs)
        row = {
            "n": len(rs),
            "scored": len(scored),
            "unscored": len(rs) - len(scored),
            "mean_reward": statistics.fmean(scored) if scored else None,
            "mean_reward_unscored_as_0": sum(scored) / len(rs),
            "min": min(scored, default=None),
            "max": max(scored, default=None),
            "turns": statistics.fmean(r["n_turns"] for r in rs),
            "calls": statistics.fmean(r["tool_calls"] for r in rs),
            "tool_errors": statistics.fmean(r["tool_errors"] for r in rs),
            "tokens": statistics.fmean(
                sum(r["usage"][k] for k in ("input", "output", "cache_read", "cache_write")) for r in rs
            ),
            "reasoning_per_turn": sum(r["usage"]["reasoning_tokens"] for r in rs) / n_turns,
            "cost": sum(r["cost_usd"] for r in rs),
        }
        if len(g) == 5:  # per tier: task-clustered bootstrap of both means
            per_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
            for r in rs:
                t = per_task[r["task_id"]]
                ok = r["error_class"] is None and r["reward"] is not None
                t[0] += r["reward"] if ok else 0.0
                t[1] += ok
                t[2] += 1
            tasks = list(per_task.values())
            boots, boots0 = [], []
            for _ in range(n_boot):
                sample = rng.choices(tasks, k=len(tasks))
                s = sum(t[0] for t in sample)
                c = sum(t[1] for t in sample)
                boots.append(s / c if c else float("nan"))
                boots0.append(s / sum(t[2] for t in sample))
            boots.sort()
            boots0.sort()
            lo, hi = int(0.025 * n_boot), int(0.975 * n_boot) - 1
            row |= {"ci": (boots[lo], boots[hi]), "ci0": (boots0[lo], boots0[hi])}
        out[g] = row
    return out


def median_of(fn, repeat: int = 3, before=None) -> float:
    times = []
    for _ in range(repeat):
        if before:
            before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cold_cpu(run: Path, repeat: int, index_module=None) -> tuple[float, float, float, float]:
    """Medians of a cold `load_runs`: wall seconds, this process's CPU, the fork's CPU, and the CPU on the
    critical path (max(this process's CPU before the wait, the fork's) + this process's after it)."""
    rows = []
    real_beside, real_module = beside.beside, index_cache._index
    waits: list[tuple[float, float]] = []

    @contextlib.contextmanager
    def timed_beside(fn):
        with real_beside(fn) as theirs:

            def wait():
                c, t0 = time.process_time(), os.times()
                got = theirs()
                t1 = os.times()
                waits.append(
                    (c, t1.children_user + t1.children_system - t0.children_user - t0.children_system)
                )
                return got

            yield wait

    beside.beside = timed_beside
    if index_module is not None:
        index_cache._index = index_module
    try:
        for _ in range(repeat):
            index_cache.flush()
            shutil.rmtree(run / ".evalkit", ignore_errors=True)
            waits.clear()
            t, c0 = time.perf_counter(), time.process_time()
            analysis.load_runs(run)
            wall, c1 = time.perf_counter() - t, time.process_time()
            pre, child = waits[-1] if waits else (c1, 0.0)
            rows.append((wall, c1 - c0, child, max(pre - c0, child) + c1 - pre))
        index_cache.flush()
    finally:
        beside.beside, index_cache._index = real_beside, real_module
    return tuple(statistics.median(r[j] for r in rows) for j in range(4))  # type: ignore[return-value]


def against(run: Path, rev: str, repeat: int) -> None:
    """Cold loads with `_index` as at git revision `rev` and as in this checkout, alternating; print both
    and their ratios."""
    src = subprocess.run(
        ["git", "show", f"{rev}:evalkit/records/_index.py"], capture_output=True, check=True, text=True
    ).stdout
    old = types.ModuleType("evalkit.records._index_before")
    sys.modules[old.__name__] = old  # msgspec resolves the Structs' annotations through it
    exec(compile(src, f"{rev}:_index.py", "exec"), old.__dict__)  # noqa: S102 - our own file, at a revision
    got: dict[str, list] = {"before": [], "this": []}
    for i in range(repeat):
        for name in ("before", "this") if i % 2 == 0 else ("this", "before"):
            got[name].append(cold_cpu(run, 1, old if name == "before" else None))
    index_cache._index = old
    try:
        before_df = analysis.load_runs(run, cache=False)
    finally:
        index_cache._index = _index
    assert analysis.load_runs(run, cache=False).equals(before_df), "the frame differs from the revision's"
    med = {k: [statistics.median(r[j] for r in v) for j in range(4)] for k, v in got.items()}
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  cold, {rev} vs this checkout (alternating, median of {repeat} each; load average {load}):")
    for k, (wall, mine, fork, crit) in med.items():
        print(
            f"    {k:6s}: {wall:.2f} s wall; CPU {mine:.2f} s here, {fork:.2f} s in the fork, "
            f"{crit:.2f} s critical path"
        )
    b, t = med["before"], med["this"]
    print(
        f"    this / before: wall {t[0] / b[0]:.2f}x, critical-path CPU {t[3] / b[3]:.2f}x, "
        f"total CPU {(t[1] + t[2]) / (b[1] + b[2]):.2f}x"
    )


def _bound_decoders() -> dict[str, tuple]:
    """The two cut-down decoders of `--decode-bounds` (see the module docstring): name -> (decode,
    decode_lines, what `_take` counts a turn's frame by)."""
    import msgspec

    from evalkit import wellformed

    class Checked(msgspec.Struct, gc=False):
        """An object, its contents skipped."""

    turn = msgspec.defstruct(
        "Turn",
        [
            ("frame", str | None, None),
            ("calls", list[Checked] | None, None),
            ("failed_attempts", list[Checked] | None, None),
        ],
        gc=False,
    )
    own = {
        "grade": dict[str, msgspec.Raw] | None,
        "usage": _index._Usage | None,
        "info": _index._Info | None,
        "provider_switches": list[msgspec.Raw] | None,
        "turns": list[turn] | None,
        "plans": list[Checked] | None,
    }
    fields = [
        (name, own.get(name) or _index._KIND[kind] | None, None)
        for name, (kind, _) in wellformed.kinds(EpisodeRecord).items()
        if name in own or kind != wellformed.ANY
    ]
    read = {*_index._FIELDS, "grade", "usage", "info", "provider_switches", "auto_submitted"}
    index_only = [f for f in fields if f[0] in read] + [("turns", list[Checked] | None, None)]
    out = {}
    for name, fs, frame in (
        ("nested unchecked", fields, _index._FRAME),
        ("index fields only", index_only, lambda t: None),
    ):
        dec = msgspec.json.Decoder(msgspec.defstruct("Bound", fs, gc=False))
        out[name] = (dec.decode, dec.decode_lines, frame)
    return out


def decode_bounds(run: Path, repeat: int) -> None:
    """Cold loads with `_index`'s decoder and with each of `_bound_decoders`, alternating; print the medians
    and their ratios to the real one."""
    decoders = {"as it is": (_index._DECODE, _index._DECODE_LINES, _index._FRAME), **_bound_decoders()}
    real = decoders["as it is"]
    got: dict[str, list] = {k: [] for k in decoders}
    try:
        for i in range(repeat):
            for name in decoders if i % 2 == 0 else reversed(decoders):
                _index._DECODE, _index._DECODE_LINES, _index._FRAME = decoders[name]
                got[name].append(cold_cpu(run, 1))
    finally:
        _index._DECODE, _index._DECODE_LINES, _index._FRAME = real
        index_cache.flush()  # the index a cut-down decoder wrote is no reader's: the real one writes it
        shutil.rmtree(run / ".evalkit", ignore_errors=True)
        analysis.load_runs(run)
        index_cache.flush()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"  cold, decoders that are not readers (alternating, median of {repeat} each; load average {load}):"
    )
    base = [statistics.median(r[j] for r in got["as it is"]) for j in range(4)]
    for name, rows in got.items():
        wall, mine, fork, crit = (statistics.median(r[j] for r in rows) for j in range(4))
        both = (mine + fork) / (base[1] + base[2])
        print(
            f"    {name:17s}: {wall:.2f} s wall; CPU {mine:.2f} s here, {fork:.2f} s in the fork, "
            f"{crit:.2f} s critical path ({crit / base[3]:.2f}x), {mine + fork:.2f} s both ({both:.2f}x)"
        )


def kept_load(run: Path, repeat: int) -> tuple[float, float]:
    """Seconds for a writer to catch the whole trace up into its kept index, and the median seconds of a
    `load_runs` that has that index and no cached one (which must read nothing cold)."""
    shutil.rmtree(run / ".evalkit", ignore_errors=True)
    t = time.perf_counter()
    assert TraceWriter(run).keeping()
    catch_up = time.perf_counter() - t
    read_cold: list[int] = []
    real = _index._part

    def counted(fd, lo, hi):
        read_cold.append(hi - lo)
        return real(fd, lo, hi)

    def uncached() -> None:
        index_cache.flush()
        for p in (run / ".evalkit").glob("index-v*.parquet"):
            p.unlink()

    _index._part = counted
    try:
        t_kept = median_of(lambda: analysis.load_runs(run), repeat, before=uncached)
    finally:
        _index._part = real
    assert not read_cold, f"a run with its index kept read {sum(read_cold)} bytes cold"
    return catch_up, t_kept


def append_cost(run: Path, n: int) -> tuple[float, float]:
    """Median seconds of an append through a `TraceWriter`, with the index kept and without it."""
    rng = random.Random(7)
    recs = [EpisodeRecord.from_dict(episode(rng, MODELS[i % 3], i % 3, i, 0)) for i in range(n)]
    out = []
    for keep in (True, False):
        shutil.rmtree(run, ignore_errors=True)
        w = TraceWriter(run)
        assert w.keeping() or not keep
        if not keep:
            w._journal = None  # as a writer whose journal could not be opened
        times = []
        for r in recs:
            t = time.perf_counter()
            w.append(r)
            times.append(time.perf_counter() - t)
        out.append(statistics.median(times))
        if keep:
            with open(run / "trace.jsonl", "rb") as f:
                assert kept.read(run, f.fileno()).rows.height == n
    return out[0], out[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=30_000)
    ap.add_argument("--load", type=int, default=100_000)
    ap.add_argument("--append", type=int, default=100, help="episodes appended before the incremental load")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time the json.loads-per-line reader")
    ap.add_argument("--kept-appends", type=int, default=300, help="records appended to time the kept index")
    ap.add_argument("--against", metavar="REV", help="also time the cold load with _index.py as at REV")
    ap.add_argument(
        "--decode-bounds", action="store_true", help="also time the cold load with cut-down decoders (bounds)"
    )
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "summary-run"
        run.mkdir()
        rows = write_trace(run / "trace.jsonl", a.episodes)
        df = analysis.load_runs(run)
        index_cache.flush()  # the index is written in a thread: done before the directory is removed
    assert df.height == len(rows), df.height

    t_vec = median_of(lambda: (analysis.summarise(df), analysis.by_tier(df)), a.repeat)
    t_py = median_of(lambda: python_summary(rows), repeat=1)
    print(f"summarise + by_tier, {a.episodes:,} episodes, 3 models x 3 tiers, 2,000 resamples:")
    print(f"  plain Python / evalkit.analysis = {t_py / t_vec:.1f}x   ({t_py:.2f} s vs {t_vec:.3f} s)")

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "load-run"
        run.mkdir()
        big = write_trace(run / "trace.jsonl", a.load, seed=1)
        size = (run / "trace.jsonl").stat().st_size

        def uncached() -> None:
            index_cache.flush()  # an index written in a thread by the load before
            shutil.rmtree(run / ".evalkit", ignore_errors=True)

        load = " ".join(f"{x:.1f}" for x in os.getloadavg())  # a shared machine: say how busy it was
        t_cold = median_of(lambda: analysis.load_runs(run), a.repeat, before=uncached)
        # The same with the index written: a large one is written in a thread once the frame is returned.
        t_written = median_of(
            lambda: (analysis.load_runs(run), index_cache.flush()), a.repeat, before=uncached
        )
        cpu = cold_cpu(run, a.repeat)
        cold = analysis.load_runs(run)
        index_cache.flush()
        t_warm = median_of(lambda: analysis.load_runs(run), a.repeat)
        t_nocache = median_of(lambda: analysis.load_runs(run, cache=False), a.repeat)
        t_one = None
        if beside.spare_cpu():  # the same, in one process: without the later lines decoded beside
            split, _index._BESIDE_BYTES = _index._BESIDE_BYTES, float("inf")
            try:
                t_one = median_of(lambda: analysis.load_runs(run), a.repeat, before=uncached)
                assert analysis.load_runs(run, cache=False).equals(cold)
            finally:
                _index._BESIDE_BYTES = split
        t_ref = median_of(lambda: index_cache.build_reference(run), 1) if a.reference else None
        if a.against:  # printed now: the trace is appended to below
            against(run, a.against, a.repeat)
        if a.decode_bounds:
            decode_bounds(run, a.repeat)
        appended = []

        def grow() -> None:
            appended.append(len(appended))
            append_trace(run / "trace.jsonl", a.append, seed=len(appended))

        extended = []
        real_extend = index_cache._extend

        def counting_extend(*args):
            extended.append(1)
            return real_extend(*args)

        index_cache._extend = counting_extend
        try:
            t_inc = median_of(lambda: analysis.load_runs(run), a.repeat, before=grow)
        finally:
            index_cache._extend = real_extend
        assert len(extended) == len(appended), (
            "a reload after an append rebuilt the index instead of extending it"
        )
        grown = analysis.load_runs(run)
        assert grown.equals(analysis.load_runs(run, cache=False))  # extended = built from scratch
        t_catch, t_kept = kept_load(run, a.repeat)
        assert analysis.load_runs(run).equals(grown)
        per_append = append_cost(Path(tmp) / "appends", a.kept_appends)
    assert cold.height == len(big)
    assert grown.height == len(big) + a.append * len(appended), grown.height
    print(f"load_runs, {a.load:,} episodes ({size / 1e6:.0f} MB trace; load average {load}):")
    print(
        f"  cold / cached index = {t_cold / t_warm:.0f}x   ({t_cold:.2f} s vs {t_warm:.3f} s; goals 1.0 s "
        f"and 0.3 s; the index written beside, in a thread, by {t_written:.2f} s)"
    )
    print(
        f"  cold, CPU: {cpu[1]:.2f} s here, {cpu[2]:.2f} s in the fork, {cpu[3]:.2f} s on the critical path "
        f"({cpu[0]:.2f} s wall)"
    )
    print(f"  parse without writing the index: {t_nocache:.2f} s")
    if t_one is not None:
        print(f"  cold in one process / cold = {t_one / t_cold:.2f}x   ({t_one:.2f} s)")
    print(
        f"  {a.append:,} episodes appended, reload (extends the index) / cold = {t_inc / t_cold:.3f}   "
        f"({t_inc:.3f} s vs {t_cold:.2f} s)"
    )
    print(
        f"  a run evalkit wrote (index kept beside the trace, none cached) / cold = {t_kept / t_cold:.2f} "
        f"({t_kept:.2f} s: no cold load; a writer caught the trace up once in {t_catch:.2f} s)"
    )
    with_kept, without = per_append
    print(
        f"  an append through the writer: {with_kept * 1e3:.2f} ms with the index kept, "
        f"{without * 1e3:.2f} ms without (median of {a.kept_appends} appends; both fsync the trace)"
    )
    if t_ref is not None:
        ratio = t_ref / t_nocache
        print(f"  reference reader (json.loads per line) / fast reader = {ratio:.1f}x   ({t_ref:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
