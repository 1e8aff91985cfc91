"""The key footer every screen shows: compact on a narrow terminal, so that the keys that matter (open,
filter, drain, jobs, alerts, help, quit) fit in 80 columns; the rest are in the help (?)."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

COMPACT_BELOW_COLUMNS = 120


class GputopFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW_COLUMNS
