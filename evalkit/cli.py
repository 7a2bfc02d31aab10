"""`evalkit run | summarise | compare | report | view | serve`.

Every mistake in what was asked (unknown names, bad paths, bad values, missing keys) exits 2 with one line
and makes no run directory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from evalkit.errors import ConfigError, EvalkitError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        self.exit(2, f"evalkit: error: {message}\n")


def _csv(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _window(text: str) -> tuple[int, int]:
    try:
        hi, keep = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--image-window wants MAX,KEEP (two integers), got {text!r}"
        ) from None
    if not 0 < keep <= hi:
        raise argparse.ArgumentTypeError("--image-window wants 0 < KEEP ≤ MAX")
    return hi, keep


def _positive(kind: type):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return v

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evalkit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run a batch of episodes into a run directory")
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("--env", help="embedded environment to serve in-process (e.g. canvas)")
    where.add_argument("--base-url", help="your own OpenEnv MCP server, e.g. http://127.0.0.1:8000")
    r.add_argument(
        "--models", type=_csv, required=True, help="comma-separated provider:model[@thinking] specs"
    )
    r.add_argument("--out", required=True, help="run directory (rerun into it to resume)")
    r.add_argument("--evalset", help="frozen task set JSON, e.g. data/evalsets/canvas-test-300.json")
    r.add_argument("--subset", help="evalset subset, e.g. lite or core30")
    r.add_argument("--tiers", type=_csv, help="only these tiers (easy,medium,hard)")
    r.add_argument("--task-ids", type=_csv, help="only these task ids")
    r.add_argument("--limit", type=_positive(int), help="at most N tasks, balanced across tiers")
    r.add_argument("--split", default="test", help="without an evalset: the split to draw tasks from")
    r.add_argument("--tasks", type=_positive(int), help="without an evalset: number of tasks")
    r.add_argument("--start", type=int, default=0, help="without an evalset: first task index")
    r.add_argument("--stride", type=_positive(int), default=1, help="without an evalset: index step")
    r.add_argument("--surfaces", type=_csv, help="default: the env's first (canvas: tools, webapp: gui)")
    r.add_argument("--modes", type=_csv, help="default: the env's first (canvas: reference, webapp: task)")
    r.add_argument("--repeats", type=_positive(int), default=1)
    r.add_argument("--max-turns", type=_positive(int), default=30)
    r.add_argument("--max-steps", type=_positive(int), help="tool calls before the env ends the episode")
    r.add_argument("--episode-timeout", type=_positive(float), help="wall-clock seconds per episode")
    r.add_argument("--concurrency", type=_positive(int), default=4)
    r.add_argument("--no-frames", action="store_true", help="don't store a frame per turn")
    r.add_argument("--max-tokens", type=_positive(int), default=16000)
    r.add_argument("--request-timeout", type=_positive(float), default=600.0)
    r.add_argument("--keep-images", type=_positive(int), help="keep only the newest N images in the prompt")
    r.add_argument(
        "--image-window", type=_window, help="MAX,KEEP: let images reach MAX, then keep the newest KEEP"
    )
    r.add_argument("--env-file", help="a .env file with API keys (default: the nearest .env up the tree)")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--verbose", "-v", action="store_true", help="a line per finished episode")

    s = sub.add_parser("summarise", aliases=["summarize"], help="print (and write) the summary of runs")
    s.add_argument("runs", nargs="+")

    c = sub.add_parser("compare", help="paired comparison of two models (or runs) on the same tasks")
    c.add_argument("runs", nargs="+")
    c.add_argument("--a", required=True, help="model label or run directory")
    c.add_argument("--b", required=True, help="model label or run directory")
    c.add_argument("--by", default="tier", help="column to break the comparison down by")

    rp = sub.add_parser("report", help="execute the report notebook and write standalone HTML")
    rp.add_argument("runs", nargs="+")
    rp.add_argument("-o", "--output", default="report.html")
    rp.add_argument("--a")
    rp.add_argument("--b")

    v = sub.add_parser("view", help="open the trace viewer (Streamlit) on runs")
    v.add_argument("runs", nargs="*")
    v.add_argument("--port", type=int, default=8501)

    sv = sub.add_parser("serve", help="serve an embedded environment for other clients")
    sv.add_argument("name")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--host", default="127.0.0.1")
    return p


def _existing_runs(paths: list[str]) -> list[str]:
    for path in paths:
        if not Path(path).exists():
            raise ConfigError(f"no such run directory: {path}")
    return paths


def cmd_run(a: argparse.Namespace) -> int:
    from evalkit.batch import run_batch
    from evalkit.providers.common import load_env
    from evalkit.types import AgentOptions

    if a.env_file and not Path(a.env_file).is_file():
        raise ConfigError(f"--env-file {a.env_file} does not exist")
    load_env(a.env_file)
    if a.evalset and not Path(a.evalset).is_file():
        raise ConfigError(f"evalset not found: {a.evalset}")
    options = AgentOptions(
        max_tokens=a.max_tokens,
        request_timeout=a.request_timeout,
        keep_images=a.keep_images,
        image_window=a.image_window,
    )
    run = run_batch(
        a.models,
        a.env or a.base_url,
        out=a.out,
        evalset=a.evalset,
        subset=a.subset,
        tiers=a.tiers,
        task_ids=a.task_ids,
        limit=a.limit,
        split=a.split,
        tasks=a.tasks,
        start=a.start,
        stride=a.stride,
        surfaces=a.surfaces,
        modes=a.modes,
        repeats=a.repeats,
        concurrency=a.concurrency,
        max_turns=a.max_turns,
        max_steps=a.max_steps,
        episode_timeout=a.episode_timeout,
        frames=not a.no_frames,
        options=options,
        progress=not a.no_progress,
        verbose=a.verbose,
        argv=sys.argv[1:],
    )
    print(
        f"{run.path}: ran {run.ran} episode(s), skipped {run.skipped} already done, "
        f"{run.errors} unscored by infrastructure errors"
    )
    print(f"summary: {Path(run.path) / 'summary.md'}  (or: evalkit summarise {run.path})")
    return 0


def cmd_summarise(a: argparse.Namespace) -> int:
    from evalkit import analysis

    runs = _existing_runs(a.runs)
    for run in runs:
        if (Path(run) / "trace.jsonl").exists():
            analysis.write_summary(run)
    print(analysis.format_summary(analysis.load_runs(runs)))
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    from evalkit import analysis

    df = analysis.load_runs(_existing_runs(a.runs))
    print(analysis.format_compare(analysis.compare(df, a.a, a.b, by=a.by)))
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from evalkit.report import NOTEBOOK, build_report

    if not Path(NOTEBOOK).exists():
        raise ConfigError(f"the report notebook is not next to this evalkit install (looked for {NOTEBOOK}); "
                          "install evalkit from a checkout with `pip install -e .`")  # fmt: skip
    path = build_report(_existing_runs(a.runs), a.output, a=a.a, b=a.b)
    print(f"wrote {path}")
    return 0


def cmd_view(a: argparse.Namespace) -> int:
    from evalkit.viewer_support import APP_PATH

    if not APP_PATH.exists():
        raise ConfigError(f"the viewer is not next to this evalkit install (looked for {APP_PATH}); "
                          "install evalkit from a checkout with `pip install -e .`")  # fmt: skip
    # Loopback only and no usage statistics: traces can hold prompts a user may not want to publish.
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_PATH), "--server.port", str(a.port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "viewer", "--", *_existing_runs(a.runs)]  # fmt: skip
    print(f"evalkit viewer on http://127.0.0.1:{a.port}", flush=True)
    return subprocess.call(cmd, env=os.environ.copy())


def cmd_serve(a: argparse.Namespace) -> int:
    from evalkit.envs.server import build_app, serve_forever

    build_app(a.name)  # an unknown name fails here, with one line, before uvicorn starts
    print(f"serving {a.name} on http://{a.host}:{a.port} (WebSocket /ws, health /health)", flush=True)
    serve_forever(a.name, port=a.port, host=a.host)
    return 0


COMMANDS = {
    "run": cmd_run,
    "summarise": cmd_summarise,
    "summarize": cmd_summarise,
    "compare": cmd_compare,
    "report": cmd_report,
    "view": cmd_view,
    "serve": cmd_serve,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except EvalkitError as e:
        print(f"evalkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evalkit: interrupted; finished episodes are saved, rerun the same command to resume",
              file=sys.stderr, flush=True)  # fmt: skip
        sys.stdout.flush()
        # Episodes still running in worker threads would hold the interpreter open until they end; every
        # record already written is complete on disk, so leave now and let resume re-run the rest.
        os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
