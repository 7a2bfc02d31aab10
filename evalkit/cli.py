"""evalkit: run, probe, summarise, compare, plan, noise, scan, report, export, view, bundle, convert, serve,
ownloop

Every mistake in what was asked (unknown names, bad paths, bad values, missing keys) exits 2 with one line
and makes no run directory; values are checked where they enter (`evalkit.values.checks`; run directories:
`evalkit.records.checks`).

Exit status of `evalkit run` (`evalkit.run.breaker`): 0 every episode was scored or ended by the model; 2 a
configuration mistake, or a model whose endpoint refused its key (its episodes were stopped, the others ran);
3 some episodes ended unscored by infrastructure errors (rerun the command to retry them); 4 the env stopped
answering and the batch stopped (rerun to resume); 130 interrupted (Ctrl-C), 143 stopped by SIGTERM, 129 by
SIGHUP (each stops as Ctrl-C does; rerun to resume); 5 the disk is full (every record written is whole; rerun
once there is room). A batch that stopped at its `--max-cost`, or an `--until-decided` batch that stopped once
decided, did what was asked: 0 (unless one of the above). `evalkit probe` exits 3 when the step it took broke
the env (its whole report first, then that step in one line). A traceback (status 1) is a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from evalkit import analysis, secrets
from evalkit.analysis.tables import PAIRED_METHODS
from evalkit.envs import EMBEDDED
from evalkit.errors import ConfigError, DiskFullError, EnvError, EvalkitError, NotWritableError
from evalkit.records import checks as rundirs
from evalkit.run.breaker import EXIT_UNSCORED
from evalkit.run.settings import Settings, argtype
from evalkit.values import checks

# Start-up: each command imports what it runs inside its own function (the loop, the envs, Polars, the
# viewer, the exporters), so that `evalkit --help`, a mistake's one line and the parser that every command
# builds load none of them; tests/records/test_convert.py holds one of them to it (inspect_ai).


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        self.exit(2, f"evalkit: error: {message}\n")


def _csv(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _step_json(text: str) -> dict:
    """`--step-json`: the step `evalkit probe` takes, `{"tool": NAME, "args": {...}}`."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--step-json is not JSON ({e})") from None
    if not isinstance(value, dict) or not isinstance(value.get("args", {}), dict):
        raise argparse.ArgumentTypeError('--step-json wants {"tool": NAME, "args": {...}}')
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evalkit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    _run_parser(sub)
    _probe_parser(sub)
    _reading_parsers(sub)
    sv = sub.add_parser("serve", help="serve an embedded environment for other clients")
    sv.add_argument("name")
    sv.add_argument("--port", type=checks.port, default=8000)
    sv.add_argument("--host", default="127.0.0.1")
    _ownloop_parser(sub)
    return p


def _run_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run a batch of episodes into a run directory")
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("--env", help="embedded environment to serve in-process (e.g. canvas)")
    where.add_argument(
        "--base-url", help="your own OpenEnv server (MCP or typed-action), e.g. http://127.0.0.1:8000"
    )
    r.add_argument(
        "--models", type=_csv, required=True, help="comma-separated provider:model[@thinking] specs"
    )
    r.add_argument("--out", required=True, help="run directory (rerun into it to resume)")
    r.add_argument("--env-file", help="a .env file with API keys (default: the nearest .env up the tree)")
    Settings.add_flags(r)


def _probe_parser(sub: Any) -> None:
    pr = sub.add_parser("probe", help="show what evalkit sees of an environment, before running anything")
    pr.add_argument("url", help="a server's base URL, or the name of an embedded environment (served for it)")
    pr.add_argument("--task-id", help="reset with this task id (default: the env's own default task)")
    pr.add_argument("--split", help="reset with this split (and --index)")
    pr.add_argument("--index", type=checks.COUNT.parse, help="reset with this index (and --split)")
    pr.add_argument(
        "--reset-json",
        type=argtype("--reset-json", "reset"),
        help="reset with these arguments (a JSON object)",
    )
    pr.add_argument("--surface", help="reset on this surface (default: the env's first)")
    pr.add_argument("--mode", help="reset in this mode (envs that declare modes)")
    pr.add_argument(
        "--max-turns", type=checks.WHOLE.parse, help="for the opening message it shows (default: the env's)"
    )
    pr.add_argument(
        "--sessions", type=checks.WHOLE.parse, default=8, help="count server sessions up to this many"
    )
    pr.add_argument(
        "--step-json", type=_step_json,
        help='the step whose result to show, {"tool": NAME, "args": {...}} (default: one it fills in)',
    )  # fmt: skip
    pr.add_argument("--no-step", action="store_true", help="take no step: show the opening message only")
    pr.add_argument(
        "--hide-field", type=argtype("--hide-field", "hide_fields"), action="append", metavar="KEY",
        help="a reset-metadata key or observation field the model is never sent (as evalkit run's)",
    )  # fmt: skip
    pr.add_argument("--json", action="store_true", help="print the report as JSON")


def _reading_parsers(sub: Any) -> None:
    """The commands that read runs: summarise, compare, plan, noise, scan, report, export, view, bundle,
    convert (in the order `evalkit --help` lists them)."""
    numbers = _number_parsers(sub)
    sc = _scan_parser(sub)
    shares = _sharing_parsers(sub)
    _convert_parser(sub)
    for reads in (*numbers, sc, *shares):
        _scorer_option(reads)


def _number_parsers(sub: Any) -> list[argparse.ArgumentParser]:
    """summarise, compare, plan and noise; the ones that take --scorer are returned."""
    s = sub.add_parser("summarise", aliases=["summarize"], help="print (and write) the summary of runs")
    s.add_argument("runs", nargs="+")
    s.add_argument("--grades", help="JSON or CSV of task_id → reward, merged into episodes without a reward")
    s.add_argument(
        "--out",
        help="write summary.json / summary.md here (default: the run; for a run another harness wrote, "
        "evalkit's cache, $XDG_CACHE_HOME/evalkit)",
    )
    s.add_argument(
        "--as-harness",
        action="store_true",
        help="print each imported run's numbers as its own harness summarises them",
    )

    c = sub.add_parser("compare", help="paired comparison of two models (or runs) on the same tasks")
    c.add_argument("runs", nargs="+")
    c.add_argument("--a", required=True, help="model label or run directory")
    c.add_argument("--b", required=True, help="model label or run directory")
    c.add_argument("--by", default="tier", help="column to break the comparison down by")
    c.add_argument(
        "--margin",
        type=float,
        help="non-inferiority: say whether B is worse than A by less than this (one-sided 98.75%% bound)",
    )
    c.add_argument(
        "--method", choices=PAIRED_METHODS, default=None,
        help=f"the interval's method (default {PAIRED_METHODS[0]}; docs/statistics.md)",
    )  # fmt: skip

    pl_ = sub.add_parser("plan", help="how many tasks (and repeats) a difference needs, from a pilot run")
    pl_.add_argument("runs", nargs="+")
    pl_.add_argument("--a", required=True, help="model label or run directory")
    pl_.add_argument("--b", required=True, help="model label or run directory")
    pl_.add_argument("--delta", type=float, required=True, help="the true difference to detect, e.g. 0.05")
    pl_.add_argument("--power", type=float, default=0.8, help="the chance of detecting it (default 0.8)")

    nz = sub.add_parser(
        "noise", help="how noisy a benchmark is, from repeats: flip rate, variance parts, difference needed"
    )
    nz.add_argument("runs", nargs="+", help="runs with repeats (or two runs of one model)")
    nz.add_argument(
        "--threshold", type=float,
        help="a reward at or above this is a success, for the flip rate (default: 1 where rewards are 0/1)",
    )  # fmt: skip
    return [s, c, nz]


def _sharing_parsers(sub: Any) -> list[argparse.ArgumentParser]:
    """report, export, view and bundle; the ones that take --scorer are returned."""
    rp = sub.add_parser("report", help="execute the report notebook and write standalone HTML")
    rp.add_argument("runs", nargs="+")
    rp.add_argument("-o", "--output", default="report.html")
    rp.add_argument("--a")
    rp.add_argument("--b")
    rp.add_argument("--method", choices=PAIRED_METHODS, default=None, help="the paired interval's method")
    rp.add_argument(
        "--bundle", action="store_true",
        help="also write the runs as a static bundle beside the report (REPORT-bundle/); every task the "
        "report lists links to its episode there",
    )  # fmt: skip

    ex = sub.add_parser("export", help="write a notebook as one HTML page that works offline")
    ex.add_argument("notebook")
    ex.add_argument("-o", "--output", help="the HTML file (default: the notebook's name with .html)")
    ex.add_argument("--execute", action="store_true", help="run the notebook first (in its own folder)")
    ex.add_argument("--no-code", action="store_true", help="leave the code cells out, outputs only")

    v = sub.add_parser("view", help="open the trace viewer (Streamlit) on runs")
    v.add_argument("runs", nargs="*")
    v.add_argument("--port", type=checks.port, help="default: the first free port from 8501")
    v.add_argument(
        "--wait", type=checks.Number(float, 0).parse, default=None,
        help="seconds to wait for a run that is not there yet (default: only a run a batch is creating, "
        "up to 600; 0: refuse at once)",
    )  # fmt: skip

    bu = sub.add_parser("bundle", help="write runs as a static site (no server, no CDN) to share")
    bu.add_argument("runs", nargs="+")
    bu.add_argument("-o", "--output", required=True, help="a new or empty directory (or a bundle to replace)")
    return [rp, v, bu]


def _scan_parser(sub: Any) -> argparse.ArgumentParser:
    sc = sub.add_parser(
        "scan", help="why models fail: scanners over every episode, their rates per model with intervals"
    )
    sc.add_argument("runs", nargs="+")
    sc.add_argument(
        "--scanner", action="append", type=_csv, metavar="NAME",
        help="a built-in scanner (repeat, or comma-separate; default: every keyless one, and with --judge "
        "the built-in questions): " + ", ".join(_scanner_names()),
    )  # fmt: skip
    sc.add_argument("--judge", metavar="MODEL", help="the model that answers judged scanners (a model spec)")
    sc.add_argument("--ask", action="append", metavar="QUESTION", help="a yes/no question of your own for "
                    "the judge to answer of each episode (repeat for more)")  # fmt: skip
    sc.add_argument("--concurrency", type=checks.WHOLE.parse, default=8, help="judge requests at once")
    sc.add_argument("--max-chars", type=checks.WHOLE.parse, default=60_000, help="the transcript's budget")
    sc.add_argument("--images", action="store_true", help="send the judge the pictures the model saw")
    sc.add_argument("--a", help="model label or run: with --b, the failure modes that separate the two")
    sc.add_argument("--b", help="model label or run")
    sc.add_argument("--labels", help="a CSV of key, scanner, label (yes/no): each scanner's precision and "
                    "recall, its rates corrected (each run's own labels file is read too)")  # fmt: skip
    return sc


def _scanner_names() -> list[str]:
    # Named here without importing the scanners (the CLI's start stays cheap): a test holds them equal.
    rules = ["repeated_call", "error_streak", "retry_unchanged", "unknown_tool", "early_finish",
             "no_tool_call", "output_limit", "refusal", "context_overflow", "infra_error"]  # fmt: skip
    return rules + ["misread_task", "false_success", "ignored_feedback"]


def _ownloop_parser(sub: Any) -> None:
    from evalkit.ownloop import Settings as OwnloopSettings

    o = sub.add_parser(
        "ownloop", help="run an own-loop GUI agent (or an offline baseline) on the webapp tasks"
    )
    o.add_argument("agent", help="uitars, opencua, fara7b, molmoweb, or the baselines dom, random")
    o.add_argument("--tasks", help="task file (default: data/evalsets/webapp-v1.json)")
    o.add_argument("--out", required=True, help="run directory (rerun into it to resume)")
    OwnloopSettings.add_flags(o)
    o.set_defaults(path=os.environ.get("OWNLOOP_PATH", ""))  # parsed as --path is
    o.add_argument("--quiet", action="store_true", help="no line per finished task")


def _scorer_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scorer",
        help="an Inspect log with several scorers: read rewards from this one (default: its first)",
    )


def _convert_parser(sub: Any) -> None:
    cv = sub.add_parser(
        "convert",
        help="write a run as ATIF trajectories (a Harbor job), Inspect logs or a Hugging Face dataset",
    )
    cv.add_argument("run", help="a run evalkit wrote or one it imports")
    cv.add_argument("--to", required=True, choices=("atif", "inspect", "hf"))
    cv.add_argument(
        "-o", "--output", required=True,
        help="atif: a new or empty folder (one trial per episode); inspect: a .eval file (one per model, env,"
        " surface, mode and skin when the run holds several: FILE-<group>.eval); hf: a new or empty folder "
        "(a dataset: one session file per episode, the episodes as Parquet, a card)",
    )  # fmt: skip
    cv.add_argument(
        "--push", metavar="REPO",
        help="hf: then upload the folder to the Hub as the dataset REPO (user/name; private when new); needs "
        "a token (HF_TOKEN, or `hf auth login`)",
    )  # fmt: skip
    _scorer_option(cv)


@contextlib.contextmanager
def _scoring(name: str | None) -> Iterator[None]:
    """`--scorer` for the length of a command, in this process (`importers.scoring`) and in the processes it
    starts (the viewer's Streamlit, the report's kernel) through EVALKIT_SCORER."""
    if name is None:
        yield
        return
    from evalkit.records import importers
    from evalkit.records.importers.inspect_log import ENV_VAR

    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = name
    try:
        with importers.scoring(name):
            yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def cmd_convert(a: argparse.Namespace) -> int:
    from evalkit.records.exporters import convert

    runs = rundirs.runs([a.run], "convert")
    if len(runs) != 1:
        raise ConfigError(f"convert: {a.run} is a folder of {len(runs)} runs; convert one run at a time")
    run = runs[0]
    out = Path(a.output)
    if a.push and a.to != "hf":
        raise ConfigError("--push uploads a Hugging Face dataset: use it with --to hf")
    if a.to in ("atif", "hf"):
        checks.writable_dir("-o", out)
        if out.is_dir() and any(out.iterdir()):
            raise ConfigError(f"-o {out} is not empty: give a new or empty folder")
    else:
        if out.suffix != ".eval":
            raise ConfigError(f"-o {out}: an Inspect log is a .eval file")
        checks.writable_file("-o", out)
    if a.push:
        _can_push(a.push)
    done = convert(run, a.to, out, summary=_card_summary(run) if a.to == "hf" else None)
    where = ", ".join(str(p) for p in done.paths[:6]) + (
        f" and {len(done.paths) - 6} more" if len(done.paths) > 6 else ""
    )
    print(f"wrote {done.episodes:,} episode(s) of {run} as {a.to}: {where}")
    if a.push:
        from evalkit.records.exporters import hf

        print(f"pushed {out} to the Hub as the dataset {a.push}: {hf.push(out, a.push)}")
    return 0


def _can_push(repo: str) -> None:
    """`--push`'s mistakes before any work: a repo id that is not `user/name`, no token, no library."""
    from evalkit.records.exporters import hf

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ConfigError(f"--push {repo!r}: give the dataset repo as user/name (or org/name)")
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ConfigError("--push needs huggingface_hub: pip install 'evalkit[hf]'") from None
    if not hf.token():
        raise ConfigError("--push needs a Hugging Face token: set HF_TOKEN or run `hf auth login`")


def _card_summary(run: str) -> str:
    """evalkit's summary of the run, in Markdown, for a dataset card (the records' exporter does not import
    the analysis, so the command hands it over)."""
    df = analysis.load_runs([run], cache="read")
    return analysis.format_summary(df, markdown=True)


def cmd_run(a: argparse.Namespace) -> int:
    from evalkit.providers.common import load_env
    from evalkit.run.batch import run_batch

    if a.env_file and not Path(a.env_file).is_file():
        raise ConfigError(f"--env-file {a.env_file} does not exist")
    if a.base_url is not None:
        checks.url("--base-url", a.base_url)
        secrets.remember(urlsplit(a.base_url).password)
    rundirs.run_out("--out", a.out)
    load_env(a.env_file)
    if a.evalset and not Path(a.evalset).is_file():
        raise ConfigError(f"evalset not found: {a.evalset}")
    settings = Settings.from_flags(a, argv=sys.argv[1:])
    try:
        run = run_batch(a.models, a.env or a.base_url, settings, out=a.out)
    except DiskFullError as e:
        # Episodes still running in worker threads would hold the interpreter open until they end (each
        # failing to write): every record written is whole on disk, and resume runs the rest.
        print(f"evalkit: error: {' '.join(str(e).split())}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(e.exit_status)
    if not run.ran and set(run.refused) >= set(run.meta["models"]):
        return run.exit_status  # every model's key was refused, each in its line: nothing ran, no summary
    print(
        f"{run.path}: ran {run.ran} episode(s), skipped {run.skipped} already done, "
        f"{run.errors} unscored by infrastructure errors"
    )
    print(f"summary: {Path(run.path) / 'summary.md'}  (or: evalkit summarise {run.path})")
    if run.look is not None:
        from evalkit.run.rounds import result_line

        print(result_line(run.look))
    return _run_status(run)


def _run_status(run: Any) -> int:
    """One line on what is left for a resume, and the exit status (see the module doc)."""
    from evalkit.run.budget import stop_line as budget_line

    left = []
    if run.errors:
        kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(run.unscored.items()))
        left.append(f"{run.errors} episode(s) ended unscored by infrastructure errors ({kinds})")
    budget = getattr(run, "budget_stop", None) if not (run.stopped or run.refused) else None
    if budget:  # the user's own limit: not a failure, and the same command would start nothing
        print(f"{run.path}: {run.not_run} episode(s) not started: {budget_line(budget)}")
    elif run.not_run or run.abandoned:
        why = "the environment went down" if run.stopped else "their model's key was refused"
        left.append(f"{run.not_run + run.abandoned} episode(s) were not run because {why}")
    if left:
        print(f"evalkit: {'; '.join(left)}: rerun the same command to run them", file=sys.stderr)
    status = run.exit_status
    if run.abandoned:
        # Episodes hung on a frozen server would hold the interpreter open until their own timeouts; every
        # record already written is on disk, and resume runs the rest.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def cmd_probe(a: argparse.Namespace) -> int:
    if "://" in a.url:
        checks.url("probe", a.url)
    return _probe(a)


def _probe(a: argparse.Namespace) -> int:
    from evalkit.envs.client.resolved import resolve
    from evalkit.run.probe import probe

    if isinstance(a.reset_json, list):
        raise ConfigError("probe resets one task: give --reset-json a JSON object")
    task: dict = dict(a.reset_json or {})
    if a.task_id:
        task["task_id"] = a.task_id
    if a.split is not None or a.index is not None:
        task.update({"split": a.split or "test", "index": a.index or 0})
    served = None
    if "://" not in a.url:
        if a.url not in EMBEDDED:
            raise ConfigError(
                f"{a.url!r} is neither a URL nor an embedded environment ({', '.join(EMBEDDED)})"
            )
        from evalkit.envs.embedded.server import serve

        served = serve(a.url)
    try:
        env = resolve(served or a.url)
        mode = a.mode if a.mode is not None else env.default_mode
        kw = env.reset_kwargs(task or None, a.surface or env.default_surface, mode)
        try:
            step = False if a.no_step else (a.step_json or True)
            hide = [k for keys in a.hide_field or [] for k in keys]
            report = probe(
                env, kw, sessions=a.sessions, max_turns=a.max_turns, wait=10.0, step=step, hide=hide
            )
        except EnvError as e:
            raise ConfigError(f"{env.name}: {e}") from None
    finally:
        if served is not None:
            served.stop()
    print(json.dumps(report.to_dict(), indent=1, default=str) if a.json else report.describe(), flush=True)
    if report.step_error:  # the whole report first, then the step that broke the env, in one line
        print(f"evalkit probe: {report.step_error}", file=sys.stderr)

        return EXIT_UNSCORED
    return 0


def cmd_summarise(a: argparse.Namespace) -> int:
    from evalkit.records import grades, rundir

    runs = rundirs.runs(a.runs, "summarise")
    if a.out is not None:
        checks.writable_dir("--out", a.out)
    if a.grades:
        grades.read(a.grades)  # a bad grades file is one line, before anything is read or written
    for run in runs:
        native = Path(run).is_dir() and rundir.is_native(run)
        if a.out is None:
            where = analysis.summary_dir(run)
            if not native:
                checks.writable_dir("evalkit's cache (where a foreign run's summary goes; or give --out)",
                                      where)  # fmt: skip
        else:
            where = Path(a.out) / Path(run).name if len(runs) > 1 else Path(a.out)
        try:
            analysis.write_summary(run, where, a.grades)
        except NotWritableError as e:  # a run on a read-only disk is still read: the summary is printed
            print(f"evalkit: {run}: summary.json and summary.md not written ({e.why} at {where}); the "
                  "summary is below, and --out DIR writes them elsewhere", file=sys.stderr)  # fmt: skip
            continue
        note = "" if native else " (a run another harness wrote is only read)"
        print(f"{run}: summary.json and summary.md written to {where}{note}", file=sys.stderr)
    df = analysis.load_runs(runs)
    if a.grades:
        df, merged = grades.apply(df, a.grades)
        print(merged.line(), file=sys.stderr)
    print(analysis.format_harness(df) if a.as_harness else analysis.format_summary(df))
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    # Read, not cached: a comparison refused below leaves the runs as they were.
    df = analysis.load_runs(rundirs.runs(a.runs, "compare"), cache="read")
    if a.by not in df.columns:
        raise ConfigError(f"compare: --by {a.by!r} is not a column (try tier, surface, mode, env or skin)")
    _check_sides(df, "compare", a.a, a.b)
    try:
        result = analysis.compare(df, a.a, a.b, by=a.by, margin=a.margin, method=a.method)
    except ValueError as e:  # sides that ran different configurations of one env: nothing to pair
        raise ConfigError(str(e)) from None
    print(analysis.format_compare(result))
    if line := analysis.format_sequential(result):
        print(line)
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    from evalkit.analysis.repeats import format_plan, plan

    if not a.delta > 0 or not 0 < a.power < 1:
        raise ConfigError("plan: --delta must be above 0 and --power between 0 and 1")
    df = analysis.load_runs(rundirs.runs(a.runs, "plan"), cache="read")
    _check_sides(df, "plan", a.a, a.b)
    try:
        print(format_plan(plan(df, a.a, a.b, a.delta, power=a.power)))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return 0


def cmd_noise(a: argparse.Namespace) -> int:
    from evalkit.analysis.noise import format_noise

    if a.threshold is not None and not math.isfinite(a.threshold):
        raise ConfigError("noise: --threshold must be a number")
    df = analysis.load_runs(rundirs.runs(a.runs, "noise"), cache="read")
    text = format_noise(df, a.threshold)
    print(text or "No task has two scored repeats: run with --repeats 2 or more (or give two runs of one "
          "model) to see how noisy the benchmark is.")  # fmt: skip
    return 0


def _scan_choice(a: argparse.Namespace) -> list:
    """The scanners `evalkit scan` was asked for; a name it does not know, a question without a judge and a
    judge without a key are configuration mistakes, said before any work."""
    from evalkit.scanners import judge
    from evalkit.scanners.rules import BUILTIN

    names = [n for group in a.scanner or [] for n in group]
    unknown = [n for n in names if n not in BUILTIN and n not in judge.QUESTIONS]
    if unknown:
        raise ConfigError(
            f"scan: no scanner named {', '.join(unknown)} (known: {', '.join(_scanner_names())})"
        )
    asked = [n for n in names if n in judge.QUESTIONS]
    if (asked or a.ask) and not a.judge:
        raise ConfigError("scan: a judged scanner needs --judge MODEL (e.g. anthropic:claude-haiku-4-5)")
    if not names:
        names = list(BUILTIN) + (list(judge.QUESTIONS) if a.judge and not a.ask else [])
    kw = {"concurrency": a.concurrency, "max_chars": a.max_chars, "images": a.images}
    chosen: list = [BUILTIN[n] for n in names if n in BUILTIN]
    chosen += [judge.question(n, a.judge, **kw) for n in names if n in judge.QUESTIONS]
    chosen += [judge.ask(q, a.judge, **kw) for q in a.ask or []]
    for s in chosen:
        if s.judged:
            s.check()
    return chosen


def cmd_scan(a: argparse.Namespace) -> int:
    import polars as pl

    from evalkit.analysis import why
    from evalkit.records import scans as store
    from evalkit.scanners.engine import scan

    if (a.a is None) != (a.b is None):
        raise ConfigError("scan: give both --a and --b, or neither")
    chosen = _scan_choice(a)
    runs = rundirs.runs(a.runs, "scan")
    labels = store.read_labels(runs, a.labels) if a.labels else store.read_labels(runs)
    df = analysis.load_runs(runs, cache="read")
    _check_sides(df, "scan", a.a, a.b)
    rows = scan(df, chosen, save=True, progress=_say)
    for run in runs:
        _say(f"{run}: {rows.filter(pl.col('run') == run).height:,} rows written to "
             f"{store.scan_dir(run) / store.SCAN_FILE}")  # fmt: skip
    spent = rows["cost_usd"].filter(~rows["cached"].fill_null(True)).drop_nulls().sum()
    if any(s.judged for s in chosen):
        _say(f"the judge cost ${spent:.4f} for the answers asked now (answers from the cache cost nothing)")
    print(why.format_rates(why.why(df, rows, labels=labels if labels.height else None)))
    models = df["model"].unique().sort().to_list()
    sides = (a.a, a.b) if a.a is not None else tuple(models) if len(models) == 2 else None
    if sides is not None:
        print()
        try:
            print(why.format_differences(why.why(df, rows, a=sides[0], b=sides[1])))
        except ValueError as e:
            print(f"No paired differences: {e}")
    if labels.height:
        print("\nAgainst the labels:\n" + why.format_check(why.check(rows, labels)))
    return 0


def _check_sides(df: Any, command: str, a: str | None, b: str | None) -> None:
    """`--a` and `--b`, where given, name a model or a run of the episodes `df`."""
    for flag, who in (("--a", a), ("--b", b)):
        if who is not None and not any((df[c] == who).any() for c in ("model", "run", "run_name")):
            known = ", ".join(df["model"].unique().sort().to_list()[:10])
            raise ConfigError(
                f"{command}: {flag} {who!r} is neither a model nor a run here (models: {known})"
            )


def cmd_report(a: argparse.Namespace) -> int:
    from evalkit.analysis.report import NOTEBOOK, build_report

    if not Path(NOTEBOOK).exists():
        raise ConfigError(f"the report notebook is not next to this evalkit install (looked for {NOTEBOOK}); "
                          "install evalkit from a checkout with `pip install -e .`")  # fmt: skip
    checks.writable_file("-o", a.output)
    runs = rundirs.runs(a.runs, "report")
    if a.a is not None or a.b is not None:
        # Before the notebook runs: a name it cannot find would fail a cell, with the kernel's traceback.

        _check_sides(analysis.load_runs(runs, cache="read"), "report", a.a, a.b)
    href = built = None
    if a.bundle:  # beside the report, so that its links are relative and the two move together
        from evalkit.view.bundle import build

        site = Path(a.output).parent / f"{Path(a.output).stem}-bundle"
        checks.writable_dir("--bundle", site)
        built = build(runs, site)
        href = f"{site.name}/index.html"
    path = build_report(runs, a.output, a=a.a, b=a.b, bundle=href, method=a.method)
    print(f"wrote {path}" + (f" and its bundle {built.path} ({built.episodes:,} episodes)" if built else ""))
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from evalkit.analysis.export import export

    out = checks.writable_file("-o", a.output or Path(a.notebook).with_suffix(".html"))
    print(f"wrote {export(a.notebook, out, execute=a.execute, show_code=not a.no_code)}")
    return 0


def cmd_view(a: argparse.Namespace) -> int:
    from evalkit.view import serve

    app = serve.APP_PATH
    if not app.exists():
        raise ConfigError(f"the viewer is not next to this evalkit install (looked for {app}); "
                          "install evalkit from a checkout with `pip install -e .`")  # fmt: skip
    named = a.runs
    if not named:  # EVALKIT_RUNS, else ./runs/ of the folder the command was given in (not the checkout's)
        from evalkit.view.support import discover_runs

        named = [str(p) for p in discover_runs((), cwd=Path.cwd())]
    try:
        # As typed (this process is in the user's folder, so a line names a run as they did); the
        # Streamlit child, which runs in the checkout, gets them made absolute by serve().
        runs = serve.wait_for_runs(named, a.wait, lambda line: print(line, file=sys.stderr))
    except KeyboardInterrupt:
        return 130  # stopped while waiting: nothing was started, nothing to say
    return serve.serve(rundirs.runs(runs, "view", episodes=False), a.port, app)  # it checks the port


def cmd_bundle(a: argparse.Namespace) -> int:
    from evalkit.view.bundle import build

    checks.writable_dir("-o", a.output)  # before the runs are read (reading may cache their index)
    out = build(rundirs.runs(a.runs, "bundle"), a.output)
    print(f"wrote {out.path} ({out.episodes:,} episodes, {out.files:,} files, {out.bytes / 1e6:.1f} MB): "
          f"open {out.path / 'index.html'}")  # fmt: skip
    return 0


def cmd_serve(a: argparse.Namespace) -> int:
    from evalkit.envs.embedded.server import build_app, serve_forever

    build_app(a.name)  # an unknown name fails here, with one line, before uvicorn starts
    checks.free_port("--port", a.port, a.host)
    print(f"serving {a.name} on http://{a.host}:{a.port} (WebSocket /ws, health /health)", flush=True)
    serve_forever(a.name, port=a.port, host=a.host)
    return 0


def cmd_ownloop(a: argparse.Namespace) -> int:
    from evalkit.ownloop import Settings, run_ownloop

    rundirs.run_out("--out", a.out)
    settings = Settings.from_flags(a, agent=a.agent, argv=sys.argv[1:])
    run = run_ownloop(settings, a.out, a.tasks, log=(lambda _: None) if a.quiet else _say)
    print(f"{run.path}: ran {run.ran} task(s), skipped {run.skipped} already done, "
          f"{run.unscored} unscored by harness or endpoint failures")  # fmt: skip
    print(f"summary: {Path(run.path) / 'summary.md'}  (or: evalkit summarise {run.path})")
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


COMMANDS = {
    "run": cmd_run,
    "probe": cmd_probe,
    "summarise": cmd_summarise,
    "summarize": cmd_summarise,
    "compare": cmd_compare,
    "plan": cmd_plan,
    "noise": cmd_noise,
    "scan": cmd_scan,
    "report": cmd_report,
    "export": cmd_export,
    "view": cmd_view,
    "bundle": cmd_bundle,
    "convert": cmd_convert,
    "serve": cmd_serve,
    "ownloop": cmd_ownloop,
}


class _Lines(logging.Handler):
    """evalkit's log records on stderr, one line each: `evalkit: …` for information (a batch's notices),
    `evalkit: warning: …`, `evalkit: error: …`."""

    def emit(self, record: logging.LogRecord) -> None:
        text = " ".join(self.format(record).split())
        level = record.levelno
        kind = "error: " if level >= logging.ERROR else "warning: " if level >= logging.WARNING else ""
        print(f"evalkit: {kind}{text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _log_on_stderr() -> Iterator[None]:
    """For the length of a command (main may run in-process, under tests or a notebook: then undone)."""
    from evalkit.records.jsonl import forget_warnings

    forget_warnings()
    logger = logging.getLogger("evalkit")
    handler = _Lines(logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        logger.setLevel(level)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (`timeout`, `docker stop`, systemd, a cluster's preemption, a closed terminal):
    stopped as Ctrl-C stops a command — the same clean-up, the env's child gone at once, one line — with the
    signal's own exit status (128 + its number)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise Stopped(signum)

    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _log_on_stderr(), _stop_signals(), _scoring(getattr(args, "scorer", None)):
            return COMMANDS[args.cmd](args)
    except EvalkitError as e:
        print(f"evalkit: error: {' '.join(str(e).split())}", file=sys.stderr)  # one line, whatever it quotes
        return getattr(e, "exit_status", 2)  # (a full disk: 5)
    except KeyboardInterrupt as e:
        status, why = 130, "interrupted"
        if isinstance(e, Stopped):
            status, why = 128 + e.signum, f"stopped by {signal.Signals(e.signum).name}"
        print(f"evalkit: {why}; finished episodes are saved, rerun the same command to resume",
              file=sys.stderr, flush=True)  # fmt: skip
        sys.stdout.flush()
        # Episodes still running in worker threads would hold the interpreter open until they end; every
        # record already written is complete on disk, so leave now and let resume re-run the rest.
        os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
