"""What every gputop screen shares: the app under its own type, and read-only mode taking away the keys
that change the cluster (not shown, not bound)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.screen import Screen
from textual.widget import Widget

if TYPE_CHECKING:
    from gputop.tui.app import GputopApp


class GputopScreen(Screen[None]):
    ACTING: ClassVar[frozenset[str]] = frozenset()  # the actions that change the cluster

    @property
    def gputop(self) -> GputopApp:
        return self.app  # type: ignore[return-value]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in self.ACTING and self.gputop.read_only)

    def focus_now(self, widget: Widget) -> None:
        """Focus ``widget`` before the next queued event is handled: ``Widget.focus`` defers the change
        to a callback queued behind keys that already wait, which would then meet the old focus's
        bindings."""
        self.set_focus(widget)
