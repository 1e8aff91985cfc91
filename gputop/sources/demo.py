"""The simulated cluster as a source, for `--demo`, the tests, the screenshots and the benchmarks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gputop.core.models import SourceResult
from gputop.sources.simulator import SimulatedCluster


class SimulatorSource:
    name = "simulator"

    def __init__(self, cluster: SimulatedCluster | Callable[[], SimulatedCluster]) -> None:
        """Takes a cluster, or a function that builds one: a large cluster then builds in `start`, off
        the event loop, so the first frame is painted without waiting for it."""
        self._build = None if isinstance(cluster, SimulatedCluster) else cluster
        self._cluster = cluster if isinstance(cluster, SimulatedCluster) else None

    @property
    def cluster(self) -> SimulatedCluster:
        if self._cluster is None:
            raise RuntimeError("the simulated cluster is built when the source starts")
        return self._cluster

    async def start(self) -> None:
        if self._cluster is None and self._build is not None:
            self._cluster = await asyncio.to_thread(self._build)

    async def collect(self, now_s: float) -> SourceResult:
        # Steps in chunks and yields between them, so a 1,000-node step never holds up a key press.
        await self.cluster.advance_and_yield(now_s)
        return await self.cluster.result_and_yield()

    async def close(self) -> None:
        return None
