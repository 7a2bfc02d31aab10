"""Run directories checked before any work: one a command will write (`run_out`: new, empty, or a run evalkit
wrote, which it resumes — never one another harness wrote) and those it will read (`runs`: runs evalkit
wrote or imports, or folders of them, each holding a readable episode). Each raises `ConfigError` with one
line naming the option; the CLI turns it into exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.errors import ConfigError, TraceError
from evalkit.values.checks import why, writable_dir


def run_out(name: str, path: str | Path) -> Path:
    """A run directory `evalkit run` may write: new, empty, or a run evalkit wrote (resumed). A run another
    harness wrote is never written into, nor is any other non-empty directory."""
    from evalkit.records import rundir  # start-up: the CLI's commands import this module, few of them that

    path = writable_dir(name, path)
    # (a run killed before its run.json was written holds only evalkit's own `.evalkit/`: its writer's lock)
    if path.is_dir() and any(p.name != ".evalkit" for p in path.iterdir()):
        if rundir.begun(path):
            return path
        if (path / rundir.TRACE).exists():
            raise ConfigError(f"{name} {path} holds a run another harness wrote, which evalkit never writes "
                              "into; give a new directory")  # fmt: skip
        raise ConfigError(f"{name} {path} is a non-empty directory that holds no evalkit run; give a new one")
    return path


def runs(paths: list[str], command: str, episodes: bool = True) -> list[str]:
    """Paths a command reads as runs: each must exist, be a run evalkit wrote or one it imports (or a folder
    of such runs, which stands for each of them, said in one line), and hold a readable episode — a run
    whose every line is unreadable or malformed is refused alike by every command.
    A run with no episode yet (its batch has not finished one) is refused too, unless `episodes` is False
    (the viewer, which watches runs grow)."""
    from evalkit.records import importers, rundir  # start-up (see run_out)

    for p in paths:
        if not Path(p).exists():
            raise ConfigError(f"{command}: no such run directory: {p}")
    found, notes = rundir.expand_runs(paths)
    paths = [str(p) for p in found]
    for p in paths:
        path = Path(p)
        if not (path.is_dir() and rundir.is_native(path)):
            if path.is_dir() and rundir.begun(path):  # killed before its trace was made
                raise ConfigError(f"{command}: {p} has no episodes yet")
            try:
                importers.detect(path)
            except TraceError:
                raise ConfigError(
                    f"{command}: {p} is not a run (no evalkit trace.jsonl, nor a run evalkit can import, nor "
                    "a folder of such runs)"
                ) from None
            except OSError as e:
                raise ConfigError(f"{command}: cannot read {p}: {why(e)}") from None
    for note in notes:
        print(f"evalkit: {note}", file=sys.stderr, flush=True)
    from evalkit.records import index_cache  # start-up: it loads Polars, which a batch never needs

    for p in paths:
        try:  # read, not cached: a command refused here must leave the run as it was
            df, unreadable = index_cache.read(Path(p), cache="read")
        except (OSError, TraceError) as e:
            raise ConfigError(f"{command}: cannot read {p}: {e}") from None
        malformed = int(df["problem"].is_not_null().sum())
        if df.height > malformed:
            continue
        if unreadable or malformed:
            said = [f"{unreadable} unreadable line(s)"] if unreadable else []
            said += [f"{malformed} malformed record(s)"] if malformed else []
            raise ConfigError(f"{command}: {p} holds no readable episode ({', '.join(said)})")
        if episodes:
            raise ConfigError(f"{command}: {p} has no episodes yet")
    return paths
