"""The simulated cluster as a source, for `--demo`, the tests, the screenshots and the benchmarks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputop.core.models import SourceResult

if TYPE_CHECKING:
    # The simulator (and numpy with it) is imported by whoever builds the cluster: the demo builds it in
    # `start`, off the event loop, so the first frame does not wait for that import either.
    from gputop.sim.simulator import SimulatedCluster

HISTORY_STEP_S = 60.0  # a look a minute tells a GPU idle for minutes (the idle tracker counts 60 s whole)
# The last minutes are replayed twice as densely: the node table's 5-minute trend has a character per
# 37.5 s, and a minute between looks would leave every other one blank, as if the data had a gap.
HISTORY_TAIL_S = 300.0
HISTORY_TAIL_STEP_S = 30.0


class SimulatorSource:
    name = "simulator"

    def __init__(
        self,
        cluster: SimulatedCluster | Callable[[], SimulatedCluster],
        *,
        history_s: float = 0.0,
        history_step_s: float = HISTORY_STEP_S,
    ) -> None:
        """Takes a cluster, or a function that builds one: a large cluster then builds in `start`, off
        the event loop, so the first frame is painted without waiting for it.

        ``history_s``: `start` runs the cluster that far past its start time, keeping a result every
        ``history_step_s``, for `take_history`. The demo starts its cluster that long before now, so the
        trackers that need minutes of data (idle GPUs) have them at the first frame."""
        self._build = cluster if callable(cluster) else None
        self._cluster = None if callable(cluster) else cluster
        self._history_s = max(0.0, history_s)
        self._history_step_s = history_step_s
        self._history: list[tuple[float, SourceResult]] = []

    @property
    def cluster(self) -> SimulatedCluster:
        if self._cluster is None:
            raise RuntimeError("the simulated cluster is built when the source starts")
        return self._cluster

    async def start(self) -> None:
        if self._cluster is None and self._build is not None:
            self._cluster = await asyncio.to_thread(self._build)
        if self._history_s > 0:
            self._history = await asyncio.to_thread(self._replay)

    def _replay(self) -> list[tuple[float, SourceResult]]:
        cluster = self.cluster
        end_s = cluster.start_time_s + self._history_s
        history: list[tuple[float, SourceResult]] = []
        t = cluster.start_time_s
        while t < end_s:
            step_s = HISTORY_TAIL_STEP_S if end_s - t <= HISTORY_TAIL_S else self._history_step_s
            t = min(end_s, t + min(step_s, self._history_step_s))
            cluster.advance_to(t)
            history.append((cluster.now_s, cluster.result()))
        return history

    def take_history(self) -> list[tuple[float, SourceResult]]:
        history, self._history = self._history, []
        return history

    async def collect(self, now_s: float) -> SourceResult:
        # Steps in chunks and yields between them, so a 1,000-node step never holds up a key press.
        await self.cluster.advance_and_yield(now_s)
        return await self.cluster.result_and_yield()

    async def close(self) -> None:
        return None
