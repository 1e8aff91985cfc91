"""The alerts pane: every current problem across the cluster, worst first, with how long it has lasted;
acknowledge or silence one; drain the node of the selected one with the evidence as the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputop.core.alerts import Alert, alert_reason
from gputop.core.health import format_age
from gputop.core.safe_text import safe_line
from gputop.core.summary import ClusterView
from gputop.tui.screens.base import GputopScreen
from gputop.tui.widgets.alert_table import AlertOpened, AlertSelected, AlertTable
from gputop.tui.widgets.footer import GputopFooter
from gputop.tui.widgets.status_header import StatusHeader

if TYPE_CHECKING:
    pass


class AlertsScreen(GputopScreen):
    ACTING = frozenset({"drain"})
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("a", "acknowledge", "Acknowledge"),
        Binding("x", "silence", "Silence"),
        Binding("d", "drain", "Drain its node"),
    ]

    DEFAULT_CSS = """
    AlertsScreen { layout: vertical; }
    #alert-line { height: auto; padding: 0 1; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        yield self.gputop.status_header()
        yield Static("", id="alert-line", markup=False)
        yield AlertTable(id="alerts")
        yield GputopFooter()

    def on_mount(self) -> None:
        self.query_one(AlertTable).focus()
        view = self.gputop.view
        if view is not None:
            self.apply_view(view)

    # -- data -----------------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        self.query_one(StatusHeader).apply_view(view)
        self._show(view.snapshot.taken_at_s)

    def _show(self, now_s: float) -> None:
        state = self.gputop.poller.alert_book.state
        table = self.query_one(AlertTable)
        view = self.gputop.view
        table.set_now(now_s, view.history if view is not None else None)
        table.set_rows(state.alerts)
        self._describe(table.cursor_name)

    def _selected(self) -> Alert | None:
        key = self.query_one(AlertTable).cursor_name
        return self.gputop.poller.alert_book.state.alerts.get(key or "")

    def _describe(self, key: str | None) -> None:
        state = self.gputop.poller.alert_book.state
        alert = state.alerts.get(key or "")
        line = self.query_one("#alert-line", Static)
        if alert is None:
            line.update("no current problems" if not state.alerts else "")
            return
        now_s = state.taken_at_s
        status = ""
        if alert.silenced(now_s) and alert.silenced_until_s is not None:
            status = f"; silenced for {format_age(alert.silenced_until_s - now_s)} more"
        elif alert.acknowledged:
            status = "; acknowledged"
        line.update(
            safe_line(
                f"{alert.severity.value.upper()} {alert.node}: {alert.message} "
                f"(for {format_age(now_s - alert.since_s)}{status})"
            )
        )

    @on(AlertSelected)
    def _alert_selected(self, event: AlertSelected) -> None:
        self._describe(event.key)

    @on(AlertOpened)
    def _alert_opened(self, event: AlertOpened) -> None:
        alert = self.gputop.poller.alert_book.state.alerts.get(event.key)
        if alert is not None:
            self.gputop.open_node(alert.node)

    # -- actions --------------------------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def action_acknowledge(self) -> None:
        """Acknowledges the selected alert (again: takes it back). It stays listed while it lasts."""
        alert = self._selected()
        if alert is None:
            return
        book = self.gputop.poller.alert_book
        book.acknowledge(alert.key.text, not alert.acknowledged)
        self._show(book.state.taken_at_s)

    def action_silence(self) -> None:
        """Silences the selected alert for the configured time (again: lifts the silence)."""
        alert = self._selected()
        if alert is None:
            return
        book = self.gputop.poller.alert_book
        now_s = book.state.taken_at_s
        minutes = self.gputop.settings.config.alerts.silence_minutes
        book.silence(alert.key.text, None if alert.silenced(now_s) else now_s + minutes * 60.0)
        self._show(now_s)

    def action_drain(self) -> None:
        alert = self._selected()
        if alert is not None:
            self.gputop.open_node_action("drain", [alert.node], reason=alert_reason(alert))
