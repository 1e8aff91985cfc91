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
    "plus": "+",
    "equals_sign": "=",
    "minus": "-",
    "full_stop": ".",
    "comma": ",",
}


def key_label(keys: str) -> str:
    labels = []
    for key in keys.split(","):
        key = key.strip()
        labels.append(KEY_NAMES.get(key, key.replace("ctrl+", "Ctrl+")))
    return " ".join(labels)


def binding_rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    """A row per description: the keys of two bindings that do the same (`+` and `z`) share one."""
    keys_of: dict[str, list[str]] = {}
    for item in bindings:
        binding = item if isinstance(item, Binding) else Binding(*item)
        if binding.description:
            keys_of.setdefault(binding.description, []).append(key_label(binding.key))
    return [(" ".join(keys), description) for description, keys in keys_of.items()]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close help"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 150; max-width: 95%; height: auto; max-height: 90%; border: round $primary;
            background: $surface; padding: 0 1; }
    """

    def __init__(self, sections: list[tuple[str, list[BindingType]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        # two columns of sections, so that every key shows on a 50-line screen without scrolling
        columns: list[list[tuple[str | Text, str | Text]]] = [[], []]
        listed = [(title, binding_rows(bindings)) for title, bindings in self.sections]
        listed = [(title, rows) for title, rows in listed if rows]
        half = (sum(len(rows) + 2 for _title, rows in listed) + 1) // 2
        for title, rows in listed:
            column = columns[0] if len(columns[0]) < half else columns[1]
            column.append((Text(title, style="underline"), ""))
            column.extend(rows)
            column.append(("", ""))
        table = Table.grid(padding=(0, 2))
        for _ in range(2):
            table.add_column(justify="right", style="bold")
            table.add_column()
        for at in range(max(len(columns[0]), len(columns[1]))):
            left = columns[0][at] if at < len(columns[0]) else ("", "")
            right = columns[1][at] if at < len(columns[1]) else ("", "")
            table.add_row(*left, *right)
        table.add_row(
            "",
            Text("Ctrl+P opens the command palette; the mouse clicks, scrolls and sorts too.", style="dim"),
        )
        with VerticalScroll(id="help") as scroll:
            scroll.border_title = "gputop keys"
            yield Static(table)
