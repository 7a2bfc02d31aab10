"""A real two-node Ray cluster on loopback for the tests: a head (`ray start --head`, 127.0.0.2: Ray takes
127.0.0.1 for "this machine" and swaps in its outward address) and a second node (`ray start --address`,
127.0.0.3), the second in a mount namespace of its own with a private
/tmp and another working directory where the machine allows it (`unshare`), so it shares no file system
with the driver. Small: one CPU and the smallest object store each, no dashboard, every port chosen free
(other Ray instances may run on the machine). Processes are stopped by their ids, never `ray stop` (which
stops every Ray on the machine). Ray's token authentication is off for this cluster and its drivers
(`RAY_AUTH_MODE=disabled`): it is reached from the test's own processes only."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

PATIENT = """
import sys, time
import ray._private.services as services
from ray.scripts.scripts import main

asked = services.get_node


def get_node(*args, **kw):
    end = time.monotonic() + 180
    while True:
        try:
            return asked(*args, **kw)
        except RuntimeError:
            if time.monotonic() > end:
                raise
            time.sleep(0.5)


services.get_node = get_node

import inspect
import ray._raylet as raylet

start_raylet = services.start_raylet
PORTS = {"dashboard_agent_listen_port": raylet.DASHBOARD_AGENT_LISTEN_PORT_NAME,
         "metrics_agent_port": raylet.METRICS_AGENT_PORT_NAME,
         "metrics_export_port": raylet.METRICS_EXPORT_PORT_NAME,
         "runtime_env_agent_port": raylet.RUNTIME_ENV_AGENT_PORT_NAME}


def announced(*args, **kw):
    got = inspect.signature(start_raylet).bind(*args, **kw).arguments
    for key, name in PORTS.items():
        if got.get(key):
            raylet.persist_port(got["session_dir"], got["node_id"], name, got[key])
    return start_raylet(*args, **kw)


services.start_raylet = announced
sys.argv[0] = "ray"
main()
"""
"""`ray start`, made patient for a 2-core machine shared with other work: Ray waits 30 s for a raylet to
register (a fixed limit in `ray._private.node`), and a raylet waits 15 s for its agents to say their ports,
which their start-up took longer than at a load average of 12-15 (the raylet aborted). Here the node waits
up to 3 minutes, and the agents' ports, fixed by the command line, are written for the raylet before it
starts (the agents write the same later). Tests only."""
SMALL = ["--num-cpus", "1", "--object-store-memory", str(80 * 2**20), "--disable-usage-stats", "--block"]

ATTEMPTS = 3


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def own_ports() -> list[str]:
    names = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"]  # fmt: skip
    return [x for name, port in zip(names, free_ports(len(names)), strict=True) for x in (name, str(port))]


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--mount", "--map-root-user", "sh", "-c", "mount -t tmpfs tmpfs /tmp"]
    return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0


class Cluster:
    """The head, and a second node that a test may kill, freeze or start again (`second`)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ekray-"))
        self.private = can_unshare()
        (self.dir / "node2").mkdir()
        self.env = {
            **os.environ,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",
            "RAY_agent_register_timeout_ms": "180000",
            "RAY_raylet_start_wait_time_s": "180",
        }  # its agents start slowly on a busy machine
        self.node: subprocess.Popen | None = None
        try:
            for attempt in range(ATTEMPTS):
                self._head()
                if self.started("head", self.head, last=attempt == ATTEMPTS - 1):
                    break
        except BaseException:
            self.stop()
            raise

    def _head(self) -> None:
        (self.port,) = free_ports(1)
        self.address = f"127.0.0.2:{self.port}"
        head = [sys.executable, "-c", PATIENT, "start", "--head", "--node-ip-address", "127.0.0.2",
                "--port", str(self.port),
                "--dashboard-port", str(free_ports(1)[0]), "--include-dashboard=false",
                "--temp-dir", str(self.dir / "t"), *own_ports(), *SMALL]  # fmt: skip
        (self.dir / "head.log").unlink(missing_ok=True)
        self.head = self._start(head, self.dir / "head.log")

    def _start(self, argv: list[str], log: Path, **kw: object) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                    start_new_session=True, **kw)  # fmt: skip

    def started(self, name: str, proc: subprocess.Popen, last: bool, timeout: float = 240) -> bool:
        """Whether `ray start` says the node runs (its raylet registered with the head). Ray gives a raylet
        30 s to register, which a loaded machine can miss (40 s was measured at a load average of 13 on 2
        cores): False then, for another try, unless this was the `last`."""
        end = time.monotonic() + timeout
        while "Ray runtime started" not in (self.dir / f"{name}.log").read_text(errors="replace"):
            if proc.poll() is not None:
                if last:
                    raise RuntimeError(f"Ray's {name} stopped: {self.log(name)}")
                return False
            if time.monotonic() > end:
                raise TimeoutError(f"Ray's {name} did not start in {timeout}s: see {self.dir}")
            time.sleep(0.5)
        return True

    def log(self, name: str) -> str:
        lines = (self.dir / f"{name}.log").read_text(errors="replace").splitlines()
        return " / ".join(lines[-3:])

    def second(self) -> None:
        """A live second node (started again if a test killed it)."""
        if self.node is not None and self.node.poll() is None:
            return
        for attempt in range(ATTEMPTS):
            self.stop_node()
            self._join()
            if self.started("node2", self.node, last=attempt == ATTEMPTS - 1):
                return

    def _join(self) -> None:
        join = [sys.executable, "-c", PATIENT, "start", "--address", self.address]
        join += ["--node-ip-address", "127.0.0.3", *own_ports(), *SMALL]
        work = self.dir / "node2"
        if self.private:
            inner = "mount -t tmpfs tmpfs /tmp && exec " + shlex.join(join)
            argv = ["unshare", "--mount", "--map-root-user", "sh", "-c", inner]
        else:
            argv = join
        (self.dir / "node2.log").unlink(missing_ok=True)
        self.node = self._start(argv, self.dir / "node2.log", cwd=work)

    def node_processes(self) -> list[psutil.Process]:
        if self.node is None:
            return []
        try:
            top = psutil.Process(self.node.pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def raylet(self) -> psutil.Process:
        return next(p for p in self.node_processes() if "raylet" in " ".join(p.cmdline()[:1]))

    def freeze(self, on: bool) -> None:
        """SIGSTOP (or SIGCONT) every process of the second node."""
        for p in self.node_processes():
            try:
                p.send_signal(signal.SIGSTOP if on else signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass

    def stop_node(self) -> None:
        if self.node is None:
            return
        procs = self.node_processes()
        for p in procs:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
        self.node.wait(timeout=10)

    def stop(self) -> None:
        self.stop_node()
        try:
            top = psutil.Process(self.head.pid)
            procs = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        gone, left = psutil.wait_procs(procs, timeout=15)
        for p in left:
            p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
