"""What every gputop screen shares: the app under its own type, and read-only mode taking away the keys
that change the cluster (not shown, not bound).

Key actions move the focus with ``set_focus``, which takes effect at once, not ``Widget.focus``, which queues
the change behind keys already waiting: typed fast or pasted, those keys would meet the old focus's
bindings (``/temp`` switching the metric on ``m``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.screen import Screen

if TYPE_CHECKING:
    from gputop.tui.app import GputopApp


class GputopScreen(Screen[None]):
    ACTING: ClassVar[frozenset[str]] = frozenset()  # the actions that change the cluster

    @property
    def gputop(self) -> GputopApp:
        return self.app  # type: ignore[return-value]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in self.ACTING and self.gputop.read_only)
