"""The `?` screen: every key binding, read from the bindings themselves so it can never drift."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEY_NAMES = {
    "slash": "/",
    "asterisk": "*",
    "space": "Space",
    "question_mark": "?",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "escape": "Esc",
    "enter": "Enter",
    "pageup": "PgUp",
    "pagedown": "PgDn",
}


def key_label(keys: str) -> str:
    labels = []
    for key in keys.split(","):
        key = key.strip()
        labels.append(KEY_NAMES.get(key, key.replace("ctrl+", "Ctrl+")))
    return " ".join(labels)


def binding_rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for item in bindings:
        binding = item if isinstance(item, Binding) else Binding(*item)
        if binding.description:
            rows.append((key_label(binding.key), binding.description))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close help"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 90; max-width: 95%; height: auto; max-height: 90%; border: round $primary;
            background: $surface; padding: 0 1; }
    """

    def __init__(self, sections: list[tuple[str, list[BindingType]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", style="bold")
        table.add_column()
        for title, bindings in self.sections:
            rows = binding_rows(bindings)
            if not rows:
                continue
            table.add_row(Text(title, style="underline"), "")
            for key, description in rows:
                table.add_row(key, description)
            table.add_row("", "")
        table.add_row(
            "",
            Text("Ctrl+P opens the command palette; the mouse clicks, scrolls and sorts too.", style="dim"),
        )
        with VerticalScroll(id="help") as scroll:
            scroll.border_title = "gputop keys"
            yield Static(table)
