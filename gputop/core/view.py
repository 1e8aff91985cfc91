"""The one place where a tick's snapshot becomes what the screens show.

`ViewStage` owns what carries over from tick to tick (the idle, interconnect and health trackers, the
alert book, which nodes gputop has heard in full, the previous view) and turns each snapshot into the
next `ClusterView`: rows, the map's cell codes for the current metric, the Slurm queue's job rows, the
alerts and the summary. The poller (cadence, collection, ageing, merging), `gputop check`/`snapshot` and
the tests all go through it; nothing else derives a view.

`steps` does the work a slice of nodes at a time and yields between slices, so a caller on an event loop
can let a key press through (a 1,000-node tick is tens of milliseconds); `derive` runs it all at once.
The core does no I/O and knows no event loop: the caller decides what a yield means.
"""

from __future__ import annotations

import operator
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from gputop.core.alerts import AlertBook, FirstLook
from gputop.core.config import HistoryConfig, Thresholds
from gputop.core.counter_rates import CounterRateTracker
from gputop.core.event_history import EventHistory
from gputop.core.health_tracker import HealthTracker
from gputop.core.heatmap import COLUMNS_FROM_NODES, CellCodes, cells_of
from gputop.core.ib_flaps import IbFlapTracker
from gputop.core.idle import IdleTracker
from gputop.core.interconnect_deviations import InterconnectTracker
from gputop.core.jobs import job_rows_steps
from gputop.core.map_zoom import Reduce, node_cells
from gputop.core.metrics import Metric, heat_scales
from gputop.core.models import ClusterSnapshot, NodeSample
from gputop.core.node_timeline import NodeTimeline
from gputop.core.slices import run_to_end
from gputop.core.summary import ClusterView, NodeRow, derive_rows, summarize_steps

if TYPE_CHECKING:
    from gputop.core.history_store import Gathered, HistoryStore

DERIVE_CHUNK_NODES = 100  # nodes derived between two yields: a few milliseconds of work
NODE_CODES_PER_SLICE = 2500  # nodes' one cell worked out between two yields: some 2 ms
# A tick that comes late (a slow source, a suspended laptop) counts as at most this many intervals of
# idleness, so a pause is never mistaken for a GPU sitting idle.
MAX_IDLE_STEP_INTERVALS = 2
MIN_IDLE_STEP_S = 60.0


class ViewStage:
    def __init__(
        self,
        thresholds: Thresholds,
        *,
        interval_s: float,
        judge_at_once: bool = False,
        history: HistoryConfig | None = None,
    ) -> None:
        """interval_s: the poll interval (a late tick counts as at most two of idleness). judge_at_once: a
        reading over its threshold counts at once, without waiting thresholds.temp_sustain_s (one round
        of `gputop check` has no past to wait on)."""
        self.thresholds = thresholds
        self.interval_s = interval_s
        self.scales = heat_scales(thresholds.temp_warn_c, thresholds.mem_warn_pct, thresholds.power_warn_pct)
        self.cell_metric = Metric.UTIL  # the metric whose map cells each view carries; the UI switches it
        self._judge_at_once = judge_at_once
        # what gputop remembers across restarts; the caller loads it and saves it (None: nothing kept)
        self.history: EventHistory | None = None
        self._history_config = history
        self.forget()

    def forget(self) -> None:
        """Starts over with no past: the trackers, the alerts and the history store as new (a replay that
        jumps in time; its own past is then replayed to it). The remembered events stay the caller's."""
        thresholds = self.thresholds
        self.idle_tracker = IdleTracker(
            thresholds.idle_util_pct,
            thresholds.idle_minutes,
            max_step_s=max(MIN_IDLE_STEP_S, MAX_IDLE_STEP_INTERVALS * self.interval_s),
        )
        self.interconnect_tracker = InterconnectTracker()
        self.health_tracker = HealthTracker(thresholds)
        self.ib_flap_tracker = IbFlapTracker(thresholds.ib_flap_grace_s, thresholds.ib_flap_window_min * 60.0)
        self.counter_rate_tracker = CounterRateTracker()
        if self._judge_at_once:
            self.health_tracker.sustain_s = 0.0
        self.alert_book = AlertBook()
        self.timeline = NodeTimeline()
        self.first_look = FirstLook()
        self.view: ClusterView | None = None
        # every GPU's recent readings, for charts and sparklines (None: a round without a past); made at
        # the first snapshot, so numpy is not loaded before the first frame is painted
        self.history_store: HistoryStore | None = None
        # the last readings gathered for the history store, and of which node samples: a store's source
        # hands on the same samples for the ticks between its refreshes, whose readings are then known
        self._gathered: tuple[Sequence[NodeSample], Gathered] | None = None
        # what the history's last row was written from (readings, rows), and the last tick since that
        # was held back as the same (None: none): a next row right after it stands for the time since
        # the last row
        self._written: tuple[Gathered, Mapping[str, NodeRow]] | None = None
        self._held_until_s: float | None = None

    def store(self) -> HistoryStore | None:
        """The history store, made at the first call (None: this stage keeps no history)."""
        if self.history_store is None and self._history_config is not None:
            from gputop.core.history_store import HistoryStore

            config = self._history_config
            self.history_store = HistoryStore(
                interval_s=self.interval_s,
                fine_minutes=config.fine_minutes,
                coarse_hours=config.coarse_hours,
                budget_mb=config.budget_mb(from_store=False),
            )
        return self.history_store

    def _gather_steps(self, nodes: Sequence[NodeSample]) -> Generator[None, None, Gathered]:
        """`history_store.gather_steps`, or what it gave last time for the very same node samples (80,000
        GPUs' readings cost some 25 ms a tick, in five slices that each hold up a key)."""
        from gputop.core.history_store import gather_steps  # with numpy, once the store exists

        last = self._gathered
        if last is not None and len(last[0]) == len(nodes) and all(map(operator.is_, last[0], nodes)):
            return last[1]
        gathered = yield from gather_steps(nodes)
        self._gathered = (nodes, gathered)
        return gathered

    def _column_cells(
        self,
        metric: Metric,
        changed: list[NodeSample],
        rows: Mapping[str, NodeRow],
        cells: dict[str, CellCodes],
        previous: ClusterView | None,
    ) -> Generator[None, None, dict[Metric, Mapping[str, CellCodes]]]:
        """The changed nodes' cells for ``metric`` (the stage's when this view began: the UI may switch it
        between two slices) into ``cells``, with numpy; and every node's cells for the other metrics,
        from the same split, where the unchanged nodes' are known. A switch of metric at 10,000 nodes
        then costs a lookup, not some 20 ms that the key waits for; the tick pays some 10 ms a metric,
        and a store's source only when its data is new."""
        from gputop.core.cell_columns import CellColumns  # numpy: only for a large cluster

        split = yield from CellColumns.steps(changed, rows)
        yield
        cells.update((yield from split.codes_steps(metric, self.scales[metric])))
        everything = len(changed) == len(cells)
        more: dict[Metric, Mapping[str, CellCodes]] = {}
        for other in Metric:
            known = previous.cells_known(other) if previous is not None else None
            if other is metric or (known is None and not everything):
                continue
            yield
            fresh = yield from split.codes_steps(other, self.scales[other])
            if not everything and known is not None:
                fresh = {name: fresh[name] if name in fresh else known[name] for name in cells}
            more[other] = fresh
        return more

    def replay(self, history: Iterable[ClusterSnapshot]) -> None:
        """A source's recent past (the demo's), oldest first, derived as live snapshots are: the trackers
        that need time get it, the history store gets the readings and each node's problem counts, and
        the alerts their start times. Each snapshot stands for the time up to the next one."""
        last_s: float | None = None
        for snapshot in history:
            span_s = snapshot.taken_at_s - last_s if last_s is not None else self.interval_s
            self.derive(snapshot, span_s=span_s)
            last_s = snapshot.taken_at_s

    def derive(
        self, snapshot: ClusterSnapshot, source_errors: tuple[str, ...] = (), *, span_s: float | None = None
    ) -> ClusterView:
        """The next view, all at once. ``span_s``: how long the snapshot stands for in the history (default:
        the poll interval)."""
        return run_to_end(self.steps(snapshot, source_errors, span_s=span_s))

    def steps(
        self, snapshot: ClusterSnapshot, source_errors: tuple[str, ...] = (), *, span_s: float | None = None
    ) -> Generator[None, None, ClusterView]:
        """The next view, a slice at a time: yields between slices, returns the view (and keeps it as the
        previous view of the next snapshot)."""
        previous = self.view
        # a yield after each tracker, and within the two that take longest (idle: some 40 ms at 10,000
        # nodes, health: 30): together they are some 80 ms that a key pressed meanwhile would wait for
        idle = yield from self.idle_tracker.update_steps(snapshot)
        yield
        interconnect = yield from self.interconnect_tracker.update_steps(snapshot.nodes)
        yield
        health = yield from self.health_tracker.update_steps(snapshot)
        yield
        ib_flaps = self.ib_flap_tracker.update(snapshot)
        yield
        rates = yield from self.counter_rate_tracker.update_steps(snapshot)
        yield
        memory = self.history.update(snapshot) if self.history is not None else None
        yield
        rows: dict[str, NodeRow] = {}
        cells: dict[str, CellCodes] = {}
        metric = self.cell_metric
        scale = self.scales[metric]
        # same row, same metric: same cells (the same tuple, which tells the map nothing moved); after a
        # switch, the cells the previous view worked out for this metric on the map's first ask
        previous_cells = previous.cells_known(metric) if previous is not None else None
        previous_rows = previous.rows if previous is not None else {}
        thresholds = self.thresholds
        changed: list[NodeSample] = []  # nodes whose row is new: their cells are worked out again
        for start in range(0, len(snapshot.nodes), DERIVE_CHUNK_NODES):
            chunk = snapshot.nodes[start : start + DERIVE_CHUNK_NODES]
            chunk_rows = derive_rows(
                snapshot,
                chunk,
                thresholds,
                previous,
                idle=idle,
                interconnect=interconnect,
                health=health,
                ib_flaps=ib_flaps,
                rates=rates,
                memory=memory,
            )
            for node in chunk:
                if previous_cells is not None and previous_rows.get(node.name) is chunk_rows[node.name]:
                    cells[node.name] = previous_cells[node.name]
                else:
                    cells[node.name] = ()  # keeps the nodes' order; worked out below
                    changed.append(node)
            rows.update(chunk_rows)
            yield
        more_cells: dict[Metric, Mapping[str, CellCodes]] = {}
        node_codes: dict[tuple[Metric, Reduce], list[int]] = {}
        unexported: list[frozenset[str]] = []
        if (
            not changed
            and previous is not None
            and previous_cells is not None
            and len(cells) == len(previous_cells)
        ):
            # nothing moved (a store's source between refreshes): the same mappings, which tell the map
            # and the table so without a look at every node
            cells = previous_cells  # type: ignore[assignment]
            if len(rows) == len(previous_rows):
                rows = previous.rows  # type: ignore[assignment]  # every node's very row, in its order
            for other in Metric:
                known = previous.cells_known(other)
                if other is not metric and known is not None:
                    more_cells[other] = known
            node_codes, unexported = previous.node_codes, previous.unexported_memo
        elif len(changed) >= COLUMNS_FROM_NODES:
            more_cells = yield from self._column_cells(metric, changed, rows, cells, previous)
            node_codes = yield from _node_codes_steps(snapshot.nodes, {metric: cells, **more_cells})
        else:
            cells.update(cells_of(changed, rows, metric, scale))
            if (
                previous is not None
                and previous_cells is not None
                and len(cells) >= COLUMNS_FROM_NODES
                and cells.keys() == previous_cells.keys()
            ):
                # a few nodes of a large cluster changed (one aged, a rule's minutes ran out): the other
                # metrics' cells go on with those nodes' worked again, or a switch of the map's metric
                # would work out every node's, on the key press
                for other in Metric:
                    known = previous.cells_known(other)
                    if other is metric or known is None:
                        continue
                    yield
                    carried = dict(known)
                    carried.update(cells_of(changed, rows, other, self.scales[other]))
                    more_cells[other] = carried
        yield
        jobs = yield from job_rows_steps(snapshot, idle, previous.jobs if previous is not None else None)
        yield
        store = self.store()
        if store is not None:
            gathered = yield from self._gather_steps(snapshot.nodes)
            written = self._written
            taken_s = snapshot.taken_at_s
            if (
                written is not None
                and written[0] is gathered
                and written[1] is rows
                and store.in_minute(taken_s)
            ):
                # A store's samples between its refreshes: the very readings and rows as the last row.
                # No row for them (80,000 GPUs would fill the ticks' memory with copies, 15 a refresh);
                # the next row stands for the time since the last.
                self._held_until_s = taken_s
            else:
                span = self.interval_s if span_s is None else span_s
                held_until_s, last_s = self._held_until_s, store.last_time_s
                if held_until_s is not None and last_s is not None and taken_s - held_until_s <= 2 * span:
                    span = max(span, taken_s - last_s)  # (after a pause of gputop's own: a gap)
                self._held_until_s = None
                self._written = (gathered, rows)
                yield from store.append_steps(taken_s, snapshot.nodes, rows, span, gathered=gathered)
            yield
        now_s = snapshot.taken_at_s
        yield from self.timeline.update_steps(now_s, rows)
        yield
        settling = self.first_look.settling(snapshot.nodes, now_s)
        yield
        problems = (p for row in rows.values() for p in row.problems)
        alerts = yield from self.alert_book.update_steps(problems, now_s, settling)
        if previous is not None and rows is previous.rows:
            summary = previous.summary  # the very rows: the same counts
        else:
            summary = yield from summarize_steps(rows.values())
        view = ClusterView(
            snapshot=snapshot,
            rows=rows,
            summary=summary,
            cells=cells,
            cells_metric=metric,
            more_cells=more_cells,
            node_codes=node_codes,
            unexported_memo=unexported,
            scales=self.scales,
            idle=idle,
            jobs=jobs,
            source_errors=source_errors,
            interconnect=interconnect,
            alerts=alerts,
            history=self.history_store,
            timeline=self.timeline,
        )
        self.view = view
        return view


def _node_codes_steps(
    nodes: Sequence[NodeSample], cells: Mapping[Metric, Mapping[str, CellCodes]]
) -> Generator[None, None, dict[tuple[Metric, Reduce], list[int]]]:
    """Each node's one cell (the map's node zoom, the worst of its GPUs) for every metric whose cells are
    known, a slice of nodes at a time: a switch of the map's metric is then a lookup."""
    names = [node.name for node in nodes]
    done: dict[tuple[Metric, Reduce], list[int]] = {}
    for metric, codes in cells.items():
        found: list[int] = []
        for start in range(0, len(names), NODE_CODES_PER_SLICE):
            yield
            found.extend(node_cells(codes, names[start : start + NODE_CODES_PER_SLICE], Reduce.WORST))
        done[(metric, Reduce.WORST)] = found
    return done
