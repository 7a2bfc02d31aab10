"""Mistakes exit 2 with one line and make no run directory."""

from __future__ import annotations

import pytest

from evalkit.cli import main

EVALSET = "data/evalsets/canvas-test-300.json"


@pytest.mark.parametrize(
    "extra",
    [
        ["--models", "nosuch:model"],
        ["--models", "baseline:random", "--evalset", "data/evalsets/missing.json"],
        ["--models", "baseline:random", "--evalset", EVALSET, "--subset", "nope"],
        ["--models", "baseline:random", "--evalset", EVALSET, "--tiers", "legendary"],
        ["--models", "baseline:random", "--concurrency", "0"],
        ["--models", "baseline:random", "--concurrency", "many"],
        ["--models", "baseline:random", "--image-window", "3"],
        ["--models", "baseline:random", "--surfaces", "paint"],
        ["--models", "baseline:random@loud"],
        ["--models", "anthropic:claude-sonnet-5"],
        ["--models", "baseline:random", "--env-file", "missing.env"],
    ],
)
def test_run_mistakes(tmp_path, capsys, monkeypatch, extra):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env up the tree supplies a key
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["run", "--env", "canvas", "--out", str(out), *extra]))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalkit: error:") and "\n" not in err
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
