"""Keeps the event history (gputop.core.event_history) in its file: read at start, saved when it
changed (at most every SAVE_EVERY_S, and at the end). Another gputop on the same cluster (the dashboard
beside `gputop watch`) saves the same file: each save first takes in what the file holds, so neither
loses the other's drains."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gputop.actions.state_file import load_json, save_json, set_aside
from gputop.core.event_history import HISTORY_VERSION, KEEP_S, EventHistory

SAVE_EVERY_S = 30.0
WHAT = "the event history"


class HistoryKeeper:
    def __init__(self, path: Path, history: EventHistory, say: Callable[[str], None]) -> None:
        self.path = path
        self.history = history
        self.say = say
        self._saved_at_s = 0.0
        self._writable = True  # False: the file exists but cannot be read; never saved over

    def load(self) -> None:
        loaded = load_json(self.path, WHAT)
        if loaded.message is not None:
            self.say(loaded.message)
            self._writable = "not saved over" not in loaded.message
        if loaded.document is None:
            return
        document = loaded.document
        if not isinstance(document, dict):
            self.say(set_aside(self.path, WHAT, "not a JSON object"))
            return
        if _other_version(document):
            self._writable = False
            self.say(
                f"{WHAT} {self.path} has format version {document.get('version')!r}, this gputop reads "
                f"{HISTORY_VERSION}: left as it is, and not saved over"
            )
            return
        problem = self.history.merge_document(document)
        if problem is not None:
            self.say(f"{WHAT} {self.path}: {problem}")
        self.history.mark_saved()

    def maybe_save(self, now_s: float, *, force: bool = False) -> None:
        if not self._writable or not self.history.changed:
            return
        if not force and now_s - self._saved_at_s < SAVE_EVERY_S:
            return
        current = load_json(self.path, WHAT)
        if isinstance(current.document, dict) and not _other_version(current.document):
            self.history.merge_document(current.document)
        self.history.forget_before(now_s - KEEP_S)
        problem = save_json(self.path, self.history.to_document())
        self._saved_at_s = now_s
        if problem is not None:
            self.say(f"{WHAT} could not be saved: {problem}")
            return
        self.history.mark_saved()


def _other_version(document: dict[str, object]) -> bool:
    return document.get("version") != HISTORY_VERSION
