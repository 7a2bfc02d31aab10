"""`evalkit view` as a user runs it: headless with stdin closed, usage statistics off, and however it is
stopped (SIGTERM, Ctrl-C, even SIGKILL) no Streamlit server is left behind; `streamlit run viewer/app.py`
gets the same settings from the viewer's own `.streamlit/config.toml`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from evalkit.serving import free_port
from evalkit.view import serve
from tests.viewer.viewer_runs import APP, REPO, SAMPLE_RUN


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if state == "Z":  # exited; its parent has not reaped it yet
            return True
        time.sleep(0.1)
    return False


def start_view(tmp_path, log_name: str) -> tuple[subprocess.Popen, int, int, Path]:
    """`evalkit view` with stdin closed (as a service or `nohup … <&-` runs it): it, its server, the port."""
    port = free_port()
    log = tmp_path / log_name
    cmd = f"exec {sys.executable} -m evalkit.cli view {SAMPLE_RUN} --port {port} <&- >{log} 2>&1"
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(REPO))  # no Streamlit credentials file
    proc = subprocess.Popen(["sh", "-c", cmd], env=env, cwd=tmp_path)
    serve.wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=90)
    kids = children(proc.pid)
    assert len(kids) == 1, kids
    return proc, kids[0], port, log


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + 15), (signal.SIGINT, 130)])
def test_a_signal_stops_the_server_too(tmp_path, sig, code):
    proc, server, port, log = start_view(tmp_path, "view.log")
    proc.send_signal(sig)
    assert proc.wait(30) == code
    assert gone(server)
    assert serve.port_free(port)
    text = log.read_text()
    assert f"evalkit viewer on http://127.0.0.1:{port}" in text
    assert "usage statistics" not in text and "Email" not in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal and /proc are Linux's")
def test_a_killed_evalkit_view_takes_its_server_along(tmp_path):
    proc, server, port, _ = start_view(tmp_path, "view.log")
    proc.kill()
    proc.wait(10)
    assert gone(server, timeout=20)


def test_a_port_in_use_is_one_line(capsys):
    import socket

    from evalkit.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["view", str(SAMPLE_RUN), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"evalkit: error: port {port} is in use on 127.0.0.1: pass another --port, or leave it out"


def test_streamlit_run_reads_the_viewers_config(tmp_path):
    """From any directory, with stdin closed and no Streamlit credentials: headless, no usage statistics."""
    conf = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text())
    assert conf["browser"]["gatherUsageStats"] is False and conf["server"]["headless"] is True
    port = free_port()
    log = tmp_path / "streamlit.log"
    cmd = f"exec {sys.executable} -m streamlit run {APP} --server.port {port} -- {SAMPLE_RUN} <&- >{log} 2>&1"
    proc = subprocess.Popen(["sh", "-c", cmd], env=dict(os.environ, HOME=str(tmp_path)), cwd=tmp_path)
    try:
        serve.wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=90)
    finally:
        serve.stop(proc)
    text = log.read_text()
    assert "127.0.0.1" in text and "usage statistics" not in text and "Email" not in text


def test_server_skips_streamlits_use_warning_check():
    """The server `evalkit view` starts is `streamlit run`: the first element of its first page does not
    walk the script thread's stack to decide whether to warn that it is not (`env_util.is_repl`)."""
    code = (
        "from streamlit import delta_generator as d, env_util\n"
        "from evalkit.view import streamlit_main\n"
        "def walked():\n"
        "    raise SystemExit('is_repl was called')\n"
        "env_util.is_repl = walked\n"
        "streamlit_main.no_use_warning()\n"
        "d._maybe_print_use_warning()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


FIRST_PAGE = """
import json, sys
from streamlit.testing.v1 import AppTest
from evalkit.view import streamlit_main
streamlit_main.REST = ()  # what is imported once the first page is out: not this page's
at = AppTest.from_file(sys.argv[1], default_timeout=90).run()
assert not at.exception, [e.value for e in at.exception]
assert [e for e in at.get("bidi_component") if e.proto.component_name == "evalkit_rows"], "no table"
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def test_first_page_imports_only_the_table():
    """The Episodes table, the first page of a run, imports no statistics (NumPy), no pandas or PyArrow (which
    Streamlit imported to look at a component's list for a data frame) and not the other views: 0.85 s and
    more of the first open under a plain `streamlit run` (py-spy, benchmarks/viewer.py --first)."""
    absent = ["numpy", "pandas", "pyarrow", "altair", "evalkit.analysis.stats", "viewer.episode", "viewer.ab"]
    done = subprocess.run(
        [sys.executable, "-c", FIRST_PAGE, str(APP), json.dumps(absent)],
        capture_output=True, text=True, timeout=180, cwd=APP.parents[1],
        env=dict(os.environ, EVALKIT_RUNS=str(SAMPLE_RUN)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
