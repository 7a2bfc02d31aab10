"""What a directory (or file) holds, byte for byte: to show that reading a run wrote nothing into it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def snapshot(path: Path) -> dict[str, str]:
    """Relative path → sha256 of every file under `path` (or of `path` itself), and every folder."""
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out
