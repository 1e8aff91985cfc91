"""The main screen: header, cluster map, node table, filter line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from gputop.core.filter import FilterError, NodeFilter, parse_filter
from gputop.core.metrics import Metric
from gputop.core.safe_text import safe_line
from gputop.core.summary import ClusterView
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.screens.base import GputopScreen
from gputop.tui.widgets.cluster_map import ClusterMap, sign_zoom_allowed
from gputop.tui.widgets.cluster_strip import ClusterStrip
from gputop.tui.widgets.footer import GputopFooter
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader

if TYPE_CHECKING:
    pass

# From this many nodes a new view is painted in two frames: the table, header and strip first, then the
# map. At 10,000 nodes each is some 15 ms of the event loop (a store's refresh changes every line of
# both); a key pressed meanwhile then waits for one of them rather than both.
SPLIT_FRAME_NODES = 2000


class DashboardScreen(GputopScreen):
    ACTING = frozenset({"mark", "mark_shown", "drain", "resume", "toggle_policy", "reset_breaker"})
    BINDINGS = [
        Binding("slash", "start_filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("m", "cycle_metric", "Metric"),
        Binding("M", "cycle_metric_back", "Previous metric", show=False),
        Binding("space", "mark", "Mark node", show=False),
        Binding("asterisk", "mark_shown", "Mark all shown", show=False),
        Binding("d", "drain", "Drain"),
        Binding("R", "resume", "Resume", show=False),
        Binding("P", "toggle_policy", "Auto-drain policy on/off", show=False),
        Binding("B", "reset_breaker", "Reset the policy's circuit breaker", show=False),
        Binding("H", "toggle_strip", "Cluster strip: the last hour", show=False),
        Binding("E", "export_table", "Export the table to CSV", show=False),
        Binding("J", "queue", "Jobs"),
        Binding("plus,equals_sign", "zoom_map_by_sign(-1)", "Zoom the map in", show=False),
        Binding("minus", "zoom_map_by_sign(1)", "Zoom the map out", show=False),
        Binding("z", "zoom_map(-1)", "Zoom the map in", show=False),
        Binding("Z", "zoom_map(1)", "Zoom the map out", show=False),
        Binding("w", "map_reduce", "Map: worst or mean of a node's GPUs", show=False),
        Binding("b", "map_group_by", "Map: group by partition or rack", show=False),
        Binding("A", "alerts", "Alerts"),
    ]

    DEFAULT_CSS = """
    DashboardScreen { layout: vertical; }
    #filter-bar { height: auto; display: none; }
    #filter-bar.active { display: block; }
    #filter { border: none; height: 1; padding: 0 1; background: $boost; }
    #filter-error { height: auto; color: $error; padding: 0 1; display: none; }
    #filter-error.shown { display: block; }
    #filter-count { height: 1; padding: 0 1; color: $text-muted; }
    """

    # The filter applies as it is typed; the one last applied with Enter is what a filter that does not
    # parse falls back to, so that a typo never leaves the table on a half-typed filter.
    _committed_text = ""
    _committed_filter: NodeFilter | None = None
    _count_text = ""

    _map_view: ClusterView | None = None  # the view the map is still to be given (SPLIT_FRAME_NODES)

    def compose(self) -> ComposeResult:
        app = self.gputop
        yield app.status_header()
        yield ClusterStrip(id="strip")
        yield ClusterMap(
            metric=app.metric, scales=app.scales, rack_pattern=app.settings.config.ui.rack_pattern, id="map"
        )
        with Vertical(id="filter-bar"):
            yield Input(
                placeholder="filter: name, state, temp>85, util<5, slurm=drain, gpu[001-016] ...", id="filter"
            )
            yield Static("", id="filter-error", markup=False)
            yield Static("", id="filter-count", markup=False)
        yield NodeTable(id="nodes")
        yield GputopFooter()

    def on_mount(self) -> None:
        self.query_one(NodeTable).focus()

    def on_screen_resume(self) -> None:
        view = self.gputop.view
        if view is not None:
            self.apply_view(view)

    # -- data -------------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        table = self.query_one(NodeTable)
        table.apply_view(view)
        self.query_one(StatusHeader).apply_view(view)
        self.query_one(ClusterStrip).apply_view(view)
        self._show_count()
        map_frame_to_come = self._map_view is not None
        self._map_view = view  # what the map shows at its frame: the latest view
        if len(view.rows) < SPLIT_FRAME_NODES:
            self._apply_map_view()
        elif not map_frame_to_come:
            self.call_after_refresh(self._apply_map_view)

    def _apply_map_view(self) -> None:
        """The map shows the latest view the table was given (after the table's frame, on a large fleet)."""
        view, self._map_view = self._map_view, None
        if view is None or not self.is_attached:
            return
        self.query_one(ClusterMap).apply_view(view)
        self._map_follows_table()

    def _map_follows_table(self) -> None:
        """The map dims what the table's filter leaves out and brackets the table's cursor node: after
        every view and every filter change (a filter moves the cursor without a selection event)."""
        table = self.query_one(NodeTable)
        node_map = self.query_one(ClusterMap)
        if table.node_filter is not None:
            node_map.set_filter(table.visible_names)
        if table.cursor_name:
            node_map.select(table.cursor_name)

    # -- selection sync -----------------------------------------------------------------------------------
    @on(NodeSelected)
    def _node_selected(self, event: NodeSelected) -> None:
        # whichever pane moved, the other follows (select() is quiet, so this does not echo back)
        self.query_one(NodeTable).select(event.name)
        self.query_one(ClusterMap).select(event.name)

    @on(NodeOpened)
    def _open(self, event: NodeOpened) -> None:
        self.gputop.open_node(event.name)

    # -- the map's zoom (the table has the focus; the map's own keys when it has) ----------------------------
    def action_zoom_map(self, step: int) -> None:
        self.query_one(ClusterMap).action_zoom(step)

    def action_zoom_map_by_sign(self, step: int) -> None:
        self.query_one(ClusterMap).action_zoom(step)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not sign_zoom_allowed(self.app, action):
            return False
        return super().check_action(action, parameters)

    def action_map_reduce(self) -> None:
        self.query_one(ClusterMap).action_switch_reduce()

    def action_map_group_by(self) -> None:
        self.query_one(ClusterMap).action_switch_group_by()

    # -- node actions -----------------------------------------------------------------------------------
    def action_mark(self) -> None:
        self.query_one(NodeTable).toggle_mark()

    def action_mark_shown(self) -> None:
        """Marks every node the filter shows (all of them without a filter); again unmarks them."""
        table = self.query_one(NodeTable)
        shown = frozenset(table.order)
        table.set_marked(table.marked - shown if shown <= table.marked else table.marked | shown)

    def _targets(self) -> list[str]:
        table = self.query_one(NodeTable)
        if table.marked:
            return sorted(table.marked)
        return [table.cursor_name] if table.cursor_name else []

    def action_drain(self) -> None:
        self.gputop.open_node_action("drain", self._targets())

    def action_resume(self) -> None:
        self.gputop.open_node_action("resume", self._targets())

    def action_toggle_policy(self) -> None:
        self.gputop.policy.switch()
        self.refresh_header()

    def action_reset_breaker(self) -> None:
        import getpass

        self.gputop.policy.reset_breaker(getpass.getuser())
        self.refresh_header()

    def action_toggle_strip(self) -> None:
        if self.query_one(ClusterStrip).toggle() and self.gputop.view is not None:
            self.query_one(ClusterStrip).apply_view(self.gputop.view)

    def action_export_table(self) -> None:
        """The table as shown (filter and order) to a CSV file in the current directory."""
        import os
        import time

        from gputop.core.table_export import table_csv

        view = self.gputop.view
        if view is None:
            return
        table = self.query_one(NodeTable)
        rows = [view.rows[key] for key in table.order if key in view.rows]
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"gputop-{view.snapshot.cluster}-{stamp}.csv".replace(os.sep, "_")
        try:
            with open(name, "x", encoding="utf-8", newline="") as out:
                out.write(table_csv(rows))
        except OSError as err:
            self.app.notify(f"table not exported: {name}: {err.strerror or err}", severity="error")
            return
        self.app.notify(f"{len(rows)} rows written to {os.path.abspath(name)}", timeout=8)

    def refresh_header(self) -> None:
        for header in self.query(StatusHeader):
            header.refresh()

    def clear_marks(self) -> None:
        self.query_one(NodeTable).set_marked(frozenset())

    def action_queue(self) -> None:
        self.gputop.open_queue()

    def action_alerts(self) -> None:
        self.gputop.open_alerts()

    # -- metric -----------------------------------------------------------------------------------------
    def action_cycle_metric(self) -> None:
        self.gputop.set_metric(self.gputop.metric.next())

    def action_cycle_metric_back(self) -> None:
        members = list(Metric)
        self.gputop.set_metric(members[(members.index(self.gputop.metric) - 1) % len(members)])

    def show_metric(self, metric: Metric) -> None:
        self.query_one(ClusterMap).set_metric(metric)

    # -- filter -----------------------------------------------------------------------------------------
    def action_start_filter(self) -> None:
        self.query_one("#filter-bar").add_class("active")
        self.set_focus(self.query_one("#filter", Input))

    def action_clear_filter(self) -> None:
        filter_input = self.query_one("#filter", Input)
        filter_input.value = ""
        self.apply_filter("")
        self._commit_filter("")
        self.query_one("#filter-bar").remove_class("active")
        self.set_focus(self.query_one(NodeTable))

    def apply_filter(self, text: str) -> bool:
        """Filter the table and dim the map; returns False (and says why) on a bad expression, and the
        table goes back to the filter last applied with Enter."""
        try:
            node_filter = parse_filter(text) if text.strip() else None
        except FilterError as err:
            self._set_table_filter(self._committed_filter)
            kept = f"the filter '{self._committed_text}'" if self._committed_filter else "every node"
            self._show_filter_error(f"{err}: not applied; the table shows {kept}")
            return False
        self._show_filter_error("")
        self._set_table_filter(node_filter)
        return True

    def _commit_filter(self, text: str) -> None:
        self._committed_text = text.strip()
        self._committed_filter = self.query_one(NodeTable).node_filter

    def _set_table_filter(self, node_filter: NodeFilter | None) -> None:
        table = self.query_one(NodeTable)
        if node_filter is not table.node_filter:
            table.set_filter(node_filter)
            if node_filter is None:
                self.query_one(ClusterMap).set_filter(None)
            self._map_follows_table()
        self._show_count()

    def _show_count(self) -> None:
        table = self.query_one(NodeTable)
        counted = self.query_one("#filter-count", Static)
        total = len(table._rows)
        shown = len(table.order)
        text = f"showing {shown} of {total} nodes" if table.node_filter is not None else ""
        if text != self._count_text:  # every tick calls this: repaint only a change
            self._count_text = text
            counted.update(text)

    def _show_filter_error(self, message: str) -> None:
        error = self.query_one("#filter-error", Static)
        error.update(safe_line(message))
        error.set_class(bool(message), "shown")

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.apply_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if self.apply_filter(event.value):
            self._commit_filter(event.value)
            if not event.value.strip():
                self.query_one("#filter-bar").remove_class("active")
            self.set_focus(self.query_one(NodeTable))
