"""Every GPU's recent past: utilization, memory used, temperature, power and SM clock at every tick for
the last `fine_minutes`, and their per-minute mean and max for the last `coarse_hours`; each node's
problem counts beside them.

Why numpy, and why small integers: 1,000 nodes of 8 GPUs at a 1 s tick are 40,000 readings a second.
As Python floats in lists they would take gigabytes for a day; as fixed-point integers in preallocated
2-D arrays (a row per tick or minute, a column per GPU) a reading takes one or two bytes, a tick is one
row written with a handful of vectorised operations, and a chart reads a column slice without copying.
The resolution is what a screen shows: 1 % of utilization, 1 C, 0.1 W, 4 MiB, 1 MHz.

- A reading that is not there (a node down or stale, gputop suspended, a GPU without the field, a MIG
  GPU's utilization) is a gap: the dtype's largest value, read back as NaN, never 0 and never filled in.
  Rows are stamped with their time, so a pause shows as a gap in time too.
- A GPU that disappears keeps its column, and so its past; one that comes back gets the same column.
- Pure: the caller (the view stage) hands in each snapshot with its time.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from gputop.core.models import GpuSample, NodeSample, Reachability, Severity
from gputop.core.slices import run_to_end

if TYPE_CHECKING:
    from gputop.core.summary import NodeRow

FloatArray = npt.NDArray[np.float32]


class MetricSpec(NamedTuple):
    name: str  # GpuSample's field
    unit: str
    dtype: type[np.unsignedinteger]
    step: float  # one unit of the stored integer, in the metric's unit


METRICS: Final = (
    MetricSpec("util_pct", "%", np.uint8, 1.0),
    MetricSpec("mem_used_mib", "MiB", np.uint16, 4.0),
    MetricSpec("temp_c", "C", np.uint8, 1.0),
    MetricSpec("power_w", "W", np.uint16, 0.1),
    MetricSpec("sm_clock_mhz", "MHz", np.uint16, 1.0),
)
METRIC_NAMES: Final = tuple(m.name for m in METRICS)
# The metrics whose per-minute maximum is kept beside the mean: a minute's hottest reading, its peak
# utilization or power are what the mean hides. Memory moves slowly (its maximum is its mean), and a
# throttled clock shows in its mean; leaving their maxima out keeps a day of 1,000 nodes 47 MB smaller.
MAXED: Final = ("util_pct", "temp_c", "power_w")
_MAXED_AT: Final = tuple(METRIC_NAMES.index(name) for name in MAXED)
_FIELDS: Final = tuple(GpuSample._fields.index(m.name) for m in METRICS)
# the GPU's index, then the five readings
_READERS: Final = tuple(itemgetter(field) for field in (0, *_FIELDS))
_WIDTH: Final = 1 + len(METRICS)
COUNTS: Final = ("crit", "warn")  # per node, each tick
# the cluster as a whole, each tick, for the dashboard's strip: kept for an hour
CLUSTER_SERIES: Final = ("util_pct", "power_w", "crit", "warn")
CLUSTER_WINDOW_S: Final = 3600.0

# per metric (a column vector, to scale a row per metric): its step, its largest reading, its gap
_STEPS: Final = np.array([[m.step] for m in METRICS], dtype=np.float32)
_TOPS: Final = np.array([[np.iinfo(m.dtype).max - 1] for m in METRICS], dtype=np.float32)
_GAPS_WIDE: Final = np.array([np.iinfo(m.dtype).max for m in METRICS], dtype=np.float32)

MINUTE_S: Final = 60.0
FIRST_COLUMNS: Final = 256  # grown by doubling
# the rings' memory at most (HistoryStore): a thousand 8-GPU nodes keep 15 minutes of ticks and a day of
# minutes within it; 80,000 GPUs some minutes of ticks and two hours of minutes
DEFAULT_BUDGET_MB: Final = 256.0
FINE_SHARE: Final = 0.4
MIN_ROWS: Final = 8


def gap_value(dtype: type[np.unsignedinteger]) -> int:
    return int(np.iinfo(dtype).max)


@dataclass(frozen=True, slots=True)
class Series:
    """One reading over time: times (epoch seconds) and values (NaN: a gap)."""

    times_s: npt.NDArray[np.float64]
    values: FloatArray
    maxima: FloatArray | None = None  # per-minute maxima, where the series is per minute
    # how long each reading stands for (a tick's interval, a replayed past's step, a minute): two
    # readings further apart than this allows have a gap between them
    spans_s: npt.NDArray[np.float64] | None = None

    def gap_after(self) -> npt.NDArray[np.bool_]:
        """For each reading but the last, whether a gap follows it: the next comes later than twice
        the longer of their spans (a late tick is no gap; a missed one is)."""
        if len(self.times_s) < 2:
            return np.zeros(0, dtype=bool)
        spans = self.spans_s if self.spans_s is not None else np.full(len(self.times_s), MINUTE_S)
        allowed = 2.0 * np.maximum(spans[:-1], spans[1:])
        return np.asarray(np.diff(self.times_s) > allowed)

    def __len__(self) -> int:
        return len(self.times_s)


Gathered = tuple[list[NodeSample], FloatArray]


def gather(nodes: Sequence[NodeSample]) -> Gathered:
    """The nodes that answer, and their GPUs' index and five readings: a row per field (index first), a
    column per GPU (NaN: none)."""
    return run_to_end(gather_steps(nodes))


def gather_steps(nodes: Sequence[NodeSample]) -> Generator[None, None, Gathered]:
    """`gather`, yielding after each field (at 80,000 GPUs each field takes some 5 ms)."""
    answering = [n for n in nodes if n.reachability is Reachability.OK and n.gpus]
    gpus = list(chain.from_iterable(n.gpus for n in answering))
    if not gpus:
        return answering, np.empty((_WIDTH, 0), dtype=np.float32)
    # A field at a time, straight from the samples into its row (None reads as NaN): at 8,000 GPUs
    # this is the tick's largest cost, and one pass per field takes about 60 % of one pass over
    # each GPU's six fields at once.
    count = len(gpus)
    fields: list[FloatArray] = []
    for read in _READERS:
        fields.append(np.fromiter(map(read, gpus), dtype=np.float32, count=count))
        yield
    return answering, np.vstack(fields)


class _Ring:
    """Rows of quantized readings, one per tick or minute, a column per GPU (or node), oldest overwritten."""

    def __init__(self, rows: int, columns: int, specs: Sequence[MetricSpec]) -> None:
        self.rows = rows
        self.specs = specs
        self.times_s = np.full(rows, np.nan)
        self.spans_s = np.full(rows, np.nan)
        # np.empty: pages are taken only as rows are written; every row is written whole
        self.data = [np.empty((rows, columns), dtype=s.dtype) for s in specs]
        self.written = 0

    def grow(self, columns: int, rows: int | None = None) -> None:
        """More columns, and as many rows as given (fewer: the oldest rows go). Only the rows written so
        far are copied, oldest first, and given gaps in their new columns: a row not yet written is
        written whole when its turn comes, so its memory is not taken before then (a day of minutes is
        most of the store, and would otherwise be taken at the first tick)."""
        rows = self.rows if rows is None else rows
        order = self.order()[-rows:]
        # each kept row where `order` looks for it with the new count: the count of rows written goes
        # on (a reader that notes it sees a change)
        at = np.arange(self.written - len(order), self.written) % rows
        for k, old in enumerate(self.data):
            new = np.empty((rows, columns), dtype=old.dtype)
            new[at, : old.shape[1]] = old[order]
            new[at, old.shape[1] :] = gap_value(self.specs[k].dtype)
            self.data[k] = new
        for name in ("times_s", "spans_s"):
            times = np.full(rows, np.nan)
            times[at] = getattr(self, name)[order]
            setattr(self, name, times)
        self.rows = rows

    def row_bytes(self, columns: int) -> int:
        return columns * sum(np.dtype(spec.dtype).itemsize for spec in self.specs)

    def next_row(self, time_s: float, span_s: float) -> int:
        row = self.written % self.rows
        self.written += 1
        self.times_s[row] = time_s
        self.spans_s[row] = span_s
        for k, array in enumerate(self.data):
            array[row].fill(gap_value(self.specs[k].dtype))
        return row

    def order(self) -> npt.NDArray[np.intp]:
        """Row numbers oldest first."""
        count = min(self.written, self.rows)
        start = self.written - count
        return np.arange(start, start + count) % self.rows

    def read(self, k: int, column: int, since_s: float) -> Series:
        rows = self.order()
        times = self.times_s[rows]
        keep = rows[times >= since_s]
        return Series(
            self.times_s[keep],
            dequantize(self.data[k][keep, column], self.specs[k]),
            None,
            self.spans_s[keep],
        )


def dequantize(stored: npt.NDArray[np.unsignedinteger], spec: MetricSpec) -> FloatArray:
    values = stored.astype(np.float32) * np.float32(spec.step)
    values[stored == gap_value(spec.dtype)] = np.nan
    return values


def quantize(values: FloatArray, spec: MetricSpec) -> npt.NDArray[np.unsignedinteger]:
    gap = gap_value(spec.dtype)
    scaled = np.rint(values / np.float32(spec.step))
    np.clip(scaled, 0, gap - 1, out=scaled)
    scaled[np.isnan(values)] = gap
    quantized: npt.NDArray[np.unsignedinteger] = scaled.astype(spec.dtype)
    return quantized


class HistoryStore:
    """The rings of every GPU's and node's readings. Their memory is bounded by ``budget_mb``: a
    thousand nodes keep the whole windows asked for in some 210 MB, but 80,000 GPUs would take 0.7 GB
    for fifteen minutes of ticks and 1.4 GB for a day of minutes. Where the windows do not fit, each ring
    keeps fewer rows (the ticks at most FINE_SHARE of the budget, the minutes the rest) and
    ``fine_window_s`` and ``coarse_window_s`` say what is kept."""

    def __init__(
        self,
        *,
        interval_s: float,
        fine_minutes: float = 15.0,
        coarse_hours: float = 24.0,
        budget_mb: float = DEFAULT_BUDGET_MB,
    ) -> None:
        self.interval_s = max(interval_s, 0.05)
        self.asked_fine_s = fine_minutes * 60.0
        self.asked_coarse_s = coarse_hours * 3600.0
        self.budget_bytes = int(budget_mb * 1024 * 1024)
        self.fine_window_s = self.asked_fine_s
        self.coarse_window_s = self.asked_coarse_s
        # room for a quarter more ticks than the interval gives (a refresh asked for, a late tick)
        fine_rows = max(2, math.ceil(self.fine_window_s / self.interval_s * 1.25))
        coarse_rows = max(2, math.ceil(self.coarse_window_s / MINUTE_S))
        self.columns: dict[tuple[str, int], int] = {}
        self.node_columns: dict[str, int] = {}
        capacity = FIRST_COLUMNS
        self.fine = _Ring(fine_rows, capacity, METRICS)
        self.coarse_mean = _Ring(coarse_rows, capacity, METRICS)
        self.coarse_max = _Ring(coarse_rows, capacity, [METRICS[k] for k in _MAXED_AT])
        count_spec = (MetricSpec("crit", "", np.uint16, 1.0), MetricSpec("warn", "", np.uint16, 1.0))
        self.node_fine = _Ring(fine_rows, capacity, count_spec)
        self.node_coarse = _Ring(coarse_rows, capacity, count_spec)
        self._capacity = capacity
        self._node_capacity = capacity
        # the minute being summed: per metric the sum, count and max of each column
        self._minute: float | None = None
        self._sum = np.zeros((len(METRICS), capacity), dtype=np.float64)
        self._count = np.zeros((len(METRICS), capacity), dtype=np.uint32)
        self._max = np.full((len(METRICS), capacity), -np.inf, dtype=np.float32)
        self._node_max = np.zeros((len(COUNTS), capacity), dtype=np.float32)
        self._node_seen = np.zeros(capacity, dtype=bool)
        # the last tick's layout: the nodes that answered, their GPU counts, and the columns they map to
        self._layout: tuple[tuple[str, ...], npt.NDArray[np.int64]] | None = None
        self._indices: FloatArray = np.empty(0, dtype=np.float32)
        self._contiguous = False

        self._last_time_s: float | None = None
        cluster_rows = max(2, math.ceil(CLUSTER_WINDOW_S / max(interval_s, 0.05) * 1.25))
        self.cluster_times_s = np.full(cluster_rows, np.nan)
        self.cluster_spans_s = np.full(cluster_rows, np.nan)
        self.cluster_values = np.full((len(CLUSTER_SERIES), cluster_rows), np.nan, dtype=np.float32)
        self.cluster_written = 0
        self._fit()

    # -- feeding ----------------------------------------------------------------------------------------
    def append(
        self,
        time_s: float,
        nodes: Sequence[NodeSample],
        rows: Mapping[str, NodeRow],
        span_s: float,
        gathered: Gathered | None = None,
    ) -> None:
        """One tick: the readings of the nodes that answer, and every node's problem counts. ``span_s``:
        how long the reading stands for (the poll interval; a replayed past's step). ``gathered``:
        `gather(nodes)` where the caller has it (the view stage gathers a field at a time)."""
        run_to_end(self.append_steps(time_s, nodes, rows, span_s, gathered))

    def append_steps(
        self,
        time_s: float,
        nodes: Sequence[NodeSample],
        rows: Mapping[str, NodeRow],
        span_s: float,
        gathered: Gathered | None = None,
    ) -> Generator[None, None, None]:
        """`append`, yielding between the GPUs' readings and the nodes' counts (some 8 ms each at 10,000
        nodes). A chart drawn between the two finds the readings' ring at this tick and the counts' ring
        at the last one: each ring whole, as the two are kept apart anyway."""
        if self._last_time_s is not None and time_s <= self._last_time_s:
            return  # a tick from the past (a clock stepped back) would break the rows' order
        self._last_time_s = time_s
        answering, flat = gathered if gathered is not None else gather(nodes)
        columns = self._columns_of(answering, flat[0])
        minute = math.floor(time_s / MINUTE_S) * MINUTE_S
        if self._minute is not None and minute != self._minute:
            self._close_minute()
        self._minute = minute
        row = self.fine.next_row(time_s, span_s)
        # The usual tick: the same GPUs as the first one, in the same order, in columns 0..n-1; slices
        # then stand for index arrays (a fancy index costs several times a slice).
        at: slice | npt.NDArray[np.int64] = slice(0, len(columns)) if self._contiguous else columns
        # the five metrics at once, a row each: one numpy call per step rather than five
        values = flat[1:]
        present = ~np.isnan(values)
        scaled = np.rint(values / _STEPS)
        np.clip(scaled, 0.0, _TOPS, out=scaled)
        scaled[~present] = _GAPS_WIDE[np.nonzero(~present)[0]]
        for k in range(len(METRICS)):
            self.fine.data[k][row, at] = scaled[k]  # cast to the metric's own dtype on the way in
        # a column is in a tick once (a node listing one GPU index twice: the last one counts)
        self._sum[:, at] += np.where(present, values, 0.0)
        self._count[:, at] += present
        self._max[:, at] = np.fmax(self._max[:, at], values)  # fmax: a NaN leaves the maximum as it was
        yield
        totals = self._append_counts(time_s, rows, span_s)
        self._append_cluster(time_s, span_s, flat, totals)

    def _append_cluster(
        self, time_s: float, span_s: float, flat: FloatArray, totals: tuple[int, int] | None
    ) -> None:
        row = self.cluster_written % len(self.cluster_times_s)
        self.cluster_written += 1
        self.cluster_times_s[row] = time_s
        self.cluster_spans_s[row] = span_s
        util, power = flat[1 + METRIC_NAMES.index("util_pct")], flat[1 + METRIC_NAMES.index("power_w")]
        present_util, present_power = util[~np.isnan(util)], power[~np.isnan(power)]
        crit, warn = totals if totals is not None else (np.nan, np.nan)
        self.cluster_values[:, row] = (
            present_util.mean() if len(present_util) else np.nan,
            present_power.sum() if len(present_power) else np.nan,
            crit,
            warn,
        )

    def cluster_series(self, name: str, window_s: float, now_s: float) -> Series:
        """The cluster's mean utilization, total power, or CRIT or WARN problem count over time."""
        size = len(self.cluster_times_s)
        count = min(self.cluster_written, size)
        start = self.cluster_written - count
        rows = np.arange(start, start + count) % size
        keep = rows[self.cluster_times_s[rows] >= now_s - window_s]
        values = self.cluster_values[CLUSTER_SERIES.index(name), keep]
        return Series(self.cluster_times_s[keep], values, None, self.cluster_spans_s[keep])

    def _append_counts(
        self, time_s: float, rows: Mapping[str, NodeRow], span_s: float
    ) -> tuple[int, int] | None:
        """Each node's CRIT and WARN problem counts; the cluster's totals (None: no rows this tick)."""
        # every node listed has a count; most have none, and pay one test (first: a new column may
        # change the rings' rows)
        for name in rows:
            if name not in self.node_columns:
                self._node_column(name)
        node_row = self.node_fine.next_row(time_s, span_s)
        if not rows:
            return None
        listed = np.fromiter((self.node_columns[name] for name in rows), dtype=np.int64, count=len(rows))
        for k in range(len(COUNTS)):
            self.node_fine.data[k][node_row, listed] = 0
        self._node_seen[listed] = True
        total_crit = total_warn = 0
        for name, node in rows.items():
            if not node.problems:
                continue
            crit = warn = 0
            for problem in node.problems:
                if problem.severity is Severity.CRIT:
                    crit += 1
                elif problem.severity is Severity.WARN:
                    warn += 1
            total_crit += crit
            total_warn += warn
            column = self.node_columns[name]
            for k, found in enumerate((crit, warn)):
                self.node_fine.data[k][node_row, column] = min(found, 65534)
                if found > self._node_max[k, column]:
                    self._node_max[k, column] = found
        return total_crit, total_warn

    def _close_minute(self) -> None:
        if self._minute is None:
            return
        mean_row = self.coarse_mean.next_row(self._minute, MINUTE_S)
        max_row = self.coarse_max.next_row(self._minute, MINUTE_S)
        with np.errstate(invalid="ignore", divide="ignore"):
            for k, spec in enumerate(METRICS):
                counted = self._count[k] > 0
                mean = np.where(counted, self._sum[k] / np.maximum(self._count[k], 1), np.nan).astype(
                    np.float32
                )
                top = np.where(counted, self._max[k], np.nan).astype(np.float32)
                self.coarse_mean.data[k][mean_row] = quantize(mean, spec)
                if k in _MAXED_AT:
                    self.coarse_max.data[_MAXED_AT.index(k)][max_row] = quantize(top, spec)
        node_row = self.node_coarse.next_row(self._minute, MINUTE_S)
        for k in range(len(COUNTS)):
            values = np.where(self._node_seen, self._node_max[k], np.nan).astype(np.float32)
            self.node_coarse.data[k][node_row] = quantize(values, self.node_coarse.specs[k])
        self._sum.fill(0.0)
        self._count.fill(0)
        self._max.fill(-np.inf)
        self._node_max.fill(0.0)
        self._node_seen.fill(False)

    def _columns_of(self, answering: Sequence[NodeSample], indices: FloatArray) -> npt.NDArray[np.int64]:
        names = tuple(n.name for n in answering)
        layout = self._layout
        if layout is not None and layout[0] == names and len(layout[1]) == len(indices):
            cached = layout[1]
            if np.array_equal(self._indices, indices):
                return cached
        columns = np.empty(len(indices), dtype=np.int64)
        at = 0
        for node in answering:
            for gpu in node.gpus:
                columns[at] = self._column(node.name, gpu.index)
                at += 1
        self._layout = (names, columns)
        self._indices = indices.copy()
        self._contiguous = bool(np.array_equal(columns, np.arange(len(columns))))
        return columns

    def _column(self, node: str, gpu: int) -> int:
        key = (node, gpu)
        found = self.columns.get(key)
        if found is None:
            found = self.columns[key] = len(self.columns)
            if found >= self._capacity:
                self._grow(self._capacity * 2)
        return found

    def _fit(self) -> None:
        """The rings' rows for the present columns, within the budget: each ring what its window asks
        for where all fit, else the ticks at most FINE_SHARE of the budget (more where the minutes need
        less than the rest) and the minutes what is left; at least MIN_ROWS each."""
        fine_need = max(2, math.ceil(self.asked_fine_s / self.interval_s * 1.25))
        coarse_need = max(2, math.ceil(self.asked_coarse_s / MINUTE_S))
        fine_row = self.fine.row_bytes(self._capacity) + self.node_fine.row_bytes(self._node_capacity)
        coarse_row = (
            self.coarse_mean.row_bytes(self._capacity)
            + self.coarse_max.row_bytes(self._capacity)
            + self.node_coarse.row_bytes(self._node_capacity)
        )
        budget = self.budget_bytes
        fine_rows, coarse_rows = fine_need, coarse_need
        if fine_need * fine_row + coarse_need * coarse_row > budget:
            fine_rows = min(fine_need, int(budget * FINE_SHARE) // fine_row)
            coarse_rows = min(coarse_need, (budget - fine_rows * fine_row) // coarse_row)
            fine_rows = min(fine_need, (budget - coarse_rows * coarse_row) // fine_row)
        fine_rows, coarse_rows = max(MIN_ROWS, fine_rows), max(MIN_ROWS, coarse_rows)
        for ring, rows, columns in (
            (self.fine, fine_rows, self._capacity),
            (self.node_fine, fine_rows, self._node_capacity),
            (self.coarse_mean, coarse_rows, self._capacity),
            (self.coarse_max, coarse_rows, self._capacity),
            (self.node_coarse, coarse_rows, self._node_capacity),
        ):
            if ring.rows != rows:
                ring.grow(columns, rows)
        # what is kept: the ticks' rows at the interval (without the quarter's room), the minutes'
        self.fine_window_s = min(self.asked_fine_s, fine_rows / 1.25 * self.interval_s)
        self.coarse_window_s = min(self.asked_coarse_s, coarse_rows * MINUTE_S)

    @property
    def last_time_s(self) -> float | None:
        """The last row's time."""
        return self._last_time_s

    def reach_s(self, window_s: float, now_s: float) -> float:
        """How far back before ``now_s`` the rows a chart of ``window_s`` reads go (0: none yet)."""
        ring = self.fine if window_s <= self.fine_window_s else self.coarse_mean
        rows = ring.order()
        if not len(rows):
            ring, rows = self.fine, self.fine.order()  # the first minute, not yet closed
        return max(0.0, now_s - float(ring.times_s[rows[0]])) if len(rows) else 0.0

    def in_minute(self, time_s: float) -> bool:
        """Whether ``time_s`` is in the minute being summed (a row at another closes it)."""
        return self._minute is not None and math.floor(time_s / MINUTE_S) * MINUTE_S == self._minute

    def kept_bytes(self) -> int:
        """The rings' memory once every row is written (what the budget bounds)."""
        return sum(
            ring.rows * ring.row_bytes(columns)
            for ring, columns in (
                (self.fine, self._capacity),
                (self.coarse_mean, self._capacity),
                (self.coarse_max, self._capacity),
                (self.node_fine, self._node_capacity),
                (self.node_coarse, self._node_capacity),
            )
        )

    def _grow(self, capacity: int) -> None:
        for ring in (self.fine, self.coarse_mean, self.coarse_max):
            ring.grow(capacity)
        grown_sum = np.zeros((len(METRICS), capacity))
        grown_sum[:, : self._capacity] = self._sum
        grown_count = np.zeros((len(METRICS), capacity), dtype=np.uint32)
        grown_count[:, : self._capacity] = self._count
        grown_max = np.full((len(METRICS), capacity), -np.inf, dtype=np.float32)
        grown_max[:, : self._capacity] = self._max
        self._sum, self._count, self._max = grown_sum, grown_count, grown_max
        self._capacity = capacity
        self._fit()

    def _node_column(self, name: str) -> int:
        found = self.node_columns.get(name)
        if found is None:
            found = self.node_columns[name] = len(self.node_columns)
            if found >= self._node_capacity:
                capacity = self._node_capacity * 2
                self.node_fine.grow(capacity)
                self.node_coarse.grow(capacity)
                node_max = np.zeros((len(COUNTS), capacity), dtype=np.float32)
                node_max[:, : self._node_capacity] = self._node_max
                seen = np.zeros(capacity, dtype=bool)
                seen[: self._node_capacity] = self._node_seen
                self._node_max, self._node_seen = node_max, seen
                self._node_capacity = capacity
                self._fit()
        return found

    # -- reading ----------------------------------------------------------------------------------------
    def series(self, node: str, gpu: int, metric: str, window_s: float, now_s: float) -> Series:
        """``metric`` of one GPU over the last ``window_s``: every tick while the fine rows reach that far
        back, else per minute (mean, with the maxima beside)."""
        k = METRIC_NAMES.index(metric)
        column = self.columns.get((node, gpu))
        if column is None:
            empty = np.empty(0, dtype=np.float32)
            return Series(np.empty(0), empty)
        since_s = now_s - window_s
        if window_s <= self.fine_window_s:
            return self.fine.read(k, column, since_s)
        means = self.coarse_mean.read(k, column, since_s)
        if k not in _MAXED_AT:
            return means
        maxima = self.coarse_max.read(_MAXED_AT.index(k), column, since_s)
        return Series(means.times_s, means.values, maxima.values, means.spans_s)

    def node_gpus(self, node: str) -> list[int]:
        return sorted(gpu for (name, gpu) in self.columns if name == node)

    def node_mean(self, node: str, metric: str, window_s: float, now_s: float) -> Series:
        """The mean of a node's GPUs over time (a GPU without the reading left out; none: a gap)."""
        gpus = self.node_gpus(node)
        if not gpus:
            return Series(np.empty(0), np.empty(0, dtype=np.float32))
        parts = [self.series(node, gpu, metric, window_s, now_s) for gpu in gpus]
        stacked = np.vstack([p.values for p in parts])
        # an all-gap tick is a gap, said by the NaN nanmean returns; its warning says nothing more
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            mean = np.nanmean(stacked, axis=0).astype(np.float32)
        return Series(parts[0].times_s, mean, None, parts[0].spans_s)

    def problem_counts(self, node: str, window_s: float, now_s: float) -> tuple[Series, Series]:
        """(crit, warn) counts of a node over time."""
        column = self.node_columns.get(node)
        ring = self.node_fine if window_s <= self.fine_window_s else self.node_coarse
        if column is None:
            empty = Series(np.empty(0), np.empty(0, dtype=np.float32))
            return empty, empty
        since_s = now_s - window_s
        return ring.read(0, column, since_s), ring.read(1, column, since_s)
