"""The cadence: asks every source for its latest data once per interval, ages and merges the answers into
one immutable snapshot, has the view stage (gputop.core.view) derive the view, yielding to the UI between
its slices, and hands the view to a callback.

One long-lived coroutine runs this loop. A tick never overlaps the next (single flight); a source that
misses its deadline keeps its last good nodes, which then age into STALE and DOWN like any silent node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence

from gputop.clock import Clock
from gputop.core.alerts import AlertBook
from gputop.core.config import HistoryConfig, PollConfig, Thresholds
from gputop.core.health import format_age
from gputop.core.metrics import Metric
from gputop.core.models import (
    ClusterSnapshot,
    NodeSample,
    Reachability,
    SlurmState,
    SourceResult,
)
from gputop.core.nodeset import natural_key
from gputop.core.slurm_names import SlurmNameAligner
from gputop.core.summary import ClusterView
from gputop.core.view import ViewStage
from gputop.sources.base import Source
from gputop.yielding import yield_to_ui

log = logging.getLogger(__name__)

ViewCallback = Callable[[ClusterView], None]


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
        judge_at_once: bool = False,
        history: HistoryConfig | None = None,
    ) -> None:
        """history: keep every GPU's readings for charts (the dashboard); None: keep none."""
        self.cluster = cluster
        self.sources = list(sources)
        self.clock = clock
        self.poll = poll
        self.thresholds = thresholds
        self.on_view = on_view
        self.is_demo = is_demo
        if history is not None and history.memory_mb is None:
            # a source that can give a node's past (a store) keeps the GPUs' past itself: the node
            # screen's chart reads it from there (gputop.tui.store_past)
            from_store = any(hasattr(source, "node_past") for source in self.sources)
            history = dataclasses.replace(history, memory_mb=history.budget_mb(from_store))
        self.stage = ViewStage(
            thresholds, interval_s=poll.interval_s, judge_at_once=judge_at_once, history=history
        )
        self.last_tick_cpu_s: float = 0.0
        self._last_results: dict[str, SourceResult] = {}
        self._source_errors: dict[str, str] = {}
        self._tick = 0
        self._slurm_names = SlurmNameAligner()
        self._sorted_names: list[str] = []  # the last tick's nodes, in natural order
        # by source: its last result, and the time of that result's oldest answering sample (None: not
        # worked out, which it is only when the same result comes again)
        self._seen_results: dict[str, tuple[SourceResult, float | None]] = {}
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

    # What carries over from tick to tick lives in the view stage; these name its parts for the UI.
    @property
    def view(self) -> ClusterView | None:
        return self.stage.view

    @property
    def alert_book(self) -> AlertBook:
        return self.stage.alert_book

    @property
    def cell_metric(self) -> Metric:
        return self.stage.cell_metric

    @cell_metric.setter
    def cell_metric(self, metric: Metric) -> None:
        self.stage.cell_metric = metric

    def replay_history(self) -> None:
        """Feeds the sources' recent past (the demo's) to the view stage's trackers, oldest first."""
        for source in self.sources:
            take_history = getattr(source, "take_history", None)
            if take_history is None:
                continue
            self.stage.replay(
                ClusterSnapshot.build(
                    cluster=self.cluster, taken_at_s=taken_at_s, nodes=result.nodes, slurm=result.slurm
                )
                for taken_at_s, result in take_history()
            )

    async def _start_over(self) -> None:
        """A source that jumped in time (a replay) hands over the past before its new time: the view stage
        forgets its own and derives that one, yielding between snapshots so keys are still answered."""
        for source in self.sources:
            take_jump = getattr(source, "take_jump", None)
            past = take_jump() if take_jump is not None else None
            if past is None:
                continue
            self.stage.forget()
            last_s: float | None = None
            for taken_at_s, result in past:
                snapshot = ClusterSnapshot.build(
                    cluster=self.cluster, taken_at_s=taken_at_s, nodes=result.nodes, slurm=result.slurm
                )
                span_s = taken_at_s - last_s if last_s is not None else None
                for _ in self.stage.steps(snapshot, span_s=span_s):
                    await yield_to_ui()
                last_s = taken_at_s

    async def tick(self) -> ClusterView:
        now_s = self.clock.now()
        results = await asyncio.gather(*(self._collect(source, now_s) for source in self.sources))
        await self._start_over()
        cpu_started = time.process_time()
        # a source that stands for more than the interval (a replay playing fast) says how much
        span_s = max((r.span_s for r in results if r.span_s is not None), default=None)
        nodes: list[NodeSample] = []
        slurm: SlurmState | None = None
        for source, result in zip(self.sources, results, strict=True):
            # a source whose data is older by nature (a store fed every 15-30 s) says from when it is old
            stale_s = max(self.poll.stale_after_s, getattr(source, "stale_after_s", 0.0))
            down_s = max(self.poll.down_after_s, getattr(source, "down_after_s", 0.0))
            nodes.extend(self._aged(source.name, result, now_s, stale_s, down_s))
            if result.slurm is not None:
                slurm = result.slurm
        names = [node.name for node in nodes]
        if names != self._sorted_names:  # most ticks list the nodes as the last one did, in order
            nodes.sort(key=lambda node: natural_key(node.name))
            names = self._sorted_names = [node.name for node in nodes]
        # Slurm's names keyed as the nodes are named (case and domain apart), so every lookup finds them
        slurm = self._slurm_names.align(slurm, names)
        self._tick += 1
        snapshot = ClusterSnapshot.build(
            cluster=self.cluster,
            taken_at_s=now_s,
            nodes=tuple(nodes),
            slurm=slurm,
            is_demo=self.is_demo,
            tick=self._tick,
        )
        # Each stretch between yields is a few milliseconds at most: a key press waits for one, not
        # for the tick (a key's handling hops through several queues, each of which would wait).
        steps = self.stage.steps(snapshot, tuple(self._source_errors.values()), span_s=span_s)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                view: ClusterView = done.value
                break
            await yield_to_ui()
        self.last_tick_cpu_s = time.process_time() - cpu_started
        self.on_view(view)
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
        # a source that answered but could not read everything (a store's query failing) says what
        warnings = getattr(source, "warnings", ())
        if warnings:
            more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
            self._source_errors[source.name] = f"{source.name}: {warnings[0]}{more}"
        else:
            self._source_errors.pop(source.name, None)
        self._last_results[source.name] = result
        return result

    def _aged(
        self, source: str, result: SourceResult, now_s: float, stale_after_s: float, down_after_s: float
    ) -> Sequence[NodeSample]:
        """The result's nodes, aged. The very result again (a store's source between its refreshes)
        while even its oldest answering sample is not yet stale: its nodes as they are, without a look
        at each. A new result (every tick, for most sources) is aged node by node, as ever."""
        seen = self._seen_results.get(source)
        if seen is None or seen[0] is not result:
            self._seen_results[source] = (result, None)
            return [self._age(node, now_s, stale_after_s, down_after_s) for node in result.nodes]
        oldest_s = seen[1]
        if oldest_s is None:  # the second time this result comes: its oldest sample, worked out once
            oldest_s = min(
                (
                    node.sampled_at_s
                    for node in result.nodes
                    if node.reachability is Reachability.OK and node.sampled_at_s is not None
                ),
                default=math.inf,  # no answering sample: nothing to age
            )
            self._seen_results[source] = (result, oldest_s)
        if now_s - oldest_s < stale_after_s:
            return result.nodes
        return [self._age(node, now_s, stale_after_s, down_after_s) for node in result.nodes]

    def _age(self, node: NodeSample, now_s: float, stale_after_s: float, down_after_s: float) -> NodeSample:
        """Turn an old sample into STALE or DOWN, keeping its last good values and saying for how long."""
        if node.reachability is not Reachability.OK or node.sampled_at_s is None:
            return node
        age_s = now_s - node.sampled_at_s
        if age_s >= down_after_s:
            state = Reachability.DOWN
        elif age_s >= stale_after_s:
            state = Reachability.STALE
        else:
            return node
        return dataclasses.replace(
            node, reachability=state, error=node.error or f"no data for {format_age(age_s)}"
        )

    @property
    def source_errors(self) -> list[str]:
        return list(self._source_errors.values())
