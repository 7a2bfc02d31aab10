"""What keeping the model's conversation costs in trace bytes, and what reading it back costs in time.

One batch on the embedded canvas env (reference and description modes) of the offline tracer and of the
stand-in model (`evalkit.providers.standin`: the real Anthropic SDK and provider code against a local server),
once as evalkit writes it and once with `--save-raw`. Per model, bytes of `trace.jsonl` per turn without
frames (pictures live in `frames/` and `renders/`, never in the trace):

- `before`: the records without their `transcript` (the format before transcripts were kept);
- `after`: the records as written; `texts/`: the run's shared text store, per turn of the whole run;
- `raw/`: with --save-raw, the request and response bodies per turn (images as frame references).

And the median time of `transcripts.messages()` for one episode, first read (texts from disk) and again
(texts cached), against reading the episode's record.

    PYTHONPATH=. python benchmarks/transcripts.py [--tasks 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.envs.embedded.server import serve  # noqa: E402
from evalkit.providers import prices  # noqa: E402
from evalkit.providers.standin import SPEC, StandIn  # noqa: E402
from evalkit.records import rundir, transcripts  # noqa: E402
from evalkit.run.batch import run_batch  # noqa: E402

EVALSET = Path(__file__).resolve().parents[1] / "data" / "evalsets" / "canvas-test-300.json"
MODELS = ["baseline:tracer", SPEC]


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def measure(run: Path) -> dict:
    lines = (run / rundir.TRACE).read_text(encoding="utf-8").splitlines()
    per: dict[str, dict] = {}
    for line in lines:
        d = json.loads(line)
        m = per.setdefault(d["model"], {"turns": 0, "before": 0, "after": 0})
        m["turns"] += d["n_turns"]
        m["after"] += len(line.encode()) + 1
        bare = {k: v for k, v in d.items() if k != "transcript"}
        m["before"] += (
            len(json.dumps(bare, ensure_ascii=False, separators=(",", ":"), default=str).encode()) + 1
        )
    turns = sum(m["turns"] for m in per.values())
    return {"per": per, "turns": turns, "texts": _bytes(run / "texts"), "raw": _bytes(run / "raw")}


def read_times(run: Path, repeat: int = 3) -> tuple[float, float, float]:
    offsets = [o for o, _ in rundir.iter_offsets(run)]
    cold, warm, record = [], [], []
    transcripts._stored.cache_clear()
    for o in offsets:
        t = time.perf_counter()
        rec = rundir.read_at(run, o)
        record.append(time.perf_counter() - t)
        t = time.perf_counter()
        transcripts.messages(rec, run)
        cold.append(time.perf_counter() - t)
        for _ in range(repeat):
            t = time.perf_counter()
            transcripts.messages(rec, run)
            warm.append(time.perf_counter() - t)
    return statistics.median(record), statistics.median(cold), statistics.median(warm)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=12)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalkit-transcripts-"))
    with StandIn() as standin, serve("canvas") as env:
        import os

        os.environ.update(standin.environ())
        prices.price_table.cache_clear()
        runs = {}
        for raw in (False, True):
            out = tmp / ("raw" if raw else "plain")
            modes = ["reference", "description"]
            run_batch(MODELS, env, out=out, evalset=EVALSET, subset="lite", limit=args.tasks, max_turns=12,
                      modes=modes, concurrency=2, save_raw=raw, progress=False)  # fmt: skip
            runs[raw] = out
    plain, raw = measure(runs[False]), measure(runs[True])
    print(f"{args.tasks} tasks × 2 modes × {len(MODELS)} models, {plain['turns']} turns (run in {tmp})")
    print(f"{'model':34} {'turns':>6} {'before B/turn':>14} {'after B/turn':>13} {'ratio':>6}")
    for model, m in plain["per"].items():
        b, a = m["before"] / m["turns"], m["after"] / m["turns"]
        print(f"{model:34} {m['turns']:>6} {b:>14.0f} {a:>13.0f} {a / b:>6.2f}")
    print(f"texts/ (shared, stored once): {plain['texts'] / plain['turns']:.0f} B per turn of the run "
          f"({plain['texts']:,} B in {len(list((runs[False] / 'texts').rglob('*.*')))} files)")  # fmt: skip
    model = raw["per"][SPEC]
    print(
        f"--save-raw: raw/ {raw['raw'] / model['turns']:,.0f} B per turn of the model ({raw['raw']:,} B), "
        f"{raw['raw'] / model['after']:.1f}× the trace bytes of its records"
    )
    record, cold, warm = read_times(runs[False])
    print(
        f"median per episode: read the record {record * 1e3:.2f} ms; messages() {cold * 1e3:.2f} ms first "
        f"({cold / record:.1f}× the record), {warm * 1e3:.2f} ms with texts cached ({warm / record:.1f}×)"
    )


if __name__ == "__main__":
    main()
