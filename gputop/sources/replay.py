"""Replay: a recording as a source, and the clock that says where in it the dashboard is.

`ReplaySource.collect(now_s)` hands the poller the recorded samples and Slurm state of the last tick at or
before ``now_s``, so a replay goes through the same poller, view stage and screens as live data. The
`ReplayClock` is the app's clock in a replay: it moves with the wall clock times the speed while playing,
stands still while paused, and jumps where the time bar sends it. The poller ages samples against it, so a
node recorded as answering at 03:12 is fresh at 03:12 of the replay.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

from gputop.core.models import SourceResult
from gputop.core.record_tick import TickPlayer
from gputop.core.recording import Frame
from gputop.sources.recording_file import Recording

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class ReplayClock:
    def __init__(self, start_s: float, end_s: float) -> None:
        self.start_s = start_s
        self.end_s = max(end_s, start_s)
        self.speed = 1.0
        self.paused = False
        self._position_s = start_s
        self._anchor = time.monotonic()

    def now(self) -> float:
        if self.paused:
            return self._position_s
        moved = (time.monotonic() - self._anchor) * self.speed
        return min(self.end_s, self._position_s + moved)

    def _reanchor(self) -> None:
        self._position_s = self.now()
        self._anchor = time.monotonic()

    def toggle(self) -> None:
        self._reanchor()
        self.paused = not self.paused

    def faster(self, step: int) -> None:
        self._reanchor()
        at = SPEEDS.index(self.speed) if self.speed in SPEEDS else 2
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, at + step))]

    def seek(self, time_s: float) -> None:
        self._position_s = max(self.start_s, min(self.end_s, time_s))
        self._anchor = time.monotonic()

    @property
    def at_end(self) -> bool:
        return self.now() >= self.end_s


class ReplaySource:
    name = "replay"

    def __init__(self, recording: Recording) -> None:
        self.meta = recording.meta
        self.cluster = str(recording.meta.get("cluster") or "replay")
        self.frames: list[Frame] = [f for f in recording.frames.frames if f.document.get("kind") == "tick"]
        self.times_s = [float(f.document["t"]) for f in self.frames]
        self.stopped = recording.frames.stopped
        self._player = TickPlayer(self.cluster)
        self._next = 0  # the next frame to play
        self._last: SourceResult = SourceResult()
        self.bad_frames = 0
        self.bad_frame_why = ""
        # the times a person wants to jump to: a new CRIT problem on a node, an action in the audit log
        self.events_s = self._events()

    @property
    def start_s(self) -> float:
        return self.times_s[0] if self.times_s else 0.0

    @property
    def end_s(self) -> float:
        return self.times_s[-1] if self.times_s else 0.0

    @property
    def player(self) -> TickPlayer:
        return self._player

    async def start(self) -> None:
        return None

    async def collect(self, now_s: float) -> SourceResult:
        return self.at(now_s)

    def at(self, time_s: float) -> SourceResult:
        """The recorded state as of ``time_s``: played forward from where it is, or from the start when
        the time is earlier (the changes accumulate from the first frame)."""
        target = bisect.bisect_right(self.times_s, time_s)
        if target < self._next:
            self._player = TickPlayer(self.cluster)
            self._next = 0
            self._last = SourceResult()
        while self._next < target:
            found = self.frames[self._next]
            self._next += 1
            try:
                if self._next < target:  # passed over: its changes and readings taken in, no samples built
                    self._player.advance(found.document, found.arrays)
                    continue
                snapshot = self._player.play(found.document, found.arrays)
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
                # a frame whose contents do not read as ours (a damaged or hostile file): skipped, counted
                self.bad_frames += 1
                self.bad_frame_why = f"a frame at offset {found.offset} was skipped: {err!s:.200}"
                continue
            if snapshot is not None:
                self._last = SourceResult(snapshot.nodes, snapshot.slurm)
        return self._last

    def step_time(self, time_s: float, step: int) -> float:
        """The time of the tick ``step`` ticks from the one shown at ``time_s``."""
        if not self.times_s:
            return time_s
        at = max(0, bisect.bisect_right(self.times_s, time_s) - 1)
        return self.times_s[max(0, min(len(self.times_s) - 1, at + step))]

    def next_event(self, time_s: float) -> float | None:
        later = bisect.bisect_right(self.events_s, time_s + 1e-6)
        return self.events_s[later] if later < len(self.events_s) else None

    def _events(self) -> list[float]:
        found: list[float] = []
        crit_before: dict[str, int] = {}
        for frame, time_s in zip(self.frames, self.times_s, strict=True):
            changes: dict[str, Any] = frame.document.get("changes") or {}
            if changes.get("audit"):
                found.append(time_s)
                continue
            for node, listed in (changes.get("problems") or {}).items():
                crit = sum(1 for p in listed if p and p[0] == "crit")
                if crit > crit_before.get(node, 0):
                    found.append(time_s)
                crit_before[node] = crit
        return sorted(set(found))

    async def close(self) -> None:
        return None
