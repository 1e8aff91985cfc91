"""gputop's entries in Textual's command palette (Ctrl+P)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from gputop.core.metrics import Metric
from gputop.core.safe_text import safe_line
from gputop.tui.widgets.node_table import COLUMNS

if TYPE_CHECKING:
    from gputop.tui.app import GputopApp


class GputopCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app: GputopApp = self.app  # type: ignore[assignment]
        commands: list[tuple[str, Callable[[], object], str]] = []
        for metric in Metric:
            commands.append(
                (f"Colour map by {metric.label}", partial(app.set_metric, metric), "Cluster map metric")
            )
        for column in COLUMNS:
            commands.append(
                (f"Sort nodes by {column.title}", partial(app.sort_nodes, column.key), "Node table")
            )
        commands.append(("Filter nodes", app.start_filter, "Type a filter such as temp>85"))
        commands.append(("Clear filter", app.clear_filter, "Show every node"))
        commands.append(("Show the alerts", app.open_alerts, "Every current problem, worst first"))
        commands.append(("Show the Slurm queue", app.open_queue, "Jobs, their GPUs and idle GPU-hours"))
        commands.append(("Refresh now", app.action_refresh, "Poll every node at once"))
        commands.append(("Show keys", app.action_help, "Every key binding"))
        for theme in app.gputop_theme_names:
            commands.append((f"Theme: {safe_line(theme)}", partial(app.set_theme, theme), "Switch theme"))
        view = app.view
        if view is not None:
            for node in view.snapshot.nodes:
                name = safe_line(node.name)
                commands.append((f"Open node {name}", partial(app.open_node, node.name), "Node screen"))
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            if not name.startswith("Open node"):
                yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
