"""The replay's "jump to a time" dialog (T): a UTC time of day on the replay's current day, or a full
date and time; Enter jumps, Esc leaves it as it was."""

from __future__ import annotations

from datetime import UTC, datetime

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gputop.sources.replay import ReplayClock


def parse_jump(text: str, clock: ReplayClock) -> float | str:
    """The time ``text`` names (epoch seconds), or why it names none."""
    text = text.strip()
    try:
        if len(text) <= 8 and ":" in text:  # 03:12 or 03:12:30, on the day the replay is at
            day = datetime.fromtimestamp(clock.now(), UTC)
            parts = [int(p) for p in text.split(":")]
            second = parts[2] if len(parts) > 2 else 0
            moment = day.replace(hour=parts[0], minute=parts[1], second=second, microsecond=0)
        else:
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except (ValueError, IndexError):
        return f"{text!r}: type a UTC time, 03:12 or 2026-12-05T03:12"
    time_s = moment.timestamp()
    if not clock.start_s <= time_s <= clock.end_s:
        return "outside the recording"
    return time_s


class ReplayJumpScreen(ModalScreen[float | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ReplayJumpScreen { align: center middle; }
    #jump { width: 60; height: auto; padding: 1 2; border: round $accent; background: $panel; }
    """

    def __init__(self, clock: ReplayClock) -> None:
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        with Vertical(id="jump"):
            yield Static("Jump to (UTC): HH:MM[:SS], or a date and time", markup=False)
            yield Input(placeholder="03:12", id="when")
            yield Static("", id="why", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        found = parse_jump(event.value, self.clock)
        if isinstance(found, str):
            self.query_one("#why", Static).update(found)
            return
        self.clock.seek(found)
        self.dismiss(found)

    def action_cancel(self) -> None:
        self.dismiss(None)
