"""The node screen's chart: one metric of every GPU of the node over 5 minutes, an hour or a day, drawn by
plotext (through textual-plotext).

- The selected GPU (the GPU table's cursor) is drawn bright and last, the others dim, so it stands out.
- The metric's warning threshold is a horizontal line (temperature, memory, power: the GPU's limit).
- Events are vertical lines on the time axis: the node's Xid events, its problems' starts, gputop's
  drains of it; the legend under the chart names them.
- A gap is a gap: each run of readings is drawn on its own (a reading stands for its span: a tick's
  interval, a replayed past's step, a minute), so a node down or gputop suspended leaves the chart
  empty there, never a line across.
- At most two points per character column are drawn (a day is 1,440 minutes): the points are averaged
  into as many bins as the chart has room for, so a redraw stays well under a frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from textual_plotext import PlotextPlot

from gputop.core.config import Thresholds
from gputop.core.history_store import HistoryStore, Series
from gputop.core.models import NodeSample

WINDOWS: Final = ((300.0, "5 min"), (3600.0, "1 h"), (86400.0, "24 h"))
CHART_METRICS: Final = (
    ("util_pct", "utilization %"),
    ("temp_c", "temperature C"),
    ("mem_used_mib", "memory used GiB"),
    ("power_w", "power W"),
    ("sm_clock_mhz", "SM clock MHz"),
)
SELECTED_COLOR = "cyan+"
OTHER_COLOR = "gray"
THRESHOLD_COLOR = "orange"
EVENT_COLOR = "red"
# the source note (`show`) for lines read from a store rather than gputop's own history
FROM_STORE: Final = "from the store"


@dataclass(frozen=True, slots=True)
class ChartEvent:
    time_s: float
    label: str  # "Xid 79 GPU4", "drain", "GPU3 91 C"


def _runs(
    series: Series, bins: int, since_s: float, window_s: float
) -> list[tuple[list[float], list[float]]]:
    """The series as runs of (minutes before now, value) points: split where it has a gap (a reading
    missing for longer than its span allows, or a NaN), each run averaged into the chart's bins."""
    if not len(series):
        return []
    values = series.values
    breaks = np.flatnonzero(series.gap_after() | np.isnan(values[:-1]) | np.isnan(values[1:])) + 1
    runs = []
    for times, part in zip(np.split(series.times_s, breaks), np.split(values, breaks), strict=True):
        present = ~np.isnan(part)
        if not present.any():
            continue
        slot = np.clip(((times[present] - since_s) / window_s * bins).astype(np.intp), 0, bins - 1)
        sums = np.bincount(slot, weights=part[present], minlength=bins)
        counts = np.bincount(slot, minlength=bins)
        kept = np.nonzero(counts)[0]
        minutes = ((kept + 0.5) / bins * window_s - window_s) / 60.0
        runs.append((minutes.tolist(), (sums[kept] / counts[kept]).tolist()))
    return runs


class HistoryChart(PlotextPlot):
    DEFAULT_CSS = """
    HistoryChart { height: 14; min-height: 10; }
    """

    def __init__(self, thresholds: Thresholds, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.thresholds = thresholds
        self.metric_index = 0
        self.window_index = 0
        self.selected_gpu: int | None = None
        self._drawn: tuple[object, ...] | None = None

    @property
    def metric(self) -> tuple[str, str]:
        return CHART_METRICS[self.metric_index]

    @property
    def window(self) -> tuple[float, str]:
        return WINDOWS[self.window_index]

    def next_metric(self) -> None:
        self.metric_index = (self.metric_index + 1) % len(CHART_METRICS)
        self._drawn = None

    def next_window(self) -> None:
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self._drawn = None

    def select(self, gpu: int | None) -> None:
        if gpu != self.selected_gpu:
            self.selected_gpu = gpu
            self._drawn = None

    def show(
        self,
        store: HistoryStore | None,
        node: NodeSample,
        now_s: float,
        events: Sequence[ChartEvent] = (),
        source_note: str = "",
    ) -> None:
        """Draws the node's chart as of ``now_s``, once per tick (a redraw for the same tick is skipped).
        ``source_note``: where the lines come from where not gputop's own history ("from the store"), or
        why not ("reading the store's past", why it failed)."""
        written = store.fine.written if store is not None else -1
        key = (
            node.name,
            id(store),
            written,
            self.metric_index,
            self.window_index,
            self.selected_gpu,
            len(events),
            source_note,
        )
        if key == self._drawn:
            return
        self._drawn = key
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        metric, label = self.metric
        window_s, window_label = self.window
        plt.title(f"{label} over the last {window_label}  (c: metric, w: window)")
        plt.xlabel("minutes before now")
        plt.xlim(-window_s / 60.0, 0.0)
        if source_note == FROM_STORE:
            plt.title(f"{label} over the last {window_label}, {FROM_STORE}  (c: metric, w: window)")
        elif source_note:
            plt.title(f"{label}, last {window_label}: {source_note}  (w: window)")
        elif store is not None and store.coarse_window_s < window_s:
            kept = _duration(store.coarse_window_s)
            plt.title(f"{label}, last {window_label}: {kept} kept for this fleet (history.memory_mb; w)")
        if store is None:
            plt.title("no history kept here")
            self.refresh()
            return
        bins = max(10, 2 * max(self.size.width - 12, 10))
        since_s = now_s - window_s
        scale = 1.0 / 1024.0 if metric == "mem_used_mib" else 1.0
        gpus = store.node_gpus(node.name)
        ordered = [g for g in gpus if g != self.selected_gpu] + (
            [self.selected_gpu] if self.selected_gpu in gpus else []
        )
        drawn_any = False
        for gpu in ordered:
            series = store.series(node.name, gpu, metric, window_s, now_s)
            color = SELECTED_COLOR if gpu == self.selected_gpu else OTHER_COLOR
            for number, (run_x, run_y) in enumerate(_runs(series, bins, since_s, window_s)):
                name = f"GPU{gpu}" if gpu == self.selected_gpu and number == 0 else None
                plt.plot(run_x, [y * scale for y in run_y], marker="braille", color=color, label=name)
                drawn_any = True
        threshold = self._threshold(metric, node)
        if threshold is not None:
            plt.hline(threshold * scale, THRESHOLD_COLOR)
        for event in events:
            if since_s <= event.time_s <= now_s:
                plt.vline((event.time_s - now_s) / 60.0, EVENT_COLOR)
        if not drawn_any:
            said = f" ({source_note})" if source_note else ""
            plt.title(f"{label}: no readings in the last {window_label}{said}")
        self.refresh()

    def _threshold(self, metric: str, node: NodeSample) -> float | None:
        thresholds = self.thresholds
        if metric == "temp_c":
            return thresholds.temp_warn_c
        if metric == "mem_used_mib":
            totals = [g.mem_total_mib for g in node.gpus if g.mem_total_mib]
            return max(totals) * thresholds.mem_warn_pct / 100.0 if totals else None
        if metric == "power_w":
            limits = [g.power_limit_w for g in node.gpus if g.power_limit_w]
            return max(limits) * thresholds.power_warn_pct / 100.0 if limits else None
        return None


def _duration(seconds: float) -> str:
    return f"{seconds / 3600.0:.1f} h" if seconds >= 5400.0 else f"{seconds / 60.0:.0f} min"
