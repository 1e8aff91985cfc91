"""The key footer every screen shows: compact on a narrow terminal, so that the keys that matter (open,
filter, drain, jobs, alerts, help, quit) fit in 80 columns; the rest are in the help (?).

Textual's footer lays every key out in a row even when the row is full: the last ones run under the
command palette's key, docked right, and a letter of them shows past its end ("^p Commandso"). Keys that
do not fit are left out instead, in the order the screen binds them (the first ones matter most)."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

COMPACT_BELOW_COLUMNS = 120
KEY_GAP_COLUMNS = 1


class GputopFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_BELOW_COLUMNS
        if compact != self.compact or compact:
            self.compact = compact
            self.refresh(recompose=True)  # which keys fit depends on the width

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        if not self.compact or not self.size.width:
            yield from widgets
            return
        palette = [w for w in widgets if w.has_class("-command-palette")]
        room = self.size.width - sum(_width(w) + KEY_GAP_COLUMNS for w in palette)
        for widget in widgets:
            if widget in palette:
                continue
            needed = _width(widget) + KEY_GAP_COLUMNS
            if needed > room:
                break
            room -= needed
            yield widget
        yield from palette


def _width(widget: Widget) -> int:
    if isinstance(widget, FooterKey):
        return len(widget.key_display) + 1 + len(widget.description)
    return len(str(widget.render()))
