"""Where time comes from. The app uses the wall clock; tests and screenshots freeze it."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, start_s: float) -> None:
        self._now_s = start_s

    def now(self) -> float:
        return self._now_s

    def advance(self, seconds: float) -> None:
        self._now_s += seconds
