"""Every command, every option, given something wrong: exit status 2, one line on stderr (`evalkit: error:
…`), nothing on stdout, and nothing created or changed in the working directory or the runs it names.

One row per case; a new command gets its rows here (a test checks that every command has some).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.cli import COMMANDS, main
from tests.fixtures.synth import make_run
from tests.support.snapshot import snapshot

GARBAGE = "garbage holds no readable episode (1 unreadable line(s), 1 malformed record(s))"
"""What every command that reads runs says of a run whose every line is unreadable or malformed."""
R = ["run", "--env", "canvas", "--models", "baseline:random"]
"""A run command that is right but for what a case adds (and its --out)."""
OUT = ["--out", "new"]
AB = ["--a", "m-a", "--b", "m-b"]

CASES: list[tuple[str, list[str], str]] = [
    # ---- run: numbers
    ("nan-timeout", [*R, *OUT, "--episode-timeout", "nan"], "--episode-timeout: expected a finite number"),
    ("inf-timeout", [*R, *OUT, "--episode-timeout", "inf"], "got 'inf'"),
    ("negative-timeout", [*R, *OUT, "--episode-timeout", "-5"], "--episode-timeout"),
    ("inf-request-timeout", [*R, *OUT, "--request-timeout", "inf"], "--request-timeout"),
    ("zero-request-timeout", [*R, *OUT, "--request-timeout", "0"], "--request-timeout"),
    ("zero-max-tokens", [*R, *OUT, "--max-tokens", "0"], "--max-tokens"),
    ("fractional-max-turns", [*R, *OUT, "--max-turns", "1.5"], "--max-turns: expected a whole number"),
    ("zero-max-steps", [*R, *OUT, "--max-steps", "0"], "--max-steps"),
    ("zero-concurrency", [*R, *OUT, "--concurrency", "0"], "--concurrency"),
    ("concurrency-past-the-machine", [*R, *OUT, "--concurrency", "100000"],
     "--concurrency 100,000 is more than this machine holds: at most"),
    ("negative-repeats", [*R, *OUT, "--repeats", "-1"], "--repeats"),
    ("zero-limit", [*R, *OUT, "--limit", "0"], "--limit"),
    ("word-tasks", [*R, *OUT, "--tasks", "abc"], "--tasks: expected a whole number"),
    ("negative-start", [*R, *OUT, "--start", "-1"], "--start: expected a whole number ≥ 0"),
    ("zero-stride", [*R, *OUT, "--stride", "0"], "--stride"),
    ("image-window-one", [*R, *OUT, "--image-window", "3"], "MAX,KEEP"),
    ("negative-keep-images", [*R, *OUT, "--keep-images", "-1"], "≥ 0"),
    ("both-image-budgets", [*R, *OUT, "--keep-images", "2", "--image-window", "6,2"], "give only one"),
    ("breaker-one-number", [*R, *OUT, "--env-breaker", "3"], "FAILURES,SECONDS"),
    ("breaker-negative", [*R, *OUT, "--env-breaker=-1,5"], "FAILURES ≥ 0"),
    ("breaker-nan", [*R, *OUT, "--env-breaker", "3,nan"], "finite SECONDS"),
    ("zero-max-cost", [*R, *OUT, "--max-cost", "0"], "--max-cost"),
    ("nan-episode-max-cost", [*R, *OUT, "--episode-max-cost", "nan"], "--episode-max-cost"),
    # ---- run: --until-decided
    ("until-decided-without-a-b", [*R, *OUT, "--until-decided"], "--until-decided needs --a A and --b B"),
    ("a-b-without-until-decided", [*R, *OUT, *AB], "--a, --b and --delta go with --until-decided"),
    ("until-decided-a-not-run", [*R, *OUT, "--until-decided", *AB], "m-a, m-b is not among --models"),
    ("until-decided-a-is-b", [*R, *OUT, "--until-decided", "--a", "m", "--b", "m"], "name the same model"),
    ("until-decided-zero-delta", [*R, *OUT, "--until-decided", *AB, "--delta", "0"], "--delta"),
    ("until-decided-all-tasks", [*R[:-1], "baseline:random,baseline:tracer", *OUT, "--tasks", "all",
                                 "--until-decided", "--a", "baseline:random", "--b", "baseline:tracer"],
     "known number of tasks"),
    # ---- run: paths
    ("out-under-proc", [*R, "--out", "/proc/evalkit-run"], "--out /proc/evalkit-run cannot be written"),
    ("out-under-a-file", [*R, "--out", "file.txt/run"], "file.txt is not a directory"),
    ("out-is-a-file", [*R, "--out", "file.txt"], "exists and is not a directory"),
    ("out-not-a-run", [*R, "--out", "notrun"], "non-empty directory that holds no evalkit run"),
    ("out-foreign-run", [*R, "--out", "foreign"], "another harness wrote"),
    ("out-missing", R, "the following arguments are required: --out"),
    ("evalset-missing", [*R, *OUT, "--evalset", "missing.json"], "evalset not found"),
    ("evalset-a-directory", [*R, *OUT, "--evalset", "notrun"], "evalset not found"),
    ("env-file-missing", [*R, *OUT, "--env-file", "missing.env"], "missing.env does not exist"),
    ("reset-json-not-json", [*R, *OUT, "--reset-json", "{"], "--reset-json is not JSON"),
    ("reset-json-empty-list", [*R, *OUT, "--reset-json", "[]"], "a non-empty list of objects"),
    ("reset-json-missing-file", [*R, *OUT, "--reset-json", "@missing.json"], "cannot read missing.json"),
    ("reset-json-and-split", [*R, *OUT, "--reset-json", '{"seed": 1}', "--split", "train"], "drop --evalset"),
    ("tasks-word", [*R, *OUT, "--tasks", "some"], "--tasks: expected a whole number > 0, got 'some'"),
    # ---- run: what to run
    ("base-url-ftp", ["run", "--base-url", "ftp://h/", "--models", "baseline:random", *OUT], "--base-url"),
    ("base-url-no-host", ["run", "--base-url", "http://", "--models", "baseline:random", *OUT], "a host"),
    ("base-url-bad-port", ["run", "--base-url", "http://h:99999", "--models", "baseline:random", *OUT],
     "not a valid URL"),
    ("env-and-base-url", [*R, *OUT, "--base-url", "http://127.0.0.1:9"], "not allowed with argument"),
    ("unknown-env", ["run", "--env", "nowhere", "--models", "baseline:random", *OUT], "unknown environment"),
    ("no-models", ["run", "--env", "canvas", "--models", ",", *OUT], "no models given"),
    ("unknown-provider", ["run", "--env", "canvas", "--models", "nosuch:m", *OUT], "unknown provider"),
    ("unknown-thinking", ["run", "--env", "canvas", "--models", "baseline:random@loud", *OUT],
     "unknown thinking level"),
    ("missing-key", ["run", "--env", "canvas", "--models", "anthropic:claude-sonnet-5", *OUT],
     "ANTHROPIC_API_KEY"),
    ("unknown-surface", [*R, *OUT, "--surfaces", "paint"], "no surface paint"),
    ("unknown-coordinates", [*R, *OUT, "--coordinates", "polar"], "unknown coordinates 'polar'"),
    ("subset-without-evalset", [*R, *OUT, "--subset", "lite"], "need --evalset"),
    # ---- summarise
    ("summarise-missing", ["summarise", "missing"], "no such run directory: missing"),
    ("plan-missing", ["plan", "missing", *AB, "--delta", "0.1"], "no such run directory"),
    ("plan-delta-zero", ["plan", "run", *AB, "--delta", "0"], "--delta must be above 0"),
    ("plan-typo", ["plan", "run", "--a", "m-x", "--b", "m-b", "--delta", "0.1"], "'m-x' is neither a model"),
    ("convert-missing", ["convert", "missing", "--to", "atif", "-o", "new"], "no such run directory"),
    ("convert-to-what", ["convert", "run", "--to", "xml", "-o", "new"], "invalid choice: 'xml'"),
    ("convert-not-eval", ["convert", "run", "--to", "inspect", "-o", "new.log"], "an Inspect log is a .eval"),
    ("convert-into-a-file", ["convert", "run", "--to", "atif", "-o", "file.txt"], "is not a directory"),
    ("convert-push-not-hf", ["convert", "run", "--to", "atif", "-o", "new", "--push", "me/x"],
     "--push uploads a Hugging Face dataset"),
    ("convert-push-bad-repo", ["convert", "run", "--to", "hf", "-o", "new", "--push", "not a repo"],
     "give the dataset repo as user/name"),
    ("noise-missing", ["noise", "missing"], "no such run directory"),
    ("noise-only-invalid-lines", ["noise", "garbage"], f"noise: {GARBAGE}"),
    ("noise-nan-threshold", ["noise", "run", "--threshold", "nan"], "--threshold must be a number"),
    ("scan-missing", ["scan", "missing"], "no such run directory"),
    ("scan-only-invalid-lines", ["scan", "garbage"], f"scan: {GARBAGE}"),
    ("scan-no-episode-yet", ["scan", "begun"], "scan: begun has no episodes yet"),
    ("scan-unknown-scanner", ["scan", "run", "--scanner", "nope"], "no scanner named nope"),
    ("scan-ask-no-judge", ["scan", "run", "--ask", "Did it loop?"], "needs --judge MODEL"),
    ("scan-judge-no-key", ["scan", "run", "--judge", "anthropic:claude-haiku-4-5"], "missing API key"),
    ("scan-unknown-judge", ["scan", "run", "--judge", "nowhere:m"], "unknown provider 'nowhere'"),
    ("scan-a-without-b", ["scan", "run", "--a", "m-a"], "give both --a and --b"),
    ("scan-unknown-a", ["scan", "run", "--a", "nosuch", "--b", "m-a"], "--a 'nosuch' is neither"),
    ("scan-labels-missing", ["scan", "run", "--labels", "missing.csv"], "no labels file missing.csv"),
    ("scan-labels-not-labels", ["scan", "run", "--labels", "file.txt"], "needs the columns key, scanner"),
    ("scan-concurrency-zero", ["scan", "run", "--concurrency", "0"], "--concurrency"),
    ("summarise-a-file", ["summarise", "file.txt"], "file.txt is not a run"),
    ("summarise-not-a-run", ["summarise", "notrun"], "notrun is not a run"),
    ("summarise-out-a-file", ["summarise", "run", "--out", "file.txt"], "exists and is not a directory"),
    ("summarise-out-proc", ["summarise", "run", "--out", "/proc/evalkit-s"], "cannot be written"),
    ("summarise-grades-missing", ["summarise", "run", "--grades", "missing.csv"], "missing.csv"),
    ("summarise-no-run", ["summarise"], "the following arguments are required: runs"),
    ("summarise-only-invalid-lines", ["summarise", "garbage"], f"summarise: {GARBAGE}"),
    ("summarise-no-episode-yet", ["summarise", "begun"], "summarise: begun has no episodes yet"),
    # ---- compare
    ("compare-unknown-a", ["compare", "run", "--a", "nosuch", "--b", "m-a"], "--a 'nosuch' is neither"),
    ("compare-unknown-b", ["compare", "run", "--a", "m-a", "--b", "nosuch"], "--b 'nosuch' is neither"),
    ("compare-unknown-by", ["compare", "run", "--a", "m-a", "--b", "m-b", "--by", "nope"], "not a column"),
    ("compare-not-a-run", ["compare", "notrun", "--a", "m-a", "--b", "m-b"], "notrun is not a run"),
    ("compare-no-a", ["compare", "run", "--b", "m-b"], "required: --a"),
    ("compare-only-invalid-lines", ["compare", "garbage", "--a", "m-a", "--b", "m-b"], f"compare: {GARBAGE}"),
    ("compare-no-episode-yet", ["compare", "begun", "--a", "m-a", "--b", "m-b"], "begun has no episodes yet"),
    # ---- report
    ("report-not-a-run", ["report", "notrun"], "notrun is not a run"),
    ("report-a-file", ["report", "file.txt"], "file.txt is not a run"),
    ("report-empty-dir", ["report", "empty"], "empty is not a run"),
    ("report-only-invalid-lines", ["report", "garbage"], f"report: {GARBAGE}"),
    ("report-no-episode-yet", ["report", "begun"], "report: begun has no episodes yet"),
    ("report-unknown-b", ["report", "run", "--b", "typo"],
     "report: --b 'typo' is neither a model nor a run here (models: m-a, m-b)"),
    ("report-unknown-a", ["report", "run", "--a", "m-a", "--b", "m-c"], "--b 'm-c' is neither"),
    ("report-out-proc", ["report", "run", "-o", "/proc/evalkit.html"], "-o /proc/evalkit.html cannot be"),
    ("report-out-a-directory", ["report", "run", "-o", "notrun"], "-o notrun is a directory"),
    ("report-out-under-a-file", ["report", "run", "-o", "file.txt/r.html"], "file.txt is not a directory"),
    # ---- view
    ("view-not-a-run", ["view", "notrun"], "view: notrun is not a run"),
    ("view-a-file", ["view", "file.txt"], "view: file.txt is not a run"),
    # --wait 0: without it, a folder that is not there yet is waited for (a batch may be creating it)
    ("view-missing", ["view", "missing", "--wait", "0"], "no such run directory"),
    ("view-only-invalid-lines", ["view", "garbage"], f"view: {GARBAGE}"),
    ("view-port-zero", ["view", "run", "--port", "0"], "port number from 1 to 65535"),
    ("view-port-word", ["view", "run", "--port", "http"], "expected a port number"),
    ("view-port-taken", ["view", "run", "--port", "{taken}"], "is in use on 127.0.0.1"),
    # ---- serve
    ("serve-unknown", ["serve", "nowhere"], "unknown environment 'nowhere'"),
    ("serve-port-high", ["serve", "canvas", "--port", "70000"], "port number from 1 to 65535"),
    ("serve-port-taken", ["serve", "canvas", "--port", "{taken}"], "cannot listen on 127.0.0.1:"),
    ("serve-host-not-ours", ["serve", "canvas", "--host", "203.0.113.7"], "cannot listen on 203.0.113.7"),
    # ---- probe
    ("probe-unknown", ["probe", "nowhere"], "neither a URL nor an embedded environment"),
    ("probe-ftp", ["probe", "ftp://h/x"], "probe 'ftp://h/x' is not a http://"),
    ("probe-unreachable", ["probe", "http://127.0.0.1:{free}"], "cannot reach the environment"),
    ("probe-reset-list", ["probe", "canvas", "--reset-json", "[1]"], "--reset-json wants a JSON object"),
    ("probe-zero-sessions", ["probe", "canvas", "--sessions", "0"], "--sessions"),
    ("probe-negative-index", ["probe", "canvas", "--index", "-1"], "--index"),
    # ---- ownloop
    ("ownloop-unknown", ["ownloop", "nosuch", *OUT], "unknown own-loop agent 'nosuch'"),
    ("ownloop-out-not-a-run", ["ownloop", "dom", "--out", "notrun"], "holds no evalkit run"),
    ("ownloop-out-proc", ["ownloop", "dom", "--out", "/proc/evalkit-o"], "cannot be written"),
    ("ownloop-nan-wait", ["ownloop", "dom", *OUT, "--wait", "nan"], "--wait"),
    ("ownloop-top-p", ["ownloop", "dom", *OUT, "--top-p", "0"], "--top-p"),
    ("ownloop-temperature", ["ownloop", "dom", *OUT, "--temperature", "-1"], "--temperature"),
    ("ownloop-ports", ["ownloop", "dom", *OUT, "--ports", "80x"], "--ports wants port numbers"),
    ("ownloop-no-endpoint", ["ownloop", "uitars", *OUT], "uitars needs --endpoint and --model"),
    ("ownloop-endpoint-ftp", ["ownloop", "uitars", "--endpoint", "ftp://h", "--model", "m", *OUT],
     "--endpoint"),
    ("ownloop-tasks-missing", ["ownloop", "dom", *OUT, "--tasks", "missing.json"], "task file not found"),
    # ---- no command, or not one
    ("no-command", [], "the following arguments are required: cmd"),
    ("unknown-command", ["frobnicate"], "invalid choice: 'frobnicate'"),
    # ---- commands that land with other issues: one row each, skipped until they exist
    ("bundle-not-a-run", ["bundle", "notrun", "-o", "b"], "notrun"),
    ("bundle-missing", ["bundle", "missing", "-o", "b"], "missing"),
    ("bundle-only-invalid-lines", ["bundle", "garbage", "-o", "b"], f"bundle: {GARBAGE}"),
    ("bundle-no-episode-yet", ["bundle", "begun", "-o", "b"], "bundle: begun has no episodes yet"),
    ("bundle-out-a-file", ["bundle", "run", "-o", "file.txt"], "file.txt"),
    ("bundle-out-proc", ["bundle", "run", "-o", "/proc/evalkit-b"], "/proc/evalkit-b"),
    ("export-missing", ["export", "missing.ipynb", "-o", "x.html"], "missing.ipynb"),
    ("export-out-proc", ["export", "notebook.ipynb", "-o", "/proc/x.html"], "/proc/x.html"),
]  # fmt: skip


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A working directory holding one of everything a case may name."""
    ws = tmp_path_factory.mktemp("ws")
    make_run(ws / "run", {"m-a": 0.6, "m-b": 0.4}, n_tasks=4, frames=False)
    (ws / "notrun").mkdir()
    (ws / "notrun" / "notes.txt").write_text("not a run")
    (ws / "empty").mkdir()
    (ws / "file.txt").write_text("a plain file")
    (ws / "garbage").mkdir()
    (ws / "garbage" / "trace.jsonl").write_text(
        '{"format_version": 1, "key": "k", "turns": "oops"}\nnot json\n'
    )
    (ws / "begun").mkdir()  # a batch that has not finished an episode yet
    (ws / "begun" / "run.json").write_text(json.dumps({"models": ["m"], "evalkit_version": "0.1.0"}))
    (ws / "begun" / "trace.jsonl").write_text("")
    (ws / "foreign").mkdir()
    (ws / "foreign" / "trace.jsonl").write_text(json.dumps({"job_id": "j", "model": "m"}) + "\n")
    (ws / "notebook.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                  "nbformat_minor": 5}))  # fmt: skip
    return ws


@pytest.fixture(scope="module")
def taken():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_enough_cases():
    assert len(CASES) >= 50
    covered = {argv[0] for _, argv, _ in CASES if argv}
    assert set(COMMANDS) - {"summarize"} <= covered  # every command has its rows


@pytest.mark.parametrize("argv, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(workspace, taken, monkeypatch, capsys, argv, says):
    from evalkit.serving import free_port

    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "VLLM_BASE_URL", "OWNLOOP_PATH"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(workspace)  # and no .env up the tree supplies a key
    argv = [a.replace("{taken}", str(taken)).replace("{free}", str(free_port())) for a in argv]
    before = snapshot(workspace)
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err  # one line
    assert err.startswith("evalkit: error:") and says in err, err
    assert snapshot(workspace) == before
    assert not Path("/proc/evalkit-run").exists()
    shutil.rmtree(workspace / "new", ignore_errors=True)  # (never made: the snapshot says so)


@pytest.mark.parametrize("module", ["evalkit.providers.standin"])
def test_the_standin_says_how_it_is_used(module):
    """`--help` is usage, not a command to run; a command that does not exist is one line."""
    ran = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert ran.stdout.startswith("usage: python -m evalkit.providers.standin [-h] -- COMMAND")
    ran = subprocess.run([sys.executable, "-m", module, "--", "no-such-command-7"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == "evalkit: error: no command 'no-such-command-7' to run\n"
