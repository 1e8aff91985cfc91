"""Messages the dashboard's widgets send about nodes, so the map and the table speak the same words."""

from __future__ import annotations

from textual.message import Message


class NodeSelected(Message):
    """The user moved to a node (the other pane follows)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class NodeOpened(Message):
    """The user asked for a node's screen."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
