"""The dashboard's cluster strip (H): the last hour of the cluster's mean utilization, total power and
problem count, a sparkline each, with the value now. Drawn from the history store's cluster series, which
the view stage fills every tick; blank where there was no data (before gputop started, or suspended)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import Static

from gputop.core.models import Severity
from gputop.core.summary import ClusterView
from gputop.tui import format as fmt
from gputop.tui.palette import PaletteCache

LABEL_WIDTH = 10
VALUE_WIDTH = 10


class ClusterStrip(Static):
    DEFAULT_CSS = """
    ClusterStrip { height: 3; display: none; padding: 0 1; }
    ClusterStrip.shown { display: block; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self._palettes = PaletteCache()
        self._drawn: tuple[int, int] | None = None

    def toggle(self) -> bool:
        self.toggle_class("shown")
        self._drawn = None
        return self.has_class("shown")

    def apply_view(self, view: ClusterView) -> None:
        store = view.history
        if not self.has_class("shown") or store is None:
            return
        key = (store.cluster_written, self.size.width)
        if key == self._drawn:
            return
        self._drawn = key
        self.update(self._lines(store, view.snapshot.taken_at_s))

    def _lines(self, store: Any, now_s: float) -> Text:
        import numpy as np  # loaded with the first data, not before the first frame

        from gputop.core.history_store import CLUSTER_WINDOW_S, Series
        from gputop.core.history_trends import binned_means, sparkline

        palette = self._palettes.get(self.app)
        bins = max(10, self.size.width - LABEL_WIDTH - VALUE_WIDTH - 4)
        since_s = now_s - CLUSTER_WINDOW_S
        text = Text(no_wrap=True, overflow="ellipsis")
        rows: tuple[tuple[str, str, float, float | None, Callable[[float], str]], ...] = (
            ("util", "util_pct", 0.0, 100.0, fmt.pct),
            ("power", "power_w", 0.0, None, fmt.power),
            ("problems", "crit", 0.0, None, lambda v: f"{v:.0f}"),
        )
        for number, (label, name, lo, hi, shown) in enumerate(rows):
            series = store.cluster_series(name, CLUSTER_WINDOW_S, now_s)
            if name == "crit":
                warn = store.cluster_series("warn", CLUSTER_WINDOW_S, now_s)
                series = Series(series.times_s, series.values + warn.values, None, series.spans_s)
            values = binned_means(series, bins, since_s, CLUSTER_WINDOW_S)
            top = hi if hi is not None else float(np.nanmax(values)) if not np.isnan(values).all() else 1.0
            latest = float(series.values[-1]) if len(series) else math.nan
            style = palette.severity[Severity.WARN] if name == "crit" and latest > 0 else palette.text  # any
            if number:
                text.append("\n")
            text.append(f"{label:<{LABEL_WIDTH}}", palette.dim)
            text.append(sparkline(values, lo, max(top, 1.0)), style)
            text.append("  " + ("-" if math.isnan(latest) else shown(latest)), palette.text)
        text.append("   last hour (H hides)", palette.dim)
        return text
