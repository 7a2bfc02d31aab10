"""What a batch leaves behind when it returns, and when it is killed: nothing.

- Five batches in one process (as a notebook runs them, each a different concurrency: the env served in a
  thread, in one child process, in several) hold no thread, socket or file once each returns, beyond what
  the first made once for the process's life (Polars's runtime, a pipe of the env server's libraries).
- A batch killed with SIGKILL takes the env server it started with it, and that server writes nothing into
  the output the user gave the batch: its stderr is the batch's pipe, not the user's terminal.
- A batch whose every model's key is refused says so in one line per model, and leaves a run with no
  episode yet (which every reader calls that) that the same command resumes once the key is right.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from evalkit.cli import main
from tests.faults.drivers import (
    MODEL,
    StandIn,
    check_once,
    children,
    held_over_batches,
    records,
    run_argv,
    running,
    wait_for_records,
)

MADE_ONCE = 5
"""Files a first batch opens for the process's life: Polars's runtime (two epolls and an eventfd, made by its
first Parquet write) and a pipe the embedded server's libraries make when one is first served."""


def test_five_batches_in_one_process_leave_nothing_behind(tmp_path):
    model = StandIn()
    try:
        held = held_over_batches(model, [4, 8, 16, 4, 8], tmp_path)
    finally:
        model.stop()
    start, after = held[0], held[1:]
    assert [(h["ran"], h["errors"]) for h in after] == [(8, 0)] * 5
    for h in after:
        assert h["threads"] == start["threads"], h["names"]  # no frame taker, live writer, progress monitor
        assert h["sockets"] == start["sockets"], h  # no connection to a stopped env server or to the model
        assert h["fds"] <= start["fds"] + MADE_ONCE, h
    assert len({h["fds"] for h in after}) == 1, after  # the same after every batch: nothing adds up


def test_a_killed_batch_takes_its_env_server_and_its_output_with_it(tmp_path):
    model = StandIn()
    out, err = tmp_path / "run", tmp_path / "stderr.txt"
    # Enough episodes at once for the env to be served by a child process, many sessions cut off by the kill.
    argv = run_argv(out, "--concurrency", "32", tasks=96)
    servers: set[int] = set()
    try:
        with open(err, "wb") as f:
            proc = subprocess.Popen(argv, env=model.env(), stdout=subprocess.DEVNULL, stderr=f,
                                    start_new_session=True)  # fmt: skip
        wait_for_records(out, 16, proc)
        servers = {p for p in children(proc.pid) if running(p)}
        assert servers, "the batch serves its env in a child process"
        for pid in servers:  # what it writes on stderr goes to its batch, never to the user's output
            assert os.readlink(f"/proc/{pid}/fd/2").startswith("pipe:"), os.readlink(f"/proc/{pid}/fd/2")
        os.killpg(proc.pid, signal.SIGKILL)  # its process group (the server is in a session of its own)
        proc.wait()
        said = err.stat().st_size
        deadline = time.monotonic() + 2.0
        while any(running(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(running(p) for p in servers), "the env server outlived its batch"
        time.sleep(1.0)
        assert err.stat().st_size == said, err.read_bytes()[said:].decode(errors="replace")[:2000]
    finally:
        for pid in servers:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        model.stop()


def test_every_key_refused_is_one_line_each_and_a_run_to_resume(tmp_path, monkeypatch, capsys):
    model = StandIn()
    out = tmp_path / "run"
    refused = [f"{MODEL}-refused", f"{MODEL}-b-refused"]
    try:
        for k, v in model.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
        argv = run_argv(out, models=",".join(refused), tasks=4)[3:]  # (after `python -m evalkit.cli`)
        assert main(argv) == 2
        printed, said = capsys.readouterr()
        lines = said.splitlines()
        assert printed == "" and len(lines) == 2, said
        for m, line in zip(sorted(refused), sorted(lines), strict=True):
            assert line.startswith(f"evalkit: error: {m}: the model endpoint rejected the API key (HTTP 401)")
        assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["run.json", "trace.jsonl"]
        assert records(out) == [] and not list((out / ".live").glob("*"))  # no episode left "running"
        for command in (["summarise", str(out)], ["report", str(out)], ["bundle", str(out), "-o", "b"]):
            assert main(command) == 2
            assert capsys.readouterr().err == f"evalkit: error: {command[0]}: {out} has no episodes yet\n"
        # The key is right again: the same command runs every episode, once.
        model.server.reset(default=lambda body: model.reply({**body, "model": "good"}))
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        model.stop()
    tally = check_once(out, 2 * 4)
    assert (tally["keys"], tally["duplicated"], tally["lost"], tally["unscored"]) == (8, 0, 0, 0)
