"""The episodes an env server keeps by id: the live ones, and the last few finished ones (a final render or
a grade asked just after the episode ended). Shared by the embedded envs that serve a picture of an
episode by its id (the canvas, the web apps)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class Registry:
    """Thread-safe map episode_id -> episode: live ones by reference, the last `keep` finished ones."""

    def __init__(self, keep: int) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, Any] = {}
        self._done: OrderedDict[str, Any] = OrderedDict()
        self._keep = keep

    def add(self, ep: Any) -> None:
        with self._lock:
            self._live[ep.episode_id] = ep

    def finished(self, ep: Any) -> None:
        with self._lock:
            self._done[ep.episode_id] = ep
            self._done.move_to_end(ep.episode_id)
            while len(self._done) > self._keep:
                self._done.popitem(last=False)

    def drop(self, ep: Any) -> None:
        """Forget a live episode (its env closed or was reset); a finished one stays among the kept."""
        with self._lock:
            if self._live.get(ep.episode_id) is ep:
                del self._live[ep.episode_id]

    def get(self, episode_id: str) -> Any:
        with self._lock:
            return self._live.get(episode_id) or self._done.get(episode_id)
