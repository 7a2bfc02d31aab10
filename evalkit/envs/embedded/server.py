"""Run an embedded OpenEnv environment under uvicorn: in a thread on a free loopback port (`serve`) or in
the foreground (`serve_forever`, behind `evalkit serve NAME`)."""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import sys
from typing import Any

from evalkit.envs import EMBEDDED
from evalkit.errors import ConfigError
from evalkit.serving import ThreadedServer


def import_openenv_server() -> None:
    """Import OpenEnv's server package without what costs seconds at every start and an embedded env never
    uses, each hidden for the length of the import only:
    - its Gradio web interface (unless ENABLE_WEB_INTERFACE asks for it), which the package imports whenever
      Gradio is installed and treats as absent when it is not;
    - rfc3987_syntax (where installed: JupyterLab's extras bring it), for which jsonschema (under the MCP
      server) compiles a grammar of its `iri` format at import: ~1.5 s of CPU, for a format the server
      never checks (it validates tool arguments without a format checker). Hidden only when jsonschema is
      not yet imported; a later import of it works."""
    if "openenv.core.env_server" in sys.modules:
        return
    hidden = [] if "jsonschema" in sys.modules else ["rfc3987_syntax"]
    if os.environ.get("ENABLE_WEB_INTERFACE", "false").lower() not in ("true", "1", "yes"):
        hidden.append("gradio")
    hidden = [name for name in hidden if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an import of it raises ModuleNotFoundError
    try:
        importlib.import_module("openenv.core.env_server")
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20


def hold_freed_memory() -> bool:
    """Have glibc's malloc keep the memory a server process frees for its next allocations, rather than hand
    it back to the kernel: True when it was told so (on glibc; elsewhere nothing is done).

    A canvas frame's buffers (the picture, its rows, its filtered lines: ~1.4 MB each at 800 × 600) are
    above the size from which malloc maps fresh pages and unmaps them when freed (or trims them off its
    heap), so every new frame faulted ~1000 pages in: ~5 ms of the env's CPU per new render, half of it
    the kernel's, against ~1.6 ms with the memory held (and resets' and grades' the same way). The
    process's footprint stays within TRIM_THRESHOLD of its peak. For an env server's own process (a child
    of a batch, `evalkit serve`), never a harness or a notebook's."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to ask, or one without mallopt
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def build_app(name: str, **kw: Any) -> Any:
    if name not in EMBEDDED:
        raise ConfigError(f"unknown environment {name!r} (embedded: {', '.join(sorted(EMBEDDED))})")
    import_openenv_server()
    module, _, func = EMBEDDED[name].partition(":")
    return getattr(importlib.import_module(module), func)(**kw)


def warm_app(name: str, app: Any) -> None:
    """Run embedded env `name`'s `warm(app)` on the app `build_app` made, when its package has one: what its
    first episodes would otherwise make while they run."""
    warm = getattr(importlib.import_module(EMBEDDED[name].partition(":")[0]), "warm", None)
    if warm is not None:
        warm(app)


class EnvServer(ThreadedServer):
    """An embedded environment served in a background thread. Usable as a context manager or stopped with
    `stop()`; pass it wherever an environment is expected (`run_episode`, `run_batch`)."""

    def __init__(self, name: str, port: int | None = None, host: str = "127.0.0.1", **app_kw: Any):
        self.name = name
        super().__init__(build_app(name, **app_kw), port, host, name=f"serve-{name}", ws="websockets-sansio")

    def __repr__(self) -> str:
        return f"EnvServer({self.name!r}, {self.base_url})"


def serve(name: str, port: int | None = None, host: str = "127.0.0.1", **app_kw: Any) -> EnvServer:
    """Start embedded environment `name` on a free loopback port and wait until it answers `/health`."""
    logging.getLogger("fastmcp").setLevel(logging.ERROR)
    return EnvServer(name, port=port, host=host, **app_kw)


def serve_forever(name: str, port: int = 8000, host: str = "127.0.0.1") -> None:
    import uvicorn  # start-up: only the foreground server (`evalkit serve`) runs it here

    hold_freed_memory()
    app = build_app(name)
    warm_app(name, app)
    uvicorn.run(app, host=host, port=port, log_level="info", ws="websockets-sansio")
