"""Every current alert, worst and oldest first: severity, node, GPU, what, since when, and whether someone
acknowledged or silenced it (those are shown plain, without the severity's colour)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

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


def _quiet(alert: Alert, now_s: float) -> bool:
    return alert.acknowledged or alert.silenced(now_s)


def _severity_cell(alert: Alert, now_s: float) -> Cell:
    return alert.severity.value.upper(), None if _quiet(alert, now_s) else alert.severity


def _status_cell(alert: Alert, now_s: float) -> Cell:
    if alert.silenced(now_s) and alert.silenced_until_s is not None:
        return f"silenced {format_age(alert.silenced_until_s - now_s)}", None
    return ("acknowledged" if alert.acknowledged else ""), None


def _message_cell(alert: Alert, now_s: float) -> Cell:
    text = f"{alert.message} -> {alert.action}" if alert.action else alert.message
    return text, None if _quiet(alert, now_s) else alert.severity


ALERT_COLUMNS: tuple[Column, ...] = (
    Column(
        "node", "Node", 10, False, lambda a: (natural_key(a.node), a.sort_key), lambda a, now: (a.node, None)
    ),
    Column("severity", "Sev", 4, False, lambda a: a.sort_key, _severity_cell),
    Column(
        "gpu",
        "GPU",
        4,
        True,
        lambda a: (a.key.gpu_index is None, a.key.gpu_index or 0, a.sort_key),
        lambda a, now: ("" if a.key.gpu_index is None else str(a.key.gpu_index), None),
    ),
    Column("kind", "Kind", 12, False, lambda a: (a.key.kind, a.sort_key), lambda a, now: (a.key.kind, None)),
    Column(
        "since",
        "For",
        8,
        True,
        lambda a: (a.since_s, a.sort_key),
        lambda a, now: (format_age(now - a.since_s), None),
    ),
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
    """Alerts; the cell context is the time "now" (the snapshot's), for ages and silences."""

    COLUMNS = ALERT_COLUMNS
    DROP_ORDER = ("kind", "gpu", "status")
    LAST_MIN_WIDTH = 30
    KEY_IS_FIRST_COLUMN = False
    BINDINGS: ClassVar[list[BindingType]] = table_bindings("alert", "Open node")

    DEFAULT_CSS = """
    AlertTable { height: 1fr; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sort_column="severity", cell_context=0.0, **kwargs)

    def row_key(self, row: Any) -> str:
        return str(row.key.text)

    def set_rows(self, rows: Mapping[str, Any]) -> None:
        # the node column is as wide as the longest node name shown (site names run past ten characters)
        longest = max((len(alert.node) for alert in rows.values()), default=0)
        self._key_width = max(ALERT_COLUMNS[0].width, longest)
        super().set_rows(rows)

    def set_now(self, now_s: float) -> None:
        self.cell_context = now_s

    def row_selected(self, key: str) -> None:
        self.post_message(AlertSelected(key))

    def row_opened(self, key: str) -> None:
        self.post_message(AlertOpened(key))
