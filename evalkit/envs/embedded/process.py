"""An embedded environment served by a child process, so that its CPU (resets, renders, grading, the MCP
and WebSocket machinery) runs beside the client's threads instead of contending with them for one GIL.

`ProcessServer(name)` starts a Python child on the parent's `sys.path` (as multiprocessing's spawn does,
without re-running the caller's main module) that imports the env's server only; the child
binds a free loopback port, writes it on its stdout, and serves until its stdin reaches end-of-file. The
parent holds the only write end of that pipe, so the child goes when the parent stops it, returns, raises
or is killed (even by SIGKILL): nothing outlives the batch. A parent that stops it says `stop` first, and
the child closes its sessions; end-of-file without it means the parent died, and the child exits at once.
The child runs in a session of its own, so a Ctrl-C at the terminal reaches the parent alone, which stops it
once its episodes are dealt with; killing the batch's process group therefore misses it, which is why it
watches its stdin. What the child writes on stderr reaches the parent's through a pipe the parent reads: the
sessions a dead batch cut off fail in the child as it goes, and none of what it says then reaches the
user's terminal or notebook, whose batch is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Self

from evalkit.envs.embedded.server import build_app, hold_freed_memory, serve, warm_app
from evalkit.errors import EnvError
from evalkit.serving import wait_healthy

_PATH_VAR = "EVALKIT_ENV_SYS_PATH"
_BOOT = (
    "import json, os, sys; sys.path[:] = json.loads(os.environ.pop('EVALKIT_ENV_SYS_PATH')); "
    "from evalkit.envs.embedded.process import _main; _main(*sys.argv[1:4])"
)
"""The child's first line: evalkit, and whatever the env imports, found where the parent finds them."""

_STOP = b"stop\n"
"""What a parent that stops its child writes before it closes the child's stdin."""
GRACE_S = 5.0
"""How long a stopping child may take to close its sessions before it is killed."""


class _Stopped:
    """A server that is a context manager: stopped on leaving the block."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ProcessServer(_Stopped):
    """Embedded environment `name` served by a child process on a loopback port, healthy (`/health`) before
    the constructor returns. Usable as a context manager or stopped with `stop()`; pass it wherever an
    environment is expected (`run_episode`, `run_batch`)."""

    def __init__(self, name: str, host: str = "127.0.0.1", timeout: float = 60.0, **app_kw: Any):
        self.name, self.host = name, host
        env = {**os.environ, _PATH_VAR: json.dumps(sys.path)}
        cmd = [sys.executable, "-c", _BOOT, name, host, json.dumps(app_kw)]
        t = time.perf_counter()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=env, start_new_session=True)  # fmt: skip
        self._relay = threading.Thread(target=_relay, args=(self._proc.stderr,), name="evalkit-env-stderr",
                                       daemon=True)  # fmt: skip
        self._relay.start()
        try:
            self.port = self._read_port(timeout)
            self.base_url = f"http://{host}:{self.port}"
            wait_healthy(self.base_url, timeout=max(1.0, timeout - (time.perf_counter() - t)))
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t
        """Seconds from the command to a healthy server (mostly the child's imports)."""

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read_port(self, timeout: float) -> int:
        out = self._proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else None
        if line is None or not line.strip().isdigit():
            if line is None:
                why = f"gave no port within {timeout:.0f}s"
            else:  # its stdout closed: it is exiting
                try:
                    why = f"exited with status {self._proc.wait(timeout=GRACE_S)}"
                except subprocess.TimeoutExpired:
                    why = "closed its output without a port"
            raise EnvError(f"the {self.name} env server process {why} (its error is above)")
        out.close()  # the child has sent its stdout to its stderr: nothing more comes here
        return int(line)

    def stop(self) -> None:
        """Tell the child to stop and close its stdin (it shuts down), wait for it, and kill it if it
        lingers."""
        proc = self._proc
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):  # it has exited already
                proc.stdin.write(_STOP)
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # What it said on its way out, before this returns (a process it started may hold the pipe open).
        self._relay.join(timeout=1.0)
        for f in (proc.stdout, proc.stderr):
            if f is not None and not f.closed and not (f is proc.stderr and self._relay.is_alive()):
                f.close()

    def __repr__(self) -> str:
        return f"ProcessServer({self.name!r}, {getattr(self, 'base_url', '(starting)')}, pid {self.pid})"


def _relay(pipe: Any) -> None:
    """The child's stderr onto this process's, as it comes."""
    try:
        while chunk := pipe.read1(65536):
            try:
                os.write(2, chunk)
            except OSError:
                pass
    except (OSError, ValueError):  # closed under us
        pass


class ProcessServers(_Stopped):
    """`n` ProcessServers of one embedded env, started side by side: one server process is one event loop,
    one core, and past a few dozen episodes at once that is what binds. `base_url` is the first's,
    `base_urls` all of them (an `Endpoint` resolved from this group spreads its sessions over them: each
    session keeps to one server, its WebSocket and its pictures alike). Stopping stops every one."""

    def __init__(self, name: str, n: int, **kw: Any):
        self.name = name
        started: list[ProcessServer | BaseException] = [RuntimeError("not started")] * n

        def start(i: int) -> None:
            try:
                started[i] = ProcessServer(name, **kw)
            except BaseException as e:  # (raised below, once the others are stopped)
                started[i] = e

        threads = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.servers = [s for s in started if isinstance(s, ProcessServer)]
        failed = next((s for s in started if not isinstance(s, ProcessServer)), None)
        if failed is not None:
            self.stop()
            raise failed
        self.base_url = self.servers[0].base_url
        self.base_urls = tuple(s.base_url for s in self.servers)
        self.startup_s = max(s.startup_s for s in self.servers)

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers]

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    def __repr__(self) -> str:
        return f"ProcessServers({self.name!r}, {list(self.base_urls)})"


PROCESS_FROM = 8
"""From this concurrency on, a batch serves its embedded env in child processes rather than in a thread: see
`serve_embedded`."""
EPISODES_PER_PROCESS = 32
"""Episodes at once that one env server process serves; more get more processes, at most one per core."""


def env_processes(concurrency: int) -> int:
    """How many processes serve an embedded env for `concurrency` episodes at once (0: a thread)."""
    if concurrency < PROCESS_FROM:
        return 0
    return max(1, min(os.cpu_count() or 1, -(-concurrency // EPISODES_PER_PROCESS)))


def serve_embedded(name: str, concurrency: int) -> Any:
    """The embedded env `name`, served for one batch. Its CPU per episode (reset, renders, grading, the MCP
    and WebSocket layers) is about the client's own, so beside many episodes' threads it contends with them
    for one GIL: from `PROCESS_FROM` episodes at once it gets a process (and a core) of its own, and one
    more per EPISODES_PER_PROCESS episodes up to the machine's cores, since one server process is one event
    loop on one core (on 2 cores at concurrency 50, two processes took the efficiency from ~0.58 to ~0.62
    in alternating runs; at 8, 10 and 12 episodes at once one process beat a thread in six alternating
    runs each, medians 0.94/0.92/0.92 against 0.89/0.91/0.89, and `make demo`'s eight offline episodes at
    once took 31 s rather than 34). Below 8 a thread starts without a second interpreter's imports."""
    sessions = max(64, concurrency + 4)
    n = env_processes(concurrency)
    if n:
        return ProcessServers(name, n, max_concurrent_envs=sessions)
    return serve(name, max_concurrent_envs=sessions)


def _main(name: str, host: str, app_kw: str) -> None:
    import uvicorn  # start-up: the child's alone (the parent serving in a thread starts its own)

    hold_freed_memory()
    logging.getLogger("fastmcp").setLevel(logging.ERROR)
    sock = socket.socket()
    sock.bind((host, 0))
    app = build_app(name, **json.loads(app_kw))
    config = uvicorn.Config(app, log_level="warning", ws="websockets-sansio")
    server = uvicorn.Server(config)

    def watch_parent() -> None:
        # End-of-file on stdin: the parent stopped us (it said so first), or died (its end of the pipe closed
        # with it): then nobody is left to serve, and the sessions it cut off are not worth closing.
        tail = b""
        while chunk := sys.stdin.buffer.read(65536):
            tail = (tail + chunk)[-len(_STOP) :]
        if tail != _STOP:
            os._exit(0)
        # The sessions the parent stopped with it fail as the server closes them: the user, whose batch is
        # stopping, is not told each one's traceback.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        server.should_exit = True
        time.sleep(GRACE_S)
        os._exit(0)  # sessions that would not close must not keep an orphan alive

    threading.Thread(target=watch_parent, name="evalkit-parent-watch", daemon=True).start()
    print(sock.getsockname()[1], flush=True)
    # Nobody reads our stdout after the port: whatever the env prints goes to stderr instead of filling a
    # pipe until the server blocks.
    os.dup2(2, 1)

    def warm() -> None:
        # Beside the first sessions rather than before them: the batch's first episodes start while it runs
        # (~0.1 s for the canvas); what one needs before it is done, it makes itself (an env instance) or
        # waits for (a module, on its import lock).
        warm_app(name, app)
        gc.freeze()  # what it loaded stays too (a session's objects of the moment with it, a few at most)

    threading.Thread(target=warm, name="evalkit-warm", daemon=True).start()
    # What start-up made stays for the process's life: the cycle collector's full passes leave it out (one
    # pass over it held the server's loop for ~0.1 s, its sessions waiting).
    gc.freeze()
    server.run(sockets=[sock])
    # Cleanups (Chromium's) run; tearing down every module, a second of CPU for nothing, does not.
    atexit._run_exitfuncs()
    sys.stderr.flush()
    os._exit(0)
