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

from gputop.core.facts import Reading
from gputop.core.models import SourceResult
from gputop.core.record_tick import TickPlayer
from gputop.core.recording import Frame
from gputop.sources.recording_file import Recording

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# A move further than this (or back) is a jump, not play: the dashboard starts over at the new time, with
# the recorded past before it replayed as its history. Play at 64x moves 64 s a tick (128 s at a 2 s tick).
JUMP_S = 150.0
# The past replayed before a jump's time, as the demo replays its own at start: a tick a minute for the
# hour (the full frames, one a minute, unpack on their own), every 30 s for the last five minutes.
JUMP_HISTORY_S = 3600.0
JUMP_TAIL_S = 300.0
JUMP_TAIL_STEP_S = 30.0


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
        # the full frames (every GPU's readings, not differences): a seek unpacks from the last one before
        # its time, and takes in only the changes of the frames before it
        self.keyframes = [i for i, f in enumerate(self.frames) if f.document.get("key")]
        self.stopped = recording.frames.stopped
        self._fact_memo: dict[tuple[str, str], Reading[object]] = {}
        self._player = TickPlayer(self.cluster, self._fact_memo)
        self._next = 0  # the next frame to play
        self._last: SourceResult = SourceResult()
        self._shown_s: float | None = None  # the time of the tick last handed over
        # after a jump: the recorded past before its time, for the poller to replay (None: no jump)
        self._jumped: list[tuple[float, SourceResult]] | None = None
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

    def take_jump(self) -> list[tuple[float, SourceResult]] | None:
        """After a jump, the recorded past before the new time, oldest first (the poller starts the view
        stage over and replays it); None when the replay moved as play moves."""
        jumped, self._jumped = self._jumped, None
        return jumped

    def at(self, time_s: float) -> SourceResult:
        """The recorded state as of ``time_s``: played forward from where it is, or from the start when
        the time is earlier (the changes accumulate from the first frame). A jump (back, or further
        forward than play moves) also lays out the hour before it for `take_jump`."""
        target = bisect.bisect_right(self.times_s, time_s)
        if target == 0:
            return self._last
        shown_s = self._shown_s if self._shown_s is not None else self.start_s
        to_s = self.times_s[target - 1]
        if target < self._next or to_s - shown_s > JUMP_S:
            self._jumped = self._past_before(target)
        result = self._play_to(target)
        # Play passing over recorded ticks: the one handed over stands for them all in the history,
        # unless the recording itself has a hole among them (gputop was not recording: a gap stays one).
        span_s = self._span(shown_s, target) if self._jumped is None else None
        self._shown_s = to_s
        return SourceResult(result.nodes, result.slurm, span_s) if span_s is not None else result

    def _span(self, shown_s: float, target: int) -> float | None:
        times = self.times_s
        first = bisect.bisect_right(times, shown_s)
        if target - first < 2:
            return None  # one tick further: the poll interval says it
        steps = [b - a for a, b in zip(times[first - 1 : target - 1], times[first:target], strict=False)]
        usual_s = sorted(steps)[len(steps) // 2]
        if max(steps) > 2.5 * usual_s:
            return None
        return times[target - 1] - shown_s

    def _past_before(self, target: int) -> list[tuple[float, SourceResult]]:
        """Snapshots of the hour before frame ``target``: one a minute (the full frames), then one every
        30 s for the last five minutes; played from the start of the recording, its changes taken in."""
        self._restart()
        end_s = self.times_s[target - 1]
        wanted: set[int] = set()
        for index in self.keyframes:
            if end_s - JUMP_HISTORY_S <= self.times_s[index] < end_s - JUMP_TAIL_S:
                wanted.add(index)
        tail_s = end_s - JUMP_TAIL_S
        while tail_s < end_s:
            at = bisect.bisect_right(self.times_s, tail_s) - 1
            if at >= 0 and self.times_s[at] >= end_s - JUMP_TAIL_S:
                wanted.add(at)
            tail_s += JUMP_TAIL_STEP_S
        past: list[tuple[float, SourceResult]] = []
        for index in sorted(wanted):
            if index >= target - 1:
                continue
            result = self._play_to(index + 1)
            if result.nodes:
                past.append((self.times_s[index], result))
        return past

    def _restart(self) -> None:
        self._player = TickPlayer(self.cluster, self._fact_memo)
        self._next = 0
        self._last = SourceResult()

    def _play_to(self, target: int) -> SourceResult:
        """Plays the frames before ``target``, the last of them into samples."""
        if target < self._next:
            self._restart()
        # the full frame the readings are unpacked from: the last one at or before the tick shown
        at_key = bisect.bisect_right(self.keyframes, target - 1) - 1
        unpack_from = self.keyframes[at_key] if at_key >= 0 else 0
        while self._next < target:
            index = self._next
            found = self.frames[index]
            self._next += 1
            try:
                if index < unpack_from:  # before the full frame: its changes alone
                    self._player.pass_over(found.document)
                    continue
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
