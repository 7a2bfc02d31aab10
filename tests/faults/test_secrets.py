"""No secret reaches a file: keys set in the environment, keys loaded from a `.env`, and passwords inside the
env's and the model endpoint's URLs, with a model endpoint that echoes them all back in its error bodies.
Every file `evalkit run`, `evalkit summarise` and `evalkit bundle` wrote is searched for each value."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

from tests.faults.drivers import MODEL, StandIn, run_argv
from tests.providers.fakes import Reply


def planted() -> dict[str, str]:
    """A fresh value for each way a secret reaches evalkit (random: a leak cannot be a coincidence)."""
    tag = secrets.token_hex(12)
    return {
        "env key": f"sk-envkey{tag}",
        "other env key": f"sk-ant-otherkey{tag}",
        "dotenv key": f"dotenvkey{tag}",
        "env url password": f"envurlpw{tag}",
        "model url password": f"modelurlpw{tag}",
    }


def files_holding(root: Path, values: dict[str, str]) -> list[tuple[str, str]]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [(what, str(path.relative_to(root))) for what, v in values.items() if v.encode() in data]
    return found


def test_no_secret_reaches_a_file(tmp_path, canvas_server):
    s = planted()
    echoed = " ".join(f"key={v} Authorization: Bearer {v}" for v in s.values())
    model = StandIn()
    plain = model.reply
    # The second model's endpoint fails every call with an error body that repeats every secret it could know.
    model.server.reset(
        default=lambda body: (
            Reply(status=500, error={"message": f"no: {echoed}"}, retry_after=0.001)
            if body["model"].endswith("-echo")
            else plain(body)
        )
    )
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={s['dotenv key']}\n")
    env_url = canvas_server.base_url.replace("http://", f"http://envuser:{s['env url password']}@")
    model_url = model.base_url.replace("http://", f"http://modeluser:{s['model url password']}@")
    environ = model.env(
        VLLM_API_KEY=s["env key"], ANTHROPIC_API_KEY=s["other env key"], VLLM_BASE_URL=model_url
    )
    out, site = tmp_path / "run", tmp_path / "site"
    argv = run_argv(out, "--env-file", str(tmp_path / ".env"), "--concurrency", "2",
                    models=f"{MODEL},{MODEL}-echo", tasks=3, env=env_url)  # fmt: skip
    try:
        ran = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    finally:
        model.stop()
    assert ran.returncode == 3, ran.stderr  # the echoing model's episodes are unscored
    cli = [sys.executable, "-m", "evalkit.cli"]
    for extra in (["summarise", str(out)], ["bundle", str(out), "-o", str(site)]):
        done = subprocess.run([*cli, *extra], env=environ, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (out / "trace.jsonl").is_file() and (site / "index.html").is_file()
    assert "no: key=***" in (out / "trace.jsonl").read_text()  # the echoed body was kept, scrubbed
    written = [p for p in tmp_path.iterdir() if p.name != ".env"]  # the user's own .env holds its key
    assert sorted(p.name for p in written) == ["run", "site"]
    assert [hit for root in written for hit in files_holding(root, s)] == []
