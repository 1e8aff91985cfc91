"""The cadence: asks every source for its latest data once per interval, merges the answers into one
immutable snapshot, derives the view, and hands it to a callback.

One long-lived coroutine runs this loop. A tick never overlaps the next (single flight); a source that
misses its deadline keeps its last good nodes, which then age into STALE and DOWN like any silent node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from gputop.clock import Clock
from gputop.core.alerts import AlertBook, FirstLook
from gputop.core.config import PollConfig, Thresholds
from gputop.core.health import format_age
from gputop.core.health_tracker import HealthTracker
from gputop.core.heatmap import CellCodes, cell_codes
from gputop.core.idle import IdleTracker
from gputop.core.interconnect_deviations import InterconnectTracker
from gputop.core.jobs import job_rows
from gputop.core.metrics import Metric, heat_scales
from gputop.core.models import (
    ClusterSnapshot,
    NodeSample,
    Reachability,
    SlurmState,
    SnapshotDelta,
    SourceResult,
    diff_snapshots,
)
from gputop.core.nodeset import natural_key
from gputop.core.summary import ClusterView, NodeRow, derive_rows, summarize
from gputop.sources.base import Source
from gputop.yielding import yield_to_ui

log = logging.getLogger(__name__)

DERIVE_CHUNK_NODES = 100

ViewCallback = Callable[[ClusterView, SnapshotDelta], None]


class Poller:
    def __init__(
        self,
        *,
        cluster: str,
        sources: Sequence[Source],
        clock: Clock,
        poll: PollConfig,
        thresholds: Thresholds,
        on_view: ViewCallback,
        is_demo: bool = False,
    ) -> None:
        self.cluster = cluster
        self.sources = list(sources)
        self.clock = clock
        self.poll = poll
        self.thresholds = thresholds
        self.on_view = on_view
        self.is_demo = is_demo
        self.view: ClusterView | None = None
        # the metric whose map cells each view carries; the UI sets it when the user switches
        self.cell_metric = Metric.UTIL
        self.scales = heat_scales(thresholds.temp_warn_c, thresholds.mem_warn_pct, thresholds.power_warn_pct)
        self.last_tick_cpu_s: float = 0.0
        # A tick that comes late (a slow source, a suspended laptop) counts as at most two intervals of
        # idleness, so a pause is never mistaken for a GPU sitting idle.
        self.interconnect_tracker = InterconnectTracker()
        self.alert_book = AlertBook()
        self.first_look = FirstLook()
        self.health_tracker = HealthTracker(thresholds)
        self.idle_tracker = IdleTracker(
            thresholds.idle_util_pct, thresholds.idle_minutes, max_step_s=max(60.0, 2 * poll.interval_s)
        )
        self._last_results: dict[str, SourceResult] = {}
        self._source_errors: dict[str, str] = {}
        self._tick = 0
        self._wake = asyncio.Event()
        self._stopping = False

    def refresh_now(self) -> None:
        """Cut the current wait short: the next tick starts at once, and sources that can (SSH) retry
        failed nodes and rerun their slow commands now."""
        for source in self.sources:
            refresh = getattr(source, "refresh", None)
            if refresh is not None:
                refresh()
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        for source in self.sources:
            try:
                await source.start()
            except Exception as err:  # one source that cannot start must not keep the others dark
                log.exception("source %s failed to start", source.name)
                self._source_errors[source.name] = f"{source.name}: could not start: {err}"
        self.replay_history()
        try:
            while not self._stopping:
                started = time.monotonic()
                await self.tick()
                remaining = self.poll.interval_s - (time.monotonic() - started)
                if remaining > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), remaining)
                self._wake.clear()
        finally:
            for source in self.sources:
                with contextlib.suppress(Exception):
                    await source.close()

    def replay_history(self) -> None:
        """Feeds the sources' recent past (the demo's) to the idle and health trackers, oldest first."""
        for source in self.sources:
            take_history = getattr(source, "take_history", None)
            if take_history is None:
                continue
            for taken_at_s, result in take_history():
                snapshot = ClusterSnapshot.build(
                    cluster=self.cluster, taken_at_s=taken_at_s, nodes=result.nodes, slurm=result.slurm
                )
                self.idle_tracker.update(snapshot)
                self.health_tracker.update(snapshot)

    async def tick(self) -> ClusterView:
        now_s = self.clock.now()
        results = await asyncio.gather(*(self._collect(source, now_s) for source in self.sources))
        cpu_started = time.process_time()
        nodes: list[NodeSample] = []
        slurm: SlurmState | None = None
        for result in results:
            nodes.extend(self._age(node, now_s) for node in result.nodes)
            if result.slurm is not None:
                slurm = result.slurm
        nodes.sort(key=lambda node: natural_key(node.name))
        self._tick += 1
        snapshot = ClusterSnapshot.build(
            cluster=self.cluster,
            taken_at_s=now_s,
            nodes=tuple(nodes),
            slurm=slurm,
            is_demo=self.is_demo,
            tick=self._tick,
        )
        previous = self.view
        idle = self.idle_tracker.update(snapshot)
        interconnect = self.interconnect_tracker.update(snapshot.nodes)
        health = self.health_tracker.update(snapshot)
        # Each stretch between yields is a few milliseconds at most: a key press waits for one, not
        # for the tick (a key's handling hops through several queues, each of which would wait).
        await yield_to_ui()
        rows: dict[str, NodeRow] = {}
        cells: dict[str, CellCodes] = {}
        metric = self.cell_metric
        scale = self.scales[metric]
        reuse_cells = previous is not None and previous.cells_metric is metric
        # Derived a slice at a time, yielding between slices: a 1,000-node cluster never holds a key press.
        for start in range(0, len(snapshot.nodes), DERIVE_CHUNK_NODES):
            chunk = snapshot.nodes[start : start + DERIVE_CHUNK_NODES]
            chunk_rows = derive_rows(
                snapshot,
                chunk,
                self.thresholds,
                previous,
                idle=idle,
                interconnect=interconnect,
                health=health,
            )
            for node in chunk:
                row = chunk_rows[node.name]
                if reuse_cells and previous is not None and previous.rows.get(node.name) is row:
                    cells[node.name] = previous.cells[node.name]
                else:
                    cells[node.name] = cell_codes(node, row.problems, metric, scale, row.idle_gpu_indices)
            rows.update(chunk_rows)
            await yield_to_ui()
        jobs = job_rows(snapshot, idle, previous.jobs if previous is not None else None)
        await yield_to_ui()
        settling = self.first_look.settling(snapshot.nodes, now_s)
        alerts = self.alert_book.update((p for row in rows.values() for p in row.problems), now_s, settling)
        view = ClusterView(
            snapshot=snapshot,
            rows=rows,
            summary=summarize(rows.values()),
            cells=cells,
            cells_metric=metric,
            idle=idle,
            jobs=jobs,
            source_errors=tuple(self._source_errors.values()),
            interconnect=interconnect,
            alerts=alerts,
        )
        delta = diff_snapshots(previous.snapshot if previous else None, snapshot)
        self.view = view
        self.last_tick_cpu_s = time.process_time() - cpu_started
        self.on_view(view, delta)
        return view

    async def _collect(self, source: Source, now_s: float) -> SourceResult:
        try:
            result = await asyncio.wait_for(source.collect(now_s), self.poll.node_deadline_s)
        except TimeoutError:
            self._source_errors[source.name] = (
                f"{source.name}: no answer within {self.poll.node_deadline_s:g}s"
            )
            return self._last_results.get(source.name, SourceResult())
        except Exception as err:  # a broken source must not stop the others or the UI
            log.exception("source %s failed", source.name)
            self._source_errors[source.name] = f"{source.name}: {err}"
            return self._last_results.get(source.name, SourceResult())
        self._source_errors.pop(source.name, None)
        self._last_results[source.name] = result
        return result

    def _age(self, node: NodeSample, now_s: float) -> NodeSample:
        """Turn an old sample into STALE or DOWN, keeping its last good values and saying for how long."""
        if node.reachability is not Reachability.OK or node.sampled_at_s is None:
            return node
        age_s = now_s - node.sampled_at_s
        if age_s >= self.poll.down_after_s:
            state = Reachability.DOWN
        elif age_s >= self.poll.stale_after_s:
            state = Reachability.STALE
        else:
            return node
        return dataclasses.replace(
            node, reachability=state, error=node.error or f"no data for {format_age(age_s)}"
        )

    @property
    def source_errors(self) -> list[str]:
        return list(self._source_errors.values())
