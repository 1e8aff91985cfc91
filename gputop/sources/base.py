"""What the poller expects of a source."""

from __future__ import annotations

from typing import Protocol

from gputop.core.models import SourceResult


class Source(Protocol):
    """A source covers some nodes (and maybe Slurm). `collect` returns its latest view without blocking on
    any one node: a source that streams returns what it has; the poller bounds the call with a deadline."""

    name: str

    async def start(self) -> None: ...

    async def collect(self, now_s: float) -> SourceResult: ...

    async def close(self) -> None: ...


class SourceWithHistory(Source, Protocol):
    """A source that also knows the recent past (the simulator does): the poller replays it into the
    trackers that need time (allocated-but-idle GPUs) before its first tick."""

    def take_history(self) -> list[tuple[float, SourceResult]]:
        """(time in seconds, result) oldest first, each handed out once."""
        ...
