"""Mistakes exit 2 with one line and make no run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
EVALSET = str(ROOT / "data" / "evalsets" / "canvas-test-300.json")
SAMPLE = ROOT / "data" / "sample-run"
RANDOM = ["--models", "baseline:random"]


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--models", "nosuch:model"], "unknown provider 'nosuch'"),
        ([*RANDOM, "--evalset", "data/evalsets/missing.json"], "evalset not found"),
        ([*RANDOM, "--evalset", EVALSET, "--subset", "nope"], "no subset 'nope'"),
        ([*RANDOM, "--evalset", EVALSET, "--tiers", "legendary"], "no tier legendary"),
        ([*RANDOM, "--concurrency", "0"], "expected a whole number > 0"),
        ([*RANDOM, "--concurrency", "many"], "expected a whole number > 0, got 'many'"),
        ([*RANDOM, "--image-window", "3"], "MAX,KEEP"),
        ([*RANDOM, "--image-window", "4,4"], "0 ≤ KEEP < MAX"),
        ([*RANDOM, "--keep-images", "-1"], "≥ 0"),
        ([*RANDOM, "--keep-images", "2", "--image-window", "6,2"], "give only one"),
        (["--models", "vllm:m"], "missing endpoint URL VLLM_BASE_URL"),
        ([*RANDOM, "--surfaces", "paint"], "no surface paint"),
        ([*RANDOM, "--surfaces", "gui", "--skins", "neon"], "no skin neon"),
        ([*RANDOM, "--coordinates", "polar"], "unknown coordinates 'polar': use auto, pixels or normalized"),
        ([*RANDOM, "--subset", "lite"], "need --evalset"),
        (["--models", "baseline:random@loud"], "unknown thinking level"),
        (["--models", "baseline:nosuch"], "unknown baseline 'nosuch'"),
        (["--models", f"replay:{SAMPLE}#0000000000000000"], "is not in run"),
        (["--models", "replay:no/such/run#abc"], "no run directory"),
        (["--models", "anthropic:claude-sonnet-5"], "ANTHROPIC_API_KEY"),
        ([*RANDOM, "--env-file", "missing.env"], "missing.env does not exist"),
        ([*RANDOM, "--split", "validation", "--tasks", "2"], "refused task canvas-validation-0000"),
        ([*RANDOM, "--task-ids", "canvas-test-0001,canvas-tst-0002"], "refused task canvas-tst-0002"),
    ],
)
def test_run_mistakes(tmp_path, capsys, monkeypatch, extra, says):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env up the tree supplies a key
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["run", "--env", "canvas", "--out", str(out), *extra]))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalkit: error:") and "\n" not in err
    assert says in err
    assert not out.exists()


def test_unknown_env_and_missing_runs(tmp_path, capsys):
    for argv in (
        ["run", "--env", "nowhere", "--models", "baseline:random", "--out", str(tmp_path / "x")],
        ["summarise", str(tmp_path / "missing")],
        ["serve", "nowhere"],
        ["frobnicate"],
    ):
        with pytest.raises(SystemExit) as exc:
            raise SystemExit(main(argv))
        assert exc.value.code == 2, argv
        assert "\n" not in capsys.readouterr().err.strip()
    assert not (tmp_path / "x").exists()


def test_run_and_summarise(canvas_server, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--base-url",
            canvas_server.base_url,
            "--models",
            "baseline:random,baseline:tracer",
            "--evalset",
            EVALSET,
            "--limit",
            "3",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "ran 6 episode(s)" in printed
    assert main(["summarise", str(out)]) == 0
    assert "baseline:tracer" in capsys.readouterr().out


def test_view_serves_the_viewer_on_loopback(tmp_path):
    import subprocess
    import sys
    import time
    import urllib.request

    from evalkit.serving import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "evalkit.cli", "view", str(SAMPLE), "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "evalkit view exited"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the viewer never answered"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(10)
    assert main(["view", str(tmp_path / "missing"), "--wait", "0"]) == 2


def test_report_and_view_need_a_checkout(monkeypatch, capsys):
    import evalkit.analysis.report
    import evalkit.view.serve

    monkeypatch.setattr(evalkit.analysis.report, "NOTEBOOK", ROOT / "notebooks" / "absent.ipynb")
    monkeypatch.setattr(evalkit.view.serve, "APP_PATH", ROOT / "viewer" / "absent.py")
    for argv in (["report", str(SAMPLE)], ["view", str(SAMPLE)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "pip install -e ." in err and "\n" not in err


def test_unreachable_base_url(tmp_path, capsys):
    from evalkit.serving import free_port

    out = tmp_path / "never"
    argv = ["run", "--base-url", f"http://127.0.0.1:{free_port()}", "--models", "baseline:random",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    assert "cannot reach the environment" in capsys.readouterr().err
    assert not out.exists()


def test_resume_refuses_changed_settings_and_base_url_shares_keys(canvas_server, tmp_path, capsys):
    out = tmp_path / "run"
    base = ["run", "--models", "baseline:random", "--evalset", EVALSET, "--limit", "2", "--out", str(out),
            "--no-progress", "--max-turns", "5"]  # fmt: skip
    assert main([*base, "--env", "canvas"]) == 0
    trace = (out / "trace.jsonl").read_bytes()
    assert main([*base[:-1], "6", "--env", "canvas"]) == 2
    assert "max_turns=5" in capsys.readouterr().err
    assert (out / "trace.jsonl").read_bytes() == trace
    # the same server reached by URL is the same env: nothing to re-run
    assert main([*base, "--base-url", canvas_server.base_url]) == 0
    assert "ran 0 episode(s), skipped 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, says",
    [
        (["nosuch"], "unknown own-loop agent 'nosuch'"),
        (["uitars"], "uitars needs --endpoint and --model"),
        (["uitars", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"],
         "cannot reach the model endpoint"),
        (["dom", "--tasks", "missing.json"], "task file not found"),
        (["dom", "--task-ids", "webapp-nosuch"], "the task file has no task webapp-nosuch"),
        (["dom", "--ports", "80x"], "--ports wants port numbers"),
        (["opencua", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--path", "/nonexistent"],
         "opencua runs OSWorld's mm_agents/opencua, which is not on --path"),
        (["fara7b", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--path", "/nonexistent"],
         "fara7b runs microsoft/fara's src/fara, which is not on --path"),
        (["molmoweb", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--path", "/nonexistent"],
         "molmoweb runs allenai/molmoweb's agent and utils, which is not on --path"),
    ],
)  # fmt: skip
def test_ownloop_mistakes(tmp_path, capsys, monkeypatch, extra, says):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OWNLOOP_PATH", raising=False)
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["ownloop", *extra, "--out", str(out)]))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalkit: error:") and "\n" not in err
    assert says in err
    assert not out.exists()


def test_probe_shows_what_evalkit_sees(guess_server, quiz_server, capsys):
    assert main(["probe", guess_server.base_url, "--reset-json", '{"seed": 2}', "--max-turns", "7"]) == 0
    out = capsys.readouterr().out
    assert "name:       guess" in out and "kind:       typed-action env" in out
    assert "sessions:   1 at a time" in out and "  step: Act in the environment" in out
    assert '"guess":{"description":"Your guess, 1 to 100."' in out
    assert "  | hint: I am thinking of a number from 1 to 100." in out and "opening message (1 image):" in out
    assert "You have 7 turns" in out and 'reset with: {"seed": 2}' in out
    assert main(["probe", quiz_server.base_url, "--json", "--sessions", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "mcp" and report["finishing_tool"] == "answer"
    assert [t["name"] for t in report["tools"]] == ["lookup", "answer"] and report["tools"][1]["finishes"]
    assert report["capacity"] == 3 and report["capacity_tried"] == 3
    assert report["pictures"] == {"render": False, "target": False, "document": False, "reset images": False}
    assert report["opening_message"].startswith("What is six times seven?")


def test_probe_mistakes_are_one_line(capsys):
    from evalkit.serving import free_port

    for argv in (["probe", "nowhere"], ["probe", f"http://127.0.0.1:{free_port()}"],
                 ["probe", "canvas", "--reset-json", "[1]"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            raise SystemExit(main(argv))
        assert exc.value.code == 2, argv
        assert "\n" not in capsys.readouterr().err.strip()


def test_run_a_typed_env_with_reset_json(standin, guess_server, tmp_path, capsys):
    from tests.support.standin import MODEL, bisect_guess

    standin.play(bisect_guess)
    out = tmp_path / "r"
    argv = ["run", "--base-url", guess_server.base_url, "--models", MODEL, "--out", str(out),
            "--max-turns", "8", "--reset-json", '[{"seed": 5}, {"seed": 6}]', "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "ran 2 episode(s)" in captured.out and "0 unscored" in captured.out
    assert "running 1 episode(s) at once instead of 4" in captured.err
    assert main([*argv[:-3], "--reset-json", '{"seed": 5}', "--tasks", "3"]) == 2
    assert "--reset-json names the tasks itself" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["canvas", "opencua", "planning_jsonl", "planning_dir"])
def test_summarise_never_writes_into_a_foreign_run(seed_runs, capsys, name):
    from evalkit.records import rundir
    from evalkit.records.rundir import derived_dir
    from tests.support.snapshot import snapshot

    run = seed_runs[name]
    root = run.parent  # the harness's output root the run sits in: nothing is written anywhere under it
    before = snapshot(root)
    assert main(["summarise", str(run)]) == 0
    out, err = capsys.readouterr()
    assert snapshot(root) == before  # the seed's own summary.json / summary.md included
    where = derived_dir(run)
    assert where.parent == rundir.cache_home() / "runs"
    assert err.strip() == (f"{run}: summary.json and summary.md written to {where} "
                           "(a run another harness wrote is only read)")  # fmt: skip
    data = json.loads((where / "summary.json").read_text())
    assert data["n_episodes"] == sum(r["n"] for r in data["summary"]) > 0
    assert "Per model" in out and data["summary"][0]["model"] in out


def test_summarise_with_grades_and_an_output_folder(seed_runs, tmp_path, capsys):
    run = seed_runs["uitars"]
    grades = tmp_path / "grades.csv"
    grades.write_text("task_id,reward\nu-finish,1\nu-maxsteps,0\nu-harness,1\n")
    assert main(["summarise", str(run), "--grades", str(grades), "--out", str(tmp_path / "s")]) == 0
    out, err = capsys.readouterr()
    assert f"written to {tmp_path / 's'}" in err
    assert "grades from" in err and "2 episode(s) graded" in err and "1 grade(s) matched no ungraded" in err
    data = json.loads((tmp_path / "s" / "summary.json").read_text())
    row = data["summary"][0]
    assert (row["scored"], row["mean_reward"]) == (2, 0.5) and "2 episode(s) graded" in data["grades"]
    assert "No reward" in out
    grades.write_text("task_id,reward\nu-finish,lots\n")
    assert main(["summarise", str(run), "--grades", str(grades), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a number" in err and "\n" not in err and not (tmp_path / "t").exists()


def test_summarise_writes_an_evalkit_run_in_place(tmp_path, capsys):
    from fixtures.synth import make_run

    run = make_run(tmp_path / "r", n_tasks=3, frames=False)
    assert main(["summarise", str(run)]) == 0
    assert capsys.readouterr().err.strip() == f"{run}: summary.json and summary.md written to {run}"
    assert (run / "summary.json").is_file() and (run / "summary.md").is_file()
