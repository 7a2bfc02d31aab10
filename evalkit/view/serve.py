"""Serving the Streamlit viewer: `evalkit view`, and the subprocess tests and benchmarks drive.

`evalkit view` runs `streamlit run viewer/app.py` as a child: headless (no browser opened, no first-run
e-mail prompt, which would read a closed stdin), on loopback, with usage statistics off (traces hold prompts
a user may not want to publish; `viewer/.streamlit/config.toml` says the same for a plain `streamlit run`).
The child gets its own process group and /dev/null for stdin; SIGINT, SIGTERM and SIGHUP sent to
`evalkit view` are passed on to it, and on Linux the child is told to stop if its parent dies, so no
server is left behind however `evalkit view` ends.

Run paths are made absolute before the child gets them (it runs in the checkout, not where the user typed
them), and a run a batch is still creating (no folder yet, or no episode ended) is waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from evalkit.errors import ConfigError

APP_PATH = Path(__file__).resolve().parents[2] / "viewer" / "app.py"
DEFAULT_PORT = 8501
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 10.0


def app_command(
    runs: Sequence[str | Path], port: int, app: Path = APP_PATH, address: str = "127.0.0.1"
) -> list[str]:
    """`streamlit run viewer/app.py` on `address:port`, headless, with the runs after `--` (through
    `evalkit.view.streamlit_main`, which imports the viewer's modules while the server starts)."""
    return [
        sys.executable, "-m", "evalkit.view.streamlit_main", "run", str(app),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", address,
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--client.toolbarMode", "viewer",
        # Streamlit collects garbage (gc.collect(2)) after every run of the script: with a large run loaded
        # that was most of a step's time (py-spy, benchmarks/viewer.py). Python's own collector still runs.
        "--runner.postScriptGC", "false",
        "--runner.magicEnabled", "false",
        "--", *map(str, runs),
    ]  # fmt: skip


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` (bound as servers bind: a closed connection's TIME_WAIT does
    not count, a listening socket does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def pick_port(port: int | None, host: str = "127.0.0.1") -> int:
    """`port` when it is free (ConfigError when it is not); without one, the first free port from 8501."""
    if port is not None:
        if not port_free(port, host):
            raise ConfigError(f"port {port} is in use on {host}: pass another --port, or leave it out")
        return port
    for p in range(DEFAULT_PORT, DEFAULT_PORT + 100):
        if port_free(p, host):
            return p
    raise ConfigError(f"no free port between {DEFAULT_PORT} and {DEFAULT_PORT + 99}: pass --port")


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the signal forwarding below still covers every catchable way to stop


def spawn(cmd: Sequence[str], cwd: Path | None = None, log: Path | None = None) -> subprocess.Popen:
    """The viewer's server process: stdin from /dev/null, its own process group, tied to this process."""
    out = open(log, "wb") if log else None  # noqa: SIM115 - the child holds it; closed with the process
    try:
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out if out else None,
            stderr=subprocess.STDOUT if out else None,
            cwd=cwd,
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    finally:
        if out:
            out.close()


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = STOP_GRACE_S) -> int:
    """Signal the server, wait up to `grace` seconds, then kill it; its exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def absolute(runs: Sequence[str | Path]) -> list[str]:
    """`runs` as absolute paths, read from this process's working directory: the viewer's server runs in
    the checkout, where a relative path would name another folder (or none)."""
    return [str(Path(r).expanduser().absolute()) for r in runs]


BEFORE_TRACE = ("run.json", ".live", ".evalkit", "frames", "renders", "texts")
"""What a batch writes in its run directory before its first episode's record: the run.json, the progress
and lock files, and the pictures and texts of the episodes under way (`evalkit.records.rundir`)."""


def _ready(path: Path) -> bool:
    """Whether `path` holds a run to show: a trace, or any other file than those a batch writes before its
    first episode ends (BEFORE_TRACE; anything else is a foreign run's own layout)."""
    if not path.exists():
        return False
    if not path.is_dir() or (path / "trace.jsonl").exists():
        return True
    return any(p.name not in BEFORE_TRACE for p in path.iterdir())


WAIT_S = 600.0
"""How long `evalkit view` waits for a run a batch is creating, unless told (`--wait`)."""


def wait_for_runs(
    runs: Sequence[str],
    wait_s: float | None,
    say: Callable[[str], None],
    poll_s: float = 0.5,
) -> list[str]:
    """Wait for the runs that are not ready yet, saying so in one line; returns `runs` (what is still missing
    then is refused by the caller with its own one line). Without `wait_s` (not asked), only a run a batch
    is creating is waited for, up to WAIT_S: its folder holds a live marker of a running process or a lock
    file (`being_created`). A path that is nothing yet (a typo, most often) is refused at once. With `wait_s`
    (asked), any run not there yet whose parent folder exists is waited for, up to `wait_s` (0: none)."""
    asked = wait_s is not None
    limit = wait_s if asked else WAIT_S
    pending = [
        r for r in runs
        if not _ready(Path(r)) and (being_created(Path(r)) or (asked and Path(r).parent.is_dir()))
    ]  # fmt: skip
    if not pending or limit <= 0:
        return list(runs)
    names = ", ".join(pending)
    say(
        f"evalkit view: waiting up to {limit:.0f} s for {names} to be created by a batch (Ctrl-C to stop; "
        "--wait 0 refuses at once)"
    )
    deadline = time.monotonic() + limit
    while pending and time.monotonic() < deadline:
        time.sleep(poll_s)
        pending = [r for r in pending if not _ready(Path(r))]
    return list(runs)


def being_created(path: Path) -> bool:
    """Whether a batch is creating the run at `path` now: its writer's lock held by a live process
    (`evalkit.records.lock`), or a live marker (`evalkit.records.live`) of a process that is still there."""
    # start-up: the run-directory layer only for a live run's page
    from evalkit.records import live, lock

    if not path.is_dir():
        return False
    return lock.writing(path) or bool(live.running(path))


def serve(runs: Sequence[str | Path], port: int | None = None, app: Path = APP_PATH) -> int:
    """`evalkit view`: run the viewer until it stops or this process is told to stop; the exit code."""
    port = pick_port(port)
    proc = spawn(app_command(absolute(runs), port, app), cwd=app.parent.parent)
    if sys.stdout is not None:
        print(f"evalkit viewer on http://127.0.0.1:{port}", flush=True)
    received: list[tuple[int, float]] = []

    def forward(sig: int, _frame: object) -> None:
        received.append((sig, time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)

    old = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        while True:
            try:
                code = proc.wait(0.5)
                break
            except subprocess.TimeoutExpired:
                # A server that ignores the signal it was passed is killed after a grace period.
                if received and time.monotonic() - received[0][1] > STOP_GRACE_S:
                    proc.kill()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        stop(proc)
    # Stopped by a signal: the shell convention (130 for Ctrl-C), whatever the server's own code.
    return 128 + received[0][0] if received else code


@contextlib.contextmanager
def running_app(runs: Sequence[str | Path], timeout: float = 60.0, log: Path | None = None) -> Iterator[str]:
    """The viewer served in a subprocess; yields its URL once `/_stcore/health` answers, stops it after."""
    # start-up (as above)
    from evalkit.serving import free_port

    port = free_port()
    proc = spawn(app_command(absolute(runs), port), cwd=APP_PATH.parent.parent, log=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout)
        yield url
    finally:
        stop(proc)


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    """Until Streamlit's health endpoint at `url` answers (RuntimeError if `proc` exits first)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the viewer exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the viewer did not answer on {url} within {timeout:.0f} s")
        time.sleep(0.2)
