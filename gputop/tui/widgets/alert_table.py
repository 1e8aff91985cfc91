"""Every current alert, worst and oldest first: severity, node, GPU, what, since when, and whether someone
acknowledged or silenced it (those are shown plain, without the severity's colour)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from textual.binding import BindingType
from textual.message import Message

from gputop.core.alerts import Alert
from gputop.core.health import format_age
from gputop.core.nodeset import natural_key
from gputop.tui.widgets.virtual_table import Cell, Column, VirtualTable, table_bindings


class AlertSelected(Message):
    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class AlertOpened(Message):
    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class AlertContext(NamedTuple):
    """What the cells read besides the alert: the snapshot's time, and the history for the trend."""

    now_s: float
    history: Any = None  # a HistoryStore (numpy is loaded with the first data, not before the first frame)


# The reading an alert of each kind is about, for its trend; a kind not listed has none to show.
TREND_METRIC = {
    "temp": "temp_c",
    "hbm_temp": "temp_c",
    "throttle": "temp_c",
    "mem": "mem_used_mib",
    "idle": "util_pct",
    "power": "power_w",
}
TREND_WINDOW_S = 900.0
TREND_BINS = 8


def _quiet(alert: Alert, now_s: float) -> bool:
    return alert.acknowledged or alert.silenced(now_s)


def _severity_cell(alert: Alert, ctx: AlertContext) -> Cell:
    return alert.severity.value.upper(), None if _quiet(alert, ctx.now_s) else alert.severity


def _status_cell(alert: Alert, ctx: AlertContext) -> Cell:
    now_s = ctx.now_s
    if alert.silenced(now_s) and alert.silenced_until_s is not None:
        return f"silenced {format_age(alert.silenced_until_s - now_s)}", None
    return ("acknowledged" if alert.acknowledged else ""), None


def _message_cell(alert: Alert, ctx: AlertContext) -> Cell:
    text = f"{alert.message} -> {alert.action}" if alert.action else alert.message
    return text, None if _quiet(alert, ctx.now_s) else alert.severity


def _trend_cell(alert: Alert, ctx: AlertContext) -> Cell:
    """How the reading behind the alert moved over the last 15 minutes, scaled to its own range."""
    metric = TREND_METRIC.get(alert.key.kind)
    store = ctx.history
    if metric is None or store is None:
        return "", None
    import numpy as np

    from gputop.core.history_trends import binned_means, sparkline

    key = alert.key
    if key.gpu_index is not None:
        series = store.series(key.node, key.gpu_index, metric, TREND_WINDOW_S, ctx.now_s)
    else:
        series = store.node_mean(key.node, metric, TREND_WINDOW_S, ctx.now_s)
    values = binned_means(series, TREND_BINS, ctx.now_s - TREND_WINDOW_S, TREND_WINDOW_S)
    if np.isnan(values).all():
        return "", None
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    return sparkline(values, low, max(high, low + 1.0)), None


ALERT_COLUMNS: tuple[Column, ...] = (
    Column(
        "node", "Node", 10, False, lambda a: (natural_key(a.node), a.sort_key), lambda a, ctx: (a.node, None)
    ),
    Column("severity", "Sev", 4, False, lambda a: a.sort_key, _severity_cell),
    Column(
        "gpu",
        "GPU",
        4,
        True,
        lambda a: (a.key.gpu_index is None, a.key.gpu_index or 0, a.sort_key),
        lambda a, ctx: ("" if a.key.gpu_index is None else str(a.key.gpu_index), None),
    ),
    Column("kind", "Kind", 12, False, lambda a: (a.key.kind, a.sort_key), lambda a, ctx: (a.key.kind, None)),
    Column(
        "since",
        "For",
        8,
        True,
        lambda a: (a.since_s, a.sort_key),
        lambda a, ctx: (format_age(ctx.now_s - a.since_s), None),
    ),
    Column("trend", "Last 15m", 8, False, lambda a: a.sort_key, _trend_cell),
    Column(
        "status",
        "Status",
        16,
        False,
        lambda a: (a.acknowledged, a.silenced_until_s or 0.0, a.sort_key),
        _status_cell,
    ),
    Column("message", "Problem", 0, False, lambda a: (a.message, a.sort_key), _message_cell),
)


class AlertTable(VirtualTable):
    """Alerts; the cell context is the time "now" (the snapshot's), for ages and silences, and the
    history, for the trends."""

    COLUMNS = ALERT_COLUMNS
    DROP_ORDER = ("trend", "kind", "gpu", "status")
    LAST_MIN_WIDTH = 30
    KEY_IS_FIRST_COLUMN = False
    BINDINGS: ClassVar[list[BindingType]] = table_bindings("alert", "Open node")

    DEFAULT_CSS = """
    AlertTable { height: 1fr; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sort_column="severity", cell_context=AlertContext(0.0), **kwargs)

    def row_key(self, row: Any) -> str:
        return str(row.key.text)

    def set_rows(self, rows: Mapping[str, Any]) -> None:
        # the node column is as wide as the longest node name shown (site names run past ten characters)
        longest = max((len(alert.node) for alert in rows.values()), default=0)
        self._key_width = max(ALERT_COLUMNS[0].width, longest)
        super().set_rows(rows)

    def set_now(self, now_s: float, history: Any = None) -> None:
        self.cell_context = AlertContext(now_s, history)

    def row_selected(self, key: str) -> None:
        self.post_message(AlertSelected(key))

    def row_opened(self, key: str) -> None:
        self.post_message(AlertOpened(key))
