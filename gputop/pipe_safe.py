"""Standard output that a reader may close early: ``gputop check --json | head -c 10``.

Python raises BrokenPipeError on the write after the reader went away, and again when it flushes at exit,
which printed a traceback and turned the command's status into 1. A command whose reader has gone has
nobody left to tell: its output goes nowhere from then on and it exits with the status it had.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class PipeSafeStdout:
    """Wraps a text stream; after the first broken pipe, writes go to /dev/null (the descriptor too, so
    the interpreter's own flush at exit finds nothing to complain about)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_went_away()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_went_away()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _reader_went_away(self) -> None:
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing to redirect
            pass


def guard_stdout() -> None:
    """Make ``sys.stdout`` safe against a reader that closes early (once; a second call does nothing)."""
    if not isinstance(sys.stdout, PipeSafeStdout) and sys.stdout is not None:
        sys.stdout = PipeSafeStdout(sys.stdout)
