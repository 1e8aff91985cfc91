"""How gputop stops while an action's command runs: q, SIGTERM (kill, systemd, a scheduler), SIGHUP (the
terminal closed, the SSH session dropped) and a terminal found gone all wait for the command, so its
outcome is recorded, then give the terminal back and exit (128 + the signal). A second q or SIGTERM stops
at once; the action's outcome is then recorded as unknown (gputop.actions.execute).

Without this, SIGTERM and SIGHUP killed gputop at once: the terminal stayed in the alternate screen and the
command's outcome was never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
from typing import TYPE_CHECKING

from gputop.tui import terminal_guard

if TYPE_CHECKING:
    from textual.app import App

STOP_WAIT_S = 45.0  # an action's timeout (30 s), its re-read, and some room: then gputop stops regardless


class Stopping:
    """The actions whose command runs now, and the stop that waits for them."""

    def __init__(self, app: App[None]) -> None:
        self.app = app
        self._acting: dict[int, str] = {}  # token -> what runs ("drain gpu042")
        self._tokens = itertools.count()
        self.asked: str | None = None  # what asked gputop to stop ("q", "SIGTERM"), while it waits

    def begin(self, what: str) -> int:
        """An action's command starts now: gputop will not stop until it is over and recorded."""
        token = next(self._tokens)
        self._acting[token] = what
        return token

    def end(self, token: int) -> None:
        self._acting.pop(token, None)

    @property
    def in_flight(self) -> tuple[str, ...]:
        return tuple(self._acting.values())

    def watch(self) -> None:
        """Hand SIGTERM, SIGHUP and a lost terminal to `request` (call once the app's loop runs)."""
        app = self.app
        loop = asyncio.get_running_loop()

        def terminal_lost() -> None:  # called from the output thread
            loop.call_soon_threadsafe(app.call_later, self.request, signal.SIGHUP, False)

        terminal_guard.when_lost(terminal_lost)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                # The loop calls this outside the app's context: hand the signal to the app's own queue.
                loop.add_signal_handler(signum, app.call_later, self.request, signum)

    def request(self, signum: int | None, insist: bool = True) -> None:
        """A stop asked for by ``signum`` (None: the q key). ``insist``: asked a second time, stop now;
        the terminal closing can send SIGHUP more than once, and a lost terminal is no second request."""
        why = "q" if signum is None else signal.Signals(signum).name
        code = 0 if signum is None else 128 + signum
        if self.asked is not None:
            if insist and signum != signal.SIGHUP:
                self.app.exit(return_code=code)
            return
        if not self._acting:
            self.app.exit(return_code=code)
            return
        self.asked = why
        self.app.run_worker(self._when_idle(why, code), name="stop", group="stop")

    async def _when_idle(self, why: str, return_code: int) -> None:
        with contextlib.suppress(Exception):  # the terminal may be gone (SIGHUP)
            self.app.notify(
                f"{why}: gputop stops once {', '.join(self._acting.values())} is over and recorded",
                severity="warning",
                timeout=STOP_WAIT_S,
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_WAIT_S
        while self._acting and loop.time() < deadline:
            await asyncio.sleep(0.1)
        self.app.exit(return_code=return_code)
