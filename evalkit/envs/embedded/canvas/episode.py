"""Episode state, kept apart from the MCP environment, and the registry the HTTP routes read it from.

The registry lets a client fetch the document or render of an episode by id while (or right after) it runs
on a WebSocket. Live episodes stay until their env closes; finished ones are kept in a bounded LRU so the loop
can still fetch the final render just after submit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from evalkit.envs.embedded.registry import Registry

from .grade import grade_doc, prepare
from .model import Doc
from .tasks import Task

FINISHED_KEPT = 256


@dataclass
class Episode:
    """One attempt at one task: the working document, the step budget and, once over, the grade."""

    episode_id: str
    task: Task
    surface: str
    mode: str
    coordinates: str
    max_steps: int
    doc: Doc
    skin: str | None = None
    page: Any = None
    """The Chromium page of a browser surface (`html_surface.HtmlPage`, `gui_surface.EditorPage`); `doc` then
    mirrors what was last read back from it."""
    steps: int = 0
    grade: dict | None = None
    auto_submitted: bool = False
    broken: str | None = None
    """Why the episode's browser page no longer works (it crashed, or stopped answering): the env's state
    then fails, and a client knows the session is gone."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    prepared: Any = field(default=None, repr=False)
    """What the grade works out from the target alone (`grade.prepare`), once worked out ahead of the grade
    (`prepare`); dropped by the grade."""

    @property
    def done(self) -> bool:
        return self.grade is not None

    def snapshot(self) -> Doc:
        """A copy of the document that HTTP threads can render while tools keep editing."""
        with self.lock:
            return self.doc.copy()

    def set_doc(self, doc: Doc) -> None:
        """Replace the working document (a browser surface's latest read-back)."""
        with self.lock:
            self.doc = doc

    def finish(self, auto: bool = False) -> dict:
        """Grade the canvas as it stands and close the episode (idempotent)."""
        if self.grade is None:
            self.grade = grade_doc(self.task.doc, self.snapshot(), self.prepared)
            self.prepared = None  # half a megabyte, and a finished episode stays in the registry a while
            self.auto_submitted = auto
            registry.finished(self)
        return self.grade

    def prepare(self) -> None:
        """Work out what the grade needs of the target alone, unless the episode was graded already."""
        if self.grade is None and self.prepared is None:
            self.prepared = prepare(self.task.doc)


registry = Registry(FINISHED_KEPT)
