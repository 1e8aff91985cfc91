"""The simulated cluster as a source, for `--demo`, the tests, the screenshots and the benchmarks."""

from __future__ import annotations

from gputop.core.models import SourceResult
from gputop.sources.simulator import SimulatedCluster


class SimulatorSource:
    name = "simulator"

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster

    async def start(self) -> None:
        return None

    async def collect(self, now_s: float) -> SourceResult:
        # Steps in chunks and yields between them, so a 1,000-node step never holds up a key press.
        await self.cluster.advance_and_yield(now_s)
        return self.cluster.result()

    async def close(self) -> None:
        return None
