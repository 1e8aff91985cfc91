"""When the terminal goes away (the window closed, the SSH session to the login node dropped), gputop must
still finish what it is doing and stop: record the outcome of an action that runs, then exit.

Textual writes every frame through one thread that writes to the terminal. Once the terminal is gone a
write fails, that thread ends, and the next thirty frames fill its queue: the thirty-first blocks the
event loop for good, and with it the action's outcome and the SIGHUP handler. Installed here, a writer
thread that, when a write fails, keeps taking frames and drops them, and says so once (`on_lost`), so
the app stops as it does on SIGHUP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from textual.drivers import linux_driver
from textual.drivers._writer_thread import WriterThread


class _TerminalSafeWriter(WriterThread):
    on_lost: Callable[[], None] | None = None  # set by the app: what to do once the terminal is gone

    def run(self) -> None:
        try:
            super().run()
        except OSError:
            lost = _TerminalSafeWriter.on_lost
            if lost is not None:
                with contextlib.suppress(Exception):
                    lost()
            # Keep taking what is written, so that no write blocks, until the driver stops the thread.
            while self._queue.get() is not None:
                pass


def install() -> None:
    """Use the terminal-safe writer for every Linux terminal from now on (idempotent); before the app
    runs, since its driver starts the writer before anything is mounted."""
    linux_driver.WriterThread = _TerminalSafeWriter  # type: ignore[attr-defined]


def when_lost(on_lost: Callable[[], None]) -> None:
    """What to do once the terminal is found gone; called from the output thread."""
    _TerminalSafeWriter.on_lost = on_lost
