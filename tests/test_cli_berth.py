"""`evalkit run` on a berth server by URL: the env's own neutral mode is the default, a canvas mode is refused
before any work, and the summary reads the records."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main

EVALSET = "data/evalsets/berth-test-150.json"


def test_run_berth_by_url_with_its_default_mode(berth_server, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--base-url", berth_server.base_url, "--models", "baseline:greedy", "--evalset", EVALSET,
            "--subset", "core30", "--limit", "3", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0 and "ran 3 episode(s)" in capsys.readouterr().out
    meta = json.loads((out / "run.json").read_text())
    assert meta["env"] == "berth" and meta["modes"] == ["text"]
    assert main(["summarise", str(out)]) == 0 and "baseline:greedy" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main([*argv[:-3], "--modes", "reference", "--out", str(tmp_path / "x")]))
    assert exc.value.code == 2 and "berth has no mode reference" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
