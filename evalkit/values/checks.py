"""What a value a user gives must be, checked where it enters, before any work and before any run directory
exists.

Numbers must be finite (a NaN timeout would be saved in run.json and refuse every resume, since NaN ≠ NaN;
an infinite one never fires) and within their bounds: one `Number` declares both the check of a value from
Python (a ConfigError naming the option: "--max-turns must be a whole number > 0, got 0") and the argparse
`type=` of its flag ("expected a whole number > 0, got 'x'"). Paths evalkit will write must be writable —
tried for real, by making and removing a scratch directory, since a root shell's `os.access` says yes to
`/proc`. Each check raises `ConfigError` with one line naming the option, or, as an argparse type,
`ArgumentTypeError`; the CLI turns both into exit status 2. A check takes the option's name and the value,
and returns the value normalised (a comma list split, a tuple of numbers made).
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from evalkit.errors import ConfigError
from evalkit.secrets import redact_url

Check = Callable[[str, Any], Any]
"""`check(name, value)`: the value normalised, or ConfigError naming the option."""


@dataclass(frozen=True)
class Number:
    """A finite number (`kind` int: a whole number) above `low` (at or above it unless `strict`) and at
    most `high`. None passes: a setting left unset."""

    kind: type = float
    low: float | None = None
    strict: bool = False
    high: float | None = None

    @property
    def wanted(self) -> str:
        """What the number must be, in words: `a whole number > 0`, `a finite number ≥ -2 and ≤ 2`."""
        what = "a whole number" if self.kind is int else "a finite number"
        bounds = [f"{'>' if self.strict else '≥'} {self.low:g}"] if self.low is not None else []
        bounds += [f"≤ {self.high:g}"] if self.high is not None else []
        return f"{what} {' and '.join(bounds)}".strip()

    def fits(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, int if self.kind is int else int | float):
            return False
        if not math.isfinite(v):
            return False
        if self.low is not None and (v <= self.low if self.strict else v < self.low):
            return False
        return self.high is None or v <= self.high

    def __call__(self, name: str, v: Any) -> Any:
        if v is not None and not self.fits(v):
            raise ConfigError(f"{name} must be {self.wanted}, got {v!r}")
        return v

    def parse(self, text: str) -> Any:
        """An argparse `type=`: the flag's text as this number."""
        try:
            v = self.kind(text)
        except ValueError:
            v = None
        if v is None or not self.fits(v):
            raise argparse.ArgumentTypeError(f"expected {self.wanted}, got {text!r}")
        return v


WHOLE = Number(int, 0, strict=True)
"""A whole number > 0."""
COUNT = Number(int, 0)
"""A whole number ≥ 0."""
POSITIVE = Number(float, 0, strict=True)
"""A finite number > 0."""
REAL = Number(float)
"""Any finite number."""


class CountOrAll:
    """A whole number > 0, or `all`."""

    def __call__(self, name: str, v: Any) -> int | str | None:
        return v if v == "all" else WHOLE(name, v)

    def parse(self, text: str) -> int | str:
        return "all" if text == "all" else WHOLE.parse(text)


def anything(name: str, v: Any) -> Any:
    return v


def names(name: str, v: Any) -> list[str] | None:
    """A list of names, or a comma-separated string of them."""
    if v is None:
        return None
    items = v.split(",") if isinstance(v, str) else v
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{name} must be names (a list, or comma-separated), got {v!r}")
    return [x.strip() for x in items if x.strip()] or None


def one_of(*allowed: str | None) -> Check:
    def check(name: str, v: Any) -> Any:
        if v not in allowed:
            what = name.lstrip("-").replace("-", " ")
            choices = [a for a in allowed if a]
            use = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise ConfigError(f"unknown {what} {v!r}: use {use}")
        return v

    return check


def image_window(name: str, v: Any) -> tuple[int, int] | None:
    """(MAX, KEEP) with 0 ≤ KEEP < MAX: KEEP = MAX would drop an image, and rewrite the prompt prefix, every
    turn."""
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = tuple(int(x) for x in v.split(","))
        except ValueError:
            raise ConfigError(f"{name} wants MAX,KEEP (two integers), got {v!r}") from None
    if not (isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int) for x in v)):
        raise ConfigError(f"{name} wants MAX,KEEP (two integers), got {v!r}")
    hi, keep = v
    if not 0 <= keep < hi:
        raise ConfigError(f"{name} MAX,KEEP wants 0 ≤ KEEP < MAX, got {hi},{keep}")
    return hi, keep


def reset_rows(name: str, v: Any) -> dict | list[dict] | None:
    """A JSON object (one task's reset arguments) or a non-empty list of them; from the command line, the
    JSON text or @FILE holding it."""
    if isinstance(v, str):
        source = v
        if v.startswith("@"):
            try:
                source = Path(v[1:]).read_text()
            except OSError as e:
                raise ConfigError(f"cannot read {v[1:]}: {e.strerror}") from None
        try:
            v = json.loads(source)
        except ValueError as e:
            raise ConfigError(f"{name} is not JSON ({e})") from None
    if (
        v is None
        or isinstance(v, dict)
        or (isinstance(v, list) and v and all(isinstance(r, dict) for r in v))
    ):
        return v
    raise ConfigError(f"{name} wants a JSON object or a non-empty list of objects")


def cluster_address(name: str, v: Any) -> str | None:
    """`--ray-address`: a cluster's GCS address (HOST:PORT, or `auto`); a Ray Client address is refused."""
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(f"{name} wants HOST:PORT, got {v!r}")
    if v.startswith("ray://"):
        raise ConfigError(
            f"{name} {v}: Ray Client (ray://) is not supported; run evalkit on a node of the cluster (the "
            "head, or through `ray job submit`) and give the cluster's HOST:PORT"
        )
    return v.strip()


def port(text: str) -> int:
    """An argparse `type=` for a TCP port."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < v < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return v


def free_port(name: str, number: int, host: str = "127.0.0.1") -> None:
    """The server about to start can listen on `host:number` (nothing else holds it, the host is ours)."""
    try:
        infos = socket.getaddrinfo(host, number, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"cannot listen on {host}:{number}: {getattr(e, 'strerror', None) or e}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no owner
        try:
            s.bind(address)
        except OSError as e:
            raise ConfigError(f"{name} {number}: cannot listen on {host}:{number} ({why(e)})") from None


def url(name: str, value: str, schemes: tuple[str, ...] = ("http", "https", "ws", "wss")) -> str:
    """A URL with one of `schemes` and a host."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — a port out of range raises here
    except ValueError as e:
        raise ConfigError(f"{name} {redact_url(value)!r} is not a valid URL ({e})") from None
    if parts.scheme not in schemes or not parts.hostname:
        want = " or ".join(f"{s}://" for s in schemes)
        raise ConfigError(f"{name} {redact_url(value)!r} is not a {want} URL with a host")
    return value


def json_file(what: str, path: str | Path, error: type[ConfigError] = ConfigError) -> Any:
    """The JSON in the file a user named as `what` ("task file", "evalset"); `error`, with one line, when
    the file is missing or is not readable JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except (OSError, ValueError) as e:
        raise error(f"{what} {path} is not readable JSON ({type(e).__name__}: {e})") from None


def why(e: OSError) -> str:
    """An OS error's reason, in one line."""
    return e.strerror or os.strerror(e.errno or errno.EIO)


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def writable_dir(name: str, path: str | Path, shown: str | Path | None = None) -> Path:
    """A directory evalkit may create (with its parents) and write into; nothing is left behind. `shown`
    is what the user named, when that is a file in `path`."""
    path = Path(path)
    shown = path if shown is None else shown
    if path.exists() and not path.is_dir():
        if shown != path:
            raise ConfigError(f"{name} {shown} cannot be made: {path} is not a directory")
        raise ConfigError(f"{name} {path} exists and is not a directory")
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise ConfigError(f"{name} {shown} cannot be made: {base} is not a directory")
    try:
        probe = tempfile.mkdtemp(prefix=".evalkit-probe-", dir=base)
    except OSError as e:
        raise ConfigError(f"{name} {shown} cannot be written: {why(e)} ({base})") from None
    shutil.rmtree(probe, ignore_errors=True)
    return path


def writable_file(name: str, path: str | Path) -> Path:
    """A file evalkit may (re)write, whose folder may be created."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{name} {path} is a directory; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{name} {path} cannot be written: permission denied")
    writable_dir(name, path.parent if str(path.parent) else Path("."), shown=path)
    return path
