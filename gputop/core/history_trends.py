"""What the tables and strips draw from the history: sparklines, each node's trend in a few time bins,
a series' means in equal slices of a window, and a job's GPUs' mean over its run. Pure, like the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from gputop.core.history_store import (
    METRIC_NAMES,
    METRICS,
    FloatArray,
    HistoryStore,
    Series,
    dequantize,
    gap_value,
)

SPARK_BLOCKS: Final = "▁▂▃▄▅▆▇█"


def sparkline(values: FloatArray, lo: float, hi: float) -> str:
    """One block character per value, from ``lo`` to ``hi``; a gap (NaN) is a space, never the floor."""
    span = max(hi - lo, 1e-9)
    top = len(SPARK_BLOCKS) - 1
    chars = []
    for value in values.tolist():
        if value != value:  # NaN
            chars.append(" ")
        else:
            level = round((min(max(value, lo), hi) - lo) / span * top)
            chars.append(SPARK_BLOCKS[level])
    return "".join(chars)


class Trends:
    """Each node's mean of one metric over a window, in a few time bins, worked out once per tick for
    the nodes asked about (the table asks only for the rows on screen)."""

    def __init__(self, store: HistoryStore, metric: str, window_s: float, bins: int) -> None:
        self.store = store
        self.k = METRIC_NAMES.index(metric)
        self.window_s = window_s
        self.bins = bins
        self._ticks = -1
        self._done: dict[str, FloatArray] = {}
        self._node_cols: dict[str, npt.NDArray[np.int64]] = {}
        self._known_columns = -1
        self._rows: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)
        self._bin_of: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)

    def of(self, node: str) -> FloatArray | None:
        """The node's values per bin, oldest first (NaN: no reading in that bin); None: no history."""
        store = self.store
        if store.fine.written != self._ticks:
            self._new_tick()
        found = self._done.get(node)
        if found is not None:
            return found
        if len(store.columns) != self._known_columns:
            self._node_cols.clear()
            self._known_columns = len(store.columns)
        cols = self._node_cols.get(node)
        if cols is None:
            cols = self._node_cols[node] = np.array(
                [c for (name, _gpu), c in store.columns.items() if name == node], dtype=np.int64
            )
        if not len(cols) or not len(self._rows):
            return None
        stored = store.fine.data[self.k][np.ix_(self._rows, cols)]
        spec = METRICS[self.k]
        values = stored.astype(np.float32) * np.float32(spec.step)
        values[stored == gap_value(spec.dtype)] = np.nan
        present = ~np.isnan(values)
        sums = np.bincount(
            self._bin_of, weights=np.where(present, values, 0.0).sum(axis=1), minlength=self.bins
        )
        counts = np.bincount(self._bin_of, weights=present.sum(axis=1), minlength=self.bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            result = (sums / counts).astype(np.float32)
        self._done[node] = result
        return result

    def spark(self, node: str, lo: float, hi: float) -> str:
        """The node's trend as a sparkline ("" without history)."""
        values = self.of(node)
        return sparkline(values, lo, hi) if values is not None else ""

    def _new_tick(self) -> None:
        store = self.store
        self._ticks = store.fine.written
        self._done.clear()
        rows = store.fine.order()
        times = store.fine.times_s[rows]
        if not len(times):
            self._rows = rows
            return
        now_s = float(times[-1])
        since_s = now_s - self.window_s
        keep = times > since_s
        self._rows = rows[keep]
        edges = (times[keep] - since_s) / self.window_s * self.bins
        self._bin_of = np.clip(edges.astype(np.intp), 0, self.bins - 1)


def binned_means(series: Series, bins: int, since_s: float, window_s: float) -> FloatArray:
    """The series' mean in each of ``bins`` equal slices of the window, oldest first (NaN: no reading).
    A reading counts in every slice its span covers (a replayed past's step, a minute), so readings
    sparser than the slices leave no false gaps between them; a slice no reading covers stays NaN."""
    present = ~np.isnan(series.values) & (series.times_s >= since_s)
    times = series.times_s[present]
    values = series.values[present]
    spans = series.spans_s[present] if series.spans_s is not None else np.zeros(len(times))
    scale = bins / window_s
    last = np.clip(((times - since_s) * scale).astype(np.intp), 0, bins - 1)
    first = np.clip(np.floor((times - spans - since_s) * scale).astype(np.intp) + 1, 0, last)
    reps = last - first + 1
    offsets = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    slots = np.repeat(first, reps) + offsets
    sums = np.bincount(slots, weights=np.repeat(values, reps), minlength=bins)
    counts = np.bincount(slots, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: FloatArray = (sums / counts).astype(np.float32)
    return means


def mean_over(
    store: HistoryStore,
    cells: Sequence[tuple[str, int]],
    metric: str,
    since_s: float,
    now_s: float,
    bins: int,
) -> FloatArray | None:
    """The mean of some GPUs' ``metric`` (a job's) from ``since_s`` to now in ``bins`` slices: from every
    tick while that fits the fine window, else from the per-minute means; None where none is kept."""
    columns = [c for c in (store.columns.get(cell) for cell in cells) if c is not None]
    window_s = max(now_s - since_s, 1.0)
    if not columns:
        return None
    ring = store.fine if window_s <= store.fine_window_s else store.coarse_mean
    k = METRIC_NAMES.index(metric)
    rows = ring.order()
    keep = rows[ring.times_s[rows] >= since_s]
    if not len(keep):
        return None
    values = dequantize(ring.data[k][np.ix_(keep, np.array(columns, dtype=np.intp))], METRICS[k])
    present = ~np.isnan(values)
    counts = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_row = (np.where(present, values, 0.0).sum(axis=1) / counts).astype(np.float32)
    series = Series(ring.times_s[keep], per_row, None, ring.spans_s[keep])
    return binned_means(series, bins, since_s, window_s)
